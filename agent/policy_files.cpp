// SPDX-License-Identifier: MIT
#include "agent/policy_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "util/files.hpp"

namespace blkpolicy::agent {

namespace fs = std::filesystem;
using policy::PolicyError;

namespace {

PolicyError file_error(const std::string& path, const std::string& message) {
    PolicyError e;
    e.pos.file = path;
    e.message = message;
    return e;
}

bool is_toml_file(const fs::directory_entry& e) { return is_policy_file_name(e.path().filename().string()); }

// A drop-in that is a link to /dev/null (or empty) masks the same name in
// lower-priority directories, as with systemd.
bool is_mask(const fs::path& p) {
    std::error_code ec;
    auto target = fs::read_symlink(p, ec);
    return !ec && target == "/dev/null";
}

// The policy files in DIR, sorted by name. A directory that is there but
// cannot be read (or is not a directory) is an error in ERRORS, never a
// directory with nothing in it: its files are the policy too. One that is
// not there at all is not an error here (the callers say what that means).
std::vector<fs::path> toml_files_in(const fs::path& dir, std::vector<PolicyError>& errors) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (is_toml_file(*it)) out.push_back(it->path());
    if (ec && ec != std::errc::no_such_file_or_directory)
        errors.push_back(file_error(dir.string(), "cannot read the policy directory: " + ec.message()));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

bool is_policy_file_name(std::string_view name) {
    return !name.empty() && name.front() != '.' && fs::path(name).extension() == ".toml";
}

PolicyFileList find_policy_files(const std::vector<std::string>& explicit_paths, const PolicyLocations& defaults) {
    PolicyFileList list;
    std::error_code ec;
    if (!explicit_paths.empty()) {
        for (const auto& p : explicit_paths) {
            if (fs::is_directory(p, ec)) {
                const auto before = list.errors.size();
                auto files = toml_files_in(p, list.errors);
                if (files.empty() && list.errors.size() == before)
                    list.errors.push_back(file_error(p, "directory holds no *.toml policy files"));
                for (auto& f : files)
                    if (!is_mask(f)) list.files.push_back(f.string());
            } else if (fs::exists(p, ec)) {
                list.files.push_back(p);
            } else {
                // Not there is not invalid: said as missing, like the default path.
                list.none_found = true;
                list.errors.push_back(file_error(p, "no such policy file or directory"));
            }
        }
        return list;
    }

    // A link there whose target is gone is a policy that cannot be read
    // (reading it says so), not no policy: it is never left out quietly.
    if (fs::exists(defaults.main_file, ec) || fs::is_symlink(fs::symlink_status(defaults.main_file, ec)))
        list.files.push_back(defaults.main_file);
    std::map<std::string, fs::path> by_name;  // file name -> highest-priority path
    for (const auto& dir : defaults.dropin_dirs)
        for (auto& f : toml_files_in(dir, list.errors)) by_name[f.filename().string()] = std::move(f);
    for (const auto& [name, path] : by_name)
        if (!is_mask(path)) list.files.push_back(path.string());
    if (list.files.empty() && list.errors.empty()) {
        std::string where = defaults.main_file;
        for (const auto& d : defaults.dropin_dirs) where += ", " + d + "/*.toml";
        list.none_found = true;
        list.errors.push_back(file_error("blkpolicy", "no policy file: looked for " + where +
                                                          "; write one there (examples in "
                                                          "/usr/share/doc/blkpolicy/examples) or pass --policy PATH"));
    }
    return list;
}

std::string untrusted_reason(const std::string& path, unsigned trusted_uid) {
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);
    if (ec) return {};  // reading it will report the problem
    auto mode_text = [](mode_t m) {
        char b[8];
        std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
        return std::string(b);
    };
    for (fs::path p = real;; p = p.parent_path()) {
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0) break;
        const bool dir = S_ISDIR(st.st_mode);
        const std::string what =
            p == real ? std::string(dir ? "the directory" : "it") : "the directory " + p.string() + " above it";
        const std::string via = real.string() != path ? " (" + path + " leads to " + real.string() + ")" : "";
        if (st.st_uid != 0 && st.st_uid != trusted_uid)
            return what + " is owned by uid " + std::to_string(st.st_uid) + ", not root" + via +
                   ": that user could change what blkpolicy writes as root";
        const bool sticky = dir && (st.st_mode & S_ISVTX);
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(sticky && p != real))
            return what + " is writable by group or others (mode " + mode_text(st.st_mode) + ")" + via +
                   ": anyone who can write it decides what blkpolicy writes as root; chmod go-w " + p.string();
        if (p == p.root_path()) break;
    }
    return {};
}

policy::LoadResult load_policy_from(const std::vector<std::string>& explicit_paths, const PolicyLocations& defaults) {
    auto list = find_policy_files(explicit_paths, defaults);
    policy::LoadResult result;
    result.errors = list.errors;
    result.missing = list.none_found;
    std::vector<policy::PolicySource> sources;
    const bool as_root = ::geteuid() == 0;
    for (const auto& path : list.files) {
        if (as_root) {
            auto why = untrusted_reason(path, 0);
            if (!why.empty()) {
                result.errors.push_back(file_error(path, "refusing to read the policy: " + why));
                continue;
            }
        }
        auto text = util::read_bounded_file(path, policy::kMaxPolicyBytes, "a policy file");
        if (!text.ok()) {
            result.errors.push_back(file_error(path, text.message()));
            continue;
        }
        sources.push_back({path, std::move(*text)});
    }
    auto loaded = policy::load_policy(sources);
    result.policy = std::move(loaded.policy);
    result.errors.insert(result.errors.end(), loaded.errors.begin(), loaded.errors.end());
    return result;
}

}  // namespace blkpolicy::agent
