#include "agent/commands.hpp"

#include "agent/daemon.hpp"
#include "agent/daemon_report.hpp"
#include "agent/executor.hpp"
#include "agent/import_udev.hpp"
#include "agent/inspect.hpp"
#include "agent/policy_files.hpp"
#include "agent/report.hpp"
#include "agent/snapshot.hpp"
#include "udev/discovery.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {

json errors_json(const std::vector<policy::PolicyError>& errors) {
    json arr = json::array();
    for (const auto& e : errors)
        arr.push_back({{"file", e.pos.file}, {"line", e.pos.line}, {"column", e.pos.column}, {"message", e.message}});
    return arr;
}

int check(const Options& o, std::ostream& out, std::ostream& err) {
    auto loaded = load_policy_from(o.policies);
    if (o.json) {
        out << json{{"format", kJsonFormatVersion},
                    {"valid", loaded.ok()},
                    {"files", loaded.policy.files},
                    {"rules", loaded.policy.rules.size()},
                    {"errors", errors_json(loaded.errors)}}
                   .dump(2)
            << '\n';
        return loaded.ok() ? kExitOk : kExitPolicy;
    }
    for (const auto& e : loaded.errors) err << e.str() << '\n';
    if (!loaded.ok()) return kExitPolicy;
    out << "policy OK: " << loaded.policy.rules.size() << " rule(s) from " << loaded.policy.files.size()
        << " file(s)\n";
    return kExitOk;
}

int with_devices(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    auto loaded = load_policy_from(o.policies);
    if (!loaded.ok()) {
        for (const auto& e : loaded.errors) err << e.str() << '\n';
        err << "blkpolicy: the policy is invalid; nothing was done\n";
        return kExitPolicy;
    }
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
    StateDir state(o.state_dir);
    const bool applying = o.command == "apply";
    std::vector<std::string> warnings;
    auto views = look(sysfs, state, loaded.policy, o.devices, applying, warnings, o.udev_db());
    for (const auto& w : warnings) err << "blkpolicy: warning: " << w << '\n';

    if (o.command == "plan") {
        if (o.json) out << plan_json(views).dump(2) << '\n';
        else print_plan(out, views);
        return kExitOk;
    }
    if (o.command == "status") {
        bool drift = false;
        for (const auto& v : views)
            for (const auto& a : v.plan.actions) drift = drift || standing_of(a) == Standing::drift;
        auto daemon = read_daemon_json(o.state_dir);
        if (o.json) {
            auto doc = status_json(views);
            doc["daemon"] = daemon ? *daemon : nlohmann::json(nullptr);
            out << doc.dump(2) << '\n';
        } else {
            print_status(out, views);
            if (daemon)
                out << "daemon: pid " << (*daemon)["pid"] << ", " << (*daemon)["mode"].get<std::string>() << " mode, "
                    << (*daemon)["devices_managed"] << " device(s) managed, " << (*daemon)["drifted"] << " drifted, "
                    << (*daemon)["failed"] << " failed\n";
        }
        return drift ? kExitPartial : kExitOk;
    }

    std::vector<DeviceResult> results;
    bool failed = false;
    for (const auto& v : views) {
        results.push_back(execute(sysfs, v.plan));
        for (const auto& r : results.back().results) failed = failed || is_failure(r.outcome);
    }
    if (o.json) out << apply_json(views, results).dump(2) << '\n';
    else print_apply(out, views, results);
    return failed ? kExitPartial : kExitOk;
}

}  // namespace

int run_command(const Options& o, std::ostream& out, std::ostream& err) {
    udev::Sysfs sysfs(o.sysfs_root);
    return run_command(o, sysfs, out, err);
}

int run_command(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    if (o.command == "check") return check(o, out, err);
    if (o.command == "run") return run_daemon(o);
    if (o.command == "explain") return run_explain(o, sysfs, out, err);
    if (o.command == "audit") return run_audit(o, sysfs, out, err);
    if (o.command == "import-udev") return run_import_udev(o, out, err);
    return with_devices(o, sysfs, out, err);
}

}  // namespace blkpolicy::agent
