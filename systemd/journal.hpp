// SPDX-License-Identifier: MIT
// Journal entries sent without ever waiting for journald.
//
// sd_journal_sendv() writes to a blocking socket: when journald is frozen
// or behind and its socket queue is full (net.unix.max_dgram_qlen
// datagrams), the caller sleeps until journald reads again. Measured here:
// with journald stopped (SIGSTOP) a loop of sd_journal_send() never
// returned. A daemon that sleeps there stops enforcing and stops pinging
// the watchdog. So entries go over journald's native protocol
// (systemd.io/JOURNAL_NATIVE_PROTOCOL) on a non-blocking socket, and what
// journald cannot take now is kept, in order and bounded, and sent when it
// can: each kept entry carries BLKPOLICY_QUEUED_USEC (when it was made),
// and the first entry after an outage says how long the journal was
// unreachable and how many entries were sent late or lost.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "util/fd.hpp"

namespace blkpolicy::systemd {

// One datagram per entry to journald's socket. send() never blocks.
class JournalSocket {
public:
    explicit JournalSocket(std::string path = "/run/systemd/journal/socket");
    // 0 when journald has the entry; else -errno: EAGAIN (its queue is
    // full), ENOENT or ECONNREFUSED (no journald), EMSGSIZE (too large).
    int send(const std::vector<std::string>& fields);

    // The native protocol's serialisation of "NAME=value" fields: a value
    // with a newline goes as NAME, newline, its length (64-bit little
    // endian), the value and a newline.
    static std::string serialise(const std::vector<std::string>& fields);

private:
    std::string path_;
    util::Fd fd_;
};

// What could not be delivered at once (daemon.json and the metrics).
struct JournalDelivery {
    std::size_t queued = 0;       // kept now, waiting for journald
    std::uint64_t sent_late = 0;  // kept and sent afterwards, since start
    std::uint64_t lost = 0;       // dropped because the queue was full, since start
};

// Entries in order: sent at once while journald takes them; otherwise kept
// (at most `capacity`, later ones dropped and counted) and sent by
// submit() or retry() once journald takes them again.
class JournalQueue {
public:
    explicit JournalQueue(JournalSocket socket, std::size_t capacity = 1024);
    void submit(std::vector<std::string> fields);
    // Sends what is kept; after an outage, the entry that reports it.
    void retry();
    const JournalDelivery& delivery() const { return delivery_; }

private:
    void drain();

    JournalSocket socket_;
    std::size_t capacity_;
    // Each with BLKPOLICY_QUEUED_USEC, when it was made (CLOCK_REALTIME).
    std::deque<std::vector<std::string>> kept_;
    JournalDelivery delivery_;
    // The outage being counted: since when (monotonic), the first error,
    // and what became of its entries.
    bool down_ = false;
    std::chrono::steady_clock::time_point down_since_{};
    int down_error_ = 0;
    std::uint64_t outage_late_ = 0;
    std::uint64_t outage_lost_ = 0;
};

}  // namespace blkpolicy::systemd
