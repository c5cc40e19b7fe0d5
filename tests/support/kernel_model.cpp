// SPDX-License-Identifier: MIT
#include "support/kernel_model.hpp"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "policy/attributes.hpp"
#include "udev/sysfs_text.hpp"
#include "util/text.hpp"

namespace blkpolicy::test {

using util::parse_int;
using util::trim;

namespace {
const std::map<std::string, std::map<std::string, std::string>> kIoschedDefaults = {
    {"mq-deadline", {{"fifo_batch", "16"}, {"read_expire", "500"}, {"write_expire", "5000"}}},
    {"bfq", {{"slice_idle", "8"}, {"low_latency", "1"}}},
    {"kyber", {{"read_lat_nsec", "2000000"}, {"write_lat_nsec", "10000000"}}},
};
}  // namespace

namespace {
// "block/NAME/queue/x" -> "queue/x"
std::string attr_of(const std::string& rel) {
    const auto first = rel.find('/');
    const auto second = first == std::string::npos ? first : rel.find('/', first + 1);
    return second == std::string::npos ? std::string() : rel.substr(second + 1);
}
}  // namespace

udev::ReadResult KernelModelSysfs::read(const std::string& rel) const {
    reads.push_back(rel);
    const auto attr = attr_of(rel);
    if (rel.rfind("block/", 0) == 0 && !attr.empty()) {
        if (auto f = read_fail.find(attr); f != read_fail.end()) return {{}, f->second};
        if (vanish.count(attr)) {
            std::filesystem::remove(root() / rel);
            return {{}, ENOENT};
        }
        if (short_read.count(attr)) {
            auto r = udev::Sysfs::read(rel);
            r.value = r.value.substr(0, r.value.size() / 2);
            return r;
        }
    }
    return udev::Sysfs::read(rel);
}

int KernelModelSysfs::write(const std::string& rel, std::string_view value) {
    // rel = block/NAME/ATTRPATH
    const auto first = rel.find('/');
    const auto second = rel.find('/', first + 1);
    const std::string dev = rel.substr(first + 1, second - first - 1);
    const std::string attr = rel.substr(second + 1);
    if (auto hook = before_write.find(attr); hook != before_write.end()) hook->second();
    int err = 0;
    if (auto b = busy.find(attr); b != busy.end() && b->second > 0) {
        --b->second;  // another writer still holds the queue
        err = EBUSY;
    } else if (auto f = fail.find(attr); f != fail.end()) {
        err = f->second;
    } else {
        err = simulate(dev, attr, value);
    }
    writes.push_back({attr, std::string(value), err});
    return err;
}

void KernelModelSysfs::sync_debugfs(const std::string& dev) {
    if (!debugfs) return;
    const auto dir = root() / ("kernel/debug/block/" + dev + "/rqos/wbt");
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "enabled") << wbt_state(dev) << '\n';
    forget_mounts();  // debugfs may have just appeared under the root
}

int KernelModelSysfs::simulate(const std::string& dev, const std::string& attr, std::string_view value) {
    const std::string q = "block/" + dev + "/queue/";
    auto get = [&](const std::string& a) { return trim(read(q + a).value); };
    auto put = [&](const std::string& a, const std::string& v) { return udev::Sysfs::write(q + a, v); };
    if (!exists("block/" + dev + "/" + attr)) return ENOENT;

    auto& wbt = wbt_[dev];
    if (wbt.lat < 0) wbt.lat = parse_int(get("wbt_lat_usec")).value_or(0);

    if (attr == "queue/scheduler") {
        auto line = udev::parse_scheduler_line(get("scheduler"));
        const std::string want = trim(value);
        if (std::find(line.offered.begin(), line.offered.end(), want) == line.offered.end()) {
            if (!loadable_schedulers.count(want)) return EINVAL;  // elevator_find_get: no such module
            line.offered.push_back(want);                         // request_module("%s-iosched") loaded it
        }
        if (want == line.active) return 0;
        std::string out;
        for (const auto& s : line.offered) out += (s == want ? "[" + s + "]" : s) + " ";
        put("scheduler", trim(out));
        const auto tags = parse_int(trim(udev::Sysfs::read("block/" + dev + "/mq/0/nr_tags").value)).value_or(128);
        const auto nr = kernel::nr_requests_default(tags, want == "none");
        put("nr_requests", std::to_string(nr));
        if (exists(q + "async_depth")) put("async_depth", std::to_string(kernel::async_depth_default(nr, want)));
        std::filesystem::remove_all(root() / (q + "iosched"));
        if (auto d = kIoschedDefaults.find(want); d != kIoschedDefaults.end()) {
            std::filesystem::create_directories(root() / (q + "iosched"));
            for (const auto& [k, v] : d->second) std::ofstream(root() / (q + "iosched/" + k)) << v << '\n';
        }
        if (want == "bfq" && wbt.state == 1) {
            wbt.state = 3;
            if (kernel::bfq_off_wbt_reads_zero(kernel)) put("wbt_lat_usec", "0");
        } else if (line.active == "bfq" && wbt.state == 3) {
            wbt.state = 1;
            put("wbt_lat_usec", std::to_string(wbt.lat));
        }
        sync_debugfs(dev);
        return 0;
    }
    if (attr == "queue/wbt_lat_usec") {
        auto v = parse_int(value);
        if (!v || *v < -1) return EINVAL;
        long n = static_cast<long>(*v);
        if (n == -1) n = kernel::wbt_default_usec(get("rotational") == "1");
        if (n == wbt.lat) return 0;  // the retained value: silently nothing
        wbt.lat = n;
        wbt.state = n == 0 ? 4 : 2;
        sync_debugfs(dev);
        return put("wbt_lat_usec", std::to_string(n));
    }
    if (attr == "queue/nr_requests" && exists(q + "async_depth")) {
        auto v = parse_int(value);
        if (!v || *v < 0) return EINVAL;
        const auto nr = std::max<std::int64_t>(*v, 4);
        const auto old = parse_int(get("nr_requests")).value_or(nr);
        put("async_depth",
            std::to_string(kernel::async_depth_rescaled(parse_int(get("async_depth")).value_or(old), old, nr)));
        return put("nr_requests", std::to_string(nr));
    }
    if (attr == "queue/async_depth") {
        auto v = parse_int(value);
        auto shown = v ? kernel::async_depth_readback(*v, parse_int(get("nr_requests")).value_or(0),
                                                      udev::parse_scheduler_line(get("scheduler")).active)
                       : std::nullopt;
        if (!shown) return EINVAL;
        return put("async_depth", std::to_string(*shown));
    }
    if (attr == "queue/read_ahead_kb") {
        auto v = parse_int(value);
        if (!v || *v < 0) return EINVAL;
        return put("read_ahead_kb", std::to_string(kernel::readahead_readback(*v, 4096)));
    }
    std::string written(value);
    if (attr == "queue/write_cache") {  // reads back as one of two words; the write is a limits commit
        auto shown = kernel::write_cache_readback(written);
        if (!shown) return EINVAL;
        written = *shown;
    }
    if (attr == "queue/rq_affinity") {
        auto v = parse_int(value);
        if (!v || *v < 0) return EINVAL;
        if (kernel::rq_affinity_write_ignored(*v)) return 0;
        return put("rq_affinity", std::to_string(*v));
    }
    if (attr == "queue/max_sectors_kb") {
        auto v = parse_int(value);
        auto hw = parse_int(get("max_hw_sectors_kb"));
        if (!v || (hw && *v > *hw)) return EINVAL;
    }
    int err = udev::Sysfs::write("block/" + dev + "/" + attr, written);
    if (err) return err;
    // A limits commit (the attributes the product's table marks) recomputes
    // read_ahead_kb the way the modelled kernel does (the kernel rows).
    const auto spec = attr.rfind("queue/", 0) == 0 ? policy::find_attribute(attr.substr(6)) : std::nullopt;
    if (spec && spec->path == attr && spec->cause == kernel::WriteCause::limits_commit &&
        kernel::disturbed_by(kernel::WriteCause::limits_commit, policy::Key::read_ahead_kb, kernel)) {
        const auto computed =
            kernel::kernel_readahead_kb(kernel, get("rotational") == "1", parse_int(get("optimal_io_size")).value_or(0),
                                        parse_int(get("max_sectors_kb")).value_or(0));
        const auto cur = parse_int(get("read_ahead_kb")).value_or(0);
        switch (kernel::readahead_on_commit(kernel)) {
            case kernel::ReadaheadOnCommit::untouched:
                break;
            case kernel::ReadaheadOnCommit::reset:
                put("read_ahead_kb", std::to_string(*computed));
                break;
            case kernel::ReadaheadOnCommit::raise:
            case kernel::ReadaheadOnCommit::unknown:  // modelled as the later behaviour
                put("read_ahead_kb", std::to_string(std::max(cur, *computed)));
                break;
        }
    }
    return 0;
}

}  // namespace blkpolicy::test
