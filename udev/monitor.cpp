// SPDX-License-Identifier: MIT
#include "udev/monitor.hpp"

#include <libudev.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "udev/discovery.hpp"
#include "util/files.hpp"
#include "util/names.hpp"

namespace blkpolicy::udev {

namespace {
constexpr util::Named<EventSource> kSources[] = {{EventSource::kernel, "kernel"}, {EventSource::udev, "udev"}};
static_assert(util::in_enum_order(kSources));
}  // namespace

// Also the netlink group names udev_monitor_new_from_netlink takes.
const char* to_string(EventSource s) { return util::name_of(kSources, s); }

Monitor::Monitor(EventSource source, int receive_buffer) : source_(source) {
    udev_.reset(udev_new());
    if (!udev_) throw std::runtime_error(std::string("udev_new: ") + std::strerror(errno));
    monitor_.reset(udev_monitor_new_from_netlink(udev_.get(), to_string(source)));
    if (!monitor_)
        throw std::runtime_error(std::string("cannot open the ") + to_string(source) +
                                 " uevent socket: " + std::strerror(errno));
    auto* m = monitor_.get();
    int r = udev_monitor_filter_add_match_subsystem_devtype(m, "block", "disk");
    if (r >= 0) r = udev_monitor_filter_add_match_subsystem_devtype(m, "nvme", nullptr);
    if (r >= 0 && receive_buffer > 0) r = udev_monitor_set_receive_buffer_size(m, receive_buffer);
    if (r >= 0) r = udev_monitor_enable_receiving(m);
    if (r < 0)
        throw std::runtime_error(std::string("cannot listen for ") + to_string(source) +
                                 " uevents: " + std::strerror(-r));
}

Monitor::~Monitor() = default;

int Monitor::fd() const { return udev_monitor_get_fd(monitor_.get()); }

std::vector<Uevent> Monitor::drain(bool& overflow) {
    std::vector<Uevent> out;
    for (;;) {
        errno = 0;
        util::Owned<struct ::udev_device, ::udev_device_unref> d{udev_monitor_receive_device(monitor_.get())};
        if (!d) {
            if (errno == ENOBUFS) {
                overflow = true;
                continue;  // the queue is readable again after the error
            }
            break;  // EAGAIN: drained (or a malformed message was dropped)
        }
        const char* action = udev_device_get_action(d.get());
        const char* name = udev_device_get_sysname(d.get());
        const char* subsystem = udev_device_get_subsystem(d.get());
        const bool controller = subsystem && std::strcmp(subsystem, "nvme") == 0;
        if (action && name && valid_device_name(name)) out.push_back({action, name, source_, controller});
    }
    return out;
}

bool udevd_running() { return util::unix_socket_accepts("/run/udev/control", SOCK_SEQPACKET); }

}  // namespace blkpolicy::udev
