// SPDX-License-Identifier: MIT
// What the daemon watches so that a policy file added, changed or removed
// takes effect by itself: the directories the policy is read from, and
// the names in them that matter. Pure: the daemon (agent/daemon) adds the
// inotify watches and decides when to reload.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/policy_files.hpp"

namespace blkpolicy::agent {

// One directory to watch, and what in it concerns the policy: one name (a
// policy file, or a drop-in directory not made yet), or, empty, every
// policy file there (*.toml, not hidden).
struct PolicyWatch {
    std::string dir;
    std::string name;
    bool operator==(const PolicyWatch&) const = default;
};

// The watches for the policy read from `explicit_paths` (--policy: each
// file's directory for its name, each directory for its *.toml), or from
// the default locations: the main file's directory for its name, each
// drop-in directory that exists, and for one that does not, its parent for
// its name (once made, the reload that follows watches it too). A
// directory that is not there is not watched.
std::vector<PolicyWatch> policy_watches(const std::vector<std::string>& explicit_paths,
                                        const PolicyLocations& defaults = {});

// The inotify events a watch asks for: a file written and closed, moved in
// or out, deleted, or created (a directory, a link); never a write still
// going on (IN_MODIFY), so a file a tool has not finished is not read.
std::uint32_t policy_watch_mask();

// Whether an event on NAME in W's directory concerns the policy. MASK is
// the event's; a file created but not yet closed does not (its close will),
// a directory or a link created does.
bool concerns_policy(const PolicyWatch& w, std::string_view name, std::uint32_t mask, bool is_link = false);

}  // namespace blkpolicy::agent
