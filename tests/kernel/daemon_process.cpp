// SPDX-License-Identifier: MIT
#include "kernel/daemon_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "support/run_binary.hpp"
#include "udev/monitor.hpp"
#include "util/files.hpp"
#include "util/owned.hpp"

namespace blkpolicy::test {

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (cond()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

bool journald_available() { return util::unix_socket_accepts("/run/systemd/journal/socket", SOCK_DGRAM); }

DaemonProcess::DaemonProcess(const std::vector<std::string>& args, long watchdog_usec,
                             const std::vector<std::string>& wrapper, const std::string& binary) {
    notify_path_ = "/tmp/blkpolicy-notify-" + std::to_string(::getpid()) + "-" +
                   std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, notify_path_.c_str(), sizeof addr.sun_path - 1);
    if (notify_fd_ < 0 || ::bind(notify_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0)
        throw std::runtime_error(std::string("notify socket: ") + std::strerror(errno));

    std::vector<std::string> argv_s = wrapper;
    std::vector<std::string> run = {"run"};
    run.insert(run.end(), args.begin(), args.end());
    argv_s.push_back(binary);
    for (auto& a : hermetic(run)) argv_s.push_back(std::move(a));
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    stderr_path_ = notify_path_ + ".stderr";
    pid_ = ::fork();
    if (pid_ == 0) {
        int devnull = ::open("/dev/null", O_RDWR);
        int errfile = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(devnull, 0);
        ::dup2(devnull, 1);  // not a terminal: the daemon logs to journald
        ::dup2(errfile, 2);
        ::setenv("NOTIFY_SOCKET", notify_path_.c_str(), 1);
        if (watchdog_usec > 0) {
            ::setenv("WATCHDOG_USEC", std::to_string(watchdog_usec).c_str(), 1);
            ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    // Started after fork(): the child must not inherit a thread holding locks.
    reader_ = std::thread([this] {
        char buf[4096];
        while (!stop_reader_) {
            pollfd p{notify_fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            ssize_t n = ::recv(notify_fd_, buf, sizeof buf, 0);
            if (n <= 0) continue;
            std::lock_guard<std::mutex> lock(mutex_);
            notes_.emplace_back(buf, static_cast<std::size_t>(n));
        }
    });
}

DaemonProcess::~DaemonProcess() {
    if (alive()) {
        ::kill(pid_, SIGTERM);
        if (wait_exit(std::chrono::seconds(5)) < 0) {
            ::kill(pid_, SIGKILL);
            wait_exit(std::chrono::seconds(5));
        }
    }
    stop_reader_ = true;
    if (reader_.joinable()) reader_.join();
    if (notify_fd_ >= 0) ::close(notify_fd_);
    ::unlink(notify_path_.c_str());
    ::unlink(stderr_path_.c_str());
}

std::string DaemonProcess::stderr_text() const {
    std::ifstream in(stderr_path_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool DaemonProcess::alive() {
    if (exit_code_ >= 0) return false;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return false;
    }
    return true;
}

void DaemonProcess::signal(int sig) const { ::kill(pid_, sig); }

int DaemonProcess::wait_exit(std::chrono::milliseconds timeout) {
    eventually([&] { return !alive(); }, timeout);
    return exit_code_;
}

std::vector<std::string> DaemonProcess::notifications() {
    std::lock_guard<std::mutex> lock(mutex_);
    return notes_;
}

bool DaemonProcess::wait_notification(const std::string& needle, std::chrono::milliseconds timeout) {
    return eventually(
        [&] {
            for (const auto& n : notifications())
                if (n.find(needle) != std::string::npos) return true;
            return false;
        },
        timeout);
}

std::vector<JournalEntry> DaemonProcess::journal() const {
    std::vector<JournalEntry> out;
    sd_journal* raw = nullptr;
    if (sd_journal_open(&raw, SD_JOURNAL_LOCAL_ONLY) < 0) return out;
    const util::Owned<sd_journal, sd_journal_close> journal{raw};
    sd_journal* j = journal.get();
    const std::string match = "_PID=" + std::to_string(pid_);
    sd_journal_add_match(j, match.c_str(), 0);
    sd_journal_add_match(j, "SYSLOG_IDENTIFIER=blkpolicy", 0);
    SD_JOURNAL_FOREACH(j) {
        JournalEntry e;
        const void* data = nullptr;
        size_t len = 0;
        SD_JOURNAL_FOREACH_DATA(j, data, len) {
            std::string field(static_cast<const char*>(data), len);
            auto eq = field.find('=');
            if (eq != std::string::npos) e[field.substr(0, eq)] = field.substr(eq + 1);
        }
        out.push_back(std::move(e));
    }
    return out;
}

std::vector<JournalEntry> DaemonProcess::alerts(const std::string& device) const {
    std::vector<JournalEntry> out;
    for (auto& e : journal())
        if (e.count("BLKPOLICY_EVENT") && e["BLKPOLICY_DEVICE"] == device) out.push_back(e);
    return out;
}

bool DaemonProcess::wait_journal(const std::function<bool(const JournalEntry&)>& match,
                                 std::chrono::milliseconds timeout) const {
    return eventually(
        [&] {
            for (const auto& e : journal())
                if (match(e)) return true;
            return false;
        },
        timeout);
}

long DaemonProcess::rss_kib() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

}  // namespace blkpolicy::test
