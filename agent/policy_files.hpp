// SPDX-License-Identifier: MIT
// Finding and reading policy files: the default locations with drop-in
// directories, or what --policy names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "policy/loader.hpp"

namespace blkpolicy::agent {

struct PolicyLocations {
    std::string main_file = "/etc/blkpolicy/policy.toml";
    // Lowest priority first; a later directory masks the same file name in an
    // earlier one (systemd's order: /usr/lib < /run < /etc).
    std::vector<std::string> dropin_dirs = {"/usr/lib/blkpolicy/policy.d", "/run/blkpolicy/policy.d",
                                            "/etc/blkpolicy/policy.d"};
};

// Whether a file name in a drop-in or --policy directory is a policy file
// that is read: *.toml, not hidden (a tool's ".x.toml.tmp" is not).
bool is_policy_file_name(std::string_view name);

// The files to read, in order. With `explicit_paths` (from --policy) each is a
// file or a directory of *.toml files; otherwise the default locations.
// Problems (a named path that does not exist, nothing found) become errors.
struct PolicyFileList {
    std::vector<std::string> files;
    std::vector<policy::PolicyError> errors;
    bool none_found = false;  // a policy file given with --policy, or any in the default locations, is not there
};
PolicyFileList find_policy_files(const std::vector<std::string>& explicit_paths, const PolicyLocations& defaults = {});

// Why a policy file (or directory) cannot be trusted, or empty when it can:
// it, or any directory above it, is owned by someone other than root (or
// `trusted_uid`) or is writable by group or others, so someone else could
// decide what blkpolicy writes as root. Symbolic links are followed: the file
// they lead to and its directories are what is checked. A world-writable
// directory is accepted only with the sticky bit (like /tmp), where others
// cannot replace a file they do not own.
std::string untrusted_reason(const std::string& path, unsigned trusted_uid);

// Finds, reads and loads; I/O errors are reported like parse errors. As root,
// files failing untrusted_reason are refused, naming the file and why.
policy::LoadResult load_policy_from(const std::vector<std::string>& explicit_paths,
                                    const PolicyLocations& defaults = {});

}  // namespace blkpolicy::agent
