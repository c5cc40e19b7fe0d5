// SPDX-License-Identifier: MIT
// File and system helpers every part of blkpolicy may use: bounded reads,
// atomic writes, errno text, probing a unix socket. No policy, no sysfs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "util/status.hpp"

namespace blkpolicy::util {

// Reads a whole regular file of at most `limit` bytes. Fails (naming `what`,
// e.g. "a policy file") otherwise, without reading more than limit + 1
// bytes: a huge file, a FIFO or /dev/zero is refused, never read to the end.
Result<std::string> read_bounded_file(const std::string& path, std::size_t limit, const std::string& what);

// Writes `text` to `path` through a temporary file and rename(2), so a reader
// never sees half a file; on failure the temporary file is removed and the
// old file, if any, kept.
Status write_atomically(const std::string& path, const std::string& text);

// "Invalid argument (EINVAL)"
std::string errno_text(int err);

// The names in a directory, "." and ".." left out, in the order readdir
// gives them, into `names`; 0, or the errno of opendir.
int list_directory(const std::string& path, std::vector<std::string>& names);

// Whether a server accepts connections on the unix socket at `path` (a
// socket file outlives its server: only a successful connect tells).
bool unix_socket_accepts(const char* path, int type);

}  // namespace blkpolicy::util
