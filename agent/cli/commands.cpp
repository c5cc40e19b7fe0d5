// SPDX-License-Identifier: MIT
#include "agent/cli/commands.hpp"

#include <syslog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

#include "agent/boot.hpp"
#include "agent/cli/import.hpp"
#include "agent/cli/inspect.hpp"
#include "agent/cli/measure.hpp"
#include "agent/cli/render/common.hpp"
#include "agent/cli/render/device_report.hpp"
#include "agent/cli/restore.hpp"
#include "agent/daemon/daemon.hpp"
#include "agent/daemon_client.hpp"
#include "agent/executor.hpp"
#include "agent/policy_files.hpp"
#include "agent/restore.hpp"
#include "agent/snapshot.hpp"
#include "policy/loader.hpp"
#include "policy/match.hpp"
#include "udev/discovery.hpp"
#include "udev/host.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {

json errors_json(const std::vector<policy::PolicyError>& errors) {
    json arr = json::array();
    for (const auto& e : errors)
        arr.push_back({{"file", e.pos.file}, {"line", e.pos.line}, {"column", e.pos.column}, {"message", e.message}});
    return arr;
}

// {path: digest} of each policy file (what the initramfs hook notes).
json file_digests_json(const policy::Policy& p) {
    json out = json::object();
    for (std::size_t i = 0; i < p.files.size() && i < p.file_digests.size(); ++i) out[p.files[i]] = p.file_digests[i];
    return out;
}

int check(const Options& o, std::ostream& out, std::ostream& err) {
    auto loaded = load_policy_from(o.policies);
    const auto warnings = policy::policy_warnings(loaded.policy);
    if (o.json) {
        out << json{{"format", kJsonFormatVersion},
                    {"valid", loaded.ok()},
                    {"files", loaded.policy.files},
                    {"rules", loaded.policy.rules.size()},
                    {"digest", loaded.ok() ? json(loaded.policy.digest) : json(nullptr)},
                    {"file_digests", file_digests_json(loaded.policy)},
                    {"errors", errors_json(loaded.errors)},
                    {"warnings", errors_json(warnings)}}
                   .dump(2)
            << '\n';
        return loaded.ok() ? kExitOk : kExitPolicy;
    }
    for (const auto& e : loaded.errors) err << e.str() << '\n';
    for (const auto& w : warnings) err << w.pos.str() << ": warning: " << w.message << '\n';
    if (!loaded.ok()) return kExitPolicy;
    out << "policy OK: " << loaded.policy.rules.size() << " rule(s) from " << loaded.policy.files.size()
        << " file(s)\n";
    return kExitOk;
}

}  // namespace

int check_sysfs_and_devices(const Options& o, const udev::Sysfs& sysfs, std::ostream& err) {
    if (!sysfs.is_dir("block")) {
        err << "blkpolicy: " << o.sysfs_root << "/block is not a directory: is sysfs mounted there?\n";
        return kExitRuntime;
    }
    for (const auto& d : o.devices) {
        if (!udev::valid_device_name(d) || !sysfs.exists("block/" + d)) {
            err << "blkpolicy: no block device \"" << d << "\" under " << o.sysfs_root << "/block\n";
            return kExitUsage;
        }
    }
    return kExitOk;
}

int device_went_away(const std::string& name, std::ostream& err) {
    err << "blkpolicy: block device \"" << name << "\" went away while it was being read (its dev file is gone)\n";
    return kExitRuntime;
}

namespace {

enum class Kind { plan, apply, status };

// apply --boot: the record of the pass and its line in the kernel log,
// whatever ends it.
struct BootPass {
    BootRecord record;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    const Options& o;
    explicit BootPass(const Options& opts) : o(opts) {
        record.kernel = running_kernel_release();
        const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
        char buf[32];
        std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
        record.when = buf;
    }
    bool out_of_time() const { return std::chrono::steady_clock::now() - start > kBootPassBudget; }
    int finish(int rc, std::ostream& err) {
        record.exit_code = rc;
        record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const auto saved = write_boot_record(o.state_dir, record);
        if (!saved.ok()) err << "blkpolicy: warning: " << saved.message() << '\n';
        const bool bad = !record.ok || rc != kExitOk;
        // The kernel log is where an initramfs's messages survive; where it
        // cannot be written, standard error still says it.
        if (!kernel_log(bad ? LOG_WARNING : LOG_NOTICE, boot_line(record)))
            err << "blkpolicy: " << boot_line(record) << '\n';
        return rc;
    }
};

// plan, apply and status: look at each device, plan, (apply), report.
int with_devices(Kind kind, const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    std::optional<BootPass> boot;
    if (kind == Kind::apply && o.boot) boot.emplace(o);
    auto loaded = load_policy_from(o.policies);
    if (!loaded.ok()) {
        for (const auto& e : loaded.errors) err << e.str() << '\n';
        if (!loaded.missing) err << "blkpolicy: the policy is invalid; nothing was done\n";
        if (boot) {
            boot->record.ok = false;
            boot->record.error = loaded.errors.empty() ? std::string("the policy cannot be read")
                                                       : "the policy is invalid: " + loaded.errors.front().str();
            if (loaded.errors.size() > 1)
                boot->record.error += " (and " + std::to_string(loaded.errors.size() - 1) + " more)";
            return boot->finish(kExitPolicy, err);
        }
        return kExitPolicy;
    }
    const auto host = udev::read_host_context(sysfs, o.kernel_release);
    policy::bind_host(loaded.policy, host.facts);
    if (boot) {
        boot->record.policy_digest = loaded.policy.digest;
        boot->record.policy_files = loaded.policy.files;
    }
    if (int rc = check_sysfs_and_devices(o, sysfs, err)) return rc;
    StateDir state(o.state_dir);
    const auto names = o.devices.empty() ? udev::list_block_devices(sysfs) : o.devices;
    LookOptions how;
    how.record = kind == Kind::apply;
    how.udev_db = o.udev_db();
    how.context = policy::PlanContext(host);
    std::unique_ptr<DeviceReport> report;
    switch (kind) {
        case Kind::plan:
            report = plan_report(o.json, out, how.context.loadable_schedulers);
            break;
        case Kind::apply:
            report = apply_report(o.json, out);
            break;
        case Kind::status:
            report = status_report(o.json, out, read_daemon_json(o.state_dir).value_or(nullptr),
                                   read_boot_record(o.state_dir).value_or(nullptr));
            break;
    }
    how.shown = report->facts_shown();
    report->set_policy(&loaded.policy);
    // One device at a time: look, plan, (apply), report. Nothing but
    // counters is kept across devices.
    int gone = kExitOk;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto& name = names[i];
        if (boot && boot->out_of_time()) {
            boot->record.devices_left = static_cast<int>(names.size() - i);
            break;
        }
        std::vector<std::string> warnings;
        auto v = look_one(sysfs, state, loaded.policy, name, how, warnings);
        for (const auto& w : warnings) err << "blkpolicy: warning: " << w << '\n';
        if (!v) {  // a device from the listing may go; one asked for by name is an error
            if (!o.devices.empty()) gone = device_went_away(name, err);
            continue;
        }
        if (kind == Kind::apply) {
            auto result = execute(sysfs, v->plan);
            // What it changed, and what was there before: `restore` and the
            // daemon put it back when the policy drops it.
            auto written = state.load_written(v->facts);
            if (note_writes(written, v->plan, result)) {
                const auto saved = state.save_written(v->facts, written);
                if (!saved.ok()) err << "blkpolicy: warning: " << saved.message() << '\n';
            }
            if (boot) {
                ++boot->record.devices;
                for (const auto& r : result.results) ++boot->record.outcomes[to_string(r.outcome)];
            }
            report->device(*v, &result);
        } else {
            report->device(*v);
        }
    }
    report->finish();
    int rc = gone != kExitOk ? gone : report->found_something() ? kExitPartial : kExitOk;
    if (rc == kExitOk && kind == Kind::plan && o.detailed_exit && report->changes_pending()) rc = kExitChanges;
    return boot ? boot->finish(rc, err) : rc;
}

}  // namespace

int run_command(const Options& o, std::ostream& out, std::ostream& err) {
    udev::Sysfs sysfs(o.sysfs_root);
    return run_command(o, sysfs, out, err);
}

namespace {

constexpr Command kCommands[] = {
    {"check", "", "validate the policy; errors as file:line:col: message", Operands::none,
     [](const Options& o, udev::Sysfs&, std::ostream& out, std::ostream& err) { return check(o, out, err); }},
    {"plan", "", "show each device's facts, matching rules and the ordered writes\napply would make; writes nothing",
     Operands::devices,
     [](const Options& o, udev::Sysfs& s, std::ostream& out, std::ostream& err) {
         return with_devices(Kind::plan, o, s, out, err);
     }},
    {"apply", "", "apply the plan, read every value back, report per attribute", Operands::devices,
     [](const Options& o, udev::Sysfs& s, std::ostream& out, std::ostream& err) {
         return with_devices(Kind::apply, o, s, out, err);
     }},
    {"status", "",
     "compare each managed value with the policy (and show the\nrunning daemon's last results, when one runs)",
     Operands::devices,
     [](const Options& o, udev::Sysfs& s, std::ostream& out, std::ostream& err) {
         return with_devices(Kind::status, o, s, out, err);
     }},
    {"explain", "",
     "for each attribute of DEVICE: the value now, the policy's value\nand rule, the kernel's own default and how it "
     "derived it",
     Operands::devices, run_explain},
    {"export", "",
     "write the values the devices have now that differ from the\nkernel's own defaults as a policy, on stdout "
     "(keyed by\ndriver or stack, model and rotational; each value says\nwhat the kernel's default is)",
     Operands::devices, run_export},
    {"restore", "",
     "put back every value blkpolicy changed to what the device had\nbefore (unless someone else set it since); the "
     "daemon does this\nitself when its policy stops setting a value",
     Operands::devices, run_restore},
    {"audit", "",
     "read-only findings: devices lying about rotation, readahead\namplification, write cache vs the device's cache, "
     "udev rules\nthat fight the policy, ... (with or without a policy)",
     Operands::devices, run_audit},
    {"measure", "",
     "passive and read-only: what the values do on this host's own\nload over --for (wbt activity, flushes against the "
     "cache modes,\nreadahead share, where completions run), each figure beside\nthe counter that proves it",
     Operands::devices, run_measure},
    {"import", "FILE|DIR|PROFILE...",
     "convert what other writers set (udev rules, TuneD profiles,\nsysfsutils, tmpfiles.d w lines) into policy TOML on "
     "stdout;\nwhat cannot be converted exactly is reported on stderr and\nleft out (exit 1)",
     Operands::files, run_import},
    {"import-udev", "FILE|DIR...", "the same as import --from udev (deprecated; removed in 0.3.0)", Operands::files,
     run_import},
    {"run", "",
     "the daemon: apply on every add/change uevent, re-verify every\nverify_interval, alert journald on drift, "
     "re-apply in enforce mode",
     Operands::none, [](const Options& o, udev::Sysfs&, std::ostream&, std::ostream&) { return run_daemon(o); }},
    {"reload", "",
     "make the running daemon re-read its policy (SIGHUP) and wait\nfor its answer: exit 3 when the new policy is "
     "invalid (the\ndaemon keeps the old one); systemctl reload runs this",
     Operands::none,
     [](const Options& o, udev::Sysfs&, std::ostream& out, std::ostream& err) {
         return reload_daemon(o.state_dir, o.pid, out, err);
     }},
};

}  // namespace

std::span<const Command> commands() { return kCommands; }

const Command* find_command(std::string_view name) {
    for (const auto& c : kCommands)
        if (c.name == name) return &c;
    return nullptr;
}

std::vector<std::string_view> OptionScope::names() const {
    std::vector<std::string_view> out;
    for (std::string_view rest = commands; !rest.empty();) {
        const auto space = rest.find(' ');
        out.push_back(rest.substr(0, space));
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
    return out;
}

bool OptionScope::allows(std::string_view command) const {
    const auto n = names();
    return std::find(n.begin(), n.end(), command) != n.end();
}

int run_command(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    const auto* c = find_command(o.command);
    if (!c) {  // parse_command_line admits only names from the table
        err << "blkpolicy: unknown command " << o.command << '\n';
        return kExitUsage;
    }
    return c->run(o, sysfs, out, err);
}

}  // namespace blkpolicy::agent
