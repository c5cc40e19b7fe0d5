// SPDX-License-Identifier: MIT
// A `blkpolicy run` child process with its own NOTIFY_SOCKET, and a reader
// for what it sent to journald. Stopped (SIGTERM, then SIGKILL) by the
// destructor if the test has not stopped it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/paths.hpp"

namespace blkpolicy::test {

using JournalEntry = std::map<std::string, std::string>;

class DaemonProcess {
public:
    // `watchdog_usec` > 0 sets WATCHDOG_USEC and WATCHDOG_PID as systemd would.
    // `wrapper` runs in front of the binary (e.g. strace); pid() is then the wrapper's.
    // `binary` is the blkpolicy to run (bench/ compares an earlier build's).
    explicit DaemonProcess(const std::vector<std::string>& args, long watchdog_usec = 0,
                           const std::vector<std::string>& wrapper = {},
                           const std::string& binary = blkpolicy::test::blkpolicy_binary());
    ~DaemonProcess();
    DaemonProcess(const DaemonProcess&) = delete;
    DaemonProcess& operator=(const DaemonProcess&) = delete;

    pid_t pid() const { return pid_; }
    bool alive();
    void signal(int sig) const;
    // Waits for the exit; returns the exit code (128+N for a signal), -1 on timeout.
    int wait_exit(std::chrono::milliseconds timeout);

    // sd_notify messages received so far (each one as sent, e.g. "READY=1\nSTATUS=...").
    std::vector<std::string> notifications();
    bool wait_notification(const std::string& needle, std::chrono::milliseconds timeout);

    // Journal entries logged by this process, oldest first.
    std::vector<JournalEntry> journal() const;
    std::vector<JournalEntry> alerts(const std::string& device) const;  // entries with BLKPOLICY_EVENT
    bool wait_journal(const std::function<bool(const JournalEntry&)>& match, std::chrono::milliseconds timeout) const;

    // What the daemon wrote on stderr (sanitizer reports land there).
    std::string stderr_text() const;

    // VmRSS in KiB.
    long rss_kib() const;

private:
    pid_t pid_ = -1;
    int exit_code_ = -1;
    int notify_fd_ = -1;
    std::string notify_path_;
    std::string stderr_path_;
    // Drained continuously, as a service manager would: a notify socket
    // nobody reads makes the daemon's sd_notify block.
    std::mutex mutex_;
    std::vector<std::string> notes_;
    std::atomic<bool> stop_reader_{false};
    std::thread reader_;
};

// Polls `cond` every 20 ms until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout);

// True when journald accepts on /run/systemd/journal/socket.
bool journald_available();

}  // namespace blkpolicy::test
