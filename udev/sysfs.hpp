// SPDX-License-Identifier: MIT
// All sysfs access goes through this type, constructed with a root path
// ("/sys", or a fake tree in tests). Paths given to it are relative to the root.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkpolicy::udev {

struct ReadResult {
    std::string value;  // raw text, newline included
    int err = 0;        // errno, 0 on success
    bool ok() const { return err == 0; }
};

class Sysfs {
public:
    explicit Sysfs(std::filesystem::path root);
    virtual ~Sysfs() = default;
    Sysfs(const Sysfs&) = delete;
    Sysfs& operator=(const Sysfs&) = delete;

    const std::filesystem::path& root() const { return root_; }

    virtual ReadResult read(const std::string& rel) const;
    // Writes `value` in one write(2), as `echo` would. Returns 0 or an errno.
    // Refuses (EPERM) paths that are absolute or contain "..".
    virtual int write(const std::string& rel, std::string_view value);

    bool exists(const std::string& rel) const;
    bool is_dir(const std::string& rel) const;
    // Names in a directory, sorted; empty when it does not exist.
    std::vector<std::string> list(const std::string& rel) const;
    // Target of a symbolic link, as stored.
    std::optional<std::string> readlink(const std::string& rel) const;
    // The path with every link resolved, relative to the root; nullopt when it
    // does not exist or leads outside the root.
    std::optional<std::string> resolve(const std::string& rel) const;

    // Whether debugfs's block/ directory is there (debugfs mounted under
    // the root's kernel/debug): asked once, remembered until forget_mounts().
    // Per-device debugfs reads are skipped where it is not: two failed
    // opens per device and pass otherwise.
    bool has_debugfs_block() const;
    // The daemon calls this at each full pass: debugfs may be mounted later.
    void forget_mounts() const { debugfs_block_.reset(); }

private:
    std::string at(const std::string& rel) const;  // ROOT/REL
    mutable std::optional<bool> debugfs_block_;
    std::filesystem::path root_;
    std::string root_text_;
    std::filesystem::path canonical_root_;
};

}  // namespace blkpolicy::udev
