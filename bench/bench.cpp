// SPDX-License-Identifier: MIT
// blkpolicy benchmarks: prints one table of figures, each comparison measured
// side by side in the same run. Needs root (loop devices, udevd, journald).
//
//   bench [--quick] [--only reaction|scale|startup|hostile|daemon|metrics|measure|against] [--against BINARY NAME]
//   --quick: fewer devices and a 10 s idle window
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/netlink.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/daemon/outputs.hpp"
#include "agent/daemon/reconciler.hpp"
#include "agent/snapshot.hpp"
#include "kernel/daemon_process.hpp"
#include "kernel/loop_device.hpp"
#include "kernel/udevd.hpp"
#include "measure/tracefs.hpp"
#include "policy/loader.hpp"
#include "report/audit.hpp"
#include "support/fake_sysfs.hpp"
#include "support/paths.hpp"
#include "support/temp_dir.hpp"
#include "udev/discovery.hpp"
#include "udev/host.hpp"
#include "util/files.hpp"

using namespace blkpolicy::test;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const double idx = p / 100.0 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(idx));
    const auto hi = static_cast<std::size_t>(std::ceil(idx));
    return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

std::string read_trim(const std::string& path) {
    std::ifstream in(path);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

struct Row {
    std::string name, value, target, verdict;
};
std::vector<Row> rows;
void row(const std::string& name, const std::string& value, const std::string& target = "",
         const std::string& verdict = "") {
    rows.push_back({name, value, target, verdict});
    std::cerr << "  " << name << ": " << value << (target.empty() ? "" : "  (target " + target + ": " + verdict + ")")
              << "\n";
}
std::string fmt(double v, int prec = 2) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return b;
}

// Runs blkpolicy with args; returns wall ms and peak RSS KiB (wait4 rusage).
struct RunStats {
    double ms = 0;
    long maxrss_kib = 0;
    int exit_code = -1;
};
// stderr goes to `stderr_path` when given, else with stdout to /dev/null.
RunStats run_measured(std::vector<std::string> args, std::string bin = blkpolicy::test::blkpolicy_binary(),
                      const std::string& stderr_path = {}) {
    std::vector<char*> argv;
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto t0 = Clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
        int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, 1);
        ::dup2(stderr_path.empty() ? devnull : ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
        ::execv(bin.c_str(), argv.data());
        ::_exit(127);
    }
    int status = 0;
    rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    RunStats s;
    s.ms = ms_since(t0);
    s.maxrss_kib = ru.ru_maxrss;
    s.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return s;
}

// ---------------------------------------------------------------- reaction

// What the rule sets. Writing the scheduler or wbt_lat_usec freezes the
// queue, which waits for an RCU grace period in the kernel (about 14 ms for
// wbt here, more for a scheduler switch) whoever writes it, so those are
// measured separately from the agent's own reaction.
std::vector<std::pair<std::string, std::string>> reaction_set(bool with_scheduler) {
    std::vector<std::pair<std::string, std::string>> s = {
        {"read_ahead_kb", "256"}, {"nomerges", "1"}, {"rq_affinity", "2"}};
    if (with_scheduler) {
        s.insert(s.begin(), {{"scheduler", "mq-deadline"}, {"nr_requests", "64"}});
        s.push_back({"wbt_lat_usec", "3000"});
    }
    return s;
}

bool reaction_done(const std::string& dev, bool with_scheduler) {
    const std::string q = "/sys/block/" + dev + "/queue/";
    for (const auto& [attr, want] : reaction_set(with_scheduler)) {
        const auto got = read_trim(q + attr);
        if (attr == "scheduler" ? got.find("[" + want + "]") == std::string::npos : got != want) return false;
    }
    return true;
}

// Creates a fresh unbound loop device (an add uevent) and spins until every
// setting reads as wanted. Returns ms, or NAN on timeout.
double one_reaction(bool with_scheduler) {
    int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    int idx = -1;
    for (int i = kFirstLoopIndex; i < kFirstLoopIndex + 200 && idx < 0; ++i)
        if (::ioctl(ctl, LOOP_CTL_ADD, i) >= 0) idx = i;
    const auto t0 = Clock::now();
    const std::string dev = "loop" + std::to_string(idx);
    double ms = NAN;
    // The poller sleeps 20 us between looks instead of spinning: a spinning
    // poller holds a vCPU that the agent being measured may be woken onto
    // (the uevent wakes it from this very thread), and on this 2-vCPU VM the
    // agent then waits a scheduler tick (~4 ms) behind the measurement.
    while (ms_since(t0) < 5000) {
        if (fs::exists("/sys/block/" + dev) && reaction_done(dev, with_scheduler)) {
            ms = ms_since(t0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    for (int i = 0; i < 100 && ::ioctl(ctl, LOOP_CTL_REMOVE, idx) < 0 && errno == EBUSY; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::close(ctl);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the remove uevent pass
    return ms;
}

// On a machine with two CPUs or more the poller keeps to CPU 0 and the agent
// being measured (and everything it forks) to CPU 1, so that the measuring
// does not compete with what it measures; agents inherit the CPU set at fork.
void pin_self(int cpu) {
    if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ::sched_setaffinity(0, sizeof set, &set);
}

// The floor for any agent driven by uevents: a bare netlink listener that,
// on a loop device's add uevent, writes the same values and nothing else
// (no policy, no reading, no read-back, no journal). Runs in a child process.
pid_t start_uevent_floor(bool with_scheduler) {
    int sock = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
    sockaddr_nl addr{};
    addr.nl_family = AF_NETLINK;
    addr.nl_groups = 1;  // the kernel's broadcast group
    if (sock < 0 || ::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) return -1;
    const auto set = reaction_set(with_scheduler);
    pid_t pid = ::fork();
    if (pid != 0) {
        ::close(sock);
        return pid;
    }
    char buf[8192];
    const std::string prefix = "add@/devices/virtual/block/loop";
    for (;;) {
        const ssize_t n = ::recv(sock, buf, sizeof buf - 1, 0);
        if (n <= 0) continue;
        buf[n] = '\0';
        const std::string_view head(buf);
        if (head.rfind(prefix, 0) != 0 || head.find('/', prefix.size()) != std::string_view::npos) continue;
        const std::string dev(head.substr(head.rfind('/') + 1));
        const int idx = std::atoi(dev.c_str() + 4);
        if (idx < kFirstLoopIndex) continue;
        for (const auto& [attr, value] : set) {
            const std::string path = "/sys/block/" + dev + "/queue/" + attr;
            int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd >= 0) {
                (void)!::write(fd, value.data(), value.size());
                ::close(fd);
            }
        }
    }
}

void bench_reaction(int n, const std::string& workdir, bool with_scheduler) {
    const std::string what = with_scheduler ? "reaction incl. scheduler+wbt (queue freezes)" : "reaction";
    std::cerr << what << ": " << n << " fresh loop devices each, blkpolicy then udev\n";
    std::string set;
    for (const auto& [attr, value] : reaction_set(with_scheduler))
        set += attr + " = " + (std::isdigit(static_cast<unsigned char>(value[0])) ? value : "\"" + value + "\"") + "\n";
    const auto policy = workdir + "/reaction.toml";
    std::ofstream(policy, std::ios::trunc) << "[daemon]\nverify_interval = \"1h\"\n[[rule]]\nname = "
                                              "\"bench\"\n[rule.match]\nkernel = \"loop2[4-9][0-9]\"\n[rule.set]\n"
                                           << set;

    std::vector<double> ours, theirs;
    {
        pin_self(1);
        DaemonProcess d({"--policy", policy, "--state-dir", workdir + "/state", "--log-target", "journal"});
        pin_self(0);
        d.wait_notification("READY=1", std::chrono::seconds(10));
        for (int i = 0; i < n; ++i) ours.push_back(one_reaction(with_scheduler));
    }
    {
        std::string rule = "ACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"loop2[4-9][0-9]\"";
        for (const auto& [attr, value] : reaction_set(with_scheduler))
            rule += ", ATTR{queue/" + attr + "}=\"" + value + "\"";
        pin_self(1);
        StandaloneUdevd udevd("99-blkpolicy-bench.rules", rule + "\n");
        pin_self(0);
        for (int i = 0; i < n; ++i) theirs.push_back(one_reaction(with_scheduler));
    }
    std::vector<double> bare;
    pin_self(1);
    const pid_t floor_pid = start_uevent_floor(with_scheduler);
    pin_self(0);
    if (floor_pid > 0) {
        for (int i = 0; i < n; ++i) bare.push_back(one_reaction(with_scheduler));
        ::kill(floor_pid, SIGKILL);
        ::waitpid(floor_pid, nullptr, 0);
    }
    auto drop_nan = [](std::vector<double>& v) {
        const auto before = v.size();
        v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
        return before - v.size();
    };
    const auto lost_ours = drop_nan(ours), lost_theirs = drop_nan(theirs);
    const double p50 = percentile(ours, 50), p90 = percentile(ours, 90), p99 = percentile(ours, 99);
    const double u50 = percentile(theirs, 50), u90 = percentile(theirs, 90), u99 = percentile(theirs, 99);
    const bool main = !with_scheduler;
    row(what + " blkpolicy p50/p90/p99 (ms)",
        fmt(p50, 3) + " / " + fmt(p90, 3) + " / " + fmt(p99, 3) +
            (lost_ours ? " (" + std::to_string(lost_ours) + " timed out)" : ""),
        main ? "p99 < 10 ms" : "", main ? (p99 < 10 ? "met" : "MISSED") : "");
    row(what + " udev rule p50/p90/p99 (ms)",
        fmt(u50, 3) + " / " + fmt(u90, 3) + " / " + fmt(u99, 3) +
            (lost_theirs ? " (" + std::to_string(lost_theirs) + " timed out)" : ""));
    row(what + " p50 ratio blkpolicy/udev", fmt(p50 / u50, 3), main ? "<= 0.1" : "",
        main ? (p50 <= u50 / 10 ? "met" : "MISSED") : "");
    const auto lost_bare = drop_nan(bare);
    row(what + " bare uevent listener (floor) p50/p90/p99 (ms)",
        fmt(percentile(bare, 50), 3) + " / " + fmt(percentile(bare, 90), 3) + " / " + fmt(percentile(bare, 99), 3) +
            (lost_bare ? " (" + std::to_string(lost_bare) + " timed out)" : ""));
    row(what + " p50 ratio floor/udev", fmt(percentile(bare, 50) / u50, 3));
}

// ---------------------------------------------------------------- scale

std::string vd_name(int i) {
    std::string s;
    int n = i;
    do {
        s.push_back(static_cast<char>('a' + n % 26));
        n = n / 26 - 1;
    } while (n >= 0);
    std::reverse(s.begin(), s.end());
    return "vd" + s;
}

// Opens, reads, writes and reads back the same files apply touches: the floor.
double syscall_floor(const fs::path& root, int n, const std::vector<std::pair<std::string, std::string>>& set) {
    const auto t0 = Clock::now();
    char buf[4096];
    for (int i = 0; i < n; ++i) {
        for (const auto& [attr, value] : set) {
            const auto path = (root / "block" / vd_name(i) / "queue" / attr).string();
            int fd = ::open(path.c_str(), O_RDONLY);
            if (fd >= 0) {
                (void)::read(fd, buf, sizeof buf);
                ::close(fd);
            }
            fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
            if (fd >= 0) {
                (void)::write(fd, value.data(), value.size());
                ::close(fd);
            }
            fd = ::open(path.c_str(), O_RDONLY);
            if (fd >= 0) {
                (void)::read(fd, buf, sizeof buf);
                ::close(fd);
            }
        }
    }
    return ms_since(t0);
}

void bench_scale(const std::vector<int>& sizes, const std::string& workdir) {
    const std::vector<std::pair<std::string, std::string>> set = {
        {"rotational", "0"}, {"nr_requests", "64"}, {"wbt_lat_usec", "2000"}, {"read_ahead_kb", "128"}};
    const auto policy = workdir + "/scale.toml";
    std::ofstream(policy) << "[[rule]]\nname = \"virtio\"\n[rule.match]\ndriver = \"virtio_blk\"\n[rule.set]\n"
                             "rotational = 0\nnr_requests = 64\nwbt_lat_usec = 2000\nread_ahead_kb = 128\n";
    std::vector<double> per_device_apply;
    for (int n : sizes) {
        std::cerr << "scale: " << n << " devices on tmpfs\n";
        const fs::path mnt = workdir + "/tmpfs-" + std::to_string(n);
        fs::create_directories(mnt);
        ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4g");
        // Rounds on fresh trees; the figures are the medians (the machine is
        // shared and noisy). Two identical trees a round: one for blkpolicy,
        // one for the floor.
        const int rounds = n <= 1000 ? 5 : 1;
        std::vector<double> plan_ms, apply_ms, verify_ms, floor_prog_ms, floor_loop_ms;
        long plan_rss = 0, apply_rss = 0;
        int apply_exit = 0, verify_exit = 0;
        for (int round = 0; round < rounds; ++round) {
            auto build = [&](const fs::path& where) {
                setenv("TMPDIR", where.c_str(), 1);
                auto t = std::make_unique<FakeSysfs>();
                for (int i = 0; i < n; ++i) {
                    char pci[32];
                    std::snprintf(pci, sizeof pci, "0000:%02x:%02x.0", (i / 32) % 256, i % 32);
                    t->add_virtio_disk(vd_name(i), 1000 + i,
                                       std::string(pci) + (i >= 8192 ? "/x" + std::to_string(i / 8192) : ""), i);
                }
                return t;
            };
            auto ours = build(mnt);
            auto floor_tree = build(mnt);
            auto floor_tree2 = build(mnt);
            unsetenv("TMPDIR");
            const std::string root = ours->root().string();
            const std::string state = (mnt / ("state-" + std::to_string(n) + "-" + std::to_string(round))).string();
            auto plan = run_measured({"plan", "--sysfs-root", root, "--policy", policy, "--state-dir", state});
            auto apply = run_measured({"apply", "--sysfs-root", root, "--policy", policy, "--state-dir", state});
            auto verify = run_measured({"status", "--sysfs-root", root, "--policy", policy, "--state-dir", state});
            floor_loop_ms.push_back(syscall_floor(floor_tree->root(), n, set));
            // The same loop as a program of its own, started as blkpolicy is.
            std::vector<std::string> floor_args = {floor_tree2->root().string()};
            for (const auto& [attr, value] : set) floor_args.push_back(attr + "=" + value);
            floor_prog_ms.push_back(run_measured(floor_args, BLKPOLICY_FLOOR_BINARY).ms);
            plan_ms.push_back(plan.ms);
            apply_ms.push_back(apply.ms);
            verify_ms.push_back(verify.ms);
            plan_rss = std::max(plan_rss, plan.maxrss_kib);
            apply_rss = std::max(apply_rss, apply.maxrss_kib);
            apply_exit = std::max(apply_exit, apply.exit_code);
            verify_exit = std::max(verify_exit, verify.exit_code);
        }
        const double p_ms = percentile(plan_ms, 50), a_ms = percentile(apply_ms, 50), v_ms = percentile(verify_ms, 50);
        const double floor_ms = percentile(floor_prog_ms, 50), loop_ms = percentile(floor_loop_ms, 50);
        const std::string tag =
            std::to_string(n) + " devices" + (rounds > 1 ? " (median of " + std::to_string(rounds) + ")" : "");
        row("scale " + tag + ": floor as a program / as a loop in this process (ms)",
            fmt(floor_ms, 1) + " / " + fmt(loop_ms, 1));
        row("scale " + tag + ": plan ms / peak RSS",
            fmt(p_ms, 1) + " ms / " + fmt(static_cast<double>(plan_rss) / 1024.0, 1) + " MiB");
        row("scale " + tag + ": apply ms (floor ms, ratio)",
            fmt(a_ms, 1) + " (" + fmt(floor_ms, 1) + ", " + fmt(a_ms / floor_ms, 2) + "x)", "<= 3x floor",
            a_ms <= 3 * floor_ms ? "met" : "MISSED");
        row("scale " + tag + ": verify ms (ratio to floor)", fmt(v_ms, 1) + " (" + fmt(v_ms / floor_ms, 2) + "x)",
            "<= 3x floor", v_ms <= 3 * floor_ms ? "met" : "MISSED");
        row("scale " + tag + ": apply / verify ratio to the in-process loop",
            fmt(a_ms / loop_ms, 2) + "x / " + fmt(v_ms / loop_ms, 2) + "x");
        row("scale " + tag + ": apply peak RSS", fmt(static_cast<double>(apply_rss) / 1024.0, 1) + " MiB",
            n >= 10000 ? "< 32 MiB" : "", n >= 10000 ? (apply_rss < 32 * 1024 ? "met" : "MISSED") : "");
        row("scale " + tag + ": apply per device", fmt(a_ms * 1000 / static_cast<double>(n), 1) + " us");
        per_device_apply.push_back(a_ms / static_cast<double>(n));
        if (apply_exit != 0 || verify_exit != 0)
            row("scale " + tag + ": exit codes apply/status",
                std::to_string(apply_exit) + "/" + std::to_string(verify_exit), "0/0", "MISSED");
        ::umount2(mnt.c_str(), MNT_DETACH);
        fs::remove_all(mnt);
    }
    if (per_device_apply.size() >= 2) {
        const double growth = per_device_apply.back() / per_device_apply.front();
        row("scale: per-device apply cost, largest/smallest tree", fmt(growth, 2) + "x", "flat (<= 1.5x)",
            growth <= 1.5 ? "met" : "MISSED");
    }
}

// ---------------------------------------------------------------- hostile input

// Each input must end in a clear error (or a clean result) well within a
// second: the time of the whole `blkpolicy check` / `import --from udev` process.
void bench_hostile(const std::string& workdir) {
    std::cerr << "hostile input: policy files and udev rules built to be slow or to break parsers\n";
    const std::string head = "[[rule]]\nname = \"x\"\n[rule.match]\nkernel = \"loop*\"\n[rule.set]\n";
    std::string many_rules;
    for (int i = 0; many_rules.size() < 1000 * 1000 && i < 4096; ++i)
        many_rules += "[[rule]]\nname = \"r" + std::to_string(i) + "\"\n[rule.match]\nmodel = [\"" +
                      std::string(120, 'a') + "*a*a*a*a*a*a*a*b\"]\n[rule.set]\nnomerges = 1\n";
    std::string rules_lines;
    while (rules_lines.size() < 1000 * 1000)
        rules_lines += "ACTION==\"add\", KERNEL==\"sd*\", ATTR{queue/read_ahead_kb}=\"" +
                       std::to_string(rules_lines.size()) + "\" \\\n";
    const std::vector<std::tuple<std::string, std::string, std::string>> inputs = {
        {"deep array nesting (100,000 '[')", "check", head + "read_ahead_kb = " + std::string(100000, '[') + "\n"},
        {"deep inline tables (50,000 '{a=')", "check",
         head + "read_ahead_kb = 1\nx = " +
             [] {
                 std::string t;
                 for (int i = 0; i < 50000; ++i) t += "{a=";
                 return t;
             }() +
             "\n"},
        {"a 400-digit number", "check", head + "read_ahead_kb = " + std::string(400, '9') + "\n"},
        {"1 MiB + 1 byte", "check", head + "nomerges = 1\n#" + std::string(1024 * 1024, 'x') + "\n"},
        {"NUL bytes in a string", "check", head + std::string("nomerges = \"\0\0\"\n", 17)},
        {"~1 MB of rules with 8-star patterns", "check", many_rules},
        {"udev rules: ~1 MB of continued lines", "import", rules_lines},
        {"a 200 MB policy file (sparse)", "check", "@sparse"},
        {"/dev/zero as a udev rules file", "import", "@/dev/zero"},
    };
    double worst = 0;
    for (const auto& [what, command, text] : inputs) {
        auto path = workdir + "/hostile" + (command == "check" ? std::string(".toml") : std::string(".rules"));
        if (text == "@sparse") {
            std::ofstream(path, std::ios::trunc);
            fs::resize_file(path, 200u << 20);
        } else if (text.rfind("@/", 0) == 0) {
            path = text.substr(1);
        } else {
            std::ofstream(path, std::ios::trunc | std::ios::binary) << text;
        }
        std::vector<std::string> args = {command};
        if (command == "check")
            args.insert(args.end(), {"--policy", path});
        else
            args.insert(args.end(), {"--from", "udev", path});
        // stderr goes to a file so that the first error line can be shown.
        const auto err_path = workdir + "/hostile.err";
        const auto run = run_measured(args, blkpolicy::test::blkpolicy_binary(), err_path);
        const double ms = run.ms;
        worst = std::max(worst, ms);
        std::string first;
        std::getline(std::ifstream(err_path) >> std::ws, first);
        if (first.rfind(workdir + "/", 0) == 0) first = first.substr(workdir.size() + 1);
        if (first.size() > 90) first = first.substr(0, 87) + "...";
        row("hostile: " + what,
            fmt(ms, 1) + " ms, exit " + std::to_string(run.exit_code) + (first.empty() ? "" : ": " + first));
    }
    row("hostile: slowest input", fmt(worst, 1) + " ms", "< 1000 ms", worst < 1000 ? "met" : "MISSED");
}

// ---------------------------------------------------------------- start-up, idle, burst, RSS

void bench_startup(const std::string& workdir) {
    std::cerr << "start-up: 100 devices to READY=1\n";
    setenv("TMPDIR", workdir.c_str(), 1);
    FakeSysfs t;
    unsetenv("TMPDIR");
    for (int i = 0; i < 100; ++i) {
        char pci[32];
        std::snprintf(pci, sizeof pci, "0000:%02x:%02x.0", i / 32, i % 32);
        t.add_virtio_disk(vd_name(i), 1000 + i, pci, i);
    }
    const auto policy = workdir + "/startup.toml";
    std::ofstream(policy)
        << "[daemon]\nmode = \"observe\"\n[[rule]]\nname = \"virtio\"\n[rule.match]\ndriver = \"virtio_blk\"\n"
           "[rule.set]\nread_ahead_kb = 128\nwbt_lat_usec = 2000\n";
    std::vector<double> samples;
    for (int i = 0; i < 5; ++i) {
        const auto t0 = Clock::now();
        DaemonProcess d({"--policy", policy, "--sysfs-root", t.root().string(), "--state-dir",
                         workdir + "/startup-state", "--log-target", "journal"});
        if (d.wait_notification("READY=1", std::chrono::seconds(10))) samples.push_back(ms_since(t0));
    }
    const double med = percentile(samples, 50);
    row("start-up to READY=1, 100 devices (median of 5)", fmt(med, 1) + " ms", "< 50 ms", med < 50 ? "met" : "MISSED");

    // Every plan, apply and status run, each early run in the initramfs and
    // each audit asks which schedulers the kernel can load: a distribution
    // kernel's modules directory (Debian 12's 6.1: 26,184 aliases in 1.3 MB,
    // 4,022 modules), of the same size and shape here.
    const auto mods = workdir + "/modules";
    std::filesystem::create_directories(mods);
    {
        std::ofstream alias(mods + "/modules.alias");
        alias << "# Aliases extracted from modules themselves.\n";
        for (int i = 0; i < 26180; ++i) {
            char line[96];
            std::snprintf(line, sizeof line, "alias pci:v%08Xd%08Xsv*sd*bc*sc*i* driver_%d\n", 0x8086 + i % 7,
                          0x1000 + i, i % 4000);
            alias << line;
        }
        alias << "alias bfq-iosched bfq\n";
        std::ofstream dep(mods + "/modules.dep");
        for (int i = 0; i < 4020; ++i)
            dep << "kernel/drivers/misc/driver_" << i << ".ko.xz: kernel/drivers/base/helper_" << i % 50 << ".ko.xz\n";
        dep << "kernel/block/bfq.ko.xz:\nkernel/block/kyber-iosched.ko.xz:\n";
        std::ofstream(mods + "/modules.builtin") << "kernel/block/mq-deadline.ko\n";
    }
    std::vector<double> looks;
    std::size_t found = 0;
    for (int i = 0; i < 21; ++i) {
        const auto t0 = Clock::now();
        found = blkpolicy::udev::loadable_schedulers(mods).value_or(std::vector<std::string>{}).size();
        looks.push_back(ms_since(t0));
    }
    const double look = percentile(looks, 50);
    row("loadable schedulers from a distribution's modules directory (median of 21; " + std::to_string(found) +
            " found)",
        fmt(look, 2) + " ms", "< 2 ms", look < 2 && found == 2 ? "met" : "MISSED");
}

long ctx_switches(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    long total = 0;
    while (std::getline(in, line))
        if (line.find("ctxt_switches:") != std::string::npos) total += std::stol(line.substr(line.find(':') + 1));
    return total;
}

void bench_idle_burst_rss(int idle_seconds, int burst, const std::string& workdir) {
    std::cerr << "idle, burst and RSS on this machine's devices\n";
    std::vector<std::unique_ptr<LoopDevice>> loops;
    for (int i = 0; i < 10; ++i) loops.push_back(std::make_unique<LoopDevice>());
    const auto policy = workdir + "/daemon.toml";
    std::ofstream(policy) << "[daemon]\nverify_interval = \"30s\"\n[[rule]]\nname = \"bench\"\n[rule.match]\nkernel = "
                             "\"loop2[4-9][0-9]\"\n"
                             "[rule.set]\nread_ahead_kb = 128\nscheduler = \"mq-deadline\"\nnr_requests = 64\n";
    DaemonProcess d({"--policy", policy, "--state-dir", workdir + "/daemon-state", "--log-target", "journal"});
    d.wait_notification("READY=1", std::chrono::seconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));

    const long c0 = ctx_switches(d.pid());
    std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
    const long wakeups = ctx_switches(d.pid()) - c0;
    const long timer_expected = idle_seconds / 30 + 1;
    row("idle: wake-ups in " + std::to_string(idle_seconds) + " s (verify every 30 s)", std::to_string(wakeups),
        "timer only (<= " + std::to_string(timer_expected * 2) + ")", wakeups <= timer_expected * 2 ? "met" : "MISSED");

    const long rss_before = d.rss_kib();
    const auto t0 = Clock::now();
    for (int i = 0; i < burst; ++i)
        std::ofstream("/sys/block/" + loops[static_cast<std::size_t>(i) % loops.size()]->name() + "/uevent")
            << "change";
    // Every device must have been verified after the burst: drift each one
    // now and send one more event per device; a timer cannot help (30 s).
    for (auto& l : loops) {
        l->write_queue("read_ahead_kb", "512");
        std::ofstream("/sys/block/" + l->name() + "/uevent") << "change";
    }
    bool all = eventually(
        [&] {
            for (auto& l : loops)
                if (l->queue("read_ahead_kb") != "128") return false;
            return true;
        },
        std::chrono::seconds(60));
    const double secs = ms_since(t0) / 1000.0;
    const long rss_after = d.rss_kib();
    row("burst: " + std::to_string(burst) + " change uevents, all devices verified", all ? "yes" : "NO", "yes",
        all ? "met" : "MISSED");
    row("burst: events per second handled", fmt(burst / secs, 0));
    row("burst: daemon VmRSS before / after", std::to_string(rss_before) + " / " + std::to_string(rss_after) + " KiB",
        "flat (< +1 MiB)", rss_after - rss_before < 1024 ? "met" : "MISSED");

    std::ifstream st("/proc/" + std::to_string(d.pid()) + "/status");
    std::string line;
    long hwm = -1;
    while (std::getline(st, line))
        if (line.rfind("VmHWM:", 0) == 0) hwm = std::stol(line.substr(6));
    int devices = 0;
    for (const auto& e : fs::directory_iterator("/sys/block")) {
        (void)e;
        ++devices;
    }
    row("daemon peak RSS (VmHWM) managing " + std::to_string(devices) + " devices",
        fmt(static_cast<double>(hwm) / 1024.0, 1) + " MiB", "< 16 MiB", hwm < 16 * 1024 ? "met" : "MISSED");
}

// ---------------------------------------------------------------- measuring's cost

// 4 KiB O_DIRECT random reads of DEV from one thread for `seconds`: the I/Os done.
long direct_read_load(const std::string& dev, double seconds) {
    long done = 0;
    std::thread t([&] {
        const int fd = ::open(("/dev/" + dev).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd < 0) return;
        void* buf = nullptr;
        if (::posix_memalign(&buf, 4096, 4096) != 0) return;
        const auto end = Clock::now() + std::chrono::duration<double>(seconds);
        std::uint64_t x = 88172645463325252ULL;
        while (Clock::now() < end) {
            for (int i = 0; i < 64; ++i) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                if (::pread(fd, buf, 4096, static_cast<off_t>(x % 16384) * 4096) == 4096) ++done;
            }
        }
        std::free(buf);
        ::close(fd);
    });
    t.join();
    return done;
}

// utime + stime of a process, in seconds (/proc/PID/stat fields 14, 15).
double cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) return NAN;
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i)
        if (i == 14 || i == 15) ticks += std::stod(field);
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The machine's busy CPU time (/proc/stat: all but idle and iowait), in seconds.
double busy_cpu_seconds() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    double busy = 0;
    for (int i = 0; i < 8; ++i) {
        double v = 0;
        in >> v;
        if (i != 3 && i != 4) busy += v;  // idle, iowait
    }
    return busy / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A `blkpolicy measure --json --for MS DEV` child; its rusage and report
// when waited for.
struct MeasureRun {
    pid_t pid = -1;
    std::string out;
    MeasureRun(const std::string& dev, double ms, const std::string& path, const std::string& sample = "100")
        : out(path) {
        std::vector<std::string> args = {blkpolicy::test::blkpolicy_binary(),
                                         "measure",
                                         "--json",
                                         "--for",
                                         fmt(ms, 0) + "ms",
                                         "--sample",
                                         sample,
                                         dev};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid = ::fork();
        if (pid == 0) {
            ::dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    // Its tracing instance's directory, once it records.
    std::string instance(const std::string& tracefs) const {
        for (int i = 0; i < 300; ++i) {
            // blkpolicy-NS-PID-N: the owner as measure names it.
            for (const auto& e : fs::directory_iterator(tracefs + "/instances"))
                if (const auto owner = blkpolicy::measure::instance_owner(e.path().filename().string());
                    owner && owner->pid == pid)
                    return e.path().string();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return {};
    }
    // CPU seconds (user + system) and peak RSS KiB; the report in `doc`.
    std::pair<double, long> wait(nlohmann::json& doc) {
        int status = 0;
        rusage ru{};
        ::wait4(pid, &status, 0, &ru);
        std::ifstream in(out);
        doc = nlohmann::json::parse(in, nullptr, false);
        return {static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
                ru.ru_maxrss};
    }
};

// The cost of measuring, side by side in one run: a loop device on tmpfs at
// its limit (one reader, the loop worker on the other CPU). One `blkpolicy
// measure` runs throughout; the load runs in 1 s slices, alternately with
// its instance's block events off and on (written to their enable files
// here), in alternating order, so that the machine's own drift falls on
// both sides of each pair. Two views of what tracing costs the kernel and
// the reader together: reads per second, and the machine's busy CPU per
// read. measure's own CPU per event is its CPU under load less that of
// the same window without load (start-up, the report). Then the daemon
// measuring, under the same load and idle.
void bench_measure(bool quick, const std::string& workdir) {
    std::cerr << "measuring's cost: a loop device on tmpfs at its limit, with and without blkpolicy measure\n";
    const std::string tracefs = "/sys/kernel/tracing";
    bool mounted_here = false;
    if (!fs::exists(tracefs + "/instances"))
        mounted_here = ::mount("nodev", tracefs.c_str(), "tracefs", 0, nullptr) == 0;
    LoopDevice loop(true, "/dev/shm/blkpolicy-test-");
    const int pairs = quick ? 20 : 100;
    const double slice = 0.5;
    direct_read_load(loop.name(), 1);  // warm the backing file and the path
    nlohmann::json doc;
    // The fixed part of a window: a measure with no load on the device.
    const double window_ms = (3 * pairs * slice + 3) * 1000;
    MeasureRun unloaded(loop.name(), 2000, workdir + "/measure.json");
    const double fixed = unloaded.wait(doc).first;

    MeasureRun m(loop.name(), window_ms, workdir + "/measure.json");
    const auto inst = m.instance(tracefs);
    if (inst.empty()) {
        row("measure: cost", "no tracing instance appeared");
        return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // Three states in rotation: the block events off, on as measure set
    // them (filtered to the device), and on without the filter (what the
    // kernel's per-event filter costs, beside what recording costs).
    const char* kEvents[] = {"block_rq_issue", "block_rq_complete"};
    std::map<std::string, std::string> filters;
    for (const char* e : kEvents) filters[e] = read_trim(inst + "/events/block/" + e + "/filter");
    const auto set_state = [&](int state) {
        for (const char* e : kEvents) {
            const auto dir = inst + "/events/block/" + e;
            std::ofstream(dir + "/enable") << (state == 0 ? "0" : "1");
            std::ofstream(dir + "/filter") << (state == 2 ? std::string("0") : filters[e]);
        }
    };
    std::vector<double> plain, traced, ratios, cpu_ratios, cpu_ratios_unfiltered, ratios_unfiltered;
    for (int p = 0; p < pairs; ++p) {
        double rate[3] = {0, 0, 0}, cpu_per_io[3] = {0, 0, 0};
        for (int k = 0; k < 3; ++k) {
            const int state = (p + k) % 3;  // rotating which goes first
            set_state(state);
            const double c0 = busy_cpu_seconds();
            const long ios = direct_read_load(loop.name(), slice);
            cpu_per_io[state] = (busy_cpu_seconds() - c0) / static_cast<double>(ios);
            rate[state] = static_cast<double>(ios) / slice;
        }
        plain.push_back(rate[0]);
        traced.push_back(rate[1]);
        ratios.push_back(rate[1] / rate[0]);
        cpu_ratios.push_back(cpu_per_io[1] / cpu_per_io[0]);
        ratios_unfiltered.push_back(rate[2] / rate[0]);
        cpu_ratios_unfiltered.push_back(cpu_per_io[2] / cpu_per_io[0]);
    }
    set_state(1);
    const std::uint64_t buffer_kb = std::stoull(read_trim(inst + "/buffer_total_size_kb"));
    const auto [cpu, rss_kib] = m.wait(doc);
    double events = 0;
    bool lossy = true;
    if (!doc.is_discarded() && doc.contains("devices") && !doc["devices"].empty()) {
        const auto& c = doc["devices"][0]["completions"];
        events = c["issued"].get<double>() + c["traced_completed"].get<double>();
        lossy = doc["tracing"]["lossy"].get<bool>();
    }
    const auto q = [](std::vector<double> v, double p) { return percentile(std::move(v), p); };
    row("measure: reads/s at the device's limit, events off / on (medians of " + std::to_string(pairs) +
            " rotations of " + fmt(slice, 1) + " s slices)",
        fmt(q(plain, 50), 0) + " / " + fmt(q(traced, 50), 0));
    const double loss = 1.0 - q(ratios, 50);
    row("measure: I/Os lost to tracing (median; middle half of the pairs)",
        fmt(loss * 100, 1) + "% (" + fmt((1 - q(ratios, 75)) * 100, 1) + "% to " + fmt((1 - q(ratios, 25)) * 100, 1) +
            "%)",
        "<= 2%", loss <= 0.02 ? "met" : "MISSED");
    const double extra = q(cpu_ratios, 50) - 1.0;
    row("measure: the machine's CPU per read, added by tracing (median; middle half)",
        fmt(extra * 100, 1) + "% (" + fmt((q(cpu_ratios, 25) - 1) * 100, 1) + "% to " +
            fmt((q(cpu_ratios, 75) - 1) * 100, 1) + "%)");
    row("measure: the same without the kernel's per-device filter: I/Os lost, CPU per read added (medians)",
        fmt((1 - q(ratios_unfiltered, 50)) * 100, 1) + "%, " + fmt((q(cpu_ratios_unfiltered, 50) - 1) * 100, 1) + "%");
    const double ns = events > 0 ? (cpu - fixed) / events * 1e9 : NAN;
    row("measure: its own CPU per traced event (" + fmt(events, 0) + " events" + (lossy ? ", LOSSY" : ", none lost") +
            ")",
        fmt(ns, 0) + " ns = " + fmt(ns * 1e5 / 1e9 * 100, 2) + "% of a CPU at 100,000 events/s", "<= 1%",
        ns * 1e5 / 1e9 <= 0.01 ? "met" : "MISSED");
    row("measure: a window's fixed CPU (start, instance, report; 2 s, no load)", fmt(fixed * 1000, 0) + " ms");

    // Sampled (--sample 10, the daemon's default): the request tracepoints
    // on for 1 s of every 10. Pairs of 10 s slices, one with a `blkpolicy
    // measure --sample 10` running through it and one without, alternating.
    {
        const int sampled_pairs = quick ? 3 : 12;
        std::vector<double> sratios, scpu;
        for (int p = 0; p < sampled_pairs; ++p) {
            double rate[2] = {0, 0}, cpu_per_io[2] = {0, 0};
            for (int k = 0; k < 2; ++k) {
                const bool on = (p % 2 == 0) == (k == 1);
                std::unique_ptr<MeasureRun> run;
                if (on) {
                    run = std::make_unique<MeasureRun>(loop.name(), 10'500, workdir + "/sampled.json", "10");
                    run->instance(tracefs);
                }
                const double c0 = busy_cpu_seconds();
                const long ios = direct_read_load(loop.name(), 10);
                cpu_per_io[on] = (busy_cpu_seconds() - c0) / static_cast<double>(ios);
                rate[on] = static_cast<double>(ios) / 10;
                nlohmann::json sdoc;
                if (run) run->wait(sdoc);
            }
            sratios.push_back(rate[1] / rate[0]);
            scpu.push_back(cpu_per_io[1] / cpu_per_io[0]);
        }
        const double sloss = 1.0 - q(sratios, 50);
        row("measure --sample 10: I/Os lost (median of " + std::to_string(sampled_pairs) +
                " pairs of 10 s; middle half)",
            fmt(sloss * 100, 1) + "% (" + fmt((1 - q(sratios, 75)) * 100, 1) + "% to " +
                fmt((1 - q(sratios, 25)) * 100, 1) + "%)",
            "<= 2%", sloss <= 0.02 ? "met" : "MISSED");
        row("measure --sample 10: the machine's CPU per read added (median)", fmt((q(scpu, 50) - 1) * 100, 1) + "%");
    }
    row("measure: the instance's buffers (buffer_total_size_kb) / peak RSS",
        std::to_string(buffer_kb) + " KiB / " + fmt(static_cast<double>(rss_kib) / 1024.0, 1) + " MiB");

    // The daemon measuring (daemon.measure, 10 s windows), under the same
    // load and then idle.
    const auto policy = workdir + "/measure-daemon.toml";
    std::ofstream(policy) << "[daemon]\nmode = \"observe\"\nverify_interval = \"30s\"\nmeasure = true\n"
                             "measure_window = \"10s\"\n[[rule]]\nname = \"bench\"\n[rule.match]\nkernel = \""
                          << loop.name() << "\"\n[rule.set]\nnomerges = 0\n";
    DaemonProcess d({"--policy", policy, "--state-dir", workdir + "/measure-state", "--log-target", "journal"});
    d.wait_notification("READY=1", std::chrono::seconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    double c0 = cpu_seconds(d.pid());
    const auto t0 = Clock::now();
    const double seconds = 5;
    const long ios = direct_read_load(loop.name(), 2 * seconds);
    const double busy = (cpu_seconds(d.pid()) - c0) / (ms_since(t0) / 1000.0);
    row("measure: the daemon measuring under that load (" + fmt(static_cast<double>(ios) / (2 * seconds), 0) +
            " reads/s): its CPU",
        fmt(busy * 100, 2) + "% of a CPU");
    const int idle = quick ? 10 : 30;
    const long s0 = ctx_switches(d.pid());
    c0 = cpu_seconds(d.pid());
    std::this_thread::sleep_for(std::chrono::seconds(idle));
    const long wakeups = ctx_switches(d.pid()) - s0;
    row("measure: the daemon measuring, idle " + std::to_string(idle) + " s: wake-ups, CPU",
        std::to_string(wakeups) + ", " + fmt((cpu_seconds(d.pid()) - c0) * 1000, 0) + " ms",
        "timer only (windows of 10 s)", wakeups <= 2 * (idle / 10 + idle / 30 + 1) ? "met" : "MISSED");
    d.signal(SIGTERM);
    d.wait_exit(std::chrono::seconds(10));
    if (mounted_here) ::umount2(tracefs.c_str(), MNT_DETACH);
}

}  // namespace

// ---------------------------------------------------------------- against an earlier build

// The virtio tree the scale figures use, built under `where` (TMPDIR).
// Reads every file and link of a tree once.
void warm_tree(const fs::path& root) {
    std::error_code ec;
    char buf[4096];
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const auto st = it->symlink_status(ec);
        if (fs::is_symlink(st)) {
            [[maybe_unused]] auto n = ::readlink(it->path().c_str(), buf, sizeof buf);
        } else if (fs::is_regular_file(st)) {
            int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            [[maybe_unused]] auto n = ::read(fd, buf, sizeof buf);
            ::close(fd);
        }
    }
}

std::unique_ptr<FakeSysfs> virtio_tree(const fs::path& where, int n) {
    setenv("TMPDIR", where.c_str(), 1);
    auto t = std::make_unique<FakeSysfs>();
    unsetenv("TMPDIR");
    for (int i = 0; i < n; ++i) {
        char pci[32];
        std::snprintf(pci, sizeof pci, "0000:%02x:%02x.0", (i / 32) % 256, i % 32);
        t->add_virtio_disk(vd_name(i), 1000 + i, std::string(pci) + (i >= 8192 ? "/x" + std::to_string(i / 8192) : ""),
                           i);
    }
    return t;
}

// "1.03x (0.98-1.07)": the median of the per-round ratios new/old and their spread.
std::string ratio_text(const std::vector<double>& ratios) {
    auto sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    return fmt(percentile(ratios, 50), 2) + "x (" + fmt(sorted.front(), 2) + "-" + fmt(sorted.back(), 2) + ")";
}

// This build against an earlier one (`bench/run.sh --against REV` builds
// it): plan, apply and status on the same fresh trees, on tmpfs and on the
// root disk, and the daemon's first pass with a metrics file; the order
// alternates every round (whoever goes second finds warmer caches), and each
// figure is the median of the per-round ratios new/old with their range.
// Not a gate: these machines are shared and noisy.
void bench_against(const std::string& old_bin, const std::string& old_name, bool quick, const std::string& workdir) {
    const auto policy = workdir + "/against.toml";
    std::ofstream(policy) << "[daemon]\nverify_interval = \"1h\"\n[[rule]]\nname = \"virtio\"\n[rule.match]\n"
                             "driver = \"virtio_blk\"\n[rule.set]\n"
                             "rotational = 0\nnr_requests = 64\nwbt_lat_usec = 2000\nread_ahead_kb = 128\n";
    struct Where {
        std::string name;
        bool tmpfs;
        int n;
        int rounds;
    };
    std::vector<Where> wheres = {{"tmpfs", true, 1000, 6}, {"tmpfs", true, 10000, 4}, {"disk", false, 10000, 4}};
    if (quick) wheres = {{"tmpfs", true, 1000, 4}, {"disk", false, 1000, 2}};
    for (const auto& w : wheres) {
        std::cerr << "against " << old_name << ": " << w.n << " devices on " << w.name << ", " << w.rounds
                  << " rounds\n";
        // The disk-backed trees live on the root file system (/var/tmp), as
        // a real /sys does not, but as a shared and cached page cache does.
        const fs::path base = w.tmpfs ? fs::path(workdir) / "against-tmpfs" : fs::path("/var/tmp/blkpolicy-against");
        fs::create_directories(base);
        if (w.tmpfs) ::mount("tmpfs", base.c_str(), "tmpfs", 0, "size=6g");
        std::map<std::string, std::vector<double>> ratio, ours_ms, theirs_ms;
        for (int round = 0; round < w.rounds; ++round) {
            auto tree_new = virtio_tree(base, w.n);
            auto tree_old = virtio_tree(base, w.n);
            if (!w.tmpfs) ::sync();  // what the trees cost to write is not the binaries'
            // Both trees read once, untimed, so that neither binary is the
            // one that brings a freshly written tree's inodes and dentries
            // into the cache (on disk that was most of the spread).
            warm_tree(tree_new->root());
            warm_tree(tree_old->root());
            const std::string state_new = (base / ("state-new-" + std::to_string(round))).string();
            const std::string state_old = (base / ("state-old-" + std::to_string(round))).string();
            std::map<std::string, double> t_new, t_old;
            auto run_all = [&](const std::string& bin, const std::string& root, const std::string& state,
                               std::map<std::string, double>& out) {
                for (const char* cmd : {"plan", "apply", "status"})
                    out[cmd] =
                        run_measured({cmd, "--sysfs-root", root, "--policy", policy, "--state-dir", state}, bin).ms;
            };
            if (round % 2 == 0) {
                run_all(blkpolicy::test::blkpolicy_binary(), tree_new->root().string(), state_new, t_new);
                run_all(old_bin, tree_old->root().string(), state_old, t_old);
            } else {
                run_all(old_bin, tree_old->root().string(), state_old, t_old);
                run_all(blkpolicy::test::blkpolicy_binary(), tree_new->root().string(), state_new, t_new);
            }
            for (const auto& [cmd, ms] : t_new) {
                ratio[cmd].push_back(ms / t_old[cmd]);
                ours_ms[cmd].push_back(ms);
                theirs_ms[cmd].push_back(t_old[cmd]);
            }
        }
        for (const char* cmd : {"plan", "apply", "status"}) {
            row("against " + old_name + ", " + std::to_string(w.n) + " devices on " + w.name + ": " + cmd +
                    " ms new / old, ratio (range)",
                fmt(percentile(ours_ms[cmd], 50), 0) + " / " + fmt(percentile(theirs_ms[cmd], 50), 0) + ", " +
                    ratio_text(ratio[cmd]),
                std::string(cmd) == "plan" ? "" : "<= 1.00x",
                std::string(cmd) == "plan" ? "" : (percentile(ratio[cmd], 50) <= 1.0 ? "met" : "MISSED"));
        }
        if (w.tmpfs) ::umount2(base.c_str(), MNT_DETACH);
        fs::remove_all(base);
    }

    // The daemon's first pass with a metrics file: start to READY=1 (every
    // device looked at and applied, the reports written), new and old.
    {
        const int n = quick ? 1000 : 10000;
        const int rounds = quick ? 2 : 4;
        std::cerr << "against " << old_name << ": the daemon's first pass with --metrics-file, " << n << " devices\n";
        const fs::path base = fs::path(workdir) / "against-daemon";
        fs::create_directories(base);
        ::mount("tmpfs", base.c_str(), "tmpfs", 0, "size=4g");
        std::vector<double> ratios, ours, theirs;
        for (int round = 0; round < rounds; ++round) {
            auto first_pass = [&](const std::string& bin, const std::string& tag) {
                auto tree = virtio_tree(base, n);
                const auto t0 = Clock::now();
                DaemonProcess d({"--sysfs-root", tree->root().string(), "--policy", policy, "--state-dir",
                                 (base / ("state-" + tag + std::to_string(round))).string(), "--metrics-file",
                                 (base / ("metrics-" + tag + std::to_string(round) + ".prom")).string(), "--log-target",
                                 "journal", "--mode", "enforce"},
                                0, {}, bin);
                d.wait_notification("READY=1", std::chrono::seconds(120));
                return ms_since(t0);
            };
            double a = 0, b = 0;
            if (round % 2 == 0) {
                a = first_pass(blkpolicy::test::blkpolicy_binary(), "new");
                b = first_pass(old_bin, "old");
            } else {
                b = first_pass(old_bin, "old");
                a = first_pass(blkpolicy::test::blkpolicy_binary(), "new");
            }
            ours.push_back(a);
            theirs.push_back(b);
            ratios.push_back(a / b);
        }
        row("against " + old_name + ", " + std::to_string(n) +
                " devices: daemon start to READY=1 with a metrics file"
                " (ms new / old, ratio)",
            fmt(percentile(ours, 50), 0) + " / " + fmt(percentile(theirs, 50), 0) + ", " + ratio_text(ratios));
        ::umount2(base.c_str(), MNT_DETACH);
        fs::remove_all(base);
    }
}

// ---------------------------------------------------------------- metrics

// What the metrics file costs at fleet scale: the daemon's own reconciler on
// N virtio disks (four managed attributes each, identity labels, audit
// findings), then the text, its size, and one atomic rewrite, in process.
void bench_metrics(int n, const std::string& workdir) {
    std::cerr << "metrics: " << n << " devices on tmpfs\n";
    const fs::path mnt = workdir + "/tmpfs-metrics";
    fs::create_directories(mnt);
    ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4g");
    {
        setenv("TMPDIR", mnt.c_str(), 1);
        FakeSysfs tree;
        unsetenv("TMPDIR");
        for (int i = 0; i < n; ++i) {
            char pci[32];
            std::snprintf(pci, sizeof pci, "0000:%02x:%02x.0", (i / 32) % 256, i % 32);
            tree.add_virtio_disk(vd_name(i), 1000 + i,
                                 std::string(pci) + (i >= 8192 ? "/x" + std::to_string(i / 8192) : ""), i);
        }
        struct NullLog : blkpolicy::systemd::EventLog {
            void alert(const blkpolicy::systemd::Alert&) override {}
            void log(int, const std::string&) override {}
        } null_log;
        blkpolicy::udev::Sysfs sysfs(tree.root());
        blkpolicy::agent::StateDir state(mnt / "state");
        const auto host = blkpolicy::udev::read_host_context(sysfs);
        blkpolicy::agent::Reconciler rec(sysfs, state, null_log, host);
        auto loaded = blkpolicy::policy::load_policy(
            {{"scale.toml",
              "[[rule]]\nname = \"virtio\"\n[rule.match]\ndriver = \"virtio_blk\"\n[rule.set]\n"
              "rotational = 0\nnr_requests = 64\nwbt_lat_usec = 2000\nread_ahead_kb = 128\n"}});
        rec.set_policy(loaded.policy);
        rec.set_identity_labels(true);
        const auto t_pass = Clock::now();
        for (const auto& name : blkpolicy::udev::list_block_devices(sysfs))
            rec.reconcile(name, blkpolicy::agent::Trigger::verify);
        const double pass_ms = ms_since(t_pass);
        const auto t_audit = Clock::now();
        const auto findings =
            blkpolicy::report::audit(blkpolicy::agent::audit_input(sysfs, &rec.policy(), {}, "", host));
        const double audit_ms = ms_since(t_audit);
        blkpolicy::agent::OutOfPolicyClock clock;
        blkpolicy::agent::MetricsInput in;
        in.last_pass_unix = 1.7e9;
        in.verify_interval_seconds = 30;
        in.version = BLKPOLICY_VERSION;
        in.findings = &findings;
        in.audit_unix = 1.7e9;
        in.clock = &clock;
        std::vector<double> text_ms, write_ms;
        std::string text;
        const auto file = (mnt / "blkpolicy.prom").string();
        for (int round = 0; round < 5; ++round) {
            const auto t0 = Clock::now();
            clock.update(rec, in.last_pass_unix);
            text = blkpolicy::agent::metrics_text(rec, in);
            text_ms.push_back(ms_since(t0));
            const auto t1 = Clock::now();
            if (!blkpolicy::util::write_atomically(file, text).ok()) std::cerr << "metrics: write failed\n";
            write_ms.push_back(ms_since(t1));
        }
        const auto samples = std::count(text.begin(), text.end(), '\n');
        const double mib = static_cast<double>(text.size()) / (1024.0 * 1024.0);
        const std::string tag = "metrics, " + std::to_string(n) + " devices x 4 attributes";
        row(tag + ": one daemon pass (ms), an audit (ms)", fmt(pass_ms, 0) + " / " + fmt(audit_ms, 0));
        const double kib_per_device = static_cast<double>(text.size()) / 1024.0 / static_cast<double>(n);
        row(tag + ": file size / lines / per device",
            fmt(mib, 2) + " MiB / " + std::to_string(samples) + " / " + fmt(kib_per_device, 2) + " KiB",
            "<= 2.5 KiB per device", kib_per_device <= 2.5 ? "met" : "MISSED");
        const double rewrite = percentile(text_ms, 50) + percentile(write_ms, 50);
        row(tag + ": text ms / atomic rewrite ms (median of 5)",
            fmt(percentile(text_ms, 50), 1) + " / " + fmt(percentile(write_ms, 50), 1), "<= 500 ms",
            rewrite <= 500 ? "met" : "MISSED");
        // The daemon rewrites after each pass, at most every max(100 ms, 20 x
        // the last rewrite): in a burst of events, metrics cost <= 5%.
        row(tag + ": rewrites at most every (ms)", fmt(std::max(100.0, 20 * rewrite), 0));
        row(tag + ": findings in the file", std::to_string(findings.size()));
    }
    ::umount2(mnt.c_str(), MNT_DETACH);
    fs::remove_all(mnt);
}

int main(int argc, char** argv) {
    bool quick = false;
    std::string against_bin, against_name;  // --against BINARY NAME: an earlier build, side by side
    std::string only;                       // --only reaction|scale|startup|hostile|daemon|metrics|measure|against
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick")
            quick = true;
        else if (a == "--only" && i + 1 < argc)
            only = argv[++i];
        else if (a == "--against" && i + 2 < argc) {
            against_bin = argv[++i];
            against_name = argv[++i];
        } else {
            std::cerr << "usage: blkpolicy-bench [--quick] [--only "
                         "reaction|scale|startup|hostile|daemon|metrics|measure|against]"
                         " [--against BINARY NAME]\n";
            return 2;
        }
    }
    auto want = [&](const char* section) { return only.empty() || only == section; };
    if (::geteuid() != 0) {
        std::cerr << "bench: needs root (loop devices, udevd, tmpfs mounts)\n";
        return 2;
    }
    if (!journald_available()) {
        std::cerr << "bench: journald is not running; bench/run.sh starts one\n";
        return 2;
    }
    remove_leftover_loops();
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // the reaction poller's 20 us sleeps stay 20 us
    TempDir work("blkpolicy-bench");
    if (want("reaction")) {
        bench_reaction(quick ? 20 : 50, work.path().string(), false);
        bench_reaction(quick ? 10 : 20, work.path().string(), true);
    }
    if (want("scale"))
        bench_scale(quick ? std::vector<int>{100, 1000} : std::vector<int>{100, 1000, 10000}, work.path().string());
    if (want("startup")) bench_startup(work.path().string());
    if (want("hostile")) bench_hostile(work.path().string());
    if (want("daemon")) bench_idle_burst_rss(quick ? 10 : 30, quick ? 2000 : 10000, work.path().string());
    if (!against_bin.empty() && (only.empty() || only == "against"))
        bench_against(against_bin, against_name, quick, work.path().string());
    if (want("measure")) bench_measure(quick, work.path().string());
    if (want("metrics")) {
        bench_metrics(100, work.path().string());
        bench_metrics(quick ? 1000 : 10000, work.path().string());
    }
    remove_leftover_loops();

    std::size_t w0 = 6, w1 = 5, w2 = 6;
    for (const auto& r : rows) {
        w0 = std::max(w0, r.name.size());
        w1 = std::max(w1, r.value.size());
        w2 = std::max(w2, r.target.size());
    }
    auto line = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d) {
        std::cout << "| " << a << std::string(w0 - a.size(), ' ') << " | " << b << std::string(w1 - b.size(), ' ')
                  << " | " << c << std::string(w2 - c.size(), ' ') << " | " << d << " |\n";
    };
    line("figure", "value", "target", "");
    std::cout << "|" << std::string(w0 + 2, '-') << "|" << std::string(w1 + 2, '-') << "|" << std::string(w2 + 2, '-')
              << "|---|\n";
    for (const auto& r : rows) line(r.name, r.value, r.target, r.verdict);
    return 0;
}
