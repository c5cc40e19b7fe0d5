// SPDX-License-Identifier: MIT
#include "agent/daemon/daemon.hpp"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "agent/boot.hpp"
#include "agent/daemon/outputs.hpp"
#include "agent/daemon/pending.hpp"
#include "agent/daemon/reconciler.hpp"
#include "agent/policy_files.hpp"
#include "agent/policy_watch.hpp"
#include "agent/snapshot.hpp"
#include "agent/state.hpp"
#include "measure/session.hpp"
#include "policy/match.hpp"
#include "systemd/alerts.hpp"
#include "systemd/notify.hpp"
#include "udev/discovery.hpp"
#include "udev/host.hpp"
#include "udev/monitor.hpp"
#include "udev/probes.hpp"
#include "util/files.hpp"
#include "util/owned.hpp"
#include "writers/scan.hpp"

namespace blkpolicy::agent {

namespace {

double clock_seconds(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}
// Timestamps (daemon.json's last_pass, the metrics' *_timestamp_seconds).
double now_unix() { return clock_seconds(CLOCK_REALTIME); }
// Durations: unmoved by a wall clock set forward or back.
double monotonic_seconds() { return clock_seconds(CLOCK_MONOTONIC); }
// What the daemon's own work costs, unstretched by other processes.
double thread_cpu_seconds() { return clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

// Bound on devices with queued events (each entry is a name and a trigger).
constexpr std::size_t kMaxPending = 65536;

// A policy file added, changed or removed is read once nothing more has
// changed there for this long: a tool writing several files, or moving
// one in after another, is read once, when it is done.
constexpr std::uint64_t kPolicySettleUsec = 1'000'000;

class Daemon {
public:
    Daemon(const Options& o, std::unique_ptr<systemd::EventLog> log)
        : opts_(o),
          log_(std::move(log)),
          sysfs_(o.sysfs_root),
          state_(o.state_dir),
          reconciler_(sysfs_, state_, *log_, udev::read_host_context(sysfs_)) {}

    int run() {
        auto loaded = load_policy_from(opts_.policies);
        if (!loaded.ok()) {
            for (const auto& e : loaded.errors) log_->log(LOG_ERR, e.str());
            log_->log(LOG_ERR,
                      loaded.missing ? "there is no policy; not starting" : "the policy is invalid; not starting");
            return kExitPolicy;
        }
        policy::bind_host(loaded.policy, reconciler_.host().facts);
        apply_policy(std::move(loaded.policy));
        load_writers();
        reconciler_.set_udev_db(opts_.udev_db());
        // The metrics say who each device is and what audit finds.
        reconciler_.set_identity_labels(!opts_.metrics_file.empty());
        if (!sysfs_.is_dir("block")) {
            log_->log(LOG_ERR, opts_.sysfs_root + "/block is not a directory: is sysfs mounted there?");
            return kExitRuntime;
        }
        if (int r = setup(); r < 0) {
            log_->log(LOG_ERR, std::string("cannot set up the event loop: ") + std::strerror(-r));
            return kExitRuntime;
        }
        log_->log(LOG_INFO, "blkpolicy " BLKPOLICY_VERSION " starting in " +
                                std::string(policy::to_string(reconciler_.mode())) + " mode, verify every " +
                                std::to_string(interval_.count()) + " ms, policy from " +
                                std::to_string(reconciler_.policy().files.size()) + " file(s)");
        // What the pass in the initramfs did on this boot (its facts are in the
        // state directory already, and this daemon goes on from them).
        if (auto boot = read_boot_record(opts_.state_dir)) {
            boot_record_ = *boot;
            const auto r = boot_record_from(*boot);
            log_->log(r.ok && r.exit_code == 0 && r.bound.empty() ? LOG_INFO : LOG_WARNING,
                      "this boot's " + boot_line(r));
            // Each run the runner in the initramfs stopped, or saw crash, fail
            // or not start: an alert of its own; this first pass applies
            // what it did not.
            for (const auto& b : r.bound) {
                systemd::Alert a;
                a.kind = systemd::AlertKind::failed;
                a.device = b.what == "pass" ? "*" : b.what;
                a.attribute = "initramfs";
                a.actual = b.outcome;
                a.message = "in the initramfs, blkpolicy's " +
                            (b.what == "pass" ? std::string("pass") : "run for " + b.what) + " " + b.outcome +
                            (b.detail.empty() ? "" : ": " + b.detail) + "; the daemon applies the policy now";
                char up[32];
                std::snprintf(up, sizeof up, "%.2f", b.uptime);
                a.fields = {{"INITRAMFS_OUTCOME", b.outcome}, {"INITRAMFS_DETAIL", b.detail}, {"INITRAMFS_UPTIME", up}};
                log_->alert(a);
            }
        }
        set_measuring();
        // Devices found at start were added before: not in a driver's setup.
        full_pass(Trigger::verify);
        systemd::notify_ready(status_line());
        // The findings only feed the metrics: READY=1 (every device has its
        // values) does not wait for them.
        refresh_audit();
        int r = sd_event_loop(event_.get());
        if (report_pending_) write_reports();  // the last results, not those of a gap ago
        systemd::notify_stopping();
        log_->log(LOG_INFO, "blkpolicy stopped");
        return r < 0 ? kExitRuntime : kExitOk;
    }

private:
    void load_writers() {
        std::vector<std::string> warnings;
        writers_ = writers::scan_writers({opts_.udev_rules_dirs, opts_.config_root}, &warnings);
        reconciler_.set_writers(writers_);
        for (const auto& w : warnings) log_->log(LOG_WARNING, w);
    }

    void apply_policy(policy::Policy p) {
        policy_loaded_unix_ = now_unix();
        audit_due_ = true;
        interval_ = p.daemon.verify_interval;
        reconciler_.set_mode(opts_.mode ? *opts_.mode : p.daemon.mode);
        reconciler_.set_policy(std::move(p));
    }

    int setup() {
        sd_event* event = nullptr;
        int r = sd_event_default(&event);
        if (r < 0) return r;
        event_.reset(event);
        sigset_t mask;
        sigemptyset(&mask);
        for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, sig);
        if (sigprocmask(SIG_BLOCK, &mask, nullptr) < 0) return -errno;
        // Sources added without a handle float: the loop owns and frees them.
        for (int sig : {SIGTERM, SIGINT}) {
            if ((r = sd_event_add_signal(event, nullptr, sig, &Daemon::on_stop, this)) < 0) return r;
        }
        if ((r = sd_event_add_signal(event, nullptr, SIGHUP, &Daemon::on_reload, this)) < 0) return r;

        try {
            kernel_monitor_ = std::make_unique<udev::Monitor>(udev::EventSource::kernel, opts_.receive_buffer);
        } catch (const std::exception& e) {
            log_->log(LOG_ERR, e.what());
            return -EIO;
        }
        watches_[0] = {this, kernel_monitor_.get()};
        if ((r = sd_event_add_io(event, nullptr, kernel_monitor_->fd(), EPOLLIN, &Daemon::on_uevent, &watches_[0])) < 0)
            return r;
        if ((r = listen_to_udevd()) < 0) return r;
        if (!udev_monitor_) log_->log(LOG_INFO, "udevd is not running: reacting to kernel uevents only");

        // Sources with a handle are owned here (sources_); the handles below
        // borrow from it.
        const auto keep = [this](sd_event_source* s) { return sources_.emplace_back(s).get(); };
        sd_event_source* s = nullptr;
        if ((r = sd_event_add_defer(event, &s, &Daemon::on_defer, this)) < 0) return r;
        defer_ = keep(s);
        sd_event_source_set_enabled(defer_, SD_EVENT_OFF);

        r = sd_event_add_time_relative(event, &s, CLOCK_MONOTONIC, interval_usec(), 0, &Daemon::on_timer, this);
        if (r < 0) return r;
        timer_ = keep(s);
        r = sd_event_add_time_relative(event, &s, CLOCK_MONOTONIC, 0, 0, &Daemon::on_report_timer, this);
        if (r < 0) return r;
        report_timer_ = keep(s);
        sd_event_source_set_enabled(report_timer_, SD_EVENT_OFF);
        r = sd_event_add_time_relative(event, &s, CLOCK_MONOTONIC, kPolicySettleUsec, 0, &Daemon::on_policy_settled,
                                       this);
        if (r < 0) return r;
        settle_timer_ = keep(s);
        sd_event_source_set_enabled(settle_timer_, SD_EVENT_OFF);
        watch_policy_files();
        // WATCHDOG=1 pings at half of WatchdogSec= when the unit sets it.
        sd_event_set_watchdog(event, 1);
        return 0;
    }

    // udev events (sent once udevd ran its rules) when udevd runs: asked at
    // start and, while it is not running, again at every verify pass, so a
    // udevd started after the daemon (an upgrade restarting both, a boot
    // ordering) is heard from then on, not never.
    int listen_to_udevd() {
        if (udev_monitor_ || !udev::udevd_running()) return 0;
        try {
            udev_monitor_ = std::make_unique<udev::Monitor>(udev::EventSource::udev, opts_.receive_buffer);
        } catch (const std::exception& e) {
            log_->log(LOG_WARNING, std::string("cannot listen to udevd: ") + e.what() +
                                       "; reacting to kernel uevents only, trying again at the next pass");
            return 0;
        }
        watches_[1] = {this, udev_monitor_.get()};
        const int r =
            sd_event_add_io(event_.get(), nullptr, udev_monitor_->fd(), EPOLLIN, &Daemon::on_uevent, &watches_[1]);
        if (r < 0) {
            udev_monitor_.reset();
            watches_[1] = {};
            return r;
        }
        return 0;
    }

    std::uint64_t interval_usec() const { return static_cast<std::uint64_t>(interval_.count()) * 1000ULL; }

    // --- handlers: short, they only note what to do ---

    static int on_uevent(sd_event_source*, int, uint32_t, void* userdata) {
        auto* w = static_cast<Watch*>(userdata);
        bool overflow = false;
        auto events = w->monitor->drain(overflow);
        auto& count =
            w->monitor->source() == udev::EventSource::udev ? w->daemon->uevents_.udev : w->daemon->uevents_.kernel;
        count += events.size();
        w->daemon->note_events(events, overflow);
        return 0;
    }

    static int on_defer(sd_event_source*, void* userdata) {
        static_cast<Daemon*>(userdata)->process_pending();
        return 0;
    }

    static int on_timer(sd_event_source* s, uint64_t, void* userdata) {
        auto* d = static_cast<Daemon*>(userdata);
        if (!d->udev_monitor_ && d->listen_to_udevd() == 0 && d->udev_monitor_)
            d->log_->log(LOG_INFO, "udevd is running now: reacting to its events as well as the kernel's");
        d->full_pass(Trigger::verify);
        d->refresh_audit();
        sd_event_source_set_time_relative(s, d->interval_usec());
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
    }

    static int on_reload(sd_event_source*, const struct signalfd_siginfo*, void* userdata) {
        static_cast<Daemon*>(userdata)->reload();
        return 0;
    }

    // A policy file added, changed or removed: noted, and read once the
    // directory has been still for kPolicySettleUsec.
    static int on_policy_file(sd_event_source*, const struct inotify_event* e, void* userdata) {
        auto* w = static_cast<PolicyWatchSource*>(userdata);
        const std::string name = e->len ? std::string(e->name) : std::string();
        const std::string path = name.empty() ? w->watch.dir : w->watch.dir + "/" + name;
        bool relevant = (e->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF)) != 0;
        if (!relevant) {
            struct stat st {};
            const bool link = ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
            relevant = concerns_policy(w->watch, name, e->mask, link);
        }
        if (relevant) w->daemon->policy_file_changed(path);
        return 0;
    }

    static int on_policy_settled(sd_event_source*, uint64_t, void* userdata) {
        auto* d = static_cast<Daemon*>(userdata);
        std::string which;
        for (const auto& f : d->changed_policy_files_) which += (which.empty() ? "" : ", ") + f;
        d->changed_policy_files_.clear();
        d->log_->log(LOG_INFO, "policy files changed (" + which + "): reading the policy again");
        d->reload(true);
        return 0;
    }

    void policy_file_changed(const std::string& path) {
        changed_policy_files_.insert(path);
        sd_event_source_set_time_relative(settle_timer_, kPolicySettleUsec);
        sd_event_source_set_enabled(settle_timer_, SD_EVENT_ONESHOT);
    }

    // Watches what the policy is read from (agent/policy_watch): at start,
    // and after a reload where that changed (a drop-in directory made since
    // is watched from then on). The new sources are added before the old
    // ones go, so a directory watched before and after never goes unwatched.
    void watch_policy_files() {
        auto wanted = policy_watches(opts_.policies);
        std::vector<PolicyWatch> have;
        for (const auto& t : policy_watch_targets_) have.push_back(t->watch);
        if (wanted == have && !policy_watch_targets_.empty()) return;
        std::vector<util::Owned<sd_event_source, sd_event_source_unref>> sources;
        std::vector<std::unique_ptr<PolicyWatchSource>> targets;
        for (auto& w : wanted) {
            auto target = std::make_unique<PolicyWatchSource>(PolicyWatchSource{this, std::move(w)});
            sd_event_source* s = nullptr;
            const int r = sd_event_add_inotify(event_.get(), &s, target->watch.dir.c_str(), policy_watch_mask(),
                                               &Daemon::on_policy_file, target.get());
            if (r < 0) {
                log_->log(LOG_WARNING, "cannot watch " + target->watch.dir + " for policy files: " + std::strerror(-r) +
                                           "; a change there takes effect at the next reload");
                continue;
            }
            sources.emplace_back(s);
            targets.push_back(std::move(target));
        }
        policy_watch_sources_.swap(sources);
        sources.clear();  // the old sources, before what they point at
        policy_watch_targets_.swap(targets);
    }

    static int on_stop(sd_event_source* s, const struct signalfd_siginfo*, void*) {
        systemd::notify_stopping();
        return sd_event_exit(sd_event_source_get_event(s), 0);
    }

    // --- the work ---

    void note_events(const std::vector<udev::Uevent>& events, bool overflow) {
        if (overflow) {
            log_->log(LOG_WARNING,
                      "uevent receive buffer overflowed (ENOBUFS): events were lost; rescanning every device");
            pending_.note_overflow();
        }
        for (const auto& e : events) {
            if (pending_.note(e))
                log_->log(LOG_WARNING, "more than " + std::to_string(kMaxPending) +
                                           " devices with pending events; rescanning every device instead");
        }
        // Events for other subsystems (the bdi add before a disk's) arrive
        // here filtered out: no pass for them, and no state write in front of
        // the disk's own event.
        if (!pending_.empty()) sd_event_source_set_enabled(defer_, SD_EVENT_ONESHOT);
    }

    void process_pending() {
        if (pending_.empty()) return;
        auto batch = pending_.take();
        if (!batch.removed.empty()) audit_due_ = true;
        for (const auto& name : batch.removed) reconciler_.forget(name);
        if (batch.rescan) {
            full_pass(Trigger::verify);
            return;
        }
        std::set<std::string> related;
        for (const auto& [name, trigger] : batch.reconcile) {
            if (trigger == Trigger::added || trigger == Trigger::changed) audit_due_ = true;
            if (!reconciler_.reconcile(name, trigger)) continue;
            // Stacked devices see each other's changes: verify holders and
            // slaves too (looked up here, not in a full pass, which sees all).
            for (auto& other : udev::stacked_neighbours(sysfs_, name)) related.insert(std::move(other));
        }
        for (const auto& name : related)
            if (!batch.reconcile.count(name) && sysfs_.exists("block/" + name))
                reconciler_.reconcile(name, Trigger::verify);
        after_pass();
    }

    void full_pass(Trigger trigger) {
        sysfs_.forget_mounts();  // debugfs mounted (or unmounted) since the last pass
        const auto names = udev::list_block_devices(sysfs_);
        std::set<std::string> present(names.begin(), names.end());
        std::vector<std::string> gone;
        for (const auto& [name, rec] : reconciler_.devices())
            if (!present.count(name)) gone.push_back(name);
        for (const auto& name : gone) reconciler_.forget(name);
        for (const auto& name : names) reconciler_.reconcile(name, trigger);
        after_pass();
    }

    // FROM_FILES: a policy file changed (not SIGHUP): a policy that reads
    // the same as the one in force is left as it is.
    void reload(bool from_files = false) {
        auto loaded = load_policy_from(opts_.policies);
        if (from_files && loaded.ok() && loaded.policy.digest == reconciler_.policy().digest) {
            log_->log(LOG_INFO, "the policy read is the one in force (" + loaded.policy.digest + "): nothing to do");
            watch_policy_files();
            return;
        }
        systemd::notify_reloading();
        ++reload_.generation;
        reload_.ok = loaded.ok();
        reload_.errors.clear();
        if (!loaded.ok()) {
            for (const auto& e : loaded.errors) {
                log_->log(LOG_ERR, e.str());
                reload_.errors.push_back(e.str());
            }
            log_->log(LOG_ERR, "policy reload failed, keeping the old policy");
        } else {
            const auto old_interval = interval_;
            reconciler_.forget_refused_schedulers();
            // The host again: its modules, DMI or hostname may have changed.
            reconciler_.set_host(udev::read_host_context(sysfs_));
            policy::bind_host(loaded.policy, reconciler_.host().facts);
            apply_policy(std::move(loaded.policy));
            load_writers();
            log_->log(LOG_INFO, "policy reloaded: " + std::to_string(reconciler_.policy().rules.size()) + " rule(s), " +
                                    policy::to_string(reconciler_.mode()) + " mode");
            if (interval_ != old_interval) {
                sd_event_source_set_time_relative(timer_, interval_usec());
                sd_event_source_set_enabled(timer_, SD_EVENT_ONESHOT);
            }
            set_measuring();
            full_pass(Trigger::verify);
            refresh_audit();
        }
        // At once, not after the report gap: `blkpolicy reload` waits for it.
        write_reports();
        watch_policy_files();
        systemd::notify_ready(status_line());
    }

    std::string status_line() const {
        auto s = reconciler_.summary();
        return std::to_string(s.devices) + " device(s) managed, " + std::to_string(s.drifted) + " drifted, " +
               std::to_string(s.failed) + " failed (" + policy::to_string(reconciler_.mode()) + ")";
    }

    void after_pass() {
        last_pass_unix_ = now_unix();
        log_->retry();  // what journald could not take before, if it can now
        // Only a changed STATUS= is sent: the manager needs no repeats, and a
        // notify socket nobody drains would block the loop sooner.
        if (auto status = status_line(); status != last_status_) {
            systemd::notify_status(status);
            last_status_ = status;
        }
        // The reports are rewritten at most every report_gap(): the first pass
        // after a quiet spell at once, the last of a burst when the gap ends.
        const auto mono = std::chrono::steady_clock::now();
        if (mono - last_report_ < report_gap()) {
            if (!report_pending_) {
                report_pending_ = true;
                const auto wait =
                    std::chrono::duration_cast<std::chrono::microseconds>(report_gap() - (mono - last_report_));
                sd_event_source_set_time_relative(report_timer_, static_cast<std::uint64_t>(wait.count()));
                sd_event_source_set_enabled(report_timer_, SD_EVENT_ONESHOT);
            }
            return;
        }
        write_reports();
    }

    static int on_report_timer(sd_event_source*, uint64_t, void* userdata) {
        static_cast<Daemon*>(userdata)->write_reports();
        return 0;
    }

    // daemon.json (read by `status`) and the metrics file, as of the last pass.
    void write_reports() {
        const double now = last_pass_unix_;  // what daemon.json calls last_pass
        report_pending_ = false;
        last_report_ = std::chrono::steady_clock::now();
        // What this rewrite costs, whichever way it ends: the daemon's own
        // CPU time, not the wall clock, which on a busy host also counts the
        // time other processes ran (the fleet test, 60 processes on 2 CPUs:
        // timed on the wall clock, reports lagged their passes by up to 5 s
        // and BlkpolicyNotVerifying fired for daemons that were verifying).
        struct Took {
            double start = thread_cpu_seconds();
            std::chrono::steady_clock::duration& out;
            ~Took() {
                out = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(thread_cpu_seconds() - start));
            }
        } took{.out = last_write_took_};
        uevents_.udev_listening = udev_monitor_ != nullptr;
        auto doc = daemon_json(reconciler_, static_cast<long>(::getpid()), now, reload_,
                               measuring_ ? &measured_ : nullptr, log_->delivery(), uevents_);
        doc["initramfs"] = boot_record_;
        const auto text = doc.dump(2) + "\n";
        auto st = util::write_atomically(opts_.state_dir + "/daemon.json", text);
        if (!st.ok()) {
            // Removed under us (or never made): make it again and retry once.
            std::error_code ec;
            std::filesystem::create_directories(opts_.state_dir, ec);
            st = util::write_atomically(opts_.state_dir + "/daemon.json", text);
        }
        // Each failure is logged once, not at every pass.
        say_save_once(*log_, st, last_state_error_, "; enforcing goes on, the last complete daemon.json stays",
                      "wrote daemon.json again (it could not be written: ");
        if (!opts_.metrics_file.empty()) {
            const double mono = monotonic_seconds();
            clock_.update(reconciler_, mono);
            MetricsInput m;
            m.last_pass_unix = now;
            m.monotonic_now = mono;
            m.verify_interval_seconds = static_cast<double>(interval_.count()) / 1000.0;
            m.version = BLKPOLICY_VERSION;
            m.policy_loaded_unix = policy_loaded_unix_;
            m.last_reload_ok = reload_.ok;
            m.reloads = reload_.generation;
            m.findings = audit_unix_ > 0 ? &findings_ : nullptr;
            m.audit_unix = audit_unix_;
            m.clock = &clock_;
            m.measured = measuring_ ? &measured_ : nullptr;
            m.journal = log_->delivery();
            m.uevents = uevents_;
            say_save_once(*log_, util::write_atomically(opts_.metrics_file, metrics_text(reconciler_, m)),
                          last_metrics_error_, "; enforcing goes on, the last complete metrics file stays",
                          "wrote " + opts_.metrics_file + " again (it could not be written: ");
        }
    }

    // Audit's findings for the metrics: at start, at reload, and at the first
    // verify pass after a device appeared, changed or went (not every pass:
    // it reads every attribute of every device).
    void refresh_audit() {
        if (opts_.metrics_file.empty() || !audit_due_) return;
        audit_due_ = false;
        const auto& pol = reconciler_.policy();
        auto in = audit_input(sysfs_, &pol, writers_, opts_.udev_db(), reconciler_.host());
        initramfs_audit_input(pol, opts_.config_root, in);
        if (boot_record_.is_object()) boot_audit_input(boot_record_from(boot_record_), in);
        findings_ = report::audit(in);
        audit_unix_ = now_unix();
        write_reports();  // rare (see above): not worth the report gap
    }

    // --- measuring (daemon.measure): back-to-back windows on one tracing
    // instance; each window's end publishes its figures and alerts a device
    // whose writes go unflushed over a volatile cache (once per change).

    void set_measuring() {
        const auto& d = reconciler_.policy().daemon;
        if (!d.measure) {
            if (measuring_) log_->log(LOG_INFO, "measuring stopped (daemon.measure is off)");
            trace_sources_.clear();
            measure_sources_.clear();
            measure_timer_ = nullptr;
            sample_timer_ = nullptr;
            measuring_.reset();
            measured_ = Measured{};
            at_risk_.clear();
            return;
        }
        if (measuring_ && d.measure_sample != measure_sample_) {
            // A new sample: a new session (the instance is made again).
            trace_sources_.clear();
            measure_sources_.clear();
            measure_timer_ = nullptr;
            sample_timer_ = nullptr;
            measuring_.reset();
        }
        if (measuring_) {
            if (d.measure_window != measure_window_) {
                measure_window_ = d.measure_window;
                measured_.window_seconds = static_cast<double>(measure_window_.count()) / 1000.0;
                sd_event_source_set_time_relative(measure_timer_, window_usec());
                sd_event_source_set_enabled(measure_timer_, SD_EVENT_ONESHOT);
            }
            return;
        }
        measure_window_ = d.measure_window;
        measured_ = Measured{};
        measured_.window_seconds = static_cast<double>(measure_window_.count()) / 1000.0;
        measure::SessionOptions so;
        so.first_write_cache = [this](const policy::DeviceFacts& f) { return state_.first_write_cache(f); };
        if (sysfs_.root() == "/sys") so.drive_cache = measure::drive_cache_of_node;
        so.sample_percent = measure_sample_ = d.measure_sample;
        measuring_ = std::make_unique<measure::Session>(sysfs_, so);
        measuring_->start();
        sd_event_source* s = nullptr;
        watch_trace();
        if (sd_event_add_time_relative(event_.get(), &s, CLOCK_MONOTONIC, window_usec(), 0, &Daemon::on_window, this) >=
            0) {
            measure_sources_.emplace_back(s);
            measure_timer_ = s;
        }
        schedule_sample();
        const auto& t = measuring_->tracing();
        log_->log(LOG_INFO,
                  "measuring in windows of " + measure::duration_text(measured_.window_seconds) + ": " +
                      (t.on ? "the stat counters and a tracing instance (" + measuring_->instance()->name() + ")"
                            : "the stat counters only; not traced: " + t.why_not));
    }

    // The online CPUs' buffers. A CPU's buffer wakes the loop only when it
    // is half full: no wake-ups on an idle host, and the window's end reads
    // the rest (of every CPU, online or not). Made again when a CPU came
    // online or went offline (followed at each sampling switch and window end).
    void watch_trace() {
        trace_sources_.clear();
        sd_event_source* s = nullptr;
        for (int fd : measuring_->fds()) {
            if (sd_event_add_io(event_.get(), &s, fd, EPOLLIN, &Daemon::on_trace, this) >= 0)
                trace_sources_.emplace_back(s);
        }
    }
    void follow_cpus() {
        if (measuring_ && measuring_->follow_cpus()) watch_trace();
    }

    std::uint64_t window_usec() const { return static_cast<std::uint64_t>(measure_window_.count()) * 1000ULL; }

    // Sampling: a timer for the next switch of the request tracepoints.
    void schedule_sample() {
        const auto next = measuring_->next_switch();
        if (next == std::chrono::steady_clock::time_point::max()) return;
        const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::max(next - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration{}))
                              .count();
        if (!sample_timer_) {
            sd_event_source* s = nullptr;
            if (sd_event_add_time_relative(event_.get(), &s, CLOCK_MONOTONIC, static_cast<std::uint64_t>(usec), 0,
                                           &Daemon::on_sample, this) < 0)
                return;
            measure_sources_.emplace_back(s);
            sample_timer_ = s;
            return;
        }
        sd_event_source_set_time_relative(sample_timer_, static_cast<std::uint64_t>(usec));
        sd_event_source_set_enabled(sample_timer_, SD_EVENT_ONESHOT);
    }

    static int on_sample(sd_event_source*, uint64_t, void* userdata) {
        auto* d = static_cast<Daemon*>(userdata);
        if (!d->measuring_) return 0;
        d->measuring_->advance(std::chrono::steady_clock::now());
        d->schedule_sample();
        d->follow_cpus();
        return 0;
    }

    static int on_trace(sd_event_source* s, int fd, uint32_t revents, void* userdata) {
        auto* d = static_cast<Daemon*>(userdata);
        if (!d->measuring_) return 0;
        if (revents & EPOLLIN) d->measuring_->readable(fd);
        if (revents & (EPOLLERR | EPOLLHUP)) {
            // A buffer that cannot be waited on (a CPU not online): off until
            // the online list changes, or the loop would wake forever.
            d->measuring_->poll_failed(fd);
            sd_event_source_set_enabled(s, SD_EVENT_OFF);
        }
        return 0;
    }

    static int on_window(sd_event_source* s, uint64_t, void* userdata) {
        auto* d = static_cast<Daemon*>(userdata);
        d->end_window();
        sd_event_source_set_time_relative(s, d->window_usec());
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
    }

    void end_window() {
        if (!measuring_) return;
        follow_cpus();
        auto figures = measuring_->take(/*again=*/true);
        std::set<std::string> at_risk_now, seen;
        for (const auto& f : figures) {
            seen.insert(f.device);
            if (f.flush.at_risk) at_risk_now.insert(f.device);
            if (f.flush.at_risk && !at_risk_.count(f.device)) {
                systemd::Alert a;
                a.kind = systemd::AlertKind::at_risk;
                a.device = f.device;
                a.attribute = policy::key_text(policy::Key::write_cache);
                a.expected = measure::to_string(f.flush.cache.mode);
                a.actual = f.flush.write_cache;
                a.message = f.findings.empty() ? measure::flush_sentence(f) : f.findings.front().message;
                a.fields = {{"FINDING", measure::kFlushesDropped},
                            {"WRITES", std::to_string(f.flush.writes)},
                            {"FLUSHES", std::to_string(f.flush.flushes)},
                            {"WINDOW_SECONDS", std::to_string(std::lround(f.seconds))},
                            {"DEVICE_CACHE", f.flush.cache.source}};
                log_->alert(a);
            } else if (!f.flush.at_risk && at_risk_.count(f.device)) {
                systemd::Alert a;
                a.kind = systemd::AlertKind::resolved;
                a.device = f.device;
                a.attribute = policy::key_text(policy::Key::write_cache);
                a.expected = f.flush.write_cache;
                a.actual = f.flush.write_cache;
                a.message = f.device + ": flushes reach the device again (" + measure::flush_sentence(f) + ")";
                a.fields = {{"FINDING", measure::kFlushesDropped},
                            {"WRITES", std::to_string(f.flush.writes)},
                            {"FLUSHES", std::to_string(f.flush.flushes)}};
                log_->alert(a);
            }
        }
        // A device that went is forgotten without a word (its removal was logged).
        at_risk_ = std::move(at_risk_now);
        measured_.add(now_unix(), std::move(figures), measuring_->tracing());
        write_reports();
    }

    struct Watch {
        Daemon* daemon = nullptr;
        udev::Monitor* monitor = nullptr;
    };
    struct PolicyWatchSource {
        Daemon* daemon = nullptr;
        PolicyWatch watch;
    };

    Options opts_;
    std::unique_ptr<systemd::EventLog> log_;
    udev::Sysfs sysfs_;
    StateDir state_;
    Reconciler reconciler_;  // holds the host, read at start and at each reload
    std::chrono::milliseconds interval_{30'000};
    sd_event_source* defer_ = nullptr;  // these three borrow from sources_
    sd_event_source* timer_ = nullptr;
    sd_event_source* report_timer_ = nullptr;
    sd_event_source* settle_timer_ = nullptr;  // borrows from sources_ too
    std::set<std::string> changed_policy_files_;
    // What each inotify source reads (userdata): goes after its sources.
    std::vector<std::unique_ptr<PolicyWatchSource>> policy_watch_targets_;
    // What the last rewrite of the reports cost (report_gap() in outputs.hpp).
    std::chrono::steady_clock::duration last_write_took_{};
    std::chrono::steady_clock::duration report_gap() const { return agent::report_gap(last_write_took_, interval_); }
    std::chrono::steady_clock::time_point last_report_{};
    bool report_pending_ = false;
    double last_pass_unix_ = 0;
    std::unique_ptr<udev::Monitor> kernel_monitor_;
    std::unique_ptr<udev::Monitor> udev_monitor_;
    Watch watches_[2];
    PendingEvents pending_{kMaxPending};
    ReloadOutcome reload_;
    UeventCounts uevents_;
    std::vector<writers::WriterAssignment> writers_;  // udev rules and the other writers
    nlohmann::json boot_record_;                      // the initramfs pass of this boot (null: none)
    double policy_loaded_unix_ = 0;
    bool audit_due_ = true;
    std::vector<report::Finding> findings_;
    double audit_unix_ = 0;
    OutOfPolicyClock clock_;
    std::unique_ptr<measure::Session> measuring_;
    std::chrono::milliseconds measure_window_{60'000};
    unsigned measure_sample_ = 10;
    Measured measured_;
    std::set<std::string> at_risk_;  // devices whose last window was at risk (alerted)
    std::string last_state_error_;
    std::string last_status_;
    std::string last_metrics_error_;
    // Last, so they go first: the loop (and the floating sources it owns)
    // before the monitors and watches its sources point at.
    util::Owned<sd_event, sd_event_unref> event_;
    std::vector<util::Owned<sd_event_source, sd_event_source_unref>> sources_;
    std::vector<util::Owned<sd_event_source, sd_event_source_unref>> policy_watch_sources_;
    // The measuring window's sources, after the loop so that they go before
    // it; the session they read goes after them (declared above).
    std::vector<util::Owned<sd_event_source, sd_event_source_unref>> measure_sources_;
    sd_event_source* measure_timer_ = nullptr;  // these two borrow from measure_sources_
    sd_event_source* sample_timer_ = nullptr;
    std::vector<util::Owned<sd_event_source, sd_event_source_unref>> trace_sources_;  // the CPUs' buffers
};

}  // namespace

int run_daemon(const Options& o) {
    bool console = o.log_target == "console" || (o.log_target == "auto" && ::isatty(STDERR_FILENO));
    auto log = console ? systemd::make_console_log() : systemd::make_journal_log();
    Daemon d(o, std::move(log));
    return d.run();
}

}  // namespace blkpolicy::agent
