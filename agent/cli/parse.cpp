#include "agent/cli/parse.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>

namespace blkpolicy::agent {

namespace {
constexpr std::array<const char*, 9> kCommands = {"check", "plan", "apply", "status", "run", "reload", "explain",
                                                  "audit", "import-udev"};
}

std::string usage_text() {
    return R"(Usage: blkpolicy COMMAND [OPTIONS] [DEVICE...]

Keeps block-queue settings (scheduler, read_ahead_kb, wbt_lat_usec, ...) the
way a declarative TOML policy says.

Commands:
  check    validate the policy; errors as file:line:col: message
  plan     show each device's facts, matching rules and the ordered writes
           apply would make; writes nothing
  apply    apply the plan, read every value back, report per attribute
  status   compare each managed value with the policy (and show the
           running daemon's last results, when one runs)
  explain  for each attribute of DEVICE: the value now, the policy's value
           and rule, the kernel's own default and how it derived it
  audit    read-only findings: devices lying about rotation, readahead
           amplification, write cache vs the device's cache, udev rules
           that fight the policy, ... (with or without a policy)
  import-udev FILE|DIR...
           convert udev rules that tune block devices into policy TOML on
           stdout; what cannot be converted exactly is reported on stderr
           and left out
  run      the daemon: apply on every add/change uevent, re-verify every
           verify_interval, alert journald on drift, re-apply in enforce mode
  reload   make the running daemon re-read its policy (SIGHUP) and wait
           for its answer: exit 3 when the new policy is invalid (the
           daemon keeps the old one); systemctl reload runs this

Options:
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
      --udev-rules-dir DIR  (run, audit) where udev rules live, to name
                            conflicting rules;
                            repeatable (default: /etc, /run, /usr/lib and
                            /lib udev/rules.d)
      --receive-buffer N    uevent socket buffer in bytes (default 128 MiB)

Options of reload:
      --pid PID             the daemon to reload (default: the pid in
                            STATE-DIR/daemon.json)

Options of explain and audit:
      --no-policy           look at the kernel side only, even where a
                            policy is installed
      --all                 (audit) also devices without a medium (unbound
                            loop devices, empty removable drives)

Options of explain:
      --kernel-release R    derive the kernel's defaults as release R (e.g.
                            6.12.0) would; default: the running kernel
      --kernel-rules        instead of a device, list what blkpolicy expects
                            the kernel to do (the rules that hold on this
                            kernel or on R), how it knows, where each was seen

DEVICE limits plan, apply, status and audit to the named block devices (e.g. sda).

Exit status: 0 success (run: stopped by SIGTERM or SIGINT); 1 apply left
something failed, not stuck or refused, status found drift, audit found
something at warning level or above, or import-udev left a rule out; 2 usage error; 3 invalid policy;
4 system error.
)";
}

namespace {
// Options that take one string and keep it as given.
struct StringOption {
    const char* name;
    std::string Options::*field;
};
constexpr StringOption kStringOptions[] = {
    {"--sysfs-root", &Options::sysfs_root},
    {"--state-dir", &Options::state_dir},
    {"--metrics-file", &Options::metrics_file},
    {"--kernel-release", &Options::kernel_release},
    {"--udev-db", &Options::udev_db_dir},
};
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
            if (auto m = policy::mode_from_string(*v)) o.mode = *m;
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
            char* end = nullptr;
            long n = std::strtol(v->c_str(), &end, 10);
            if (v->empty() || *end || n < 4096 || n > (1L << 30)) {
                r.error = "--receive-buffer must be a number of bytes from 4096 to 1073741824";
                return r;
            }
            o.receive_buffer = static_cast<int>(n);
        } else if (!only_positional && is("--pid")) {
            auto v = value("--pid");
            if (!v) return r;
            char* end = nullptr;
            long n = std::strtol(v->c_str(), &end, 10);
            if (v->empty() || *end || n <= 0) {
                r.error = "--pid must be a process id, not " + *v;
                return r;
            }
            o.pid = n;
        } else if (!only_positional && a.size() > 1 && a[0] == '-') {
            r.error = "unknown option " + a;
            return r;
        } else if (o.command.empty()) {
            if (std::find(kCommands.begin(), kCommands.end(), a) == kCommands.end()) {
                std::string known;
                for (const char* c : kCommands) known += (known.empty() ? "" : ", ") + std::string(c);
                r.error = "unknown command " + a + " (commands: " + known + ")";
                return r;
            }
            o.command = a;
        } else {
            o.devices.push_back(a);
        }
    }
    if (o.command.empty() && !o.help && !o.version) r.error = "no command given";
    if ((o.command == "check" || o.command == "run" || o.command == "reload") && !o.devices.empty())
        r.error = o.command + " takes no device arguments";
    if (o.no_policy && !o.policies.empty()) r.error = "--no-policy and --policy contradict each other";
    if (o.pid != 0 && o.command != "reload") r.error = "--pid is for reload";
    if (o.all && o.command != "audit") r.error = "--all is for audit";
    if (o.kernel_rules && o.command != "explain") r.error = "--kernel-rules is for explain";
    if (o.kernel_rules && !o.devices.empty()) r.error = "explain --kernel-rules takes no device arguments";
    if (o.no_policy && o.command != "explain" && o.command != "audit")
        r.error = "--no-policy is for explain and audit; " + o.command + " needs a policy";
    if (o.udev_rules_dirs.empty()) o.udev_rules_dirs = {"/etc/udev/rules.d", "/run/udev/rules.d",
                                                        "/usr/lib/udev/rules.d", "/lib/udev/rules.d"};
    return r;
}

}  // namespace blkpolicy::agent
