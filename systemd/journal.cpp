// SPDX-License-Identifier: MIT
#include "systemd/journal.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace blkpolicy::systemd {

namespace {

std::uint64_t realtime_usec() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

std::string seconds_text(std::chrono::steady_clock::duration d) {
    const auto tenths = std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 100;
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

}  // namespace

JournalSocket::JournalSocket(std::string path)
    : path_(std::move(path)), fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {}

std::string JournalSocket::serialise(const std::vector<std::string>& fields) {
    std::string out;
    for (const auto& f : fields) {
        const auto eq = f.find('=');
        if (eq == std::string::npos) continue;  // not a field
        if (f.find('\n', eq) == std::string::npos) {
            out += f;
            out += '\n';
            continue;
        }
        const std::uint64_t n = f.size() - eq - 1;
        out.append(f, 0, eq);
        out += '\n';
        for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
        out.append(f, eq + 1, std::string::npos);
        out += '\n';
    }
    return out;
}

int JournalSocket::send(const std::vector<std::string>& fields) {
    if (!fd_) return -EBADF;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof(addr.sun_path)) return -ENAMETOOLONG;
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    const std::string datagram = serialise(fields);
    for (;;) {
        const ssize_t n = ::sendto(fd_.get(), datagram.data(), datagram.size(), MSG_NOSIGNAL,
                                   reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
        if (n >= 0) return 0;
        if (errno == EINTR) continue;
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

JournalQueue::JournalQueue(JournalSocket socket, std::size_t capacity)
    : socket_(std::move(socket)), capacity_(capacity) {}

void JournalQueue::submit(std::vector<std::string> fields) {
    retry();
    if (kept_.empty()) {
        const int r = socket_.send(fields);
        if (r == 0) return;
        if (r == -EMSGSIZE) {  // would never go: counted, not kept
            ++delivery_.lost;
            return;
        }
        if (!down_) {
            down_ = true;
            down_since_ = std::chrono::steady_clock::now();
            down_error_ = -r;
            outage_late_ = outage_lost_ = 0;
        }
    }
    if (kept_.size() >= capacity_) {
        ++delivery_.lost;
        ++outage_lost_;
        return;
    }
    fields.push_back("BLKPOLICY_QUEUED_USEC=" + std::to_string(realtime_usec()));
    kept_.push_back(std::move(fields));
    delivery_.queued = kept_.size();
}

void JournalQueue::retry() {
    if (!kept_.empty() || down_) drain();
}

void JournalQueue::drain() {
    while (!kept_.empty()) {
        const int r = socket_.send(kept_.front());
        if (r == -EMSGSIZE) {
            ++delivery_.lost;
            ++outage_lost_;
        } else if (r != 0) {
            return;
        } else {
            ++delivery_.sent_late;
            ++outage_late_;
        }
        kept_.pop_front();
        delivery_.queued = kept_.size();
    }
    if (!down_) return;
    const auto lasted = std::chrono::steady_clock::now() - down_since_;
    const std::string message =
        "the journal took no entries for " + seconds_text(lasted) + " (" + std::strerror(down_error_) +
        (down_error_ == EAGAIN ? ": journald's queue was full" : "") +
        "); entries kept and sent late: " + std::to_string(outage_late_) +
        " (BLKPOLICY_QUEUED_USEC says when each was made), lost: " + std::to_string(outage_lost_);
    const int r =
        socket_.send({"MESSAGE=" + message, "PRIORITY=" + std::to_string(outage_lost_ ? LOG_WARNING : LOG_NOTICE),
                      "SYSLOG_IDENTIFIER=blkpolicy", "BLKPOLICY_JOURNAL_SENT_LATE=" + std::to_string(outage_late_),
                      "BLKPOLICY_JOURNAL_LOST=" + std::to_string(outage_lost_),
                      "BLKPOLICY_JOURNAL_OUTAGE_USEC=" +
                          std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(lasted).count())});
    if (r == 0) down_ = false;  // else down again: said at the next retry
}

}  // namespace blkpolicy::systemd
