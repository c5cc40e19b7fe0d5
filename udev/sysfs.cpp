// SPDX-License-Identifier: MIT
#include "udev/sysfs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/fd.hpp"
#include "util/files.hpp"

namespace blkpolicy::udev {

namespace fs = std::filesystem;

Sysfs::Sysfs(fs::path root) : root_(std::move(root)), root_text_(root_.string()) {
    while (root_text_.size() > 1 && root_text_.back() == '/') root_text_.pop_back();
    std::error_code ec;
    canonical_root_ = fs::canonical(root_, ec);
    if (ec) canonical_root_ = root_;
}

// ROOT/REL as a plain string: std::filesystem's operator/ parses every
// component (12% of apply's instructions at 1,000 devices, by callgrind).
std::string Sysfs::at(const std::string& rel) const {
    std::string p;
    p.reserve(root_text_.size() + 1 + rel.size());
    p += root_text_;
    if (!rel.empty()) {
        if (p.empty() || p.back() != '/') p += '/';
        p += rel;
    }
    return p;
}

ReadResult Sysfs::read(const std::string& rel) const {
    ReadResult r;
    const auto path = at(rel);
    const util::Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) {
        r.err = errno;
        return r;
    }
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            r.err = errno;
            break;
        }
        r.value.append(buf, static_cast<std::size_t>(n));
        // sysfs hands over a whole attribute in one read, so a read that did
        // not fill the buffer was the last: no second read to see EOF.
        if (static_cast<std::size_t>(n) < sizeof buf) break;
        if (r.value.size() > (1u << 20)) break;  // no sysfs attribute is this large
    }
    return r;
}

int Sysfs::write(const std::string& rel, std::string_view value) {
    if (rel.empty() || rel.front() == '/' || rel.find("..") != std::string::npos) return EPERM;
    const auto path = at(rel);
    // O_TRUNC is ignored by sysfs and makes a fake tree's regular file behave like it.
    util::Fd fd{::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC)};
    if (!fd) return errno;
    int err = 0;
    ssize_t n;
    do {
        n = ::write(fd.get(), value.data(), value.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        err = errno;
    else if (static_cast<std::size_t>(n) != value.size())
        err = EIO;
    const int closed = fd.close();
    return err != 0 ? err : closed;
}

bool Sysfs::has_debugfs_block() const {
    if (!debugfs_block_) debugfs_block_ = is_dir("kernel/debug/block");
    return *debugfs_block_;
}

bool Sysfs::exists(const std::string& rel) const { return ::access(at(rel).c_str(), F_OK) == 0; }

bool Sysfs::is_dir(const std::string& rel) const {
    struct stat st {};
    return ::stat(at(rel).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> Sysfs::list(const std::string& rel) const {
    std::vector<std::string> out;
    if (util::list_directory(at(rel), out) != 0) return out;
    std::sort(out.begin(), out.end());
    return out;
}

std::optional<std::string> Sysfs::readlink(const std::string& rel) const {
    char buf[4096];
    const ssize_t n = ::readlink(at(rel).c_str(), buf, sizeof buf);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof buf) return std::nullopt;
    return std::string(buf, static_cast<std::size_t>(n));
}

namespace {
// DIR/TARGET with "." and ".." taken away by name, the way
// std::filesystem's lexically_normal() would, without parsing every
// component into a path object (most of resolve's instructions): "a/b" and
// "../c" give "a/c"; a ".." that climbs above DIR stays at the front.
std::string join_relative(std::string_view dir, std::string_view target) {
    std::vector<std::string_view> parts;
    const auto add = [&parts](std::string_view path) {
        while (!path.empty()) {
            const auto slash = path.find('/');
            const auto part = path.substr(0, slash);
            path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
            if (part.empty() || part == ".") continue;
            if (part == ".." && !parts.empty() && parts.back() != "..")
                parts.pop_back();
            else
                parts.push_back(part);
        }
    };
    add(dir);
    add(target);
    std::string out;
    for (const auto part : parts) {
        if (!out.empty()) out += '/';
        out += part;
    }
    return out;
}
}  // namespace

std::optional<std::string> Sysfs::resolve(const std::string& rel) const {
    // sysfs links (block/<name>, class/...) point at real directories: read
    // the one link instead of one readlink per component. A target under
    // devices/ is taken as it is (that tree has no links among its
    // directories); any other must be the same directory the link leads to.
    // Anything else takes the long way.
    struct stat followed {
    }, direct{};
    if (auto target = readlink(rel); target && !target->empty() && target->front() != '/') {
        const auto slash = rel.rfind('/');
        const auto lexical = join_relative(
            slash == std::string::npos ? std::string_view() : std::string_view(rel).substr(0, slash), *target);
        const std::string_view first = std::string_view(lexical).substr(0, lexical.find('/'));
        if (first == "devices" && ::access(at(lexical).c_str(), F_OK) == 0) return lexical;
        if (!lexical.empty() && first != ".." && ::stat(at(rel).c_str(), &followed) == 0 &&
            ::stat(at(lexical).c_str(), &direct) == 0 && followed.st_dev == direct.st_dev &&
            followed.st_ino == direct.st_ino)
            return lexical;
    }
    std::error_code ec;
    auto p = fs::canonical(root_ / rel, ec);
    if (ec) return std::nullopt;
    auto r = p.lexically_relative(canonical_root_);
    if (r.empty() || *r.begin() == "..") return std::nullopt;
    return r == "." ? std::string() : r.string();
}

}  // namespace blkpolicy::udev
