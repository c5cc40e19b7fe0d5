// SPDX-License-Identifier: MIT
#include "systemd/notify.hpp"

#include <systemd/sd-daemon.h>

#include <ctime>

namespace blkpolicy::systemd {

namespace {
std::string monotonic_usec() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::to_string(static_cast<unsigned long long>(ts.tv_sec) * 1000000ULL +
                          static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL);
}
}  // namespace

void notify_ready(const std::string& status) { sd_notify(0, ("READY=1\nSTATUS=" + status).c_str()); }
void notify_status(const std::string& status) { sd_notify(0, ("STATUS=" + status).c_str()); }
void notify_reloading() {
    sd_notify(0, ("RELOADING=1\nSTATUS=reloading the policy\nMONOTONIC_USEC=" + monotonic_usec()).c_str());
}
void notify_stopping() { sd_notify(0, "STOPPING=1\nSTATUS=stopping"); }

}  // namespace blkpolicy::systemd
