// SPDX-License-Identifier: MIT
// A kernel file system (debugfs, tracefs) mounted where the system would
// mount it, for a test's life: unmounted again only if the test mounted it.
#pragma once

#include <sys/mount.h>

#include <fstream>
#include <string>

namespace blkpolicy::test {

class KernelFsMount {
public:
    KernelFsMount(const char* type, const std::string& where) : where_(where) {
        std::ifstream m("/proc/mounts");
        std::string line;
        const std::string needle = " " + where + " " + type + " ";
        while (std::getline(m, line))
            if (line.find(needle) != std::string::npos) return;
        mounted_here_ = ::mount("none", where.c_str(), type, 0, nullptr) == 0;
    }
    ~KernelFsMount() {
        if (mounted_here_) ::umount2(where_.c_str(), MNT_DETACH);
    }
    bool mounted_here() const { return mounted_here_; }
    KernelFsMount(const KernelFsMount&) = delete;
    KernelFsMount& operator=(const KernelFsMount&) = delete;

private:
    std::string where_;
    bool mounted_here_ = false;
};

}  // namespace blkpolicy::test
