// SPDX-License-Identifier: MIT
#include "util/files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include "util/fd.hpp"

namespace blkpolicy::util {

Result<std::string> read_bounded_file(const std::string& path, std::size_t limit, const std::string& what) {
    const Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (!fd) return Status::failure(std::string("cannot read: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return Status::failure("not a regular file: " + what + " must be one");
    }
    auto too_big = [&](std::size_t size) {
        return "the file is " + std::to_string(size) + " bytes; " + what + " may have at most " +
               std::to_string(limit >> 20) + " MiB";
    };
    if (static_cast<std::size_t>(st.st_size) > limit)
        return Status::failure(too_big(static_cast<std::size_t>(st.st_size)));
    std::string text;
    char buf[65536];
    std::string err;
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            err = std::string("cannot read: ") + std::strerror(errno);
            break;
        }
        if (n == 0) break;
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > limit) {  // grew since fstat
            err = too_big(text.size()) + " (and growing)";
            break;
        }
    }
    if (!err.empty()) return Status::failure(err);
    return text;
}

Status write_atomically(const std::string& path, const std::string& text) {
    // The process's own temporary name: two processes writing one file at
    // once (the initramfs's udev rule and its pass, two commands) each
    // rename a whole file, instead of one renaming the other's half.
    const std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
    Fd fd{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (!fd) return Status::failure("cannot write " + tmp + ": " + std::strerror(errno));
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const std::string why = n < 0 ? std::strerror(errno) : "short write";
            fd.reset();
            ::unlink(tmp.c_str());
            return Status::failure("cannot write " + tmp + ": " + why);
        }
        done += static_cast<std::size_t>(n);
    }
    // Whatever fails from here on, the temporary file goes: the next write
    // would truncate it anyway, but a reader of the directory should never
    // find a half-kept state file beside the real one.
    const auto fail = [&tmp](const std::string& what, int err) {
        ::unlink(tmp.c_str());
        return Status::failure(what + tmp + ": " + std::strerror(err));
    };
    if (const int err = fd.close()) return fail("cannot write ", err);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename ", errno);
    return {};
}

std::string errno_text(int err) {
    const char* name = ::strerrorname_np(err);
    std::string s = ::strerror(err);
    if (name) s += std::string(" (") + name + ")";
    return s;
}

int list_directory(const std::string& path, std::vector<std::string>& names) {
    const std::unique_ptr<DIR, int (*)(DIR*)> d{::opendir(path.c_str()), &::closedir};
    if (!d) return errno;
    while (const dirent* e = ::readdir(d.get())) {
        const std::string_view n = e->d_name;
        if (n != "." && n != "..") names.emplace_back(n);
    }
    return 0;
}

bool unix_socket_accepts(const char* path, int type) {
    const Fd fd{::socket(AF_UNIX, type | SOCK_CLOEXEC, 0)};
    if (!fd) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

}  // namespace blkpolicy::util
