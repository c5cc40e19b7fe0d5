// SPDX-License-Identifier: MIT
// sd_notify for Type=notify units; every call is a no-op outside systemd.
#pragma once

#include <string>

namespace blkpolicy::systemd {

void notify_ready(const std::string& status);
void notify_status(const std::string& status);
void notify_reloading();
void notify_stopping();

}  // namespace blkpolicy::systemd
