// SPDX-License-Identifier: MIT
// blkpolicy measure on fresh loop devices of the running kernel, through the
// real binary: the stat counters against I/O this test issues itself, the
// durability case (write through over the loop's page cache), completions
// under rq_affinity 2, a lossy window, and the tracing instance's life
// (two at once, SIGTERM, SIGKILL, no tracefs at all).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/blkpg.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernel/daemon_process.hpp"
#include "kernel/loop_device.hpp"
#include "kernel/mounts.hpp"
#include "measure/drive_cache.hpp"
#include "measure/tracefs.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;
using nlohmann::json;

namespace {

constexpr const char* kInstances = "/sys/kernel/tracing/instances";

// tracefs where systemd would mount it, for the tests' life.
struct Tracefs : KernelFsMount {
    Tracefs() : KernelFsMount("tracefs", "/sys/kernel/tracing") {}
};

// The tracing instances of process `pid` of this PID namespace (blkpolicy-NS-PID-N).
std::vector<std::string> instances_of(pid_t pid) {
    std::vector<std::string> out;
    std::error_code ec;
    const blkpolicy::measure::InstanceOwner owner{blkpolicy::measure::own_pid_namespace(), pid};
    for (const auto& e : std::filesystem::directory_iterator(kInstances, ec))
        if (blkpolicy::measure::instance_owner(e.path().filename().string()) == owner) out.push_back(e.path().string());
    return out;
}

// A `blkpolicy measure` in the background, waited for until its instance
// records (so that the I/O the test issues next falls inside the window).
class Measuring {
public:
    Measuring(const std::vector<std::string>& args, bool expect_tracing = true) : run_(blkpolicy_argv(with(args))) {
        if (!expect_tracing) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            return;
        }
        for (int i = 0; i < 500 && instances_of(run_.pid()).empty(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        REQUIRE_MESSAGE(!instances_of(run_.pid()).empty(), "measure made no tracing instance");
        // The stat baselines are read right after tracing starts.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    Running& process() { return run_; }
    json result(int* exit_code = nullptr) {
        auto r = run_.wait();
        INFO("stderr: " << r.err);
        if (exit_code) *exit_code = r.exit_code;
        REQUIRE_FALSE(r.out.empty());
        return json::parse(r.out);
    }

private:
    static std::vector<std::string> with(std::vector<std::string> args) {
        args.insert(args.begin(), "measure");
        args.push_back("--json");
        return args;
    }
    Running run_;
};

// `count` 4 KiB O_DIRECT reads of the device, from the CPU given (-1: any).
void direct_reads(const std::string& dev, int count, int cpu = -1, int span_pages = 16384) {
    std::thread t([&] {
        if (cpu >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            ::sched_setaffinity(0, sizeof set, &set);
        }
        const int fd = ::open(("/dev/" + dev).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        REQUIRE(fd >= 0);
        void* buf = nullptr;
        REQUIRE(::posix_memalign(&buf, 4096, 4096) == 0);
        for (int i = 0; i < count; ++i) {
            const off_t at = static_cast<off_t>((i * 7919) % span_pages) * 4096;
            REQUIRE(::pread(fd, buf, 4096, at) == 4096);
        }
        std::free(buf);
        ::close(fd);
    });
    t.join();
}

// `count` 4 KiB writes, each made durable before the next (O_DSYNC): a flush each.
void synced_writes(const std::string& dev, int count) {
    const int fd = ::open(("/dev/" + dev).c_str(), O_WRONLY | O_DSYNC | O_CLOEXEC);
    REQUIRE(fd >= 0);
    char buf[4096];
    std::memset(buf, 'x', sizeof buf);
    for (int i = 0; i < count; ++i) REQUIRE(::pwrite(fd, buf, sizeof buf, static_cast<off_t>(i) * 4096) == 4096);
    ::close(fd);
}

const json& device_in(const json& doc, const std::string& name) {
    for (const auto& d : doc["devices"])
        if (d["device"] == name) return d;
    FAIL("no " << name << " in " << doc.dump());
    static const json none;
    return none;
}

}  // namespace

TEST_CASE("kernel measure: the traced requests are the reads and writes the stat counters count, none lost") {
    Tracefs tracefs;
    LoopDevice loop;
    Measuring m({"--for", "3s", loop.name()});
    direct_reads(loop.name(), 300);
    synced_writes(loop.name(), 40);
    int rc = -1;
    const auto doc = m.result(&rc);
    CHECK(rc == 0);
    CHECK(doc["tracing"]["on"] == true);
    CHECK(doc["tracing"]["lossy"] == false);
    CHECK(doc["interrupted"] == false);
    const auto& d = device_in(doc, loop.name());
    CHECK(d["devnum"].get<std::string>().rfind("7:", 0) == 0);
    CHECK(d["stat"]["reads"] == 300);
    CHECK(d["readahead"]["read_requests"] == 300);     // every read the test made, traced
    CHECK(d["readahead"]["readahead_requests"] == 0);  // O_DIRECT: no readahead
    CHECK(d["readahead"]["sectors_per_read"] == 8.0);
    CHECK(d["stat"]["writes"].get<long>() >= 40);
    CHECK(d["flushes"]["flushes"].get<long>() >= 40);  // write back: each synced write flushes
    CHECK(d["flushes"]["at_risk"] == false);
    // Every completion with data had its issue in the window.
    CHECK(d["completions"]["matched"] == d["completions"]["traced_completed"]);
    CHECK(d["completions"]["traced_completed"].get<long>() >= 340);
    CHECK(d["wbt"]["state"] == "on");
    CHECK(instances_of(m.process().pid()).empty());
}

TEST_CASE("kernel measure: write through over the loop's page cache drops every flush: data at risk, exit 1") {
    Tracefs tracefs;
    LoopDevice loop;
    REQUIRE(loop.queue("write_cache") == "write back");
    {
        Measuring m({"--for", "2s", loop.name()});
        synced_writes(loop.name(), 50);
        int rc = -1;
        const auto d = device_in(m.result(&rc), loop.name());
        CHECK(rc == 0);
        CHECK(d["flushes"]["flushes"].get<long>() >= 50);
        CHECK(d["findings"].empty());
    }
    loop.write_queue("write_cache", "write through");
    Measuring m({"--for", "2s", loop.name()});
    synced_writes(loop.name(), 50);  // every one returns: fsync "worked"
    int rc = -1;
    const auto doc = m.result(&rc);
    CHECK(rc == 1);
    const auto& d = device_in(doc, loop.name());
    CHECK(d["flushes"]["flushes"] == 0);
    CHECK(d["flushes"]["writes"].get<long>() >= 50);
    CHECK(d["flushes"]["at_risk"] == true);
    CHECK(d["flushes"]["device_cache"] == "write back");
    CHECK(d["flushes"]["device_cache_source"] ==
          "the backing file's page cache: the loop device does not use direct I/O");
    REQUIRE(doc["findings"].size() == 1);
    CHECK(doc["findings"][0]["code"] == "flushes-dropped");
    CHECK(doc["findings"][0]["severity"] == "critical");
    CHECK(doc["findings"][0]["evidence"]["stat flushes completed (field 16)"] == "0");
}

TEST_CASE("kernel measure: rq_affinity 2 completes every request on the CPU that submitted it") {
    if (std::thread::hardware_concurrency() < 2) {
        MESSAGE("SKIPPED: one CPU: nothing to move completions between");
        return;
    }
    Tracefs tracefs;
    LoopDevice loop;
    const int cpu = static_cast<int>(std::thread::hardware_concurrency()) - 1;
    loop.write_queue("rq_affinity", "2");
    // A window that outlasts the reads: 2 s missed 549 of them in the
    // sanitizer pass on a loaded host (2026-12-07).
    Measuring m({"--for", "6s", loop.name()});
    direct_reads(loop.name(), 2000, cpu);
    const auto d = device_in(m.result(), loop.name());
    const auto& c = d["completions"];
    CHECK(c["rq_affinity"] == "2");
    CHECK(c["matched"].get<long>() >= 2000);
    CHECK(c["submitted"].get<long>() >= 2000);
    CHECK(c["same_cpu_share"].get<double>() >= 0.99);
    CHECK(c["completed_on"][std::to_string(cpu)].get<long>() >= 2000);
    CHECK(c["issued_on"][std::to_string(cpu)].get<long>() >= 2000);
    CHECK(c["submitted_on"][std::to_string(cpu)].get<long>() >= 2000);
}

// Partition 1 of LOOP, from 1 MiB, `mib` long: partition scanning on
// (LOOP_SET_STATUS64), then BLKPG_ADD_PARTITION. Its name, once its node is there.
std::string add_partition(const LoopDevice& loop, long long mib) {
    const int fd = ::open(("/dev/" + loop.name()).c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    loop_info64 info{};
    REQUIRE(::ioctl(fd, LOOP_GET_STATUS64, &info) == 0);
    info.lo_flags |= LO_FLAGS_PARTSCAN;
    REQUIRE(::ioctl(fd, LOOP_SET_STATUS64, &info) == 0);
    blkpg_partition part{};
    part.start = 1LL << 20;
    part.length = mib << 20;
    part.pno = 1;
    blkpg_ioctl_arg arg{};
    arg.op = BLKPG_ADD_PARTITION;
    arg.datalen = sizeof part;
    arg.data = &part;
    const int rc = ::ioctl(fd, BLKPG, &arg);
    const int err = errno;
    ::close(fd);
    REQUIRE_MESSAGE(rc == 0, "BLKPG_ADD_PARTITION: " << std::strerror(err));
    const std::string name = loop.name() + "p1";
    for (int i = 0; i < 100 && !std::filesystem::exists("/dev/" + name); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(std::filesystem::exists("/dev/" + name));
    return name;
}

TEST_CASE("kernel measure: reads of a partition count for its disk, each with the CPU that submitted it") {
    // A partition's bio is remapped to its disk (number and sector) before
    // block_getrq fires, so its request pairs with the disk's issue and
    // completion: the partition's reads are known by their submitting CPU,
    // on the disk's figures (measured on this kernel: 1000 of 1000).
    Tracefs tracefs;
    LoopDevice loop;
    const auto part = add_partition(loop, 32);
    const int cpu = static_cast<int>(std::thread::hardware_concurrency()) - 1;
    Measuring m({"--for", "2s", loop.name()});
    direct_reads(part, 1000, cpu, 8192);
    const auto doc = m.result();
    const auto& c = device_in(doc, loop.name())["completions"];
    CHECK(c["matched"].get<long>() >= 1000);
    CHECK(c["submitted"].get<long>() >= 1000);
    CHECK(c["submitted_on"][std::to_string(cpu)].get<long>() >= 1000);
    for (const auto& d : doc["devices"]) CHECK(d["device"] != part);  // asked for the disk only
}

// ext4 on LOOP, mounted on a directory of its own for the object's life.
class Ext4On {
public:
    explicit Ext4On(const LoopDevice& loop) {
        REQUIRE_MESSAGE(std::system(("mkfs.ext4 -q -F /dev/" + loop.name() + " >/dev/null 2>&1").c_str()) == 0,
                        "mkfs.ext4 (e2fsprogs, which scripts/install-deps.sh installs)");
        REQUIRE(::mount(("/dev/" + loop.name()).c_str(), dir_.path().c_str(), "ext4", 0, nullptr) == 0);
        mounted_ = true;
    }
    ~Ext4On() {
        if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
    }
    Ext4On(const Ext4On&) = delete;
    Ext4On& operator=(const Ext4On&) = delete;
    std::filesystem::path path(const std::string& name) const { return dir_.path() / name; }

private:
    TempDir dir_;
    bool mounted_ = false;
};

// A file of `mib` MiB of bytes that do not compress, on disk and out of the
// page cache (fsync, then POSIX_FADV_DONTNEED), so that reading it reads the disk.
std::string cold_file(const Ext4On& fs, int mib) {
    const auto path = fs.path("data").string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    std::string chunk(1 << 20, '\0');
    std::uint32_t x = 12345;
    for (int i = 0; i < mib; ++i) {
        for (auto& c : chunk) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
        REQUIRE(::write(fd, chunk.data(), chunk.size()) == static_cast<ssize_t>(chunk.size()));
    }
    REQUIRE(::fsync(fd) == 0);
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
    ::close(fd);
    return path;
}

TEST_CASE(
    "kernel measure: readahead is judged by what applications asked: a sequential read about 1x, "
    "random mmap reads many times") {
    // The old figure, the share of read sectors carrying A, is near 100% for
    // both: every buffered read comes by the readahead path.
    Tracefs tracefs;
    LoopDevice loop;
    Ext4On fs(loop);
    const auto file = cold_file(fs, 16);
    loop.write_queue("read_ahead_kb", "2048");
    {
        Measuring m({"--for", "2s", loop.name()});
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        std::string buf(1 << 20, '\0');
        long total = 0;
        for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += n;
        ::close(fd);
        CHECK(total == 16L << 20);
        const auto d = device_in(m.result(), loop.name());
        const auto& ra = d["readahead"];
        INFO(ra["sentence"].get<std::string>());
        REQUIRE(ra["asked_traced"] == true);
        CHECK(ra["asked_pages"].get<long>() >= 4096);  // 16 MiB of 4 KiB pages
        REQUIRE(ra["amplification"].is_number());
        CHECK(ra["amplification"].get<double>() >= 0.9);
        CHECK(ra["amplification"].get<double>() <= 1.3);
    }
    {
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
        Measuring m({"--for", "2s", loop.name()});
        // 100 random pages touched through a mapping, no access hint: each
        // fault reads around it, read_ahead_kb's worth.
        const std::size_t len = 16u << 20;
        void* map = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
        REQUIRE(map != MAP_FAILED);
        const volatile unsigned char* bytes = static_cast<const unsigned char*>(map);
        unsigned sum = 0;
        for (std::size_t i = 0; i < 100; ++i) sum += bytes[((i * 2654435761u) % 4096) * 4096];
        ::munmap(map, len);
        ::close(fd);
        INFO("sum " << sum);
        const auto d = device_in(m.result(), loop.name());
        const auto& ra = d["readahead"];
        INFO(ra["sentence"].get<std::string>());
        CHECK(ra["faults"].get<long>() >= 50);
        REQUIRE(ra["amplification"].is_number());
        CHECK(ra["amplification"].get<double>() >= 4.0);
    }
}

TEST_CASE("kernel measure: --sample traces requests part of the time and says so; 0 never") {
    Tracefs tracefs;
    LoopDevice loop;
    {
        // Sampling periods are 10 s: on for the first 2.5 s of a 4 s window.
        Measuring m({"--for", "4s", "--sample", "25", loop.name()});
        const auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(3400)) direct_reads(loop.name(), 50);
        const auto doc = m.result();
        const auto& d = device_in(doc, loop.name());
        const double share = d["requests_traced"].get<double>();
        CHECK(share > 0.5);
        CHECK(share < 0.75);
        CHECK(d["readahead"]["read_requests"].get<long>() > 0);
        CHECK(d["readahead"]["read_requests"].get<long>() < d["stat"]["reads"].get<long>());
        CHECK(d["completions"]["sentence"].get<std::string>().find("of the window (a sample)") != std::string::npos);
    }
    Measuring m({"--for", "2s", "--sample", "0", loop.name()});
    direct_reads(loop.name(), 100);
    const auto doc = m.result();
    const auto& d = device_in(doc, loop.name());
    CHECK(d["readahead"]["traced"] == false);
    CHECK(d["readahead"]["read_requests"] == 0);
    CHECK(d["stat"]["reads"] == 100);
    CHECK(d["completions"]["note"] == "the request tracepoints were off all window (sample 0%)");
    CHECK(d["wbt"]["traced"] == true);  // wbt and the counters are always on
}

TEST_CASE("kernel measure: a buffer that fills while nobody reads it makes a lossy window, said as undercounted") {
    Tracefs tracefs;
    LoopDevice loop;
    Measuring m({"--for", "3s", "--trace-buffer-kb", "4", loop.name()});
    m.process().signal(SIGSTOP);  // the reader away: the 4 KiB buffers fill
    direct_reads(loop.name(), 3000);
    m.process().signal(SIGCONT);
    const auto doc = m.result();
    CHECK(doc["tracing"]["lossy"] == true);
    CHECK(doc["tracing"]["lost_events"].get<long>() > 0);
    const auto& d = device_in(doc, loop.name());
    CHECK(d["undercounted"] == true);
    CHECK(d["stat"]["reads"] == 3000);  // the counters lose nothing
    CHECK(d["readahead"]["read_requests"].get<long>() < 3000);
    CHECK(d["completions"]["sentence"].get<std::string>().find("at least: events were lost") != std::string::npos);
}

TEST_CASE("kernel measure: only the online CPUs' buffers are polled; a CPU coming or going is followed") {
    using namespace blkpolicy::measure;
    Tracefs tracefs;
    TempDir dir;
    const auto online = dir.path() / "online";
    const auto say = [&](const std::string& text) { std::ofstream(online) << text; };
    say("0\n");  // as a host with more possible CPUs than online ones says it
    TraceOptions o;
    o.online_cpus_file = online.string();
    auto opened = TraceInstance::open("/sys/kernel/tracing", o);
    REQUIRE_MESSAGE(opened.ok(), opened.message());
    auto& t = **opened;
    const auto possible = t.possible_cpus();
    REQUIRE(possible >= 1);
    CHECK(t.fds().size() == 1);
    CHECK(t.cpus() == 1);
    CHECK_FALSE(t.follow_cpus());  // the same list: nothing to do
    say("0-" + std::to_string(possible - 1) + "\n");
    CHECK(t.follow_cpus());
    CHECK(t.fds().size() == possible);
    // A buffer poll failed on is not polled again until the list changes.
    const int first = t.fds().front();
    t.poll_failed(first);
    const auto polled = t.fds();
    CHECK(polled.size() == possible - 1);
    CHECK(std::find(polled.begin(), polled.end(), first) == polled.end());
    CHECK_FALSE(t.follow_cpus());
    say("0\n");
    CHECK(t.follow_cpus() == (possible > 1));
    CHECK(t.fds().size() == 1);
    // Where the kernel does not say, every CPU is polled.
    std::filesystem::remove(online);
    t.follow_cpus();
    CHECK(t.fds().size() == possible);
}

TEST_CASE("kernel measure: two at once, SIGTERM ends one early, a SIGKILLed one's instance goes at the next") {
    Tracefs tracefs;
    LoopDevice loop;
    Measuring a({"--for", "3s", loop.name()});
    Measuring b({"--for", "30s", loop.name()});
    CHECK(instances_of(a.process().pid()) != instances_of(b.process().pid()));
    direct_reads(loop.name(), 100);
    b.process().signal(SIGTERM);
    const auto early = b.result();
    CHECK(early["interrupted"] == true);
    CHECK(early["seconds"].get<double>() < 10);
    CHECK(device_in(early, loop.name())["readahead"]["read_requests"] == 100);
    CHECK(instances_of(b.process().pid()).empty());
    const auto full = a.result();
    CHECK(full["interrupted"] == false);
    CHECK(device_in(full, loop.name())["readahead"]["read_requests"] == 100);
    CHECK(instances_of(a.process().pid()).empty());

    Measuring killed({"--for", "30s", loop.name()});
    const pid_t dead = killed.process().pid();
    killed.process().signal(SIGKILL);
    killed.process().wait();
    REQUIRE(instances_of(dead).size() == 1);  // nothing can clean up after SIGKILL ...
    // An instance of a process with the same PID in another PID namespace (a
    // container's, over the same tracefs): that process may well be alive.
    const blkpolicy::measure::InstanceOwner other{blkpolicy::measure::own_pid_namespace() + 1, dead};
    const std::string foreign = std::string(kInstances) + "/" + blkpolicy::measure::instance_name(other, 0);
    REQUIRE(::mkdir(foreign.c_str(), 0700) == 0);
    auto next = run_blkpolicy({"measure", "--for", "100ms", "--json", loop.name()});
    const bool foreign_kept = std::filesystem::exists(foreign);
    ::rmdir(foreign.c_str());
    CHECK(next.exit_code == 0);
    CHECK(instances_of(dead).empty());  // ... but the next measure does
    CHECK_MESSAGE(foreign_kept, "another PID namespace's instance was removed");
}

TEST_CASE("kernel measure: without tracefs the stat counters are still measured and the rest says why") {
    LoopDevice loop;
    // A private mount namespace without tracefs (nor debugfs's tracing automount).
    const std::string cmd =
        "umount -l /sys/kernel/tracing 2>/dev/null; umount -l /sys/kernel/debug 2>/dev/null; exec \"$@\"";
    std::vector<std::string> argv = {"unshare", "-m", "--propagation", "private", "sh", "-c", cmd, "sh"};
    for (const auto& a : blkpolicy_argv({"measure", "--for", "2s", "--json", loop.name()})) argv.push_back(a);
    Running run(argv);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    direct_reads(loop.name(), 50);
    const auto r = run.wait();
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto doc = json::parse(r.out);
    CHECK(doc["tracing"]["on"] == false);
    CHECK(doc["tracing"]["why_not"] ==
          "tracefs is not mounted at /sys/kernel/tracing (mount -t tracefs nodev /sys/kernel/tracing)");
    const auto& d = device_in(doc, loop.name());
    CHECK(d["stat"]["reads"] == 50);
    CHECK(d["readahead"]["traced"] == false);
    CHECK(d["wbt"]["zero_reason"].get<std::string>().rfind("not traced: tracefs is not mounted", 0) == 0);
}

TEST_CASE("kernel measure: the daemon measures in windows; write through over a volatile cache is a critical alert") {
    REQUIRE_MESSAGE(journald_available(),
                    "journald is not running: scripts/test.sh starts /lib/systemd/systemd-journald when it is not");
    Tracefs tracefs;
    LoopDevice loop;
    TempDir tmp("blkpolicy-measure-daemon");
    const auto policy = (tmp.path() / "policy.toml").string();
    std::ofstream(policy) << "[daemon]\nmode = \"observe\"\nverify_interval = \"1s\"\nmeasure = true\n"
                             "measure_window = \"2s\"\n[[rule]]\nname = \"test loop\"\n[rule.match]\nkernel = \""
                          << loop.name() << "\"\n[rule.set]\nnomerges = 0\n";
    const auto state = (tmp.path() / "state").string();
    const auto metrics = (tmp.path() / "blkpolicy.prom").string();
    DaemonProcess d({"--policy", policy, "--state-dir", state, "--log-target", "journal", "--metrics-file", metrics});
    REQUIRE(d.wait_notification("READY=1", std::chrono::seconds(10)));
    loop.write_queue("write_cache", "write through");
    const auto alert = [&](const std::string& event) {
        return [&, event](const JournalEntry& e) {
            const auto get = [&](const char* k) { return e.count(k) ? e.at(k) : std::string(); };
            return get("BLKPOLICY_EVENT") == event && get("BLKPOLICY_DEVICE") == loop.name();
        };
    };
    // Writes that fsync believes durable, until the daemon has seen a window of them.
    const bool alerted = eventually(
        [&] {
            synced_writes(loop.name(), 20);
            const auto j = d.journal();
            return std::any_of(j.begin(), j.end(), alert("at-risk"));
        },
        std::chrono::seconds(15));
    REQUIRE(alerted);
    JournalEntry e;
    for (const auto& x : d.journal())
        if (alert("at-risk")(x)) e = x;
    CHECK(e["MESSAGE_ID"] == "7c0ba1f3a4d94f0e9b6c2d8e51a0f307");
    CHECK(e["PRIORITY"] == "2");
    CHECK(e["BLKPOLICY_ATTRIBUTE"] == "write_cache");
    CHECK(e["BLKPOLICY_ACTUAL"] == "write through");
    CHECK(e["BLKPOLICY_EXPECTED"] == "write back");
    CHECK(e["BLKPOLICY_FINDING"] == "flushes-dropped");
    CHECK(e["BLKPOLICY_FLUSHES"] == "0");
    CHECK(std::stol(e["BLKPOLICY_WRITES"]) >= 20);
    CHECK(e["BLKPOLICY_DEVICE_CACHE"] == "the backing file's page cache: the loop device does not use direct I/O");
    // The metrics carry the finding (BlkpolicyCriticalFinding fires on it)
    // and status shows the window.
    CHECK(eventually(
        [&] {
            std::ifstream in(metrics);
            const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            return text.find("blkpolicy_measure_finding{device=\"" + loop.name() +
                             "\",code=\"flushes-dropped\",severity=\"critical\"} 1") != std::string::npos;
        },
        std::chrono::seconds(5)));
    auto st = run_blkpolicy({"status", "--json", "--policy", policy, "--state-dir", state, loop.name()});
    const auto doc = json::parse(st.out);
    CHECK(doc["devices"][0]["measured"]["flushes"]["at_risk"].is_boolean());
    CHECK(doc["daemon"]["measured"]["window_seconds"] == 2.0);
    // Flushes reach the device again: resolved, once.
    loop.write_queue("write_cache", "write back");
    REQUIRE(eventually(
        [&] {
            synced_writes(loop.name(), 20);
            const auto j = d.journal();
            return std::any_of(j.begin(), j.end(), alert("resolved"));
        },
        std::chrono::seconds(15)));
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const auto all = d.journal();
    CHECK(std::count_if(all.begin(), all.end(), alert("at-risk")) == 1);
    CHECK(std::count_if(all.begin(), all.end(), alert("resolved")) == 1);
    // A reload that turns measuring off removes the instance at once.
    std::ofstream(policy, std::ios::trunc) << "[daemon]\nmode = \"observe\"\nverify_interval = \"1s\"\n[[rule]]\n"
                                              "name = \"test loop\"\n[rule.match]\nkernel = \""
                                           << loop.name() << "\"\n[rule.set]\nnomerges = 0\n";
    REQUIRE_FALSE(instances_of(d.pid()).empty());
    d.signal(SIGHUP);
    CHECK(eventually([&] { return instances_of(d.pid()).empty(); }, std::chrono::seconds(10)));
    d.signal(SIGTERM);
    CHECK(d.wait_exit(std::chrono::seconds(10)) == 0);
    CHECK(instances_of(d.pid()).empty());
}

TEST_CASE("kernel measure: not root, the stat counters are measured and tracing says it needs root") {
    Tracefs tracefs;
    LoopDevice loop;
    std::vector<std::string> argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    for (const auto& a :
         blkpolicy_argv({"measure", "--for", "1s", "--json", "--state-dir", "/nonexistent", loop.name()}))
        argv.push_back(a);
    Running run(argv);
    const auto r = run.wait();
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto doc = json::parse(r.out);
    CHECK(doc["tracing"]["on"] == false);
    const auto why = doc["tracing"]["why_not"].get<std::string>();
    CHECK(why.find("tracing needs root") != std::string::npos);
    CHECK(device_in(doc, loop.name())["stat"].is_object());  // /sys/block/DEV/stat is readable by anyone
}

TEST_CASE("kernel measure: a loop device with direct I/O is judged by the cache of the disk under its backing file") {
    Tracefs tracefs;
    LoopDevice loop;
    {
        const int fd = ::open(("/dev/" + loop.name()).c_str(), O_RDWR | O_CLOEXEC);
        REQUIRE(fd >= 0);
        const int dio = ::ioctl(fd, 0x4C08 /* LOOP_SET_DIRECT_IO */, 1UL);
        ::close(fd);
        if (dio != 0) {
            MESSAGE("SKIPPED: the backing file's file system refuses direct I/O here: nothing to check");
            return;
        }
    }
    // The disk under the backing file, as sysfs shows it (read only: it is the host's).
    struct stat st {};
    REQUIRE(::stat(loop.backing().c_str(), &st) == 0);
    std::filesystem::path disk = std::filesystem::canonical("/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                                                            std::to_string(minor(st.st_dev)));
    if (std::filesystem::exists(disk / "partition")) disk = disk.parent_path();
    std::string disk_cache;
    std::getline(std::ifstream(disk / "queue" / "write_cache"), disk_cache);
    REQUIRE(!disk_cache.empty());
    const bool volatile_below = disk_cache.rfind("write back", 0) == 0;
    MESSAGE("the backing file is on " << disk.filename().string() << ", whose queue says " << disk_cache);

    TempDir tmp("blkpolicy-measure-first");
    const auto state = (tmp.path() / "state").string();
    const auto policy = (tmp.path() / "p.toml").string();
    std::ofstream(policy) << "[[rule]]\nname = \"t\"\n[rule.match]\nkernel = \"" << loop.name()
                          << "\"\n[rule.set]\nnomerges = 0\n";
    loop.write_queue("write_cache", "write through");
    // apply records the facts at first sight, write_cache with them.
    REQUIRE(run_blkpolicy({"apply", "--policy", policy, "--state-dir", state, loop.name()}).exit_code == 0);
    std::ifstream rec(state + "/facts/" + loop.name() + ".json");
    CHECK(json::parse(rec)["write_cache"] == "write through");
    // A first record of write through (as a udev rule might have left it)
    // decides nothing: the disk under the file does.
    for (const auto& state_dir : {state, (tmp.path() / "none").string()}) {
        CAPTURE(state_dir);
        Measuring m({"--for", "2s", "--state-dir", state_dir, loop.name()});
        synced_writes(loop.name(), 30);
        int rc = -1;
        const auto doc = m.result(&rc);
        const auto& fl = device_in(doc, loop.name())["flushes"];
        CHECK(fl["device_cache_source"].get<std::string>().find("the disk under the backing file (" +
                                                                disk.filename().string() + ")") == 0);
        CHECK(fl["at_risk"] == volatile_below);
        CHECK(rc == (volatile_below ? 1 : 0));
    }
}

TEST_CASE(
    "kernel measure: a drive's caching page asked of a node that is no SCSI disk, or no node: said, never guessed") {
    LoopDevice loop;
    // The loop driver takes no SG_IO: the probe says so, and reads nothing.
    const auto c = blkpolicy::measure::ask_drive_cache("/dev/" + loop.name());
    CHECK(c.asked);
    CHECK_FALSE(c.read);
    CHECK(c.error.rfind("MODE SENSE on /dev/" + loop.name() + ": ", 0) == 0);
    const auto gone = blkpolicy::measure::ask_drive_cache("/dev/blkpolicy-test-no-such-disk");
    CHECK_FALSE(gone.read);
    CHECK(gone.error == "cannot open /dev/blkpolicy-test-no-such-disk: No such file or directory");
}
