// SPDX-License-Identifier: MIT
// A file descriptor with one owner: closed by the destructor, whatever way
// the owner leaves, and moved rather than copied.
//
//     util::Fd fd{::open(path, O_RDONLY | O_CLOEXEC)};
//     if (!fd) return errno;
#pragma once

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace blkpolicy::util {

class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Fd& operator=(Fd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }
    // Closes it now and says how that went (0, or errno): a write's error
    // can come only at close(2).
    int close() {
        if (fd_ < 0) return 0;
        return ::close(std::exchange(fd_, -1)) < 0 ? errno : 0;
    }

private:
    int fd_ = -1;
};

}  // namespace blkpolicy::util
