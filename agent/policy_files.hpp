// Finding and reading policy files: the default locations with drop-in
// directories, or what --policy names.
#pragma once

#include <string>
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

// The files to read, in order. With `explicit_paths` (from --policy) each is a
// file or a directory of *.toml files; otherwise the default locations.
// Problems (a named path that does not exist, nothing found) become errors.
struct PolicyFileList {
    std::vector<std::string> files;
    std::vector<policy::PolicyError> errors;
};
PolicyFileList find_policy_files(const std::vector<std::string>& explicit_paths,
                                 const PolicyLocations& defaults = {});

// Finds, reads and loads; I/O errors are reported like parse errors.
policy::LoadResult load_policy_from(const std::vector<std::string>& explicit_paths,
                                    const PolicyLocations& defaults = {});

}  // namespace blkpolicy::agent
