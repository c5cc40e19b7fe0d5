// SPDX-License-Identifier: MIT
#include "systemd/alerts.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <syslog.h>

#include "util/names.hpp"

namespace blkpolicy::systemd {

namespace {
// Everything an alert kind is, in one row: its name in BLKPOLICY_EVENT, its
// catalog MESSAGE_ID (systemd/blkpolicy.catalog) and its syslog priority.
struct KindRow {
    AlertKind value;
    const char* name;
    const char* message_id;
    int priority;
};
constexpr KindRow kKinds[] = {
    {AlertKind::applied, "applied", "7c0ba1f3a4d94f0e9b6c2d8e51a0f301", LOG_INFO},
    {AlertKind::drift, "drift", "7c0ba1f3a4d94f0e9b6c2d8e51a0f302", LOG_WARNING},
    {AlertKind::reverted, "reverted", "7c0ba1f3a4d94f0e9b6c2d8e51a0f303", LOG_WARNING},
    {AlertKind::failed, "failed", "7c0ba1f3a4d94f0e9b6c2d8e51a0f304", LOG_ERR},
    {AlertKind::conflict, "conflict", "7c0ba1f3a4d94f0e9b6c2d8e51a0f305", LOG_WARNING},
    {AlertKind::resolved, "resolved", "7c0ba1f3a4d94f0e9b6c2d8e51a0f306", LOG_NOTICE},
    {AlertKind::at_risk, "at-risk", "7c0ba1f3a4d94f0e9b6c2d8e51a0f307", LOG_CRIT},
    {AlertKind::restored, "restored", "7c0ba1f3a4d94f0e9b6c2d8e51a0f308", LOG_NOTICE},
};
static_assert(util::in_enum_order(kKinds));

const KindRow& row(AlertKind k) { return kKinds[static_cast<std::size_t>(k)]; }
}  // namespace

const char* to_string(AlertKind k) { return row(k).name; }
const char* message_id(AlertKind k) { return row(k).message_id; }
int priority(AlertKind k) { return row(k).priority; }

std::vector<std::string> journal_fields(const Alert& a) {
    std::vector<std::string> f = {
        "MESSAGE=" + a.message,
        std::string("MESSAGE_ID=") + message_id(a.kind),
        "PRIORITY=" + std::to_string(priority(a.kind)),
        "SYSLOG_IDENTIFIER=blkpolicy",
        std::string("BLKPOLICY_EVENT=") + to_string(a.kind),
        "BLKPOLICY_DEVICE=" + a.device,
        "BLKPOLICY_ATTRIBUTE=" + a.attribute,
        "BLKPOLICY_EXPECTED=" + a.expected,
        "BLKPOLICY_ACTUAL=" + a.actual,
        "BLKPOLICY_RULE=" + a.rule,
    };
    if (!a.writer.empty()) {
        f.push_back("BLKPOLICY_WRITER=" + a.writer);
        f.push_back("BLKPOLICY_WRITER_KIND=" + a.writer_kind);
        if (!a.writer_context.empty()) f.push_back("BLKPOLICY_WRITER_CONTEXT=" + a.writer_context);
        // The field of 0.1.0, deprecated in 0.2.0 and removed in 0.3.0 (NEWS.md).
        if (a.writer_kind == "udev") f.push_back("BLKPOLICY_UDEV_RULE=" + a.writer);
    }
    for (const auto& [name, value] : a.fields) f.push_back("BLKPOLICY_" + name + "=" + value);
    return f;
}

namespace {

class JournalLog : public EventLog {
public:
    explicit JournalLog(JournalSocket socket) : queue_(std::move(socket)) {}
    void alert(const Alert& a) override { queue_.submit(journal_fields(a)); }
    void log(int prio, const std::string& message) override {
        queue_.submit({"MESSAGE=" + message, "PRIORITY=" + std::to_string(prio), "SYSLOG_IDENTIFIER=blkpolicy"});
    }
    void retry() override { queue_.retry(); }
    JournalDelivery delivery() const override { return queue_.delivery(); }

private:
    JournalQueue queue_;
};

spdlog::level::level_enum level_of(int prio) {
    if (prio <= LOG_ERR) return spdlog::level::err;
    if (prio == LOG_WARNING) return spdlog::level::warn;
    return spdlog::level::info;
}

class ConsoleLog : public EventLog {
public:
    ConsoleLog() : logger_(spdlog::stderr_color_mt("blkpolicy-console")) {
        logger_->set_pattern("%H:%M:%S.%e %^%-7l%$ %v");
    }
    ~ConsoleLog() override { spdlog::drop("blkpolicy-console"); }
    void alert(const Alert& a) override {
        std::string line = std::string(to_string(a.kind)) + " " + a.device + " " + a.attribute + ": " + a.message;
        if (!a.rule.empty()) line += " [rule " + a.rule + "]";
        logger_->log(level_of(priority(a.kind)), line);
        logger_->flush();
    }
    void log(int prio, const std::string& message) override {
        logger_->log(level_of(prio), message);
        logger_->flush();
    }

private:
    std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace

std::unique_ptr<EventLog> make_journal_log(JournalSocket socket) {
    return std::make_unique<JournalLog>(std::move(socket));
}
std::unique_ptr<EventLog> make_console_log() { return std::make_unique<ConsoleLog>(); }

}  // namespace blkpolicy::systemd
