// SPDX-License-Identifier: MIT
// libudev monitors for block disks and NVMe controllers: kernel uevents (fastest) and udev events
// (sent after udevd ran its rules).
#pragma once

#include <libudev.h>

#include <string>
#include <vector>

#include "util/owned.hpp"

namespace blkpolicy::udev {

enum class EventSource { kernel, udev };
const char* to_string(EventSource s);

struct Uevent {
    std::string action;  // add, remove, change, ...
    std::string name;    // kernel name, e.g. loop240
    EventSource source = EventSource::kernel;
    // An NVMe controller's event (subsystem nvme), not a disk's: the hidden
    // multipath paths under a controller come and go with it without block
    // uevents of their own (6.12), so such an event asks for a rescan.
    bool controller = false;
};

class Monitor {
public:
    // Opens and starts receiving; throws std::runtime_error with the reason.
    // `receive_buffer` is the socket buffer in bytes (0: libudev's default).
    Monitor(EventSource source, int receive_buffer);
    ~Monitor();
    Monitor(const Monitor&) = delete;
    Monitor& operator=(const Monitor&) = delete;

    int fd() const;
    EventSource source() const { return source_; }

    // Reads every queued event. Sets `overflow` when the kernel dropped
    // events because the socket buffer was full (ENOBUFS).
    std::vector<Uevent> drain(bool& overflow);

private:
    EventSource source_;
    // Declared in this order so the monitor goes before its context.
    util::Owned<struct ::udev, ::udev_unref> udev_;
    util::Owned<struct ::udev_monitor, ::udev_monitor_unref> monitor_;
};

// True when udevd runs (its control socket accepts a connection), i.e. udev
// events will come.
bool udevd_running();

}  // namespace blkpolicy::udev
