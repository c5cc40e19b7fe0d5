// SPDX-License-Identifier: MIT
// measure/figures: each figure with its proof counter, each zero explained,
// and the data-at-risk finding exactly where writes go unflushed over a
// volatile cache the queue was told is write through.
#include <doctest/doctest.h>

#include "measure/figures.hpp"

using namespace blkpolicy;
using namespace blkpolicy::measure;

namespace {

DeviceSettings virtio(const std::string& write_cache, DeviceCache::Mode cache) {
    DeviceSettings s;
    s.name = "vdb";
    s.devnum = "254:16";
    s.driver = "virtio_blk";
    s.request_based = true;
    s.scheduler = "none";
    s.wbt_lat_usec = "75000";
    s.wbt_state = 1;
    s.write_cache = write_cache;
    s.cache.mode = cache;
    s.cache.source = "cache_type \"write back\"";
    s.read_ahead_kb = "8192";
    s.rq_affinity = "1";
    s.hw_queues = 1;
    return s;
}

IoStat stat(std::uint64_t reads, std::uint64_t sectors_read, std::uint64_t writes, std::uint64_t flushes) {
    IoStat s;
    s.fields = 17;
    s.values[0] = reads;
    s.values[2] = sectors_read;
    s.values[4] = writes;
    s.values[15] = flushes;
    s.values[16] = flushes ? 3 : 0;
    return s;
}

Tracing traced() {
    Tracing t;
    t.on = true;
    return t;
}

}  // namespace

TEST_CASE("figures: flushes-dropped is critical exactly for unflushed writes, write through, volatile cache") {
    struct Row {
        const char* write_cache;
        DeviceCache::Mode cache;
        std::uint64_t writes, flushes;
        bool at_risk;
    };
    const Row rows[] = {
        {"write through", DeviceCache::Mode::write_back, 200, 0, true},
        {"write through", DeviceCache::Mode::write_back, 0, 0, false},       // no writes: nothing at risk yet
        {"write through", DeviceCache::Mode::write_back, 200, 3, false},     // flushes still go through
        {"write back", DeviceCache::Mode::write_back, 200, 0, false},        // the kernel would send them
        {"write through", DeviceCache::Mode::write_through, 200, 0, false},  // nothing volatile
        {"write through", DeviceCache::Mode::none, 200, 0, false},
        {"write through", DeviceCache::Mode::unknown, 200, 0, false},  // a warning: cannot tell
    };
    for (const auto& r : rows) {
        CAPTURE(r.write_cache);
        CAPTURE(to_string(r.cache));
        CAPTURE(r.writes);
        CAPTURE(r.flushes);
        const auto d = stat(0, 0, r.writes, r.flushes);
        const auto f = device_figures(virtio(r.write_cache, r.cache), 60, &d, "", traced(), nullptr);
        CHECK(f.flush.at_risk == r.at_risk);
        const bool cannot_tell = r.cache == DeviceCache::Mode::unknown;
        CHECK(f.findings.size() == (r.at_risk || cannot_tell ? 1u : 0u));
        if (cannot_tell) {
            REQUIRE(f.findings.size() == 1);
            CHECK(f.findings.front().severity == report::Severity::warning);
            CHECK(f.findings.front().code == kFlushesDropped);
            CHECK(f.findings.front().message.find("cannot be told") != std::string::npos);
        }
        if (r.at_risk) {
            const auto& x = f.findings.front();
            CHECK(x.code == kFlushesDropped);
            CHECK(x.severity == report::Severity::critical);
            CHECK(x.message ==
                  "vdb: 200 writes and no flush in 60 s: queue/write_cache says write through over a "
                  "volatile write-back cache (cache_type \"write back\"), so the kernel drops every flush "
                  "and fsync no longer makes data durable");
            // The same fix as audit's write-through finding: a whole rule for this disk.
            CHECK(x.fix ==
                  "[[rule]]\nname = \"keep flushes\"\n[rule.match]\nkernel = \"vdb\"\n[rule.set]\nwrite_cache = "
                  "\"write back\"\n");
        }
        if (r.cache == DeviceCache::Mode::unknown)
            CHECK(f.flush.note.find("whether the device's own cache is volatile is not known") != std::string::npos);
    }
    // Kernels before 5.5 have no flush counter: no finding can be made.
    auto old = stat(0, 0, 200, 0);
    old.fields = 15;
    const auto f =
        device_figures(virtio("write through", DeviceCache::Mode::write_back), 60, &old, "", traced(), nullptr);
    CHECK_FALSE(f.flush.at_risk);
    CHECK(f.flush.note == "this kernel's stat has no flush counters (fields 16 and 17 came in 5.5)");
    // A bio-based device counts its flushes on its members; write through on
    // it drops them before the members see them.
    auto md = virtio("write through", DeviceCache::Mode::unknown);
    md.name = "dm-0";
    md.request_based = false;
    md.slaves = {"sda", "sdb"};
    const auto d = stat(0, 0, 200, 0);
    md.members_write_cache = {{"sda", "write back"}, {"sdb", "write through"}};
    const auto risk = device_figures(md, 60, &d, "", traced(), nullptr);
    CHECK(risk.flush.at_risk);
    CHECK(risk.flush.cache.mode == DeviceCache::Mode::write_back);
    REQUIRE(risk.findings.size() == 1);
    CHECK(risk.findings[0].severity == report::Severity::critical);
    CHECK(risk.findings[0].message ==
          "dm-0: 200 writes in 60 s: queue/write_cache says write through on a bio-based device, so the block layer "
          "drops every flush and FUA there before its members see them, and their caches are write back (sda \"write "
          "back\"): fsync no longer makes data durable");
    // Members whose queues say write through need no flush: nothing at risk.
    md.members_write_cache = {{"sda", "write through"}, {"sdb", "write through"}};
    const auto safe = device_figures(md, 60, &d, "", traced(), nullptr);
    CHECK_FALSE(safe.flush.at_risk);
    CHECK(safe.findings.empty());
    CHECK(safe.flush.note == "bio-based: its flushes are counted on its members (sda, sdb)");
    // A member that could not be read: cannot tell, a warning, not silence.
    md.members_write_cache = {{"sda", "write through"}};
    const auto blind = device_figures(md, 60, &d, "", traced(), nullptr);
    CHECK_FALSE(blind.flush.at_risk);
    REQUIRE(blind.findings.size() == 1);
    CHECK(blind.findings[0].severity == report::Severity::warning);
    CHECK(blind.flush.note.find("not read: sdb") != std::string::npos);
    // Write back on the stack itself: the flushes go down.
    md.write_cache = "write back";
    md.members_write_cache = {{"sda", "write back"}, {"sdb", "write back"}};
    const auto passes = device_figures(md, 60, &d, "", traced(), nullptr);
    CHECK_FALSE(passes.flush.at_risk);
    CHECK(passes.findings.empty());
}

TEST_CASE("figures: a zero of wbt activity says why") {
    const auto writes = stat(0, 0, 500, 10);
    const auto none = stat(0, 0, 0, 0);
    DeviceTally quiet;
    quiet.wbt.windows[1] = 40;
    auto s = virtio("write back", DeviceCache::Mode::write_back);
    CHECK(device_figures(s, 60, &writes, "", traced(), &quiet).wbt.zero_reason ==
          "no pressure: 40 windows ended, none over the target");
    CHECK(device_figures(s, 60, &none, "", traced(), nullptr).wbt.zero_reason == "no writes completed");
    Tracing off;
    off.why_not = "tracefs is not mounted at /sys/kernel/tracing";
    CHECK(device_figures(s, 60, &writes, "", off, nullptr).wbt.zero_reason ==
          "not traced: tracefs is not mounted at /sys/kernel/tracing");
    auto bfq = s;
    bfq.scheduler = "bfq";
    bfq.wbt_state = 3;
    bfq.wbt_lat_usec = "0";
    const auto b = device_figures(bfq, 60, &writes, "", traced(), nullptr);
    CHECK(b.wbt.state == "off");
    CHECK(b.wbt.zero_reason == "wbt is off: bfq turned the default off");
    auto bio = s;
    bio.request_based = false;
    bio.wbt_lat_usec.clear();
    CHECK(device_figures(bio, 60, &writes, "", traced(), nullptr).wbt.zero_reason ==
          "bio-based queue: no writeback throttling");
    Tracing no_wbt = traced();
    no_wbt.missing = {"wbt_lat", "wbt_step", "wbt_timer"};
    CHECK(device_figures(s, 60, &writes, "", no_wbt, nullptr).wbt.zero_reason == "this kernel has no wbt tracepoints");
}

TEST_CASE("figures: the sentences carry each figure and its proof counter") {
    DeviceTally t;
    t.wbt.violations = 23;
    t.wbt.max_violation_usec = 290100;
    t.wbt.step_down = 34;
    t.wbt.step_up = 31;
    t.wbt.windows[1] = 100;
    t.wbt.windows[4] = 3;
    t.rq.read_requests = 200;
    t.rq.read_sectors = 48000;
    t.rq.readahead_requests = 150;
    t.rq.readahead_sectors = 47000;
    t.rq.asked_pages = 200;  // fio's 200 mmap reads of 4 KiB: 1,600 sectors asked
    t.rq.faults = 200;
    t.rq.completed = 1000;
    t.rq.matched = 1000;
    t.rq.submitted = 990;
    t.rq.same_cpu = 0;
    t.rq.same_cpu_as_issue = 250;
    t.rq.completed_on = {1000};    // CPU0
    t.rq.submitted_on = {0, 990};  // CPU1
    const auto d = stat(200, 48720, 12345, 40);
    auto tracing = traced();
    const auto f = device_figures(virtio("write back", DeviceCache::Mode::write_back), 45, &d, "", tracing, &t);
    CHECK(wbt_sentence(f) ==
          "wbt stepped down 34 times and up 31 in 45 s (wbt_step), 23 latency violations (worst 290.1 ms) (wbt_lat); "
          "103 windows (wbt_timer: 100 ok, 3 exceeded, 0 unknown); beside 12345 writes completed (stat)");
    CHECK(readahead_sentence(f) ==
          "200 reads of 48720 sectors in 45 s (stat 1/3), 121.8 KiB a read request; read_ahead_kb 8192; read 30.4x "
          "what applications asked through the page cache (200 pages asked: 200 by page faults, "
          "mm_filemap_map_pages/fault; 0 by read calls, mm_filemap_get_pages); 97.9% of the read sectors issued came "
          "by the readahead path (150 of "
          "200 read requests carried A, block_rq_issue)");
    REQUIRE(f.readahead.amplification());
    CHECK(*f.readahead.amplification() == doctest::Approx(48720.0 / 1600.0));
    {
        // Traced a quarter of the window: the asks stand for four times as many.
        auto sampled = traced();
        sampled.requests_traced = 0.25;
        const auto q = device_figures(virtio("write back", DeviceCache::Mode::write_back), 45, &d, "", sampled, &t);
        CHECK(*q.readahead.amplification() == doctest::Approx(48720.0 / 6400.0));
        // A kernel without the filemap tracepoints (6.1): not known, and it says why.
        auto old_kernel = traced();
        old_kernel.missing = {"mm_filemap_fault", "mm_filemap_get_pages", "mm_filemap_map_pages"};
        const auto o = device_figures(virtio("write back", DeviceCache::Mode::write_back), 45, &d, "", old_kernel, &t);
        CHECK_FALSE(o.readahead.amplification());
        CHECK(readahead_sentence(o).find("; what applications asked is not known: this kernel has no "
                                         "mm_filemap_fault, mm_filemap_get_pages and mm_filemap_map_pages tracepoints "
                                         "(6.11 and later have them);") != std::string::npos);
        // Reads, none asked through a filesystem on it (O_DIRECT, the raw device).
        auto direct = t;
        direct.rq.asked_pages = direct.rq.faults = 0;
        const auto r =
            device_figures(virtio("write back", DeviceCache::Mode::write_back), 45, &d, "", traced(), &direct);
        CHECK_FALSE(r.readahead.amplification());
        CHECK(readahead_sentence(r).find("; no read through the page cache asked of a filesystem on it") !=
              std::string::npos);
    }
    CHECK(completion_sentence(f) ==
          "0.0% of 990 requests completed on the CPU that submitted them (block_getrq/block_rq_complete); submitted "
          "on CPU1 990; completed on CPU0 1000; 25.0% of 1000 on the CPU that issued them (block_rq_issue); beside "
          "12585 requests completed (stat); rq_affinity 1, 1 hardware queue");
    CHECK(flush_sentence(f) ==
          "40 flushes (3 ms flushing, stat 16/17) beside 12345 writes completed in 45 s; queue/write_cache \"write "
          "back\"; device cache write back (cache_type \"write back\")");
    // A lossy window says its traced counts are lower bounds.
    tracing.lost_events = 17;
    const auto lossy = device_figures(virtio("write back", DeviceCache::Mode::write_back), 45, &d, "", tracing, &t);
    CHECK(lossy.undercounted);
    CHECK(wbt_sentence(lossy).find("at least: events were lost") != std::string::npos);
    CHECK(completion_sentence(lossy).find("at least: events were lost") != std::string::npos);
    // Matched requests none of whose submitting CPU was traced (a kernel
    // without block_getrq): no share against the issuing CPU in its place.
    auto unknown = t;
    unknown.rq.submitted = 0;
    unknown.rq.same_cpu = 0;
    unknown.rq.submitted_on.clear();
    const auto u = device_figures(virtio("write back", DeviceCache::Mode::write_back), 45, &d, "", traced(), &unknown);
    CHECK_FALSE(u.completion.same_cpu_share());
    CHECK(completion_sentence(u).rfind("the submitting CPU of no completed request was traced (block_getrq); "
                                       "completed on CPU0 1000; 25.0% of 1000 on the CPU that issued them",
                                       0) == 0);
}

TEST_CASE("figures: the device's own cache, from cache_type, a loop's backing file, or the first-sight record") {
    const LoopBacking none;
    policy::DeviceFacts scsi;
    scsi.cache_type = "write back, no read (daft)";
    CHECK(device_cache(scsi, none, "").mode == DeviceCache::Mode::write_back);
    scsi.cache_type = "write through";
    CHECK(device_cache(scsi, none, "write back").mode == DeviceCache::Mode::write_through);  // cache_type wins
    scsi.cache_type = "none";
    CHECK(device_cache(scsi, none, "").mode == DeviceCache::Mode::none);
    policy::DeviceFacts loop;
    loop.stack = policy::Stack::loop;
    loop.loop_backing_file = "/var/lib/disk.img";
    const auto buffered = device_cache(loop, {"0", "vda", "vda1", "write through"}, "");
    CHECK(buffered.mode == DeviceCache::Mode::write_back);
    CHECK(buffered.source == "the backing file's page cache: the loop device does not use direct I/O");
    // With direct I/O the page cache is passed by, not the cache of the disk
    // under the file: that disk's queue decides, whatever the loop's own said.
    const auto direct = device_cache(loop, {"1", "vda", "vda1", "write back"}, "write through");
    CHECK(direct.mode == DeviceCache::Mode::write_back);
    CHECK(direct.source ==
          "the disk under the backing file (vda): queue/write_cache \"write back\"; direct I/O passes the page "
          "cache by, not the disk's cache");
    CHECK(device_cache(loop, {"1", "vda", "vda1", "write through"}, "").mode == DeviceCache::Mode::write_through);
    CHECK(device_cache(loop, {"1", "", "tmpfs", ""}, "").mode == DeviceCache::Mode::none);
    CHECK(device_cache(loop, {"1", "", "", ""}, "write back").mode == DeviceCache::Mode::unknown);
    policy::DeviceFacts nvme;
    const auto first = device_cache(nvme, none, "write back");
    CHECK(first.mode == DeviceCache::Mode::write_back);
    CHECK(first.source == "queue/write_cache when the device first appeared (\"write back\")");
    // A first record of write through may be someone's write: no proof of a safe cache.
    const auto doubtful = device_cache(nvme, none, "write through");
    CHECK(doubtful.mode == DeviceCache::Mode::unknown);
    CHECK(doubtful.source.find("which a udev rule, TuneD or a unit may have written before") != std::string::npos);
    CHECK(device_cache(nvme, none, "").mode == DeviceCache::Mode::unknown);
}

TEST_CASE("figures: a SCSI disk's cache is the drive's own page where read: temporary write through is at risk") {
    const LoopBacking none;
    policy::DeviceFacts scsi;
    // "temporary write through" written to cache_type: the kernel's view.
    scsi.cache_type = "write through";
    DriveCache drive;
    drive.asked = drive.read = drive.wce = true;
    const auto temporary = device_cache(scsi, none, "", drive);
    CHECK(temporary.mode == DeviceCache::Mode::write_back);
    CHECK(temporary.source ==
          "the drive's caching mode page: WCE=1, cache_type \"write through\": the kernel's view differs from the "
          "drive's (a \"temporary\" mode written to cache_type changes the kernel's view alone)");
    // The flushes dropped over that cache are the critical finding.
    CHECK(temporary.volatile_cache());
    // The drive's cache really off: write through, and no note.
    drive.wce = false;
    const auto off = device_cache(scsi, none, "", drive);
    CHECK(off.mode == DeviceCache::Mode::write_through);
    CHECK(off.source == "the drive's caching mode page: WCE=0, cache_type \"write through\"");
    // Not read: the kernel's view, and why the drive's was not had.
    DriveCache closed;
    closed.asked = true;
    closed.error = "cannot open /dev/sdb: Operation not permitted";
    const auto kernel_view = device_cache(scsi, none, "", closed);
    CHECK(kernel_view.mode == DeviceCache::Mode::write_through);
    CHECK(kernel_view.source ==
          "cache_type \"write through\" (the kernel's view; the drive's own page was not read: "
          "cannot open /dev/sdb: Operation not permitted)");
}

TEST_CASE("drive cache: WCE from a MODE SENSE(10) reply, with or without block descriptors") {
    // Header: mode data length 0x1a (26 bytes follow it), no block descriptors;
    // the caching page 08h, length 0x12, byte 2 = 0x04 (WCE).
    std::vector<unsigned char> reply = {0x00, 0x1a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x12,
                                        0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
                                        0x80, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    CHECK(caching_page_wce(reply) == std::optional<bool>(true));
    reply[10] = 0x01;  // RCD alone: no write cache
    CHECK(caching_page_wce(reply) == std::optional<bool>(false));
    reply[8] = 0x88;  // the PS bit set: still page 08h
    reply[10] = 0x05;
    CHECK(caching_page_wce(reply) == std::optional<bool>(true));
    // One block descriptor of 8 bytes before the page (a drive that ignores DBD).
    std::vector<unsigned char> with_bd(reply.begin(), reply.begin() + 8);
    with_bd[1] = 0x22;
    with_bd[7] = 0x08;
    with_bd.insert(with_bd.end(), 8, 0x00);
    with_bd.insert(with_bd.end(), reply.begin() + 8, reply.end());
    CHECK(caching_page_wce(with_bd) == std::optional<bool>(true));
    // Another page, a short reply, a reply cut by its own length field: no answer, never a guess.
    auto other = reply;
    other[8] = 0x0a;
    CHECK_FALSE(caching_page_wce(other));
    CHECK_FALSE(caching_page_wce(std::span<const unsigned char>(reply.data(), 10)));
    auto cut = reply;
    cut[1] = 0x08;  // 10 bytes in all: the page's flags byte is past its end
    CHECK_FALSE(caching_page_wce(cut));
    CHECK_FALSE(caching_page_wce({}));
}
