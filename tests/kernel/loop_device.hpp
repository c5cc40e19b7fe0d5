// SPDX-License-Identifier: MIT
// A fresh loop device for real-kernel tests: made with LOOP_CTL_ADD at a high
// index, bound to a sparse file, and always detached, removed and unlinked
// again by the destructor.
#pragma once

#include <string>

namespace blkpolicy::test {

// Backing files carry this prefix, so leftovers of a crashed run are ours to remove.
inline constexpr const char* kLoopBackingPrefix = "/tmp/blkpolicy-test-";
inline constexpr int kFirstLoopIndex = 240;

class LoopDevice {
public:
    // Throws std::runtime_error with the reason when the kernel refuses.
    // The backing file is BACKING_PREFIX + pid + index (/dev/shm/... for tmpfs).
    explicit LoopDevice(bool bind = true, const std::string& backing_prefix = kLoopBackingPrefix);
    ~LoopDevice();
    LoopDevice(const LoopDevice&) = delete;
    LoopDevice& operator=(const LoopDevice&) = delete;

    const std::string& name() const { return name_; }
    const std::string& backing() const { return backing_; }
    std::string queue(const std::string& attr) const;                              // trimmed value of queue/ATTR
    void write_queue(const std::string& attr, const std::string& value) const;     // throws on error
    int try_write_queue(const std::string& attr, const std::string& value) const;  // errno or 0
    // The same for a file under the device's directory ("bdi/max_ratio").
    std::string read(const std::string& path) const;
    int try_write(const std::string& path, const std::string& value) const;

private:
    int index_ = -1;
    std::string name_;
    std::string backing_;
    bool bound_ = false;
};

// Switches the device to scheduler NAME. Empty when it took it; the reason
// when this kernel has no such scheduler, built in or as a module it can
// load (EINVAL), as on a host kernel built without bfq: the tests that need
// it say so and stop, and the guests prove the same traps on Debian's
// kernels. Any other error throws.
std::string switch_scheduler_or_reason(const LoopDevice& loop, const std::string& name);

// Detaches and removes loop devices left bound to our backing files by a
// run that crashed. Returns how many it removed.
int remove_leftover_loops();

}  // namespace blkpolicy::test
