// SPDX-License-Identifier: MIT
#include "agent/cli/measure.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>

#include "agent/cli/commands.hpp"
#include "agent/cli/render/measure.hpp"
#include "agent/state.hpp"
#include "measure/session.hpp"
#include "util/fd.hpp"

namespace blkpolicy::agent {

namespace {

// SIGINT, SIGTERM and SIGHUP end the window early (the figures so far are
// printed and the tracing instance removed); blocked while measuring and
// read from a signalfd, put back as they were afterwards.
class StopSignals {
public:
    StopSignals() {
        sigemptyset(&mask_);
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask_, sig);
        ::sigprocmask(SIG_BLOCK, &mask_, &old_);
        fd_.reset(::signalfd(-1, &mask_, SFD_CLOEXEC | SFD_NONBLOCK));
        old_pipe_ = std::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not skip the clean-up
    }
    ~StopSignals() {
        std::signal(SIGPIPE, old_pipe_);
        fd_.reset();
        ::sigprocmask(SIG_SETMASK, &old_, nullptr);
    }
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;
    int fd() const { return fd_.get(); }
    // Takes the signal that arrived, so that it is not delivered again when
    // the mask is put back.
    void consume() const {
        signalfd_siginfo info{};
        while (::read(fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        }
    }

private:
    sigset_t mask_{};
    sigset_t old_{};
    util::Fd fd_;
    void (*old_pipe_)(int) = SIG_DFL;
};

}  // namespace

int run_measure(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    if (int rc = check_sysfs_and_devices(o, sysfs, err)) return rc;
    measure::SessionOptions so;
    so.devices = o.devices;
    so.buffer_kb = o.trace_buffer_kb;
    so.sample_percent = o.sample_percent;
    const StateDir state(o.state_dir);
    so.first_write_cache = [&state](const policy::DeviceFacts& f) { return state.first_write_cache(f); };
    if (sysfs.root() == "/sys") so.drive_cache = measure::drive_cache_of_node;
    measure::Session session(sysfs, so);

    StopSignals stop;
    session.start();
    const auto deadline = std::chrono::steady_clock::now() + o.measure_for;
    bool interrupted = false;
    for (;;) {
        const auto now = std::chrono::steady_clock::now();
        session.advance(now);  // sampling: the request tracepoints on or off
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::min(deadline, session.next_switch()) - now);
        if (now >= deadline) break;
        // The CPUs online now (a CPU that came or went since the last look),
        // at least once a second.
        session.follow_cpus();
        std::vector<pollfd> fds;
        for (int fd : session.fds()) fds.push_back({fd, POLLIN, 0});
        fds.push_back({stop.fd(), POLLIN, 0});
        const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long>(left.count() + 1, 0, 1'000)));
        if (n < 0 && errno != EINTR) break;
        if (fds.back().revents & POLLIN) {
            stop.consume();
            interrupted = true;
            break;
        }
        for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
            if (fds[i].revents & POLLIN) session.readable(fds[i].fd);
            if (fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) session.poll_failed(fds[i].fd);
        }
    }
    MeasureReport report;
    report.seconds = session.seconds();
    report.interrupted = interrupted;
    report.instance_name = session.instance() ? session.instance()->name() : std::string();
    report.buffer_kb_per_cpu = session.instance() ? session.instance()->buffer_kb_per_cpu() : 0;
    report.cpus = session.instance() ? session.instance()->cpus() : 0;
    report.buffer_total_kb = session.buffer_total_kb();
    report.devices = session.take(false);
    report.tracing = session.tracing();
    print_measure(out, report, o.json);
    for (const auto& name : o.devices)
        if (!sysfs.exists("block/" + name)) return device_went_away(name, err);
    const bool critical = std::any_of(report.devices.begin(), report.devices.end(), [](const auto& f) {
        return std::any_of(f.findings.begin(), f.findings.end(),
                           [](const report::Finding& x) { return x.severity == report::Severity::critical; });
    });
    return critical ? kExitPartial : kExitOk;
}

}  // namespace blkpolicy::agent
