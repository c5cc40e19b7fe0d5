// SPDX-License-Identifier: MIT
#include "measure/drive_cache.hpp"

#include <fcntl.h>
#include <scsi/sg.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace blkpolicy::measure {
namespace {
constexpr unsigned char kModeSense10 = 0x5a;
constexpr unsigned char kCachingPage = 0x08;
constexpr unsigned char kWce = 0x04;  // byte 2 of the caching page
constexpr std::size_t kHeader10 = 8;  // the MODE SENSE(10) parameter header
}  // namespace

std::optional<bool> caching_page_wce(std::span<const unsigned char> reply) {
    if (reply.size() < kHeader10) return std::nullopt;
    // Mode data length counts the bytes after its own two.
    const std::size_t data_len = (std::size_t{reply[0]} << 8 | reply[1]) + 2;
    const std::size_t end = std::min(reply.size(), data_len);
    const std::size_t descriptors = std::size_t{reply[6]} << 8 | reply[7];
    const std::size_t page = kHeader10 + descriptors;
    if (page + 3 > end) return std::nullopt;
    if ((reply[page] & 0x3f) != kCachingPage || reply[page + 1] < 1) return std::nullopt;
    return (reply[page + 2] & kWce) != 0;
}

DriveCache ask_drive_cache(const std::string& node) {
    DriveCache c;
    c.asked = true;
    const int fd = ::open(node.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        c.error = "cannot open " + node + ": " + std::strerror(errno);
        return c;
    }
    std::array<unsigned char, 96> reply{};
    std::array<unsigned char, 32> sense{};
    // DBD set (no block descriptors wanted), PC 0 (current values), page 08h.
    std::array<unsigned char, 10> cdb{
        kModeSense10, 0x08, kCachingPage, 0, 0, 0, 0, 0, static_cast<unsigned char>(reply.size()), 0};
    sg_io_hdr_t io{};
    io.interface_id = 'S';
    io.dxfer_direction = SG_DXFER_FROM_DEV;
    io.cmd_len = static_cast<unsigned char>(cdb.size());
    io.cmdp = cdb.data();
    io.dxferp = reply.data();
    io.dxfer_len = static_cast<unsigned>(reply.size());
    io.sbp = sense.data();
    io.mx_sb_len = static_cast<unsigned char>(sense.size());
    io.timeout = 3000;  // ms
    const int rc = ::ioctl(fd, SG_IO, &io);
    const int e = errno;
    ::close(fd);
    if (rc < 0) {
        c.error = "MODE SENSE on " + node + ": " + std::strerror(e);
        return c;
    }
    if (io.status != 0 || io.host_status != 0 || (io.driver_status & 0x0f) != 0) {
        c.error = "MODE SENSE on " + node + " failed (status " + std::to_string(io.status) + ", host " +
                  std::to_string(io.host_status) + ", driver " + std::to_string(io.driver_status) + ")";
        return c;
    }
    const std::size_t got = reply.size() - static_cast<std::size_t>(std::max(0, io.resid));
    const auto wce = caching_page_wce(std::span<const unsigned char>(reply.data(), got));
    if (!wce) {
        c.error = "the reply of " + node + " to MODE SENSE holds no caching page";
        return c;
    }
    c.read = true;
    c.wce = *wce;
    return c;
}

DriveCache drive_cache_of_node(const std::string& name) { return ask_drive_cache("/dev/" + name); }

}  // namespace blkpolicy::measure
