// SPDX-License-Identifier: MIT
#include "agent/cli/parse.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

#include "agent/cli/commands.hpp"
#include "policy/kernel.hpp"
#include "policy/loader.hpp"

namespace blkpolicy::agent {

namespace {

// The Commands section of --help, from the command table: the name in a
// column of 9, its paragraph beside it (on its own line after a long name
// with operands).
std::string commands_section() {
    std::string out = "Commands:\n";
    for (const auto& c : commands()) {
        std::string head = "  " + std::string(c.name);
        if (!c.operands_text.empty()) head += " " + std::string(c.operands_text);
        const std::string indent(11, ' ');
        std::string_view help = c.help;
        bool first = true;
        if (head.size() > indent.size() - 1) {
            out += head + "\n";
            head.clear();
        }
        while (!help.empty()) {
            const auto nl = help.find('\n');
            const auto line = help.substr(0, nl);
            if (first && !head.empty())
                out += head + std::string(indent.size() - head.size(), ' ');
            else
                out += indent;
            out += std::string(line) + "\n";
            first = false;
            help = nl == std::string_view::npos ? std::string_view() : help.substr(nl + 1);
        }
    }
    return out + "\n";
}

std::string command_names(std::string_view sep) {
    std::string out;
    for (const auto& c : commands()) out += (out.empty() ? "" : std::string(sep)) + std::string(c.name);
    return out;
}

// "run and audit", "a, b and c", "reload"
std::string command_list_text(const std::vector<std::string_view>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
    return out;
}

}  // namespace

std::string usage_text() {
    std::string text = R"(Usage: blkpolicy COMMAND [OPTIONS] [DEVICE...]

Keeps block-queue settings (scheduler, read_ahead_kb, wbt_lat_usec, ...) the
way a declarative TOML policy says.

@COMMANDS@Options:
  -p, --policy PATH     policy file or directory of *.toml files; repeatable
                        (default: /etc/blkpolicy/policy.toml and drop-ins in
                        /usr/lib, /run and /etc/blkpolicy/policy.d)
      --sysfs-root DIR  where sysfs is mounted (default: /sys)
      --state-dir DIR   where facts are frozen (default: /run/blkpolicy)
      --udev-db DIR     udev's database, for env.* matches (default:
                        /run/udev/data when --sysfs-root is /sys)
      --json            machine-readable output (stable format, see blkpolicy(8))
  -h, --help            show this help
  -V, --version         show the version

Options of run:
      --mode MODE           enforce (re-apply and alert) or observe (alert
                            only); overrides daemon.mode of the policy
      --metrics-file PATH   write Prometheus text metrics there after a pass
                            (at most every 100 ms)
      --log-target TARGET   auto (console on a terminal, else journal),
                            journal or console
      --udev-rules-dir DIR  (run, audit, explain) where udev rules live, to
                            name conflicting rules; repeatable (default:
                            /etc, /run, /usr/lib and /lib udev/rules.d)
      --config-root DIR     (run, audit, explain, import) read the other
                            writers' files (TuneD, sysfsutils, tmpfiles.d,
                            units, rc.local, udev rules) under DIR, not /
      --receive-buffer N    uevent socket buffer in bytes (default 128 MiB)

Options of reload:
      --pid PID             the daemon to reload (default: the pid in
                            STATE-DIR/daemon.json)

Options of explain and audit:
      --no-policy           look at the kernel side only, even where a
                            policy is installed
      --all                 (audit) also devices without a medium (unbound
                            loop devices, empty removable drives)

Options of plan, apply, status and explain:
      --kernel-release R    act and explain as if the running kernel were
                            release R (e.g. 6.12.0 or 9.0): what blkpolicy
                            expects of it; default: the running kernel

Options of measure:
      --for DURATION        how long to watch (default 10s; 100ms to 24h);
                            SIGINT ends it early with the figures so far
      --trace-buffer-kb N   the tracing buffer per CPU (default 256); a
                            window that loses events says so
      --sample PERCENT      trace the requests (one or two events per I/O)
                            that share of each 10 s (default 100); less
                            bounds the cost on a busy disk

Options of explain:
      --kernel-rules        instead of a device, list what blkpolicy expects
                            the kernel to do (the rules that hold on this
                            kernel or on R), how it knows, where each was seen

DEVICE limits plan, apply, status, audit and measure to the named block devices (e.g. sda).

Exit status: 0 success (run: stopped by SIGTERM or SIGINT); 1 apply left
something failed, not stuck, refused or busy, status found drift, audit found
something at warning level or above, import left a rule out, or measure
found data at risk; 2 usage error; 3 invalid policy;
4 system error.
)";
    text.replace(text.find("@COMMANDS@"), 10, commands_section());
    return text;
}

namespace {
// Options that take one string and keep it as given.
struct StringOption {
    const char* name;
    std::string Options::*field;
};
constexpr StringOption kStringOptions[] = {
    {"--sysfs-root", &Options::sysfs_root},     {"--state-dir", &Options::state_dir},
    {"--metrics-file", &Options::metrics_file}, {"--kernel-release", &Options::kernel_release},
    {"--udev-db", &Options::udev_db_dir},       {"--config-root", &Options::config_root},
    {"--from", &Options::import_from},
};
// The whole of `text` as a decimal number from `lo` to `hi`, or nullopt.
std::optional<long> number_in(const std::string& text, long lo, long hi) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end || errno == ERANGE || n < lo || n > hi) return std::nullopt;
    return n;
}
const StringOption* string_option(const std::string& arg) {
    for (const auto& o : kStringOptions) {
        const std::string name = o.name;
        if (arg == name || arg.rfind(name + "=", 0) == 0) return &o;
    }
    return nullptr;
}
}  // namespace

ParseResult parse_command_line(const std::vector<std::string>& args) {
    ParseResult r;
    auto& o = r.options;
    bool only_positional = false;
    std::set<std::string> given;  // long options seen, for the scope checks
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](const std::string& name) -> std::optional<std::string> {
            auto eq = a.find('=');
            if (eq != std::string::npos) return a.substr(eq + 1);
            if (i + 1 >= args.size()) {
                r.error = "option " + name + " needs a value";
                return std::nullopt;
            }
            return args[++i];
        };
        auto is = [&](const char* long_name) {
            return a == long_name || a.rfind(std::string(long_name) + "=", 0) == 0;
        };
        if (!only_positional && a.rfind("--", 0) == 0 && a.size() > 2) given.insert(a.substr(0, a.find('=')));
        if (!only_positional && a == "-p") given.insert("--policy");
        if (!only_positional && a == "--") {
            only_positional = true;
        } else if (!only_positional && (a == "-h" || a == "--help")) {
            o.help = true;
        } else if (!only_positional && (a == "-V" || a == "--version")) {
            o.version = true;
        } else if (!only_positional && a == "--json") {
            o.json = true;
        } else if (!only_positional && a == "--no-policy") {
            o.no_policy = true;
        } else if (!only_positional && a == "--all") {
            o.all = true;
        } else if (!only_positional && a == "--kernel-rules") {
            o.kernel_rules = true;
        } else if (!only_positional && (a == "-p" || is("--policy"))) {
            auto v = value("--policy");
            if (!v) return r;
            o.policies.push_back(*v);
        } else if (!only_positional && is("--udev-rules-dir")) {
            auto v = value("--udev-rules-dir");
            if (!v) return r;
            o.udev_rules_dirs.push_back(*v);
        } else if (const auto* opt = only_positional ? nullptr : string_option(a)) {
            auto v = value(opt->name);
            if (!v) return r;
            o.*(opt->field) = *v;
        } else if (!only_positional && is("--mode")) {
            auto v = value("--mode");
            if (!v) return r;
            if (auto m = policy::mode_from_string(*v))
                o.mode = *m;
            else {
                r.error = "--mode must be enforce or observe, not " + *v;
                return r;
            }
        } else if (!only_positional && is("--log-target")) {
            auto v = value("--log-target");
            if (!v) return r;
            if (*v != "auto" && *v != "journal" && *v != "console") {
                r.error = "--log-target must be auto, journal or console, not " + *v;
                return r;
            }
            o.log_target = *v;
        } else if (!only_positional && is("--receive-buffer")) {
            auto v = value("--receive-buffer");
            if (!v) return r;
            const auto n = number_in(*v, 4096, 1L << 30);
            if (!n) {
                r.error = "--receive-buffer must be a number of bytes from 4096 to 1073741824";
                return r;
            }
            o.receive_buffer = static_cast<int>(*n);
        } else if (!only_positional && is("--for")) {
            auto v = value("--for");
            if (!v) return r;
            auto d = policy::parse_duration(*v);
            if (!d || *d < std::chrono::milliseconds(100) || *d > std::chrono::hours(24)) {
                r.error = "--for wants a duration from 100ms to 24h such as 10s, 500ms or 5m, not \"" + *v + "\"";
                return r;
            }
            o.measure_for = *d;
        } else if (!only_positional && is("--trace-buffer-kb")) {
            auto v = value("--trace-buffer-kb");
            if (!v) return r;
            const auto n = number_in(*v, 4, 1048576);
            if (!n) {
                r.error = "--trace-buffer-kb must be a number of KiB from 4 to 1048576, not " + *v;
                return r;
            }
            o.trace_buffer_kb = static_cast<unsigned>(*n);
        } else if (!only_positional && is("--sample")) {
            auto v = value("--sample");
            if (!v) return r;
            const auto n = number_in(*v, 0, 100);
            if (!n) {
                r.error = "--sample must be a percentage from 0 to 100, not " + *v;
                return r;
            }
            o.sample_percent = static_cast<unsigned>(*n);
        } else if (!only_positional && is("--pid")) {
            auto v = value("--pid");
            if (!v) return r;
            const auto n = number_in(*v, 1, std::numeric_limits<long>::max());
            if (!n) {
                r.error = "--pid must be a process id, not " + *v;
                return r;
            }
            o.pid = *n;
        } else if (!only_positional && a.size() > 1 && a[0] == '-') {
            r.error = "unknown option " + a;
            return r;
        } else if (o.command.empty()) {
            if (!find_command(a)) {
                r.error = "unknown command " + a + " (commands: " + command_names(", ") + ")";
                return r;
            }
            o.command = a;
        } else {
            o.devices.push_back(a);
        }
    }
    if (o.command.empty() && !o.help && !o.version) r.error = "no command given";
    const auto* command = find_command(o.command);
    if (command && command->operands == Operands::none && !o.devices.empty())
        r.error = o.command + " takes no device arguments";
    if (o.no_policy && !o.policies.empty()) r.error = "--no-policy and --policy contradict each other";
    if (o.kernel_rules && !o.devices.empty()) r.error = "explain --kernel-rules takes no device arguments";
    if (!o.kernel_release.empty() && !policy::parse_kernel_release(o.kernel_release))
        r.error = "--kernel-release wants a release such as 6.12.0, not \"" + o.kernel_release + "\"";
    // Options of some commands only, as the scope table says.
    for (const auto& scope : option_scopes()) {
        if (!command || !given.count(std::string(scope.option)) || scope.allows(o.command)) continue;
        r.error = std::string(scope.option) + " is for " + command_list_text(scope.names());
        if (scope.option == "--no-policy") r.error += "; " + o.command + " needs a policy";
    }
    if (!o.import_from.empty() && o.import_from != "udev" && o.import_from != "tuned" &&
        o.import_from != "sysfsutils" && o.import_from != "tmpfiles")
        r.error = "--from wants udev, tuned, sysfsutils or tmpfiles, not \"" + o.import_from + "\"";
    if (o.udev_rules_dirs.empty()) {
        // Under --config-root, udev's directories there too.
        const std::string root = o.config_root == "/" ? std::string() : o.config_root;
        for (const char* d : {"/etc/udev/rules.d", "/run/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d"})
            o.udev_rules_dirs.push_back(root + d);
    }
    return r;
}

}  // namespace blkpolicy::agent
