// SPDX-License-Identifier: MIT
// Alerts and operational log lines, and where they go: journald with
// structured fields (the product's interface for fleets), or readable lines
// on a terminal through spdlog.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "systemd/journal.hpp"

namespace blkpolicy::systemd {

enum class AlertKind { applied, drift, reverted, failed, conflict, resolved, at_risk, restored };
const char* to_string(AlertKind k);
// One fixed MESSAGE_ID per kind; explained in systemd/blkpolicy.catalog.
const char* message_id(AlertKind k);
// syslog priority: at_risk 2 (crit), failed 3 (err), drift/reverted/conflict
// 4 (warning), resolved and restored 5 (notice), applied 6 (info).
int priority(AlertKind k);

struct Alert {
    AlertKind kind = AlertKind::applied;
    std::string device;
    std::string attribute;
    std::string expected;
    std::string actual;
    std::string rule;  // the policy rule: "name (file:line)"
    // conflict: the other writer of the attribute
    std::string writer;          // file:line
    std::string writer_kind;     // udev, tuned, sysfsutils, tmpfiles, unit, rc.local
    std::string writer_context;  // "profile x, unit [disk]", "unit tune.service", or empty
    std::string message;         // the human sentence
    // More BLKPOLICY_* fields, by name without the prefix ("WRITES" ->
    // BLKPOLICY_WRITES=): what a measured alert counted.
    std::vector<std::pair<std::string, std::string>> fields;
};

enum class LogTarget { journal, console };

class EventLog {
public:
    virtual ~EventLog() = default;
    virtual void alert(const Alert& a) = 0;
    // Operational lines (start, reload, rescans): priority as syslog.
    virtual void log(int priority, const std::string& message) = 0;
    // Sends what the journal could not take before (the daemon calls it at
    // every pass), and what became of such entries.
    virtual void retry() {}
    virtual JournalDelivery delivery() const { return {}; }
};

// journald: every field of an Alert as BLKPOLICY_* fields plus MESSAGE_ID,
// PRIORITY and SYSLOG_IDENTIFIER=blkpolicy; never waits for journald
// (systemd/journal.hpp).
std::unique_ptr<EventLog> make_journal_log(JournalSocket socket = JournalSocket());
// A terminal: spdlog lines on stderr.
std::unique_ptr<EventLog> make_console_log();

// The journal fields of an alert, as "NAME=value" (what the journal log sends).
std::vector<std::string> journal_fields(const Alert& a);

}  // namespace blkpolicy::systemd
