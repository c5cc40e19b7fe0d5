// SPDX-License-Identifier: MIT
#include "writers/scan.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "util/files.hpp"
#include "writers/scan_udev.hpp"

namespace blkpolicy::writers {

namespace fs = std::filesystem;
using writers::WriterAssignment;
using writers::WriterKind;

namespace {

std::string under(const std::string& root, const std::string& path) {
    if (root.empty() || root == "/") return path;
    std::string r = root;
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    return r + path;
}

// The text of a file, or nullopt (with a warning unless it is absent or
// masked: a link to /dev/null, or empty).
std::optional<std::string> read_writer_file(const std::string& path, const std::string& what,
                                            std::vector<std::string>* warnings) {
    std::error_code ec;
    const auto st = fs::status(path, ec);
    if (ec || !fs::exists(st)) return std::nullopt;
    if (fs::is_character_file(st)) return std::nullopt;  // masked with a link to /dev/null
    auto text = util::read_bounded_file(path, kMaxWriterFileBytes, what);
    if (!text.ok()) {
        if (warnings) warnings->push_back(path + ": " + text.message() + "; not looked at for conflicts");
        return std::nullopt;
    }
    return *text;
}

const std::vector<std::string> kUnitDirs = {"/etc/systemd/system", "/run/systemd/system",
                                            "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
                                            "/lib/systemd/system"};

}  // namespace

std::map<std::string, std::string> files_by_name(const std::vector<std::string>& dirs, const std::string& suffix) {
    std::map<std::string, std::string> out;
    for (const auto& dir : dirs) {
        std::error_code ec;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            const auto name = it->path().filename().string();
            if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
                continue;
            out.emplace(name, it->path().string());
        }
    }
    return out;
}

// The path a line writes, as the writer compares them.
std::string path_key(const WriterAssignment& a) {
    return (a.kernel_patterns.empty() ? std::string("*") : a.kernel_patterns.front()) + "/" + a.attribute;
}

namespace {

// The names of units enabled under ROOT (linked from a .wants/ or .requires/ directory).
std::set<std::string> enabled_units(const std::string& root) {
    std::set<std::string> out;
    for (const auto& d : kUnitDirs) {
        std::error_code ec;
        for (fs::directory_iterator it(under(root, d), ec), end; !ec && it != end; it.increment(ec)) {
            const auto name = it->path().filename().string();
            const bool deps = name.ends_with(".wants") || name.ends_with(".requires");
            if (!deps) continue;
            std::error_code ec2;
            for (fs::directory_iterator u(it->path(), ec2), e2; !ec2 && u != e2; u.increment(ec2))
                out.insert(u->path().filename().string());
        }
    }
    return out;
}

// ROOT/etc/tuned/active_profile, split; empty when there is none.
std::vector<std::string> tuned_active_profiles(const std::string& root) {
    auto text = util::read_bounded_file(under(root, "/etc/tuned/active_profile"), 4096, "TuneD's active_profile");
    if (!text.ok()) return {};
    std::vector<std::string> out;
    std::istringstream in(*text);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

}  // namespace

std::optional<writers::TunedProfileFile> load_tuned_profile(const std::string& root, const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return std::nullopt;
    for (const char* dir : {"/etc/tuned/profiles/", "/etc/tuned/", "/usr/lib/tuned/profiles/", "/usr/lib/tuned/"}) {
        const auto path = under(root, std::string(dir) + name + "/tuned.conf");
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) continue;
        auto text = util::read_bounded_file(path, kMaxWriterFileBytes, "a TuneD profile");
        if (!text.ok()) {
            writers::TunedProfileFile p;
            p.name = name;
            p.file = path;
            p.errors.push_back(path + ": " + text.message());
            return p;
        }
        return writers::parse_tuned_conf(name, path, *text);
    }
    return std::nullopt;
}

namespace {

std::vector<WriterAssignment> scan_tuned_if(const std::string& root, std::vector<std::string>* warnings, bool enabled) {
    if (!enabled) return {};
    const auto active = tuned_active_profiles(root);
    if (active.empty()) return {};
    auto res = writers::resolve_tuned(active, [&](const std::string& n) { return load_tuned_profile(root, n); });
    if (warnings) warnings->insert(warnings->end(), res.warnings.begin(), res.warnings.end());
    return res.assignments;
}

std::vector<WriterAssignment> scan_units_in(const std::string& root, const std::set<std::string>& enabled,
                                            std::vector<std::string>* warnings) {
    std::vector<std::string> dirs;
    for (const auto& d : kUnitDirs) dirs.push_back(under(root, d));
    std::vector<WriterAssignment> out;
    for (const auto& [name, path] : files_by_name(dirs, ".service")) {
        if (!enabled.count(name)) continue;
        std::vector<std::string> files = {path};
        std::vector<std::string> drop_in_dirs;  // NAME.service.d/*.conf, earlier directories first
        for (const auto& d : dirs) drop_in_dirs.push_back(d + "/" + name + ".d");
        for (const auto& [drop, dpath] : files_by_name(drop_in_dirs, ".conf")) files.push_back(dpath);
        for (const auto& f : files) {
            auto text = read_writer_file(f, "a unit file", warnings);
            if (!text || text->find("/sys/") == std::string::npos) continue;
            auto found = writers::parse_shell_writes(f, *text, WriterKind::unit, "unit " + name);
            out.insert(out.end(), found.begin(), found.end());
        }
    }
    const auto rc = under(root, "/etc/rc.local");
    if (::access(rc.c_str(), X_OK) == 0) {
        if (auto text = read_writer_file(rc, "rc.local", warnings)) {
            auto found = writers::parse_shell_writes(rc, *text, WriterKind::rc_local, {});
            out.insert(out.end(), found.begin(), found.end());
        }
    }
    return out;
}

}  // namespace

std::vector<WriterAssignment> scan_tuned(const std::string& root, std::vector<std::string>* warnings,
                                         bool only_when_enabled) {
    return scan_tuned_if(root, warnings, !only_when_enabled || enabled_units(root).count("tuned.service"));
}

std::vector<WriterAssignment> scan_sysfsutils(const std::string& root, std::vector<std::string>* warnings) {
    // sysfsutils reads /etc/sysfs.conf, then /etc/sysfs.d/*.conf in name
    // order; the file read last writes last.
    std::vector<std::string> files = {under(root, "/etc/sysfs.conf")};
    for (const auto& [name, path] : files_by_name({under(root, "/etc/sysfs.d")}, ".conf")) files.push_back(path);
    std::vector<WriterAssignment> all;
    for (const auto& f : files) {
        auto text = read_writer_file(f, "a sysfsutils file", warnings);
        if (!text) continue;
        auto found = writers::parse_sysfs_conf(f, *text);
        all.insert(all.begin(), found.rbegin(), found.rend());  // the last write first
    }
    // The line that wins for each path: the one written last.
    std::vector<WriterAssignment> out;
    std::set<std::string> paths;
    for (auto& a : all)
        if (paths.insert(path_key(a)).second) out.push_back(std::move(a));
    return out;
}

std::vector<WriterAssignment> scan_tmpfiles(const std::string& root, std::vector<std::string>* warnings) {
    std::vector<std::string> dirs;
    for (const char* d :
         {"/etc/tmpfiles.d", "/run/tmpfiles.d", "/usr/local/lib/tmpfiles.d", "/usr/lib/tmpfiles.d", "/lib/tmpfiles.d"})
        dirs.push_back(under(root, d));
    std::vector<WriterAssignment> out;
    std::set<std::string> paths;  // the first line for a path wins
    for (const auto& [name, path] : files_by_name(dirs, ".conf")) {
        auto text = read_writer_file(path, "a tmpfiles.d file", warnings);
        if (!text) continue;
        for (auto& a : writers::parse_tmpfiles(path, *text)) {
            if (paths.insert(path_key(a)).second) out.push_back(std::move(a));
        }
    }
    return out;
}

std::vector<WriterAssignment> scan_units(const std::string& root, std::vector<std::string>* warnings) {
    return scan_units_in(root, enabled_units(root), warnings);
}

std::vector<WriterAssignment> scan_writers(const WriterSources& src, std::vector<std::string>* warnings) {
    auto out = scan_udev_rules(src.udev_rules_dirs, warnings);
    const auto enabled = enabled_units(src.root);  // once for TuneD and the units
    for (auto part :
         {scan_tuned_if(src.root, warnings, enabled.count("tuned.service") > 0), scan_sysfsutils(src.root, warnings),
          scan_tmpfiles(src.root, warnings), scan_units_in(src.root, enabled, warnings)})
        out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
    return out;
}

}  // namespace blkpolicy::writers
