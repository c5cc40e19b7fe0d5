// SPDX-License-Identifier: MIT
#include "kernel/loop_device.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "udev/sysfs.hpp"
#include "util/text.hpp"

namespace blkpolicy::test {

namespace {

std::string sys_err(const std::string& what) { return what + ": " + std::strerror(errno); }

void detach_and_remove(int index) {
    const std::string dev = "/dev/loop" + std::to_string(index);
    int fd = ::open(dev.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        ::ioctl(fd, LOOP_CLR_FD, 0);
        ::close(fd);
    }
    int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) return;
    // Removal is refused (EBUSY) while the detach is still settling.
    for (int i = 0; i < 100; ++i) {
        if (::ioctl(ctl, LOOP_CTL_REMOVE, index) >= 0 || errno != EBUSY) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::close(ctl);
}

}  // namespace

LoopDevice::LoopDevice(bool bind, const std::string& backing_prefix) {
    int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) throw std::runtime_error(sys_err("open /dev/loop-control"));
    for (int i = kFirstLoopIndex; i < kFirstLoopIndex + 200; ++i) {
        if (::ioctl(ctl, LOOP_CTL_ADD, i) >= 0) {
            index_ = i;
            break;
        }
        if (errno != EEXIST) {
            ::close(ctl);
            throw std::runtime_error(sys_err("LOOP_CTL_ADD"));
        }
    }
    ::close(ctl);
    if (index_ < 0) throw std::runtime_error("no free loop index from " + std::to_string(kFirstLoopIndex));
    name_ = "loop" + std::to_string(index_);
    if (!bind) return;

    backing_ = backing_prefix + std::to_string(::getpid()) + "-" + std::to_string(index_) + ".img";
    int file = ::open(backing_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (file < 0 || ::ftruncate(file, 64 << 20) < 0) {
        if (file >= 0) ::close(file);
        detach_and_remove(index_);
        throw std::runtime_error(sys_err("backing file " + backing_));
    }
    const std::string dev = "/dev/" + name_;
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; ++i) {  // devtmpfs creates the node asynchronously
        fd = ::open(dev.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fd < 0 || ::ioctl(fd, LOOP_SET_FD, file) < 0) {
        auto msg = sys_err("bind " + dev);
        if (fd >= 0) ::close(fd);
        ::close(file);
        ::unlink(backing_.c_str());
        detach_and_remove(index_);
        throw std::runtime_error(msg);
    }
    ::close(fd);
    ::close(file);
    bound_ = true;
}

LoopDevice::~LoopDevice() {
    if (index_ >= 0) detach_and_remove(index_);
    if (!backing_.empty()) ::unlink(backing_.c_str());
}

std::string LoopDevice::read(const std::string& path) const {
    std::ifstream in("/sys/block/" + name_ + "/" + path);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return util::trim(s);
}

int LoopDevice::try_write(const std::string& path, const std::string& value) const {
    udev::Sysfs sys("/sys");
    return sys.write("block/" + name_ + "/" + path, value);
}

std::string LoopDevice::queue(const std::string& attr) const { return read("queue/" + attr); }

int LoopDevice::try_write_queue(const std::string& attr, const std::string& value) const {
    return try_write("queue/" + attr, value);
}

void LoopDevice::write_queue(const std::string& attr, const std::string& value) const {
    if (int err = try_write_queue(attr, value))
        throw std::runtime_error("write " + attr + "=" + value + ": " + std::strerror(err));
}

std::string switch_scheduler_or_reason(const LoopDevice& loop, const std::string& name) {
    const int err = loop.try_write_queue("scheduler", name);
    if (err == 0) return {};
    if (err != EINVAL) throw std::runtime_error("write scheduler=" + name + ": " + std::strerror(err));
    return "SKIPPED: this kernel has no " + name + " scheduler, built in or loadable (" + loop.name() +
           " lists: " + loop.queue("scheduler") + "); tests/vm proves this on Debian's kernels";
}

int remove_leftover_loops() {
    int removed = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/sys/block", ec)) {
        const auto name = e.path().filename().string();
        if (name.rfind("loop", 0) != 0) continue;
        std::ifstream in(e.path() / "loop/backing_file");
        std::string backing;
        std::getline(in, backing);
        if (backing.rfind(kLoopBackingPrefix, 0) != 0) continue;
        detach_and_remove(std::stoi(name.substr(4)));
        ::unlink(backing.c_str());
        ++removed;
    }
    return removed;
}

}  // namespace blkpolicy::test
