// SPDX-License-Identifier: MIT
// measure/trace_format, measure/ring_buffer and measure/events: a real
// capture (tests/data/measure) decoded exactly as the kernel printed it,
// hand-made pages for what a capture rarely shows, and the tally.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "measure/events.hpp"
#include "measure/figures.hpp"
#include "measure/ring_buffer.hpp"
#include "measure/trace_format.hpp"
#include "measure/tracefs.hpp"
#include "support/paths.hpp"

using namespace blkpolicy::measure;

namespace {

std::string data_file(const std::string& name) {
    std::ifstream in(std::string(blkpolicy::test::test_data_dir()) + "/measure/" + name, std::ios::binary);
    REQUIRE_MESSAGE(in, name);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

EventFormat format_of(const std::string& name) {
    auto f = parse_event_format(data_file(name + ".format"));
    REQUIRE_MESSAGE(f, name);
    return *f;
}

Decoder real_decoder() {
    Decoder d;
    d.add_format(TracedEvent::rq_issue, format_of("block_rq_issue"));
    d.add_format(TracedEvent::rq_complete, format_of("block_rq_complete"));
    d.add_format(TracedEvent::wbt_lat, format_of("wbt_lat"));
    d.add_format(TracedEvent::wbt_step, format_of("wbt_step"));
    d.add_format(TracedEvent::wbt_timer, format_of("wbt_timer"));
    d.set_printk_formats(parse_printk_formats(data_file("printk_formats")));
    return d;
}

// A hand-made ring-buffer page: 8-byte time stamp, 8-byte commit, events.
class PageBuilder {
public:
    explicit PageBuilder(std::uint64_t ts) { put64(ts), put64(0); }
    // A data record with a time delta; short ones as type_len, long ones with array[0].
    PageBuilder& record(std::uint32_t delta, const std::vector<std::uint8_t>& data, bool long_form = false) {
        std::vector<std::uint8_t> padded = data;
        while (padded.size() % 4) padded.push_back(0);
        if (!long_form && padded.size() <= 28 * 4) {
            put32(static_cast<std::uint32_t>(padded.size() / 4) | (delta << 5));
        } else {
            put32(0 | (delta << 5));
            put32(static_cast<std::uint32_t>(padded.size() + 4));
        }
        bytes_.insert(bytes_.end(), padded.begin(), padded.end());
        return *this;
    }
    PageBuilder& time_extend(std::uint64_t delta) {
        put32(30 | static_cast<std::uint32_t>((delta & ((1u << 27) - 1)) << 5));
        put32(static_cast<std::uint32_t>(delta >> 27));
        return *this;
    }
    PageBuilder& absolute(std::uint64_t ts) {  // an absolute time stamp: 59 bits, low 27 in the header
        put32(31 | static_cast<std::uint32_t>((ts & ((1u << 27) - 1)) << 5));
        put32(static_cast<std::uint32_t>(ts >> 27));
        return *this;
    }
    PageBuilder& discarded(std::uint32_t length) {  // a discarded record: padding with a length
        put32(29 | (1u << 5));
        put32(length);
        bytes_.insert(bytes_.end(), length - 4, 0);
        return *this;
    }
    std::vector<std::uint8_t> page(std::uint64_t flags = 0, std::size_t size = 4096) {
        auto out = bytes_;
        const std::uint64_t commit = (out.size() - 16) | flags;
        std::memcpy(out.data() + 8, &commit, 8);
        out.resize(std::max(size, out.size()), 0);
        return out;
    }

private:
    // (resize and memcpy: gcc 12 at -O3 takes an insert of a value's bytes
    // into the empty vector of the constructor for an overflow, a false
    // -Wstringop-overflow in the unity build of build-bench.)
    void put32(std::uint32_t v) { put(&v, sizeof v); }
    void put64(std::uint64_t v) { put(&v, sizeof v); }
    void put(const void* p, std::size_t n) {
        const auto at = bytes_.size();
        bytes_.resize(at + n);
        std::memcpy(bytes_.data() + at, p, n);
    }
    std::vector<std::uint8_t> bytes_;
};

// A record of an event laid out by its format: fields set by name.
std::vector<std::uint8_t> make_record(const EventFormat& f, const std::map<std::string, std::uint64_t>& numbers,
                                      const std::map<std::string, std::string>& strings = {}) {
    std::size_t size = 0;
    for (const auto& field : f.fields) size = std::max(size, field.offset + field.size);
    std::vector<std::uint8_t> r(size, 0);
    const auto type = static_cast<std::uint16_t>(f.id);
    std::memcpy(r.data(), &type, 2);
    for (const auto& [name, value] : numbers) {
        const auto* field = f.field(name);
        const std::string& field_name = name;  // (named again: clang 14 captures no structured binding)
        REQUIRE_MESSAGE(field, field_name);
        std::memcpy(r.data() + field->offset, &value, field->size);
    }
    for (const auto& [name, value] : strings) {
        const auto* field = f.field(name);
        const std::string& field_name = name;  // (named again: clang 14 captures no structured binding)
        REQUIRE_MESSAGE(field, field_name);
        std::memcpy(r.data() + field->offset, value.data(), std::min(value.size(), field->size));
    }
    return r;
}

// A 4 KiB read's request event, as the tally takes it.
Event read_request(TracedEvent kind, std::uint64_t ts, int cpu, std::uint64_t sector,
                   std::uint32_t dev = kernel_dev(7, 250)) {
    Event e;
    e.kind = kind;
    e.ts = ts;
    e.cpu = cpu;
    e.dev = dev;
    e.sector = sector;
    e.nr_sector = 8;
    e.read = true;
    return e;
}

}  // namespace

TEST_CASE("trace format: fields by name, offset and size, as the kernel describes them") {
    const auto issue = format_of("block_rq_issue");
    CHECK(issue.name == "block_rq_issue");
    CHECK(issue.id > 0);
    REQUIRE(issue.field("rwbs"));
    CHECK(issue.field("rwbs")->size == 10);
    REQUIRE(issue.field("dev"));
    CHECK(issue.field("dev")->size == 4);
    CHECK(issue.field("cmd"));  // "__data_loc char[] cmd"
    CHECK(issue.field("common_type")->offset == 0);
    const auto step = format_of("wbt_step");
    REQUIRE(step.field("msg"));  // "const char * msg": a pointer
    CHECK(step.field("msg")->size == 8);
    CHECK(step.field("step")->is_signed);
    CHECK_FALSE(parse_event_format("name: x\nformat:\n"));
    CHECK_FALSE(parse_event_format("garbage"));
    const auto printk = parse_printk_formats(data_file("printk_formats") + "not a line\n0xzz : \"x\"\n");
    CHECK(printk.size() == 2);
    bool down = false;
    for (const auto& [addr, text] : printk) down = down || text == "scale down";
    CHECK(down);
}

TEST_CASE("ring buffer: the real capture decodes to exactly the events the kernel printed") {
    // What the text says: (event, cpu, sector, nr_sector, rwbs) per line.
    using Row = std::tuple<std::string, int, std::uint64_t, std::uint32_t, std::string>;
    std::multiset<Row> expected;
    std::istringstream text(data_file("trace.txt"));
    const std::regex line(R"(\[(\d+)\].*\s(block_rq_issue|block_rq_complete): (\d+),(\d+) (\S+) .*?(\d+) \+ (\d+))");
    std::string l;
    while (std::getline(text, l)) {
        std::smatch m;
        if (!std::regex_search(l, m, line)) continue;
        expected.insert({m[2], std::stoi(m[1]), std::stoull(m[6]), static_cast<std::uint32_t>(std::stoul(m[7])), m[5]});
    }
    REQUIRE(expected.size() > 40);

    const auto decoder = real_decoder();
    const auto header = parse_event_format("name: header_page\nID: 0\n" + data_file("header_page"));
    REQUIRE(header);
    const std::size_t commit = header->field("commit")->size;
    std::multiset<Row> decoded;
    Tally tally;
    std::vector<Event> events;
    for (int cpu : {0, 1}) {
        const auto raw = data_file("cpu" + std::to_string(cpu) + ".raw");
        for (std::size_t at = 0; at + 4096 <= raw.size(); at += 4096) {
            std::vector<RawRecord> records;
            const auto page = std::span(reinterpret_cast<const std::uint8_t*>(raw.data()) + at, 4096);
            const auto r = parse_page(page, commit, records);
            CHECK(r.ok);
            CHECK_FALSE(r.missed_events);
            for (const auto& rec : records) {
                auto e = decoder.decode(rec, cpu);
                REQUIRE(e);
                events.push_back(*e);
            }
        }
    }
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
    // Time stamps grow within each CPU and the two CPUs' clocks agree (mono):
    // every completion comes after its issue.
    for (const auto& e : events) tally.add(e);
    tally.finish();
    for (const auto& e : events) {
        const std::string name = e.kind == TracedEvent::rq_issue ? "block_rq_issue" : "block_rq_complete";
        // rwbs compared by what it means: the row keeps the text's.
        for (auto it = expected.begin(); it != expected.end(); ++it) {
            const auto& [n, cpu, sector, nr, rwbs] = *it;
            const bool read = rwbs.find('R') != std::string::npos;
            const bool ra = rwbs.find('A') != std::string::npos;
            if (n == name && cpu == e.cpu && sector == e.sector && nr == e.nr_sector && read == e.read &&
                ra == e.readahead) {
                decoded.insert(*it);
                break;
            }
        }
    }
    CHECK(decoded == expected);
    CHECK(events.size() == expected.size());

    const auto dev = kernel_dev_from_text("7:" + data_file("device").substr(4, data_file("device").find(' ') - 4));
    REQUIRE(dev);
    REQUIRE(tally.devices().count(*dev));
    const auto& rq = tally.devices().at(*dev).rq;
    std::size_t issues = 0, completes = 0, ra = 0;
    for (const auto& [n, cpu, sector, nr, rwbs] : expected) {
        if (n == "block_rq_issue") ++issues, ra += rwbs.find('A') != std::string::npos;
        // Completions with data: a flush, and the end of a write's flush
        // sequence, complete with 0 sectors (there are both in the capture).
        if (n == "block_rq_complete" && nr > 0) ++completes;
    }
    CHECK(rq.issued == issues);
    CHECK(rq.completed == completes);
    CHECK(rq.readahead_requests == ra);
    CHECK(ra > 0);
    CHECK(rq.matched == completes);  // every completion's issue was in the window
}

TEST_CASE("ring buffer: long records, time extends, discarded records, lost-event flags, a bad length") {
    const auto issue = format_of("block_rq_issue");
    const auto rec =
        make_record(issue, {{"dev", kernel_dev(8, 0)}, {"sector", 2048}, {"nr_sector", 8}}, {{"rwbs", "RA"}});
    PageBuilder b(1000);
    b.record(5, rec).time_extend(1ULL << 30).record(7, rec, /*long_form=*/true).discarded(24).record(1, rec);
    std::vector<RawRecord> out;
    const auto built = b.page();  // the records point into it
    const auto r = parse_page(built, 8, out);
    CHECK(r.ok);
    CHECK_FALSE(r.missed_events);
    REQUIRE(out.size() == 3);
    CHECK(out[0].ts == 1005);
    CHECK(out[1].ts == 1005 + (1ULL << 30) + 7);
    CHECK(out[2].ts == out[1].ts + 1);
    CHECK(out[1].data.size() >= rec.size());
    const auto decoder = real_decoder();
    for (const auto& x : out) {
        const auto e = decoder.decode(x, 3);
        CAPTURE(x.data.size());
        CAPTURE(x.ts);
        REQUIRE(e);
        CHECK(e->kind == TracedEvent::rq_issue);
        CHECK(e->dev == kernel_dev(8, 0));
        CHECK(e->sector == 2048);
        CHECK(e->read);
        CHECK(e->readahead);
        CHECK(e->cpu == 3);
    }

    // The kernel lost events before this page, and said how many.
    PageBuilder lost(0);
    lost.record(1, rec);
    auto page = lost.page((1ULL << 31) | (1ULL << 30));
    const std::uint64_t missed = 42;
    const std::size_t length = 4 + ((rec.size() + 3) / 4) * 4;
    std::memcpy(page.data() + 16 + length, &missed, 8);
    out.clear();
    const auto r2 = parse_page(page, 8, out);
    CHECK(r2.missed_events);
    REQUIRE(r2.missed_count);
    CHECK(*r2.missed_count == 42);
    CHECK(out.size() == 1);

    // A length past the page: what came before is kept, the page is flagged.
    PageBuilder bad(0);
    bad.record(1, rec);
    auto broken = bad.page();
    const std::uint64_t too_long = 5000;
    std::memcpy(broken.data() + 8, &too_long, 8);
    out.clear();
    CHECK_FALSE(parse_page(broken, 8, out).ok);
    CHECK_FALSE(parse_page(std::span<const std::uint8_t>(broken.data(), 10), 8, out).ok);
}

TEST_CASE("ring buffer: absolute time stamps as the kernel widens them (rb_fix_abs_ts)") {
    const auto rec = make_record(format_of("block_rq_issue"), {{"dev", kernel_dev(8, 0)}, {"sector", 8}});
    std::vector<RawRecord> out;
    // An ordinary page stamp (top bits clear): an absolute stamp below it is
    // taken as it is, not moved 2^59 ns into the future.
    auto plain = PageBuilder(1000).record(5, rec).absolute(800).record(1, rec).page();
    REQUIRE(parse_page(plain, 8, out).ok);
    REQUIRE(out.size() == 2);
    CHECK(out[0].ts == 1005);
    CHECK(out[1].ts == 801);
    // A page stamp with top bits set lends them to the 59-bit stamp...
    constexpr std::uint64_t top = 0x08ULL << 56;
    out.clear();
    auto high = PageBuilder(top | 1000).absolute(2000).record(0, rec).page();
    REQUIRE(parse_page(high, 8, out).ok);
    REQUIRE(out.size() == 1);
    CHECK(out[0].ts == (top | 2000));
    // ... and a stamp that then falls below the page's has wrapped.
    out.clear();
    auto wrapped = PageBuilder(top | 1000).absolute(500).record(0, rec).page();
    REQUIRE(parse_page(wrapped, 8, out).ok);
    REQUIRE(out.size() == 1);
    CHECK(out[0].ts == (top | 500) + (1ULL << 59));
}

TEST_CASE("events: wbt records by device name, step direction from printk_formats or from the step") {
    const auto decoder = real_decoder();
    const auto lat = make_record(format_of("wbt_lat"), {{"lat", 83300}}, {{"name", "254:16"}});
    const auto timer = make_record(format_of("wbt_timer"), {{"status", 4}, {"step", 1}}, {{"name", "254:16"}});
    std::uint64_t down_addr = 0, up_addr = 0;
    for (const auto& [addr, text] : parse_printk_formats(data_file("printk_formats")))
        (text == "scale down" ? down_addr : up_addr) = addr;
    const auto& step_format = format_of("wbt_step");
    const auto step = [&](int s, std::uint64_t msg) {
        return make_record(step_format,
                           {{"step", static_cast<std::uint64_t>(static_cast<std::uint32_t>(s))}, {"msg", msg}},
                           {{"name", "254:16"}});
    };
    Tally tally;
    for (const auto& r : {lat, timer}) tally.add(*decoder.decode({1, r}, 0));
    tally.add(*decoder.decode({2, step(1, down_addr)}, 0));
    tally.add(*decoder.decode({3, step(2, down_addr)}, 0));
    tally.add(*decoder.decode({4, step(1, up_addr)}, 0));
    // A message address printk_formats does not name: the step tells (2 > 1: down).
    tally.add(*decoder.decode({5, step(2, 0xdead)}, 1));
    tally.add(*decoder.decode({6, step(-1, 0xdead)}, 1));
    const auto& w = tally.devices().at(kernel_dev(254, 16)).wbt;
    CHECK(w.violations == 1);
    CHECK(w.max_violation_usec == 83300);
    CHECK(w.windows[static_cast<std::size_t>(WbtWindow::exceeded)] == 1);
    CHECK(w.window_count() == 1);
    CHECK(w.step_down == 3);
    CHECK(w.step_up == 2);
    CHECK(w.step_unknown == 0);
    CHECK(w.deepest_step == 2);
    // A name that is not MAJ:MIN is not a device.
    CHECK_FALSE(decoder.decode({1, make_record(format_of("wbt_lat"), {{"lat", 1}}, {{"name", "vda"}})}, 0));
    CHECK(kernel_dev_from_text("8:0") == kernel_dev(8, 0));
    CHECK_FALSE(kernel_dev_from_text("8:"));
    CHECK_FALSE(kernel_dev_from_text(":1"));
    CHECK_FALSE(kernel_dev_from_text("8-0"));
    CHECK(devnum_text(kernel_dev(259, 3)) == "259:3");
}

TEST_CASE("tally: a completion read before its issue waits for it; one whose issue never comes is unmatched") {
    const auto ev = [](TracedEvent k, std::uint64_t ts, int cpu, std::uint64_t sector) {
        return read_request(k, ts, cpu, sector);
    };
    Tally t;
    // CPU1's page read first: the completion of a request CPU0 issued.
    t.add(ev(TracedEvent::rq_complete, 200, 1, 10));
    t.add(ev(TracedEvent::rq_issue, 100, 0, 10));
    t.settle(300);
    t.add(ev(TracedEvent::rq_issue, 400, 1, 20));
    t.add(ev(TracedEvent::rq_complete, 500, 1, 20));
    t.add(ev(TracedEvent::rq_complete, 600, 0, 99));  // issued before the window
    t.finish();
    const auto& rq = t.devices().at(kernel_dev(7, 250)).rq;
    CHECK(rq.issued == 2);
    CHECK(rq.completed == 3);
    CHECK(rq.matched == 2);
    CHECK(rq.same_cpu_as_issue == 1);
    CHECK(rq.submitted == 0);  // no block_getrq here: the submitting CPU is not known
    CHECK(rq.same_cpu == 0);
    CHECK(rq.completed_on.at(1) == 2);
    CHECK(rq.issued_on.at(0) == 1);
    CHECK(rq.issued_on.at(1) == 1);

    // Waiting gives up past the horizon.
    Tally late;
    late.add(ev(TracedEvent::rq_complete, 1'000, 1, 10));
    late.settle(10'000'000'000ULL);
    late.add(ev(TracedEvent::rq_issue, 500, 0, 10));
    late.finish();
    CHECK(late.devices().at(kernel_dev(7, 250)).rq.matched == 0);
}

TEST_CASE("tally: the submitting CPU is block_getrq's, not the issuing one") {
    const auto disk = kernel_dev(254, 16);
    const auto ev = [&](TracedEvent k, std::uint64_t ts, int cpu, std::uint64_t sector) {
        return read_request(k, ts, cpu, sector, disk);
    };
    Tally t;
    // With a scheduler: submitted on CPU1, dispatched by a kblockd worker on
    // CPU0, completed on CPU1 (rq_affinity 2 sent it back there).
    t.add(ev(TracedEvent::rq_getrq, 100, 1, 1000));
    t.add(ev(TracedEvent::rq_issue, 150, 0, 1000));
    t.add(ev(TracedEvent::rq_complete, 200, 1, 1000));
    // Issued on the submitting CPU (no scheduler, or a run of the queue in
    // the submitter), completed on the interrupt's CPU.
    t.add(ev(TracedEvent::rq_getrq, 300, 1, 2048));
    t.add(ev(TracedEvent::rq_issue, 310, 1, 2048));
    t.add(ev(TracedEvent::rq_complete, 400, 0, 2048));
    // A getrq at another sector (a front merge moved the request's start)
    // is nobody's: that request's submitter is unknown, not guessed.
    t.add(ev(TracedEvent::rq_getrq, 500, 1, 4096));
    t.add(ev(TracedEvent::rq_issue, 510, 0, 4088));
    t.add(ev(TracedEvent::rq_complete, 600, 0, 4088));
    // A getrq after the issue at the same sector is a later request's.
    t.add(ev(TracedEvent::rq_issue, 700, 0, 8192));
    t.add(ev(TracedEvent::rq_getrq, 710, 1, 8192));
    t.add(ev(TracedEvent::rq_complete, 800, 0, 8192));
    t.finish();
    REQUIRE(t.devices().size() == 1);
    const auto& rq = t.devices().at(disk).rq;
    CHECK(rq.issued == 4);
    CHECK(rq.matched == 4);
    CHECK(rq.submitted == 2);
    CHECK(rq.same_cpu == 1);           // the first: submitted and completed on CPU1
    CHECK(rq.same_cpu_as_issue == 2);  // the third and the fourth
    CHECK(rq.submitted_on.at(1) == 2);

    CompletionFigure c;
    c.traced = true;
    c.counts = rq;
    REQUIRE(c.same_cpu_share());
    CHECK(*c.same_cpu_share() == doctest::Approx(0.5));
    CHECK(*c.issuing_cpu_share() == doctest::Approx(0.5));
}

TEST_CASE("decode: block_getrq as this kernel lays it out (no bytes field: rwbs sits earlier than in rq_issue)") {
    Decoder d = real_decoder();
    const auto getrq = format_of("block_getrq");
    d.add_format(TracedEvent::rq_getrq, getrq);
    const auto rec = make_record(getrq, {{"dev", kernel_dev(8, 1)}, {"sector", 2048}, {"nr_sector", 8}},
                                 {{"rwbs", "RA"}, {"comm", "fio"}});
    const auto e = d.decode({5, rec}, 3);
    REQUIRE(e);
    CHECK(e->kind == TracedEvent::rq_getrq);
    CHECK(e->dev == kernel_dev(8, 1));
    CHECK(e->sector == 2048);
    CHECK(e->nr_sector == 8);
    CHECK(e->cpu == 3);
    CHECK(e->read);
    CHECK(e->readahead);
}

TEST_CASE("decode and tally: what applications asked through the page cache, per file system's disk") {
    Decoder d = real_decoder();
    d.add_format(TracedEvent::fm_fault, format_of("mm_filemap_fault"));
    d.add_format(TracedEvent::fm_get_pages, format_of("mm_filemap_get_pages"));
    d.add_format(TracedEvent::fm_map_pages, format_of("mm_filemap_map_pages"));
    const auto disk = kernel_dev(259, 0), part = kernel_dev(259, 1), other = kernel_dev(0, 45);
    const auto fault = [&](std::uint32_t dev, std::uint64_t ino, std::uint64_t index, int cpu = 0) {
        const auto e = d.decode(
            {1, make_record(format_of("mm_filemap_fault"), {{"s_dev", dev}, {"i_ino", ino}, {"index", index}})}, cpu);
        REQUIRE(e);
        return *e;
    };
    const auto get_pages = [&](std::uint32_t dev, std::uint64_t ino, std::uint64_t index, std::uint64_t last) {
        const auto e =
            d.decode({1, make_record(format_of("mm_filemap_get_pages"),
                                     {{"s_dev", dev}, {"i_ino", ino}, {"index", index}, {"last_index", last}})},
                     0);
        REQUIRE(e);
        return *e;
    };
    const auto map_pages = [&](int cpu, std::uint32_t dev, std::uint64_t ino, std::uint64_t index, std::uint64_t last) {
        auto e = d.decode({1, make_record(format_of("mm_filemap_map_pages"),
                                          {{"s_dev", dev}, {"i_ino", ino}, {"index", index}, {"last_index", last}})},
                          cpu);
        REQUIRE(e);
        return *e;
    };
    const auto f = fault(part, 12, 777);
    CHECK(f.kind == TracedEvent::fm_fault);
    CHECK(f.dev == part);
    CHECK(f.ino == 12);
    CHECK(f.index == 777);
    const auto g = get_pages(disk, 13, 0, 255);
    CHECK(g.kind == TracedEvent::fm_get_pages);
    CHECK(g.last_index == 255);
    // A range that ends before it starts is not one.
    CHECK_FALSE(d.decode({1, make_record(format_of("mm_filemap_get_pages"),
                                         {{"s_dev", disk}, {"i_ino", 1}, {"index", 9}, {"last_index", 8}})},
                         0));

    Tally t;
    t.set_partitions({{part, disk}});
    // mmap: one page per fault, on the partition's file system: the disk's.
    // Each fault maps the cached pages around it first; where its own page
    // was not cached, the file's fault handler follows on the same CPU.
    for (std::uint64_t i = 0; i < 100; ++i) {
        t.add(map_pages(0, part, 12, i * 97 + 20000, i * 97 + 20015));  // fault-around mapped the page: one ask
        t.add(map_pages(1, part, 12, i * 89, i * 89 + 15));
        t.add(fault(part, 12, i * 89 + 3, 1));  // not cached: the same fault, on CPU 1; it reads the page
        // and is retried once the page is in: fault-around maps it, on
        // whichever CPU the task runs then.
        t.add(map_pages(static_cast<int>(i % 2), part, 12, i * 89, i * 89 + 15));
    }
    // One read() of 1 MiB (256 pages): filemap_read asks [0, 255], then the
    // rest as it copies ([16, 255], [48, 255], ...): 256 pages, once.
    t.add(get_pages(disk, 13, 0, 255));
    t.add(get_pages(disk, 13, 16, 255));
    t.add(get_pages(disk, 13, 48, 255));
    t.add(get_pages(disk, 13, 255, 255));
    // The next read of the same file, and one of another file in between.
    t.add(get_pages(disk, 14, 0, 3));
    t.add(get_pages(disk, 13, 256, 511));
    // Reading the same range again is asking again.
    t.add(get_pages(disk, 13, 256, 511));
    // A fault with no fault-around before it (fault_around_bytes 4096, a
    // private write fault) is one ask; so is one for a page outside the
    // last fault-around's range, or another file's.
    t.add(fault(disk, 13, 9000));
    t.add(fault(disk, 13, 9000));  // its retry, without fault-around
    t.add(map_pages(0, disk, 13, 100, 115));
    t.add(fault(disk, 13, 116));
    t.add(map_pages(0, disk, 13, 200, 215));
    t.add(fault(disk, 14, 200));
    // Another file system's (an anonymous device: btrfs, tmpfs) is not the disk's.
    t.add(fault(other, 5, 0));
    const auto& rq = t.devices().at(disk).rq;
    CHECK(rq.faults == 200 + 5);
    CHECK(rq.asked_pages == 200 + 5 + 256 + 4 + 256 + 256);
    CHECK(t.devices().at(other).rq.asked_pages == 1);
    CHECK_FALSE(t.devices().count(part));
    // A new window: the counts start again; the partitions stay known.
    t.reset_counts();
    t.add(fault(part, 12, 1));
    CHECK(t.devices().at(disk).rq.asked_pages == 1);
}

TEST_CASE("tracefs: instance names carry the PID namespace; only blkpolicy's own names parse") {
    const InstanceOwner me{4026531836, 1234};
    const auto name = instance_name(me, 7);
    CHECK(name == "blkpolicy-4026531836-1234-7");
    REQUIRE(instance_owner(name));
    CHECK(*instance_owner(name) == me);
    // The same PID in another namespace: another name, another owner.
    const InstanceOwner container{4026532999, 1234};
    CHECK(instance_name(container, 7) != name);
    CHECK_FALSE(*instance_owner(instance_name(container, 7)) == me);
    // Names that are not this scheme's: never taken for a dead process's.
    for (const char* other :
         {"blkpolicy-1234-0", "blkpolicy-", "blkpolicy-1-2-", "blkpolicy-1-2-3-4", "blkpolicy-x-2-3", "blkpolicy-0-2-3",
          "blkpolicy-1-0-3", "tuned-1-2-3", "blkpolicy-1-99999999999-3"})
        CHECK_MESSAGE(!instance_owner(other), other);
    // This process's namespace, as /proc tells it.
    CHECK(own_pid_namespace() != 0);
}

TEST_CASE("tracefs: a sysfs CPU list, as devices/system/cpu/online gives it") {
    CHECK(parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
    CHECK(parse_cpu_list("0\n") == std::vector<int>{0});
    CHECK(parse_cpu_list("\n") == std::vector<int>{});
    CHECK(parse_cpu_list("2,0-1") == std::vector<int>{0, 1, 2});
    for (const char* bad : {"0-", "-1", "3-1", "0,,1", "0,", "a", "0-1x", "1 2"})
        CHECK_MESSAGE(!parse_cpu_list(bad), bad);
}

TEST_CASE("tally: an issue whose completion was never traced is not paired with a later request's") {
    const auto ev = [](TracedEvent k, std::uint64_t ts, std::uint64_t sector) {
        return read_request(k, ts, 0, sector);
    };
    constexpr std::uint64_t s = 1'000'000'000ULL;
    const auto rq = [](const Tally& t) { return t.devices().at(kernel_dev(7, 250)).rq; };
    {  // In flight past the horizon: expired at a settle, unmatched.
        Tally t;
        t.add(ev(TracedEvent::rq_issue, 1 * s, 8));
        t.settle(1 * s + Tally::kInFlightHorizon + 3 * s);
        t.add(ev(TracedEvent::rq_complete, 1 * s + Tally::kInFlightHorizon + 4 * s, 8));
        CHECK(rq(t).completed == 1);
        CHECK(rq(t).matched == 0);
        // A request within the horizon still pairs.
        t.add(ev(TracedEvent::rq_issue, 70 * s, 16));
        t.settle(75 * s);
        t.add(ev(TracedEvent::rq_complete, 76 * s, 16));
        CHECK(rq(t).matched == 1);
    }
    {  // Events lost between them (a page flagged missed events): no pair across the gap.
        Tally t;
        t.add(ev(TracedEvent::rq_issue, 1 * s, 8));
        t.gap(2 * s);
        t.add(ev(TracedEvent::rq_complete, 3 * s, 8));
        CHECK(rq(t).matched == 0);
        // Both after the gap: paired; a completion read first, its issue before the gap: not.
        t.add(ev(TracedEvent::rq_issue, 4 * s, 24));
        t.add(ev(TracedEvent::rq_complete, 5 * s, 24));
        CHECK(rq(t).matched == 1);
        t.add(ev(TracedEvent::rq_complete, 3 * s, 32));
        t.add(ev(TracedEvent::rq_issue, 1 * s, 32));
        CHECK(rq(t).matched == 1);
    }
    {  // The request tracepoints off a while (sampling): what was in flight is forgotten.
        Tally t;
        t.add(ev(TracedEvent::rq_issue, 1 * s, 8));
        t.forget_in_flight();
        t.add(ev(TracedEvent::rq_complete, 12 * s, 8));
        CHECK(rq(t).matched == 0);
        CHECK(rq(t).completed == 1);
    }
}

namespace {
std::uint32_t swap32(std::uint32_t v) { return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24); }
std::uint64_t swap64(std::uint64_t v) {
    return (static_cast<std::uint64_t>(swap32(static_cast<std::uint32_t>(v))) << 32) |
           swap32(static_cast<std::uint32_t>(v >> 32));
}
// A little-endian kernel's page as a big-endian kernel would have written
// it: the words byte-swapped, each entry header's bit fields from the top.
// (The records' own bytes are left: parse_page does not read them.)
std::vector<std::uint8_t> as_big_endian(std::span<const std::uint8_t> page, std::size_t commit_size) {
    std::vector<std::uint8_t> out(page.begin(), page.end());
    const auto get32 = [&](std::size_t at) {
        std::uint32_t v;
        std::memcpy(&v, page.data() + at, 4);
        return v;
    };
    const auto put32 = [&](std::size_t at, std::uint32_t v) {
        v = swap32(v);
        std::memcpy(out.data() + at, &v, 4);
    };
    std::uint64_t ts, commit;
    std::memcpy(&ts, page.data(), 8);
    ts = swap64(ts);
    std::memcpy(out.data(), &ts, 8);
    if (commit_size == 8) {
        std::memcpy(&commit, page.data() + 8, 8);
        const auto swapped = swap64(commit);
        std::memcpy(out.data() + 8, &swapped, 8);
    } else {
        commit = get32(8);
        put32(8, static_cast<std::uint32_t>(commit));
    }
    const std::size_t header = 8 + commit_size, length = commit & ((1ULL << 30) - 1);
    for (std::size_t at = header; at + 4 <= header + length;) {
        const std::uint32_t h = get32(at);
        const unsigned type_len = h & 0x1f;
        const std::uint32_t delta = h >> 5;
        put32(at, (type_len << 27) | delta);
        if (type_len == 29 && delta == 0) break;
        if (type_len >= 29 || type_len == 0) put32(at + 4, get32(at + 4));
        at += type_len == 29   ? 4 + get32(at + 4)
              : type_len >= 30 ? 8
              : type_len == 0  ? 4 + get32(at + 4)
                               : 4 + type_len * 4u;
    }
    return out;
}
}  // namespace

TEST_CASE("ring buffer: a big-endian kernel's pages decode to the same records (the capture, byte-swapped)") {
    const auto header = parse_event_format("name: header_page\nID: 0\n" + data_file("header_page"));
    REQUIRE(header);
    const std::size_t commit = header->field("commit")->size;
    std::size_t records = 0;
    for (int cpu : {0, 1}) {
        const auto raw = data_file("cpu" + std::to_string(cpu) + ".raw");
        for (std::size_t at = 0; at + 4096 <= raw.size(); at += 4096) {
            const auto page = std::span(reinterpret_cast<const std::uint8_t*>(raw.data()) + at, 4096);
            std::vector<RawRecord> little, big;
            REQUIRE(parse_page(page, commit, little, std::endian::little).ok);
            const auto swapped = as_big_endian(page, commit);
            REQUIRE(swapped != std::vector<std::uint8_t>(page.begin(), page.end()));
            const auto r = parse_page(swapped, commit, big, std::endian::big);
            CHECK(r.ok);
            REQUIRE(big.size() == little.size());
            for (std::size_t i = 0; i < big.size(); ++i) {
                CHECK(big[i].ts == little[i].ts);
                CHECK(big[i].data.size() == little[i].data.size());
                // The same bytes, at the same place in their page.
                CHECK(big[i].data.data() - swapped.data() == little[i].data.data() - page.data());
            }
            // Read as little-endian, the swapped page is not the same page.
            std::vector<RawRecord> wrong;
            parse_page(swapped, commit, wrong, std::endian::little);
            CHECK((wrong.size() != little.size() || (!wrong.empty() && wrong[0].ts != little[0].ts)));
            records += big.size();
        }
    }
    CHECK(records > 40);
    // A hand-made page with a time extend, a long record and a discarded one, both ways.
    const auto rec = make_record(format_of("block_rq_issue"), {{"dev", kernel_dev(8, 0)}, {"sector", 8}});
    auto built = PageBuilder(1000)
                     .record(5, rec)
                     .time_extend(1ULL << 30)
                     .record(7, rec, true)
                     .discarded(24)
                     .record(1, rec)
                     .page();
    std::vector<RawRecord> little, big;
    REQUIRE(parse_page(built, 8, little, std::endian::little).ok);
    const auto swapped = as_big_endian(built, 8);
    REQUIRE(parse_page(swapped, 8, big, std::endian::big).ok);
    REQUIRE(big.size() == 3);
    REQUIRE(little.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) CHECK(big[i].ts == little[i].ts);
}
