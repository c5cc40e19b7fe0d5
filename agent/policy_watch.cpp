// SPDX-License-Identifier: MIT
#include "agent/policy_watch.hpp"

#include <sys/inotify.h>

#include <filesystem>

namespace blkpolicy::agent {

namespace fs = std::filesystem;

namespace {
void add(std::vector<PolicyWatch>& out, PolicyWatch w) {
    std::error_code ec;
    if (w.dir.empty() || !fs::is_directory(w.dir, ec)) return;
    for (const auto& have : out)
        if (have == w) return;
    out.push_back(std::move(w));
}

PolicyWatch file_watch(const std::string& path) {
    const fs::path p(path);
    return {p.parent_path().empty() ? "." : p.parent_path().string(), p.filename().string()};
}
}  // namespace

std::vector<PolicyWatch> policy_watches(const std::vector<std::string>& explicit_paths,
                                        const PolicyLocations& defaults) {
    std::vector<PolicyWatch> out;
    std::error_code ec;
    if (!explicit_paths.empty()) {
        for (const auto& p : explicit_paths) add(out, fs::is_directory(p, ec) ? PolicyWatch{p, {}} : file_watch(p));
        return out;
    }
    add(out, file_watch(defaults.main_file));
    for (const auto& d : defaults.dropin_dirs) add(out, fs::is_directory(d, ec) ? PolicyWatch{d, {}} : file_watch(d));
    return out;
}

std::uint32_t policy_watch_mask() {
    return IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF |
           IN_ONLYDIR;
}

bool concerns_policy(const PolicyWatch& w, std::string_view name, std::uint32_t mask, bool is_link) {
    if (name.empty()) return false;
    if (!w.name.empty()) {
        if (name != w.name) return false;
    } else if (!is_policy_file_name(name)) {
        return false;
    }
    // Created: a directory or a link is whole; a file is read at its close.
    if ((mask & IN_CREATE) && !(mask & IN_ISDIR) && !is_link) return false;
    return true;
}

}  // namespace blkpolicy::agent
