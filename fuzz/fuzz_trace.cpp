// SPDX-License-Identifier: MIT
// libFuzzer target: any bytes as a page of trace_pipe_raw (the first byte
// picks the size of the header's commit field), decoded with the real
// formats of the captured kernel (tests/data/measure) and tallied; and as
// the text of a stat file, a format file and printk_formats. Nothing may
// read outside the page, and the tally's counts must stay consistent.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "measure/events.hpp"
#include "measure/ring_buffer.hpp"
#include "measure/stat.hpp"
#include "measure/trace_format.hpp"

using namespace blkpolicy::measure;

namespace {
std::string data_file(const std::string& name) {
    std::ifstream in(std::string(BLKPOLICY_SOURCE_DIR) + "/tests/data/measure/" + name);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const Decoder& decoder() {
    static const Decoder d = [] {
        Decoder x;
        const std::pair<TracedEvent, const char*> formats[] = {{TracedEvent::rq_issue, "block_rq_issue"},
                                                               {TracedEvent::rq_complete, "block_rq_complete"},
                                                               {TracedEvent::wbt_lat, "wbt_lat"},
                                                               {TracedEvent::wbt_step, "wbt_step"},
                                                               {TracedEvent::wbt_timer, "wbt_timer"},
                                                               {TracedEvent::rq_getrq, "block_getrq"},
                                                               {TracedEvent::fm_fault, "mm_filemap_fault"},
                                                               {TracedEvent::fm_get_pages, "mm_filemap_get_pages"},
                                                               {TracedEvent::fm_map_pages, "mm_filemap_map_pages"}};
        for (const auto& [kind, name] : formats)
            if (auto f = parse_event_format(data_file(std::string(name) + ".format"))) x.add_format(kind, *f);
        x.set_printk_formats(parse_printk_formats(data_file("printk_formats")));
        return x;
    }();
    return d;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::size_t commit = (data[0] & 1) ? 8 : 4;
    // A copy of the exact size: ASan sees any read past the page.
    const std::vector<std::uint8_t> page(data + 1, data + size);
    std::vector<RawRecord> records;
    (void)parse_page(page, commit, records);
    Tally tally;
    for (const auto& r : records) {
        if (r.data.data() < page.data() || r.data.data() + r.data.size() > page.data() + page.size()) __builtin_trap();
        if (auto e = decoder().decode(r, static_cast<int>(r.ts % 4))) tally.add(*e);
    }
    tally.settle(~0ULL);
    tally.finish();
    for (const auto& [dev, d] : tally.devices()) {
        if (d.rq.matched > d.rq.completed || d.rq.submitted > d.rq.matched || d.rq.same_cpu > d.rq.submitted ||
            d.rq.same_cpu_as_issue > d.rq.matched)
            __builtin_trap();
        if (d.rq.readahead_sectors > d.rq.read_sectors) __builtin_trap();
    }
    const std::string text(reinterpret_cast<const char*>(data), size);
    if (auto s = parse_stat(text); s && (s->fields < 11 || s->fields > kStatFields)) __builtin_trap();
    (void)parse_event_format(text);
    (void)parse_printk_formats(text);
    (void)kernel_dev_from_text(text);
    return 0;
}
