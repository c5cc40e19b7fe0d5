// SPDX-License-Identifier: MIT
#include "agent/cli/restore.hpp"

#include <signal.h>

#include <nlohmann/json.hpp>

#include "agent/cli/commands.hpp"
#include "agent/cli/render/common.hpp"
#include "agent/daemon_client.hpp"
#include "agent/restore.hpp"
#include "agent/state.hpp"
#include "systemd/alerts.hpp"
#include "udev/discovery.hpp"

namespace blkpolicy::agent {

using nlohmann::json;
using Result = Restored::Result;

int run_restore(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    if (int rc = check_sysfs_and_devices(o, sysfs, err)) return rc;
    StateDir state(o.state_dir);
    const auto names = o.devices.empty() ? state.devices_written() : o.devices;
    // One journal entry per value, as the daemon writes them.
    auto journal = systemd::make_journal_log();
    json devices = json::array();
    Table table({"DEVICE", "ATTRIBUTE", "PUT BACK", "BLKPOLICY SET", "NOW", "RESULT"});
    std::vector<std::string> notes;
    bool bad = false;
    std::size_t restored = 0, left = 0;
    for (const auto& name : names) {
        json items = json::array();
        auto facts =
            sysfs.exists("block/" + name) ? udev::read_facts(sysfs, name, {}, policy::kIdentityFacts) : std::nullopt;
        if (!facts) {
            // Gone since: its values went with it (a new device of the name starts afresh).
            state.forget(name);
            continue;
        }
        std::string problem;
        auto values = state.load_written(*facts, &problem);
        if (!problem.empty()) err << "blkpolicy: warning: " << problem << '\n';
        if (values.empty()) continue;
        for (const auto& r : restore_values(sysfs, name, values, {})) {
            bad = bad || r.result == Result::failed || r.result == Result::busy;
            restored += r.result == Result::restored || r.result == Result::already;
            left += r.result == Result::left;
            table.add({name, r.attribute, r.original, r.written, r.after.empty() ? "-" : r.after, to_string(r.result)});
            if (!r.detail.empty()) notes.push_back(name + " " + r.attribute + ": " + r.detail);
            items.push_back({{"attribute", r.attribute},
                             {"original", r.original},
                             {"written", r.written},
                             {"before", r.before},
                             {"after", r.after},
                             {"result", to_string(r.result)},
                             {"detail", r.detail}});
            if (r.result == Result::dropped || r.result == Result::busy) continue;
            journal->alert(restored_alert(name, r, " (blkpolicy restore)"));
        }
        const auto saved = state.save_written(*facts, values);
        if (!saved.ok()) {
            err << "blkpolicy: " << saved.message() << '\n';
            bad = true;
        }
        devices.push_back({{"device", name}, {"values", items}});
    }
    // A running daemon whose policy still sets these values sets them again.
    const auto daemon = read_daemon_json(o.state_dir);
    const bool daemon_runs = daemon && daemon->contains("pid") && (*daemon)["pid"].is_number_integer() &&
                             ::kill((*daemon)["pid"].get<int>(), 0) == 0;
    const std::string daemon_note =
        daemon_runs ? "the daemon (pid " + std::to_string((*daemon)["pid"].get<int>()) +
                          ") is running: values its policy still sets are set again at its next pass; remove them "
                          "from the policy (and reload) or stop it first"
                    : std::string();
    if (o.json) {
        out << json{{"format", kJsonFormatVersion},
                    {"devices", devices},
                    {"daemon_running", daemon_runs},
                    {"note", daemon_note}}
                   .dump(2)
            << '\n';
        return bad ? kExitPartial : kExitOk;
    }
    if (restored + left == 0 && notes.empty() && !bad) {
        out << "nothing to put back: blkpolicy has changed no value of "
            << (o.devices.empty() ? std::string("any device") : "the devices named") << " since they appeared\n";
    } else {
        table.print(out, "");
        for (const auto& n : notes) out << "  " << n << '\n';
        out << restored << " value(s) put back, " << left << " left as someone else set them\n";
    }
    if (!daemon_note.empty()) out << "note: " << daemon_note << '\n';
    return bad ? kExitPartial : kExitOk;
}

}  // namespace blkpolicy::agent
