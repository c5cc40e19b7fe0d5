#include "systemd/alerts.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <syslog.h>
#include <systemd/sd-journal.h>

namespace blkpolicy::systemd {

const char* to_string(AlertKind k) {
    switch (k) {
        case AlertKind::applied: return "applied";
        case AlertKind::drift: return "drift";
        case AlertKind::reverted: return "reverted";
        case AlertKind::failed: return "failed";
        case AlertKind::conflict: return "conflict";
        case AlertKind::resolved: return "resolved";
    }
    return "?";
}

const char* message_id(AlertKind k) {
    switch (k) {
        case AlertKind::applied: return "7c0ba1f3a4d94f0e9b6c2d8e51a0f301";
        case AlertKind::drift: return "7c0ba1f3a4d94f0e9b6c2d8e51a0f302";
        case AlertKind::reverted: return "7c0ba1f3a4d94f0e9b6c2d8e51a0f303";
        case AlertKind::failed: return "7c0ba1f3a4d94f0e9b6c2d8e51a0f304";
        case AlertKind::conflict: return "7c0ba1f3a4d94f0e9b6c2d8e51a0f305";
        case AlertKind::resolved: return "7c0ba1f3a4d94f0e9b6c2d8e51a0f306";
    }
    return "";
}

int priority(AlertKind k) {
    switch (k) {
        case AlertKind::failed: return LOG_ERR;
        case AlertKind::drift:
        case AlertKind::reverted:
        case AlertKind::conflict: return LOG_WARNING;
        case AlertKind::resolved: return LOG_NOTICE;
        case AlertKind::applied: return LOG_INFO;
    }
    return LOG_INFO;
}

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
    if (!a.udev_rule.empty()) f.push_back("BLKPOLICY_UDEV_RULE=" + a.udev_rule);
    return f;
}

namespace {

int send(const std::vector<std::string>& fields) {
    std::vector<iovec> iov;
    iov.reserve(fields.size());
    for (const auto& f : fields) iov.push_back({const_cast<char*>(f.data()), f.size()});
    return sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
}

class JournalLog : public EventLog {
public:
    void alert(const Alert& a) override { send(journal_fields(a)); }
    void log(int prio, const std::string& message) override {
        send({"MESSAGE=" + message, "PRIORITY=" + std::to_string(prio), "SYSLOG_IDENTIFIER=blkpolicy"});
    }
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

std::unique_ptr<EventLog> make_journal_log() { return std::make_unique<JournalLog>(); }
std::unique_ptr<EventLog> make_console_log() { return std::make_unique<ConsoleLog>(); }

}  // namespace blkpolicy::systemd
