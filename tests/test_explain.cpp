// SPDX-License-Identifier: MIT
// explain's derivations of the kernel's own defaults, in process: per driver,
// per VPD page, per backing store, per stack and per kernel version. The
// guest tests (tests/vm/test_devices.py) check the same derivations against
// what real 6.1, 6.12 and 7.3 kernels set on real disks.
#include <doctest/doctest.h>

#include "kernel/rows.hpp"
#include "report/explain.hpp"

using namespace blkpolicy::policy;
using namespace blkpolicy::kernel;
using namespace blkpolicy::report;

namespace {

DeviceFacts disk(const std::string& driver, Stack stack = Stack::none) {
    DeviceFacts f;
    f.name = "x";
    f.driver = driver;
    f.stack = stack;
    return f;
}

std::map<std::string, Explanation> explain(const DeviceFacts& f, const Values& v, const ExplainContext& ctx) {
    auto x = explain_device(f, v, DevicePlan{}, ctx, StackView{});
    std::map<std::string, Explanation> out;
    for (auto& e : x.attributes) out[e.attribute] = e;
    return out;
}

ExplainContext kernel_at(int major, int minor, int patch = 0) {
    ExplainContext c;
    c.kernel = KernelVersion{major, minor, patch};
    c.hw_queues = 2;
    c.hw_tags = 256;
    return c;
}

const Values kSpinning = {{"rotational", "1"},
                          {"scheduler", "none"},
                          {"nr_requests", "256"},
                          {"wbt_lat_usec", "75000"},
                          {"read_ahead_kb", "128"}};

}  // namespace

TEST_CASE("explain: the rotational flag a driver sets at registration") {
    auto ctx = kernel_at(6, 12, 117);
    CHECK(explain(disk("virtio_blk"), kSpinning, ctx)["rotational"].kernel_default == "1");
    CHECK(explain(disk("nvme"), kSpinning, ctx)["rotational"].kernel_default == "0");

    SUBCASE("sd: VPD page B1h decides") {
        ctx.rotation_rate = 1;  // non-rotating medium (an SSD, scsi-hd rotation_rate=1)
        auto e = explain(disk("sd"), kSpinning, ctx)["rotational"];
        CHECK(e.kernel_default == "0");
        CHECK(e.derivation ==
              "sd read medium rotation rate 1 (non-rotating) from VPD page B1h; sd revalidation sets "
              "it again");
        ctx.rotation_rate = 7200;
        CHECK(explain(disk("sd"), kSpinning, ctx)["rotational"].kernel_default == "1");
        ctx.rotation_rate = 0;  // not reported (QEMU HARDDISK)
        CHECK(explain(disk("sd"), kSpinning, ctx)["rotational"].kernel_default == "1");
        ctx.rotation_rate.reset();  // no page at all
        CHECK(explain(disk("sd"), kSpinning, ctx)["rotational"].derivation.rfind(
                  "sd found no Block Device Characteristics VPD page (B1h)", 0) == 0);
    }
    SUBCASE("loop: from the backing file's device, or the creation flag when unbound") {
        auto f = disk("", Stack::loop);
        f.loop_backing_file = "/var/tmp/img";
        ctx.backing_known = true;
        ctx.backing_store = "vda";
        ctx.backing_rotational = true;
        CHECK(explain(f, kSpinning, ctx)["rotational"].kernel_default == "1");
        ctx.backing_store = "tmpfs";
        ctx.backing_rotational.reset();
        auto e = explain(f, kSpinning, ctx)["rotational"];
        CHECK(e.kernel_default == "0");
        CHECK(e.derivation == "the backing file is on tmpfs, which has no block device: non-rotational");
        f.loop_backing_file.clear();
        CHECK(explain(f, kSpinning, kernel_at(6, 1))["rotational"].kernel_default == "1");
        CHECK(explain(f, kSpinning, kernel_at(6, 12))["rotational"].kernel_default == "0");
    }
    SUBCASE("md and dm: rotational when any device below is") {
        ctx.lowers_rotational = {{"vdb", false}, {"sda2", true}};
        CHECK(explain(disk("", Stack::md), kSpinning, ctx)["rotational"].kernel_default == "1");
        ctx.lowers_rotational = {{"nvme0n1", false}};
        CHECK(explain(disk("", Stack::dm), kSpinning, ctx)["rotational"].kernel_default == "0");
    }
}

TEST_CASE("explain: wbt's default is fixed at registration; a loop device's by its creation flag") {
    CHECK(explain(disk("virtio_blk"), kSpinning, kernel_at(6, 1))["wbt_lat_usec"].kernel_default == "75000");
    CHECK(explain(disk("nvme"), kSpinning, kernel_at(6, 1))["wbt_lat_usec"].kernel_default == "2000");
    auto loop = disk("", Stack::loop);
    loop.loop_backing_file = "/var/tmp/img";  // attached: rotational now, but wbt started before
    CHECK(explain(loop, kSpinning, kernel_at(6, 1))["wbt_lat_usec"].kernel_default == "75000");
    CHECK(explain(loop, kSpinning, kernel_at(6, 12))["wbt_lat_usec"].kernel_default == "2000");
    CHECK(explain(loop, kSpinning, kernel_at(6, 18))["wbt_lat_usec"].kernel_default == "2000");
}

TEST_CASE("explain: nr_requests from the hardware queue depth and the scheduler") {
    auto ctx = kernel_at(6, 12);
    CHECK(explain(disk("nvme"), {{"scheduler", "none"}, {"nr_requests", "1023"}},
                  [&] {
                      auto c = ctx;
                      c.hw_tags = 1023;
                      return c;
                  }())["nr_requests"]
              .kernel_default == "1023");
    ctx.hw_tags = 32;  // AHCI: one queue of 32 tags, mq-deadline
    auto e = explain(disk("sd"), {{"scheduler", "mq-deadline"}, {"nr_requests", "64"}}, ctx)["nr_requests"];
    CHECK(e.kernel_default == "64");
    CHECK(e.derivation == "with a scheduler (mq-deadline): 2 x min(queue depth 32, 128) = 64");
    ctx.hw_tags = 256;
    CHECK(explain(disk("sd"), {{"scheduler", "bfq"}, {"nr_requests", "256"}}, ctx)["nr_requests"].kernel_default ==
          "256");
}

TEST_CASE("explain: a loop device gets no scheduler by default") {
    auto e = explain(disk("", Stack::loop), {{"scheduler", "none"}}, kernel_at(6, 12))["scheduler"];
    CHECK(e.kernel_default == "none");
}

TEST_CASE("explain: the scheduler the kernel picks from the hardware queues") {
    auto ctx = kernel_at(6, 12);
    ctx.hw_queues = 1;  // AHCI
    auto one = explain(disk("sd"), {{"scheduler", "mq-deadline"}}, ctx)["scheduler"];
    CHECK(one.kernel_default == "mq-deadline");
    CHECK(one.derivation == "one hardware queue: the kernel picks mq-deadline when it is available");
    ctx.hw_queues = 4;
    CHECK(explain(disk("nvme"), {{"scheduler", "none"}}, ctx)["scheduler"].kernel_default == "none");
    ctx.hw_queues = 0;  // md, bio-based dm
    auto bio = explain(disk("", Stack::md), {{"scheduler", "none"}}, ctx)["scheduler"];
    CHECK(bio.kernel_default == "none");  // what queue/scheduler of a bio-based queue reads
    CHECK(bio.derivation ==
          "bio-based queue: no scheduler here (the file reads none); the devices below schedule the requests");
}

TEST_CASE("explain: a driver blkpolicy knows nothing special about reports rotational itself") {
    auto e = explain(disk("mmcblk"), {{"rotational", "0"}}, kernel_at(6, 12))["rotational"];
    CHECK(e.kernel_default == "0");
    CHECK(e.derivation == "reported by the driver");
}

TEST_CASE("explain: a bio-based queue's nr_requests, where the kernel shows one, is the fixed 128 (6.1)") {
    auto ctx = kernel_at(6, 1, 0);
    ctx.hw_queues = 0;  // md, dm linear/crypt: no mq/
    ctx.hw_tags = 0;
    const Values md = {{"rotational", "1"}, {"scheduler", "none"}, {"nr_requests", "128"}, {"read_ahead_kb", "128"}};
    auto e = explain(disk("", Stack::md), md, ctx)["nr_requests"];
    CHECK(e.kernel_default == "128");
    CHECK(
        e.derivation ==
        "bio-based queue: it allocates no requests; the file, where the kernel shows it, reads the fixed default 128");
    // 7.3 shows no such file: nothing to explain.
    const Values newer = {{"rotational", "1"}, {"scheduler", "none"}, {"read_ahead_kb", "128"}};
    CHECK(explain(disk("", Stack::md), newer, ctx).count("nr_requests") == 0);
}

TEST_CASE("explain: a block device's writeback limits start at max_ratio 100, min_ratio 0, strict_limit 0") {
    auto v = kSpinning;
    v["bdi.max_ratio"] = "1";  // a value someone wrote: the default is still the kernel's
    v["bdi.min_ratio"] = "0";
    v["bdi.strict_limit"] = "0";
    auto x = explain(disk("sd"), v, kernel_at(6, 12));
    CHECK(x["bdi.max_ratio"].kernel_default == "100");
    CHECK(x["bdi.max_ratio"].current == "1");
    CHECK(x["bdi.min_ratio"].kernel_default == "0");
    CHECK(x["bdi.strict_limit"].kernel_default == "0");
    CHECK(x["bdi.strict_limit"].kernel_rule == "bdi-default:ratios-100-0-strict-0");
    // 6.1 has no strict_limit file: nothing read, nothing explained.
    v.erase("bdi.strict_limit");
    CHECK_FALSE(explain(disk("sd"), v, kernel_at(6, 1)).count("bdi.strict_limit"));
}

TEST_CASE("explain: an md array's stripe cache starts at 256, its resync speeds follow the sysctls") {
    auto ctx = kernel_at(6, 12);
    ctx.hw_queues = 0;
    Values v = {{"rotational", "0"},
                {"read_ahead_kb", "128"},
                {"md.stripe_cache_size", "8192"},  // written since: the default is still the kernel's
                {"md.sync_speed_min", "system"},
                {"md.sync_speed_max", "500000"}};
    auto x = explain(disk("", Stack::md), v, ctx);
    CHECK(x["md.stripe_cache_size"].kernel_default == "256");
    CHECK(x["md.stripe_cache_size"].current == "8192");
    CHECK(x["md.stripe_cache_size"].kernel_rule == "md-default:stripe-cache-256-speeds-system");
    CHECK(x["md.sync_speed_min"].kernel_default == "system");
    CHECK(x["md.sync_speed_min"].derivation ==
          "an array follows the sysctl dev.raid.speed_limit_min until a number is written to it");
    CHECK(x["md.sync_speed_max"].kernel_default == "system");
    // A raid1 array reads no stripe cache: nothing to explain.
    v.erase("md.stripe_cache_size");
    CHECK_FALSE(explain(disk("", Stack::md), v, ctx).count("md.stripe_cache_size"));
}
