// SPDX-License-Identifier: MIT
#include "agent/cli/parse.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

#include "agent/cli/commands.hpp"
#include "kernel/rows.hpp"
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

namespace {

// --- the option table: parsing, scopes and --help from one row per option ---

using Store = std::string (*)(Options& o, const std::string& value);  // the error, empty when fine

// The whole of `text` as a decimal number from `lo` to `hi`, or nullopt.
std::optional<long> number_in(const std::string& text, long lo, long hi) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end || errno == ERANGE || n < lo || n > hi) return std::nullopt;
    return n;
}

// The stores most rows need: keep the text, add it to a list, set a flag.
template <std::string Options::*Field>
std::string keep(Options& o, const std::string& v) {
    o.*Field = v;
    return {};
}
template <std::vector<std::string> Options::*Field>
std::string append(Options& o, const std::string& v) {
    (o.*Field).push_back(v);
    return {};
}
template <bool Options::*Field>
std::string set_flag(Options& o, const std::string&) {
    o.*Field = true;
    return {};
}

struct OptionRow {
    std::string_view name;        // "--policy"
    std::string_view short_name;  // "-p", or empty
    std::string_view value;       // "PATH"; empty: a flag, no value
    // The commands it is for, space-separated; empty: every command.
    std::string_view commands;
    // The --help block it is listed in: empty for the general one, else
    // the commands after "Options of ".
    std::string_view section;
    std::string_view help;  // lines; the first beside the option
    Store store;
};

constexpr OptionRow kOptions[] = {
    {"--policy", "-p", "PATH", "", "",
     "policy file or directory of *.toml files; repeatable\n(default: /etc/blkpolicy/policy.toml and drop-ins in\n"
     "/usr/lib, /run and /etc/blkpolicy/policy.d)",
     append<&Options::policies>},
    {"--sysfs-root", "", "DIR", "", "", "where sysfs is mounted (default: /sys)", keep<&Options::sysfs_root>},
    {"--state-dir", "", "DIR", "", "", "where facts are frozen (default: /run/blkpolicy)", keep<&Options::state_dir>},
    {"--udev-db", "", "DIR", "", "",
     "udev's database, for env.* matches (default:\n/run/udev/data when --sysfs-root is /sys)",
     keep<&Options::udev_db_dir>},
    {"--json", "", "", "", "", "machine-readable output (stable format, see blkpolicy(8))", set_flag<&Options::json>},
    {"--help", "-h", "", "", "", "show this help", set_flag<&Options::help>},
    {"--version", "-V", "", "", "", "show the version", set_flag<&Options::version>},

    {"--mode", "", "MODE", "run", "run",
     "enforce (re-apply and alert) or observe (alert\nonly); overrides daemon.mode of the policy",
     [](Options& o, const std::string& v) {
         const auto m = policy::mode_from_string(v);
         if (!m) return "--mode must be enforce or observe, not " + v;
         o.mode = *m;
         return std::string();
     }},
    {"--metrics-file", "", "PATH", "run", "run",
     "write Prometheus text metrics there after a pass\n(at most every 100 ms)", keep<&Options::metrics_file>},
    {"--log-target", "", "TARGET", "run", "run", "auto (console on a terminal, else journal),\njournal or console",
     [](Options& o, const std::string& v) {
         if (v != "auto" && v != "journal" && v != "console")
             return "--log-target must be auto, journal or console, not " + v;
         o.log_target = v;
         return std::string();
     }},
    {"--udev-rules-dir", "", "DIR", "run audit explain", "run",
     "(run, audit, explain) where udev rules live, to\nname conflicting rules; repeatable (default:\n/etc, /run, "
     "/usr/lib and /lib udev/rules.d)",
     append<&Options::udev_rules_dirs>},
    {"--config-root", "", "DIR", "run audit explain import import-udev", "run",
     "(run, audit, explain, import) read the other\nwriters' files (TuneD, sysfsutils, tmpfiles.d,\nunits, rc.local, "
     "udev rules) under DIR, not /",
     keep<&Options::config_root>},
    {"--receive-buffer", "", "N", "run", "run", "uevent socket buffer in bytes (default 128 MiB)",
     [](Options& o, const std::string& v) {
         const auto n = number_in(v, 4096, 1L << 30);
         if (!n) return std::string("--receive-buffer must be a number of bytes from 4096 to 1073741824");
         o.receive_buffer = static_cast<int>(*n);
         return std::string();
     }},

    {"--pid", "", "PID", "reload", "reload", "the daemon to reload (default: the pid in\nSTATE-DIR/daemon.json)",
     [](Options& o, const std::string& v) {
         const auto n = number_in(v, 1, std::numeric_limits<long>::max());
         if (!n) return "--pid must be a process id, not " + v;
         o.pid = *n;
         return std::string();
     }},

    {"--no-policy", "", "", "explain audit", "explain and audit",
     "look at the kernel side only, even where a\npolicy is installed", set_flag<&Options::no_policy>},
    {"--all", "", "", "audit", "explain and audit",
     "(audit) also devices without a medium (unbound\nloop devices, empty removable drives)", set_flag<&Options::all>},

    {"--detailed-exitcode", "", "", "plan", "plan",
     "(plan) exit 5 when a write would change a value,\n0 when none would: a check for configuration\nmanagement",
     set_flag<&Options::detailed_exit>},
    {"--boot", "", "", "apply", "apply",
     "(apply) the pass in early boot, before the root\nis mounted: at most 10 s, recorded in\nSTATE-DIR/boot.json, "
     "one line in the kernel log",
     set_flag<&Options::boot>},
    {"--kernel-release", "", "R", "plan apply status explain export audit",
     "plan, apply, status, explain, export and audit",
     "act and explain as if the running kernel were\nrelease R (e.g. 6.12.0 or 9.0): what blkpolicy\nexpects of it; "
     "default: the running kernel",
     keep<&Options::kernel_release>},
    {"--by-serial", "", "", "export", "export",
     "(export) key every rule by the device's serial\ntoo, not only by what the device is",
     set_flag<&Options::by_serial>},

    {"--for", "", "DURATION", "measure", "measure",
     "how long to watch (default 10s; 100ms to 24h);\nSIGINT ends it early with the figures so far",
     [](Options& o, const std::string& v) {
         const auto d = policy::parse_duration(v);
         if (!d || *d < std::chrono::milliseconds(100) || *d > std::chrono::hours(24))
             return "--for wants a duration from 100ms to 24h such as 10s, 500ms or 5m, not \"" + v + "\"";
         o.measure_for = *d;
         return std::string();
     }},
    {"--trace-buffer-kb", "", "N", "measure", "measure",
     "the tracing buffer per CPU (default 256); a\nwindow that loses events says so",
     [](Options& o, const std::string& v) {
         const auto n = number_in(v, 4, 1048576);
         if (!n) return "--trace-buffer-kb must be a number of KiB from 4 to 1048576, not " + v;
         o.trace_buffer_kb = static_cast<unsigned>(*n);
         return std::string();
     }},
    {"--sample", "", "PERCENT", "measure", "measure",
     "trace the requests (one or two events per I/O)\nthat share of each 10 s (default 100); less\nbounds the cost on "
     "a busy disk",
     [](Options& o, const std::string& v) {
         const auto n = number_in(v, 0, 100);
         if (!n) return "--sample must be a percentage from 0 to 100, not " + v;
         o.sample_percent = static_cast<unsigned>(*n);
         return std::string();
     }},

    {"--kernel-rules", "", "", "explain", "explain",
     "instead of a device, list what blkpolicy expects\nthe kernel to do (the rules that hold on this\nkernel or on "
     "R), "
     "how it knows, where each was seen",
     set_flag<&Options::kernel_rules>},

    {"--from", "", "KIND", "import import-udev", "import",
     "udev, tuned, sysfsutils or tmpfiles: what writes\nthe operands, instead of guessing from their names",
     [](Options& o, const std::string& v) {
         if (!v.empty() && v != "udev" && v != "tuned" && v != "sysfsutils" && v != "tmpfiles")
             return "--from wants udev, tuned, sysfsutils or tmpfiles, not \"" + v + "\"";
         o.import_from = v;
         return std::string();
     }},
};

// The row `arg` names: "-p", "--policy", or "--policy=..." for an option
// that takes a value.
const OptionRow* option_named(const std::string& arg) {
    for (const auto& row : kOptions) {
        if (arg == row.name || (!row.short_name.empty() && arg == row.short_name)) return &row;
        if (!row.value.empty() && arg.size() > row.name.size() && arg.compare(0, row.name.size(), row.name) == 0 &&
            arg[row.name.size()] == '=')
            return &row;
    }
    return nullptr;
}

// One --help block: the heading, then each option with its help beside it
// from column `column`.
std::string options_block(std::string_view section) {
    const bool general = section.empty();
    const std::size_t column = general ? 24 : 28;
    std::string out = general ? "Options:\n" : "Options of " + std::string(section) + ":\n";
    for (const auto& row : kOptions) {
        if (row.section != section) continue;
        std::string head = general ? (row.short_name.empty() ? "      " : "  " + std::string(row.short_name) + ", ")
                                   : std::string(6, ' ');
        head += std::string(row.name);
        if (!row.value.empty()) head += " " + std::string(row.value);
        std::string_view help = row.help;
        bool first = true;
        if (head.size() + 2 > column) {
            out += head + "\n";
            first = false;
        }
        while (!help.empty()) {
            const auto nl = help.find('\n');
            out += (first ? head + std::string(column - head.size(), ' ') : std::string(column, ' ')) +
                   std::string(help.substr(0, nl)) + "\n";
            first = false;
            help = nl == std::string_view::npos ? std::string_view() : help.substr(nl + 1);
        }
    }
    return out;
}

// Every block, in the order of the table's first row of each.
std::string options_section() {
    std::vector<std::string_view> sections;
    for (const auto& row : kOptions)
        if (std::find(sections.begin(), sections.end(), row.section) == sections.end()) sections.push_back(row.section);
    std::string out;
    for (const auto section : sections) out += (out.empty() ? "" : "\n") + options_block(section);
    return out;
}

std::vector<OptionScope> scopes_of_table() {
    std::vector<OptionScope> out;
    for (const auto& row : kOptions)
        if (!row.commands.empty()) out.push_back({row.name, row.commands});
    return out;
}

}  // namespace

std::span<const OptionScope> option_scopes() {
    static const std::vector<OptionScope> scopes = scopes_of_table();
    return scopes;
}

std::string usage_text() {
    std::string text = R"(Usage: blkpolicy COMMAND [OPTIONS] [DEVICE...]

Keeps block-queue settings (scheduler, read_ahead_kb, wbt_lat_usec, ...) the
way a declarative TOML policy says.

@COMMANDS@@OPTIONS@
DEVICE limits plan, apply, status, audit and measure to the named block devices (e.g. sda).

Exit status: 0 success (run: stopped by SIGTERM or SIGINT); 1 apply left
something failed, not stuck, refused or busy, status found drift, audit found
something at warning level or above, import left a rule out, or measure
found data at risk; 2 usage error; 3 invalid policy;
4 system error.
)";
    text.replace(text.find("@COMMANDS@"), 10, commands_section());
    text.replace(text.find("@OPTIONS@"), 9, options_section());
    return text;
}

ParseResult parse_command_line(const std::vector<std::string>& args) {
    ParseResult r;
    auto& o = r.options;
    bool only_positional = false;
    std::set<std::string_view> given;  // options seen, by long name, for the scope checks
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (!only_positional && a == "--") {
            only_positional = true;
            continue;
        }
        if (!only_positional && a.size() > 1 && a[0] == '-') {
            const auto* row = option_named(a);
            if (!row) {
                r.error = "unknown option " + a;
                return r;
            }
            given.insert(row->name);
            std::string value;
            if (!row->value.empty()) {
                const auto eq = a.find('=');
                if (eq != std::string::npos) {
                    value = a.substr(eq + 1);
                } else if (i + 1 < args.size()) {
                    value = args[++i];
                } else {
                    r.error = "option " + std::string(row->name) + " needs a value";
                    return r;
                }
            }
            if (auto error = row->store(o, value); !error.empty()) {
                r.error = std::move(error);
                return r;
            }
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
    if (!o.kernel_release.empty() && !kernel::parse_kernel_release(o.kernel_release))
        r.error = "--kernel-release wants a release such as 6.12.0, not \"" + o.kernel_release + "\"";
    // Options of some commands only, as the scope table says.
    for (const auto& scope : option_scopes()) {
        if (!command || !given.count(scope.option) || scope.allows(o.command)) continue;
        r.error = std::string(scope.option) + " is for " + command_list_text(scope.names());
        if (scope.option == "--no-policy") r.error += "; " + o.command + " needs a policy";
    }
    if (o.udev_rules_dirs.empty()) {
        // Under --config-root, udev's directories there too.
        const std::string root = o.config_root == "/" ? std::string() : o.config_root;
        for (const char* d : {"/etc/udev/rules.d", "/run/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d"})
            o.udev_rules_dirs.push_back(root + d);
    }
    return r;
}

}  // namespace blkpolicy::agent
