// SPDX-License-Identifier: MIT
// The host as every layer sees it beside a device: the kernel (release,
// version, tick rate, the schedulers it can load, nvme_core's io_timeout),
// the page size and the host.* facts (DMI, virtualization, hostname). Read
// once per command, and by the daemon at its start and at each reload
// (udev::read_host_context), then passed down: plan, explain, export, audit
// and the daemon's verdicts ask this one record, never the system again.
// Header only and pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernel/rows.hpp"
#include "policy/facts.hpp"

namespace blkpolicy::policy {

struct HostContext {
    // The kernel's release as uname says it, or as --kernel-release gives
    // it; and as major.minor ({0, 0}: not known, as for a fake tree with no
    // release given; then a queue-limits write is assumed to move
    // read_ahead_kb, and the newest rows answer explain).
    std::string kernel_release;
    kernel::KernelVersion kernel;
    std::int64_t page_size = 4096;
    // The kernel's tick rate (CONFIG_HZ), which io_timeout is kept in;
    // hz_known false when it could not be read (250, Debian's, is assumed).
    int hz = 250;
    bool hz_known = false;
    // I/O schedulers the running kernel can load as modules (writing a name
    // makes the kernel load "NAME-iosched"); nullopt when unknown, and then a
    // name the device does not offer yet is tried all the same.
    std::optional<std::vector<std::string>> loadable_schedulers;
    // nvme_core.io_timeout (seconds) where the module is loaded: the
    // default io_timeout of every NVMe queue.
    std::optional<std::int64_t> nvme_io_timeout_s;
    // What the policy's host.* match keys compare.
    HostFacts facts;
};

}  // namespace blkpolicy::policy
