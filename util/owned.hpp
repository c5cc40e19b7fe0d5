// SPDX-License-Identifier: MIT
// C library handles (libudev, sd-event, sd-journal) owned the C++ way: one release path,
// run by the destructor, whatever way the owner leaves (an early return, an
// exception in a constructor).
//
//     Owned<udev_monitor, udev_monitor_unref> m{udev_monitor_new_from_netlink(u, "kernel")};
#pragma once

#include <memory>

namespace blkpolicy::util {

template <auto Release>
struct ReleaseWith {
    template <typename T>
    void operator()(T* p) const {
        if (p) Release(p);
    }
};

template <typename T, auto Release>
using Owned = std::unique_ptr<T, ReleaseWith<Release>>;

}  // namespace blkpolicy::util
