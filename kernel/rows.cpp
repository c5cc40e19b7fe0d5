// SPDX-License-Identifier: MIT
#include "kernel/rows.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <iterator>

#include "util/names.hpp"

namespace blkpolicy::kernel {

namespace {

constexpr util::Named<KnownBy> kKnownBy[] = {
    {KnownBy::always, "always"}, {KnownBy::version, "version"},     {KnownBy::version_and_probe, "version+probe"},
    {KnownBy::probe, "probe"},   {KnownBy::read_back, "read-back"},
};
static_assert(util::in_enum_order(kKnownBy));

constexpr VersionRange kEvery{};
constexpr VersionRange kUnused{{}, {}, false};
constexpr VersionRange from(int ma, int mi, int pa = 0) { return {{ma, mi, pa}, {}}; }
constexpr VersionRange before(int ma, int mi) { return {{}, {ma, mi, 0}}; }
constexpr VersionRange between(KernelVersion a, KernelVersion b) { return {a, b}; }

// The kernels here: the two Debian guests' own, the host's, and Debian 13's
// backports kernel in the third guest.
constexpr std::string_view kAll =
    "6.1.0 (Debian 12), 6.12.117 (Debian 13), 6.18.44 (host), 7.3.4 (Debian 13 backports)";
constexpr std::string_view kGuests = "6.1.0 (Debian 12), 6.12.117 (Debian 13), 7.3.4 (Debian 13 backports)";
// Where md's rows were seen: the devices group's arrays on every guest kernel.
constexpr std::string_view kMdObserved = kGuests;
// The newest kernel series a version-keyed row was observed on.
constexpr KernelVersion kNewest{7, 3, 4};

// The rows of one question are listed together, most specific first: the
// first row whose versions hold answers it.
constexpr KernelRow kRows[] = {
    // What a queue-limits commit does to read_ahead_kb.
    {KRow::readahead_on_commit_raise,
     "readahead-on-commit:raise",
     "a queue-limits commit raises read_ahead_kb to the computed value and keeps a larger one",
     {from(6, 15), between({6, 12, 117}, {6, 13, 0})},
     KnownBy::version,
     "the release: 6.15 and later, and the 6.12 stable series from the release it was observed on",
     "6.12.117 (Debian 13, the 6.15 rule carried back), 6.18.44 (host), 7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "blk_apply_bdi_limits, block/blk-settings.c",
     kNewest},
    {KRow::readahead_on_commit_unknown,
     "readahead-on-commit:unknown",
     "a stable series that may or may not carry the 6.15 \"only raise\" rule back",
     {between({6, 12, 0}, {6, 12, 117}), between({6, 14, 0}, {6, 15, 0})},
     KnownBy::read_back,
     "not known from the release: every write is read back and a changed read_ahead_kb written again",
     "",
     WriteCause::none,
     std::nullopt,
     "blk_apply_bdi_limits, block/blk-settings.c"},
    {KRow::readahead_on_commit_reset,
     "readahead-on-commit:reset",
     "a queue-limits commit sets read_ahead_kb to the computed value, lowering a larger one",
     {between({6, 9, 0}, {6, 12, 0}), between({6, 13, 0}, {6, 14, 0})},
     KnownBy::version,
     "the release: 6.9 to 6.13 (the 6.12 and 6.14 series are rows of their own)",
     "",
     WriteCause::none,
     std::nullopt,
     "blk_apply_bdi_limits, block/blk-settings.c"},
    {KRow::readahead_on_commit_untouched,
     "readahead-on-commit:untouched",
     "read_ahead_kb is computed once, when the disk is registered",
     {before(6, 9), kUnused},
     KnownBy::version,
     "the release: before 6.9",
     "6.1.0 (Debian 12)",
     WriteCause::none,
     std::nullopt,
     "blk_register_queue, block/blk-sysfs.c"},

    // The read_ahead_kb the kernel computes.
    {KRow::readahead_default_2x_max_sectors,
     "readahead-default:2x-max-sectors",
     "a rotational queue without optimal_io_size gets 2 x max_sectors_kb",
     {from(6, 17), kUnused},
     KnownBy::version,
     "the release: 6.17 and later",
     "6.18.44 (host: a bound loop reads 2560 = 2 x 1280), 7.3.4 (Debian 13 backports: a virtio disk reads 8192 = 2 x "
     "4096)",
     WriteCause::none,
     std::nullopt,
     "blk_apply_bdi_limits, block/blk-settings.c",
     kNewest},
    {KRow::readahead_default_2x_io_opt,
     "readahead-default:2x-io-opt",
     "max(2 x optimal_io_size, 128 KiB), where the 2x-max-sectors rule does not apply",
     {kEvery, kUnused},
     KnownBy::always,
     "",
     kAll,
     WriteCause::none,
     std::nullopt,
     "blk_apply_bdi_limits, block/blk-settings.c"},
    {KRow::read_ahead_whole_pages,
     "read-ahead:whole-pages",
     "a written read_ahead_kb reads back rounded down to whole pages",
     {kEvery, kUnused},
     KnownBy::always,
     "the page size, from sysconf",
     "6.18.44 (host: 99999999 reads 99999996), 7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "queue_ra_store, block/blk-sysfs.c"},

    // What a write disturbs.
    {KRow::limits_commit_recomputes_read_ahead,
     "limits-commit:recomputes-read-ahead",
     "writing max_sectors_kb, rotational, discard_max_bytes, add_random, iostats or write_cache commits the queue "
     "limits, which recomputes read_ahead_kb",
     {from(6, 9), kUnused},
     KnownBy::version_and_probe,
     "the release, and read_ahead_kb is read again after every such write",
     "6.12.117 (Debian 13), 6.18.44 (host), 7.3.4 (Debian 13 backports)",
     WriteCause::limits_commit,
     Key::read_ahead_kb,
     "queue_limits_commit_update, block/blk-settings.c",
     kNewest},
    {KRow::scheduler_switch_resets_nr_requests,
     "scheduler-switch:resets-nr-requests",
     "a scheduler switch sets nr_requests to the default for the new scheduler",
     {kEvery, kUnused},
     KnownBy::always,
     "nr_requests is read again after a switch",
     kAll,
     WriteCause::scheduler_switch,
     Key::nr_requests,
     "blk_mq_init_sched, block/blk-mq-sched.c"},
    {KRow::scheduler_switch_recreates_iosched,
     "scheduler-switch:recreates-iosched",
     "a scheduler switch recreates iosched/ with the new scheduler's defaults",
     {kEvery, kUnused},
     KnownBy::always,
     "the tunables are read again after a switch",
     kAll,
     WriteCause::scheduler_switch,
     Key::iosched,
     "elevator_switch, block/elevator.c"},
    {KRow::scheduler_switch_resets_async_depth,
     "scheduler-switch:resets-async-depth",
     "a scheduler switch sets queue/async_depth to the new scheduler's default",
     {from(7, 0), kUnused},
     KnownBy::version_and_probe,
     "the release, and queue/async_depth is there; it is read again after a switch",
     "7.3.4 (Debian 13 backports)",
     WriteCause::scheduler_switch,
     Key::async_depth,
     "elevator_switch, block/elevator.c",
     kNewest},
    {KRow::bfq_attach_turns_default_wbt_off,
     "bfq-attach:turns-default-wbt-off",
     "attaching bfq turns a default wbt off (a manual value stays); leaving bfq turns it back on",
     {kEvery, kUnused},
     KnownBy::version_and_probe,
     "debugfs rqos/wbt/enabled, where debugfs is mounted",
     kAll,
     WriteCause::scheduler_switch,
     Key::wbt_lat_usec,
     "bfq_init_queue, block/bfq-iosched.c; wbt_disable_default"},
    {KRow::nr_requests_write_rescales_async_depth,
     "nr-requests-write:rescales-async-depth",
     "writing nr_requests scales queue/async_depth in proportion (64 of 256, then nr_requests 128: 32)",
     {from(7, 0), kUnused},
     KnownBy::version_and_probe,
     "the release, and queue/async_depth is there; it is read again after an nr_requests write",
     "7.3.4 (Debian 13 backports)",
     WriteCause::nr_requests_write,
     Key::async_depth,
     "blk_mq_update_nr_requests, block/blk-mq.c",
     kNewest},

    // wbt.
    {KRow::bfq_off_wbt_reads_0,
     "bfq-off-wbt-reads:0",
     "after bfq turned a default wbt off, queue/wbt_lat_usec reads 0",
     {from(6, 2), kUnused},
     KnownBy::version_and_probe,
     "the release, and debugfs rqos/wbt/enabled = 3 where debugfs is mounted",
     "6.12.117 (Debian 13), 6.18.44 (host), 7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "queue_wb_lat_show, block/blk-sysfs.c",
     kNewest},
    {KRow::bfq_off_wbt_reads_latency,
     "bfq-off-wbt-reads:latency",
     "after bfq turned a default wbt off, queue/wbt_lat_usec still reads the old latency",
     {before(6, 2), kUnused},
     KnownBy::version_and_probe,
     "the release, and debugfs rqos/wbt/enabled = 3 where debugfs is mounted",
     "6.1.0 (Debian 12)",
     WriteCause::none,
     std::nullopt,
     "queue_wb_lat_show, block/blk-sysfs.c"},
    {KRow::wbt_default_rotational_at_init,
     "wbt-default:rotational-at-init",
     "wbt's default latency is 75000 us if the queue was rotational when wbt started (at registration), else 2000",
     {kEvery, kUnused},
     KnownBy::always,
     "",
     kAll,
     WriteCause::none,
     std::nullopt,
     "wbt_default_latency_nsec, block/blk-wbt.c"},
    {KRow::wbt_store_retained_value_noop,
     "wbt-store:retained-value-noop",
     "writing the latency wbt already keeps does nothing, even when wbt is off: writing 0 first makes it stick",
     {before(6, 19), kUnused},
     KnownBy::read_back,
     "every write is read back; blkpolicy writes 0 first where wbt is (or is about to be) off, which works on "
     "every kernel",
     "6.1.0 (Debian 12), 6.12.117 (Debian 13), 6.18.44 (host)",
     WriteCause::none,
     std::nullopt,
     "wbt_set_lat, block/blk-wbt.c"},
    {KRow::wbt_store_unknown,
     "wbt-store:unknown",
     "between the last kernel where the retained latency was a no-op and the first where it turns wbt back on",
     {between({6, 19, 0}, {7, 3, 0}), kUnused},
     KnownBy::read_back,
     "every write is read back; blkpolicy writes 0 first where wbt is off either way",
     "",
     WriteCause::none,
     std::nullopt,
     "wbt_set_lat, block/blk-wbt.c"},
    {KRow::wbt_store_off_retained_applies,
     "wbt-store:off-retained-applies",
     "writing the latency wbt keeps is a no-op while wbt is on, but turns a wbt that is off (bfq) back on",
     {from(7, 3), kUnused},
     KnownBy::read_back,
     "every write is read back; blkpolicy writes 0 first where wbt is off, which works here too",
     "7.3.4 (Debian 13 backports: after bfq, writing 75000 gives enabled=2)",
     WriteCause::none,
     std::nullopt,
     "wbt_set_lat, block/blk-wbt.c",
     kNewest},

    // Writers that meet on one queue (or on one tag set: the disks of one
    // SCSI host).
    {KRow::write_contended_ebusy,
     "write-contended:ebusy",
     "a write of scheduler, nr_requests or async_depth returns EBUSY while another writer updates the queue "
     "(or another queue of the same tag set, such as a disk on the same SCSI host) instead of waiting for it",
     {from(7, 0), between({6, 18, 44}, {6, 19, 0})},
     KnownBy::probe,
     "the write's own errno: on every kernel an EBUSY is written again after a pause, within a bound",
     "6.18.44 (host: two writers of one loop queue), 7.3.4 (Debian 13 backports: a scheduler switch on another disk "
     "of the same SCSI host)",
     WriteCause::none,
     std::nullopt,
     "elevator_change, blk_mq_update_nr_requests; block/elevator.c, block/blk-mq.c",
     kNewest},
    {KRow::write_contended_unknown,
     "write-contended:unknown",
     "a stable series that may or may not carry the EBUSY change back",
     {between({6, 18, 0}, {6, 18, 44}), between({6, 19, 0}, {7, 0, 0})},
     KnownBy::probe,
     "the write's own errno: an EBUSY is written again after a pause, within a bound",
     "",
     WriteCause::none,
     std::nullopt,
     "elevator_change, blk_mq_update_nr_requests; block/elevator.c, block/blk-mq.c"},
    {KRow::write_contended_waits,
     "write-contended:waits",
     "a contended write of scheduler or nr_requests waits for the other writer",
     {before(6, 18), kUnused},
     KnownBy::probe,
     "the write's own errno (none comes)",
     kGuests.substr(0, kGuests.find(", 7.3.4")),
     WriteCause::none,
     std::nullopt,
     "elevator_change, blk_mq_update_nr_requests; block/elevator.c, block/blk-mq.c"},

    // queue/async_depth (7.0+).
    {KRow::async_depth_queue_attribute,
     "async-depth:queue-attribute",
     "queue/async_depth caps the tags asynchronous writes may take; mq-deadline's iosched/async_depth is gone",
     {from(7, 0), kUnused},
     KnownBy::version_and_probe,
     "the release, and the file queue/async_depth",
     "7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "queue_async_depth_store, block/blk-sysfs.c",
     kNewest},
    {KRow::async_depth_iosched_tunable,
     "async-depth:iosched-tunable",
     "no queue/async_depth: mq-deadline has its own iosched/async_depth",
     {before(7, 0), kUnused},
     KnownBy::version_and_probe,
     "the release, and the file iosched/async_depth under mq-deadline",
     "6.1.0 (Debian 12), 6.12.117 (Debian 13), 6.18.44 (host)",
     WriteCause::none,
     std::nullopt,
     "deadline_async_depth_store, block/mq-deadline.c"},
    {KRow::async_depth_default_by_scheduler,
     "async-depth-default:by-scheduler",
     "after a switch async_depth is nr_requests under none and mq-deadline, and 3/4 of it under kyber and bfq",
     {from(7, 0), kUnused},
     KnownBy::version_and_probe,
     "the release, and queue/async_depth is read again after a switch",
     "7.3.4 (Debian 13 backports: 256 and 192 of 256)",
     WriteCause::none,
     std::nullopt,
     "blk_mq_init_sched, block/blk-mq-sched.c",
     kNewest},
    {KRow::async_depth_write_capped_refused_under_none,
     "async-depth-write:capped-refused-under-none",
     "a written async_depth above nr_requests reads back as nr_requests; 0, or any value under none, is EINVAL",
     {from(7, 0), kUnused},
     KnownBy::version_and_probe,
     "the release; the plan leaves it out under none and refuses a value above nr_requests; every write is read back",
     "7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "queue_async_depth_store, block/blk-sysfs.c",
     kNewest},

    // Loop devices.
    {KRow::loop_created_rotational_1,
     "loop-created-rotational:1",
     "a new loop device starts rotational (before a file is attached)",
     {before(6, 11), kUnused},
     KnownBy::version,
     "the release: before 6.11",
     "6.1.0 (Debian 12: unbound loops read 1)",
     WriteCause::none,
     std::nullopt,
     "blk_mq_alloc_disk, drivers/block/loop.c"},
    {KRow::loop_created_rotational_0,
     "loop-created-rotational:0",
     "a new loop device starts non-rotational: rotational is a feature loop does not ask for",
     {from(6, 11), kUnused},
     KnownBy::version,
     "the release: 6.11 and later",
     "6.12.117 (Debian 13), 6.18.44 (host), 7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "loop_add, drivers/block/loop.c",
     kNewest},

    // nr_requests.
    {KRow::nr_requests_default_scheduler,
     "nr-requests-default:scheduler",
     "with a scheduler: 2 x min(hardware tag depth, 128)",
     {kEvery, kUnused},
     KnownBy::probe,
     "mq/0/nr_tags",
     kAll,
     WriteCause::none,
     std::nullopt,
     "blk_mq_init_sched, block/blk-mq-sched.c"},
    {KRow::nr_requests_default_none,
     "nr-requests-default:none",
     "without a scheduler: the hardware tag depth",
     {kEvery, kUnused},
     KnownBy::probe,
     "mq/0/nr_tags",
     kAll,
     WriteCause::none,
     std::nullopt,
     "blk_mq_init_sched, block/blk-mq-sched.c"},
    {KRow::nr_requests_default_bio_based,
     "nr-requests-default:bio-based",
     "a bio-based queue (md, dm linear/crypt) allocates no requests: where the kernel shows the file it reads the "
     "fixed default, 128",
     {kEvery, kUnused},
     KnownBy::probe,
     "no mq/ directory, and queue/nr_requests there or not",
     "6.1.0 (Debian 12: 128 on md and dm), 6.12.117 (Debian 13) and 7.3.4 (Debian 13 backports): no such file on md "
     "and dm",
     WriteCause::none,
     std::nullopt,
     "blk_alloc_queue (BLKDEV_DEFAULT_RQ), block/blk-core.c"},

    // Read-backs.
    {KRow::write_cache_two_words,
     "write-cache:two-words",
     "queue/write_cache takes any value starting with \"write back\", \"write through\" or \"none\" and reads back "
     "\"write back\" or \"write through\"",
     {kEvery, kUnused},
     KnownBy::read_back,
     "every write is read back",
     kAll,
     WriteCause::none,
     std::nullopt,
     "queue_wc_store, block/blk-sysfs.c"},
    {KRow::rq_affinity_3_ignored,
     "rq-affinity:3-ignored",
     "rq_affinity accepts 3 (any value above 2) without an error and changes nothing",
     {kEvery, kUnused},
     KnownBy::read_back,
     "the policy allows 0-2 only; every write is read back",
     kAll,
     WriteCause::none,
     std::nullopt,
     "queue_rq_affinity_store, block/blk-sysfs.c"},
    {KRow::io_timeout_whole_ticks,
     "io-timeout-readback:whole-ticks",
     "queue/io_timeout is kept in ticks: a write rounds up to a whole tick (1000/HZ ms), 0 is refused, and 2^31 ms "
     "or more keeps the longest timer, which reads back as 4294967288 at 250 Hz",
     {kEvery, kUnused},
     KnownBy::read_back,
     "the tick rate from /boot/config-RELEASE (250 assumed without it); every write is read back",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "queue_io_timeout_store, block/blk-sysfs.c; msecs_to_jiffies, jiffies_to_msecs"},
    {KRow::io_timeout_one_timer_with_scsi_timeout,
     "io-timeout-scsi:one-timer",
     "on a SCSI disk device/timeout (seconds) and queue/io_timeout (milliseconds) are the same request timer: "
     "writing one moves the other",
     {kEvery, kUnused},
     KnownBy::always,
     "a rule that sets both to different times is refused on the device",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "sdev_store_timeout, drivers/scsi/scsi_sysfs.c; queue_io_timeout_store, block/blk-sysfs.c"},
    {KRow::io_timeout_default_by_driver,
     "io-timeout-default:by-driver",
     "a driver with a timeout handler sets the timer when it adds the disk: NVMe from nvme_core.io_timeout "
     "(30 s by default), sd 30 s; virtio-blk and loop have no queue/io_timeout",
     {kEvery, kUnused},
     KnownBy::probe,
     "the driver, and /sys/module/nvme_core/parameters/io_timeout",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "nvme_alloc_ns (NVME_IO_TIMEOUT), drivers/nvme/host/core.c; sd_probe (SD_TIMEOUT), drivers/scsi/sd.c"},

    // rotational, per driver.
    {KRow::rotational_default_virtio_blk,
     "rotational-default:virtio-blk",
     "virtio_blk always reports rotational",
     {kEvery, kUnused},
     KnownBy::probe,
     "the driver, from the device's driver chain",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "virtblk_probe, drivers/block/virtio_blk.c"},
    {KRow::rotational_default_nvme,
     "rotational-default:nvme",
     "NVMe namespaces are non-rotational",
     {kEvery, kUnused},
     KnownBy::probe,
     "the driver, from the device's driver chain",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "nvme_alloc_ns, drivers/nvme/host/core.c"},
    {KRow::rotational_default_sd_vpd_b1,
     "rotational-default:sd-vpd-b1",
     "sd reads the medium rotation rate from VPD page B1h: 1 is non-rotating",
     {kEvery, kUnused},
     KnownBy::probe,
     "device/vpd_pgb1",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "sd_read_block_characteristics, drivers/scsi/sd.c"},
    {KRow::rotational_default_sd_no_vpd,
     "rotational-default:sd-no-vpd",
     "sd without VPD page B1h leaves the disk rotational",
     {kEvery, kUnused},
     KnownBy::probe,
     "device/vpd_pgb1 missing",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "sd_read_block_characteristics, drivers/scsi/sd.c"},
    {KRow::rotational_default_loop_backing,
     "rotational-default:loop-backing",
     "a bound loop device takes rotational from its backing file's block device",
     {kEvery, kUnused},
     KnownBy::probe,
     "loop/backing_file and the device its file system is on",
     "6.12.117 (Debian 13), 6.18.44 (host), 7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "loop_update_rotational, drivers/block/loop.c"},
    {KRow::rotational_default_loop_unbound,
     "rotational-default:loop-unbound",
     "an unbound loop device keeps the flag it was created with (see loop-created-rotational)",
     {kEvery, kUnused},
     KnownBy::version,
     "the release",
     kAll,
     WriteCause::none,
     std::nullopt,
     "loop_add, drivers/block/loop.c"},
    {KRow::rotational_default_stacked,
     "rotational-default:stacked",
     "dm and md are rotational when any device below is",
     {kEvery, kUnused},
     KnownBy::probe,
     "slaves/*/queue/rotational",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "blk_stack_limits, block/blk-settings.c"},
    {KRow::rotational_default_driver,
     "rotational-default:driver",
     "any other driver reports it itself",
     {kEvery, kUnused},
     KnownBy::probe,
     "queue/rotational",
     "",
     WriteCause::none,
     std::nullopt,
     "the driver's probe"},

    // The scheduler picked at registration.
    {KRow::scheduler_default_loop_none,
     "scheduler-default:loop-none",
     "the loop driver asks for no scheduler",
     {kEvery, kUnused},
     KnownBy::probe,
     "the stack kind",
     kAll,
     WriteCause::none,
     std::nullopt,
     "BLK_MQ_F_NO_SCHED_BY_DEFAULT, drivers/block/loop.c"},
    {KRow::scheduler_default_one_queue_mq_deadline,
     "scheduler-default:one-queue-mq-deadline",
     "one hardware queue: mq-deadline when it is available",
     {kEvery, kUnused},
     KnownBy::probe,
     "mq/ (hardware queues)",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "elevator_get_default, block/elevator.c"},
    {KRow::scheduler_default_many_queues_none,
     "scheduler-default:many-queues-none",
     "several hardware queues: none",
     {kEvery, kUnused},
     KnownBy::probe,
     "mq/ (hardware queues)",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "elevator_get_default, block/elevator.c"},
    {KRow::scheduler_default_bio_based,
     "scheduler-default:bio-based",
     "a bio-based queue (md, dm linear/crypt) has no scheduler",
     {kEvery, kUnused},
     KnownBy::probe,
     "no mq/ directory",
     kGuests,
     WriteCause::none,
     std::nullopt,
     "blk_alloc_disk, block/genhd.c"},
    {KRow::bdi_defaults,
     "bdi-default:ratios-100-0-strict-0",
     "a block device's bdi starts with max_ratio 100, min_ratio 0 and (6.2+) strict_limit 0: its writeback may take "
     "the whole dirty limit, none of it is kept for it, and the limit is the global one",
     {kEvery, kUnused},
     KnownBy::always,
     "the kernel's own; blkpolicy reads the files",
     kAll,
     WriteCause::none,
     std::nullopt,
     "bdi_init, mm/backing-dev.c"},
    {KRow::bdi_min_not_above_max,
     "bdi-ratios:min-not-above-max",
     "a bdi's min_ratio above its max_ratio is refused (EINVAL), whichever of the two is written: lowering "
     "max_ratio below the min fails as raising min_ratio above the max does",
     {kEvery, kUnused},
     KnownBy::always,
     "planned from both values (the policy's, else the device's); the write's error is read",
     kAll,
     WriteCause::none,
     std::nullopt,
     "bdi_set_min_ratio, bdi_set_max_ratio, mm/page-writeback.c"},
    {KRow::bdi_strict_limit_present,
     "bdi-strict-limit:6.2+",
     "bdi/strict_limit (with max_bytes, min_bytes and the _fine ratios) came with 6.2: an older kernel has no such "
     "file, and its writeback limits are the ratios alone",
     {from(6, 2), kUnused},
     KnownBy::probe,
     "the file is there or not (6.1.0 of Debian 12 has none: the devices group)",
     "6.12.117 (Debian 13), 6.18.44 (host), 7.3.4 (Debian 13 backports)",
     WriteCause::none,
     std::nullopt,
     "strict_limit_store, mm/backing-dev.c"},
    // An md array's own tunables (md/ of the array).
    {KRow::md_defaults,
     "md-default:stripe-cache-256-speeds-system",
     "an md array starts with stripe_cache_size 256 (raid4/5/6) and sync_speed_min and _max following the sysctls "
     "dev.raid.speed_limit_min and _max (1000 and 200000 KiB/s unless set), read back as \"N (system)\"; the "
     "array's stop drops whatever was written",
     {kEvery, kUnused},
     KnownBy::always,
     "the kernel's own; blkpolicy reads the files",
     kMdObserved,
     WriteCause::none,
     std::nullopt,
     "setup_conf, drivers/md/raid5.c; sync_min_show, drivers/md/md.c"},
    {KRow::md_stripe_cache_raid456,
     "md-stripe-cache:raid456-17-32768",
     "only raid4, raid5 and raid6 arrays have md/stripe_cache_size (the raid456 personality's own file, there once "
     "the array runs); it takes 17 to 32768 stripes and refuses anything else (EINVAL)",
     {kEvery, kUnused},
     KnownBy::probe,
     "md/level of the array; the file is there or not",
     kMdObserved,
     WriteCause::none,
     std::nullopt,
     "raid5_store_stripe_cache_size, drivers/md/raid5.c"},
    {KRow::md_sync_speed_redundancy,
     "md-sync-speed:arrays-with-redundancy",
     "md/sync_speed_min and _max belong to arrays that resync (raid1, raid4/5/6, raid10); raid0 and linear arrays "
     "have neither",
     {kEvery, kUnused},
     KnownBy::probe,
     "md/level of the array; the file is there or not",
     kMdObserved,
     WriteCause::none,
     std::nullopt,
     "md_redundancy_group, drivers/md/md.c"},
    {KRow::md_sync_speed_local_or_system,
     "md-sync-speed:reads-local-or-system",
     "md/sync_speed_min and _max read \"N (local)\" after a number was written and \"N (system)\" while they "
     "follow the sysctl; writing \"system\" goes back to the sysctl, and 0 is refused (EINVAL)",
     {kEvery, kUnused},
     KnownBy::always,
     "the read-back's word: \"system\" is kept as the value (a restore writes it back)",
     kMdObserved,
     WriteCause::none,
     std::nullopt,
     "sync_min_store, sync_max_store, drivers/md/md.c"},
    {KRow::md_sync_speed_min_over_max_taken,
     "md-sync-speed:min-over-max-taken",
     "md takes a sync_speed_min above the sync_speed_max, whichever is written first, and then never holds a "
     "resync back below the min: the max does nothing under it",
     {kEvery, kUnused},
     KnownBy::always,
     "planned from both values (the policy's, else the array's): said, not refused",
     kMdObserved,
     WriteCause::none,
     std::nullopt,
     "sync_min_store, md_do_sync, drivers/md/md.c"},
};
constexpr std::size_t kRowCount = sizeof(kRows) / sizeof(kRows[0]);

static_assert(kRowCount == kKernelRowCount, "a row for every handle, a handle for every row");

constexpr util::Named<KQuestion> kQuestions[] = {
    {KQuestion::readahead_on_commit, "readahead-on-commit"},
    {KQuestion::readahead_default, "readahead-default"},
    {KQuestion::wbt_store, "wbt-store"},
    {KQuestion::write_contended, "write-contended"},
    {KQuestion::async_depth, "async-depth"},
    {KQuestion::bfq_off_wbt_reads, "bfq-off-wbt-reads"},
    {KQuestion::loop_created_rotational, "loop-created-rotational"},
};
static_assert(util::in_enum_order(kQuestions));

// Rows of one question sit together, ids are unique, and row i is the
// handle i.
constexpr bool rows_well_formed() {
    for (std::size_t i = 0; i < kRowCount; ++i) {
        if (static_cast<std::size_t>(kRows[i].handle) != i) return false;
        for (std::size_t j = i + 1; j < kRowCount; ++j) {
            if (kRows[i].id == kRows[j].id) return false;
            if (j > i + 1 && kRows[i].question() == kRows[j].question() &&
                kRows[j - 1].question() != kRows[i].question())
                return false;
        }
    }
    return true;
}
static_assert(rows_well_formed());

// The release just before `v` (patch levels counted up to a bound no
// release reaches): with the ends of every range and the release before
// each, the points where an answer can change on either side.
constexpr KernelVersion release_before(const KernelVersion& v) {
    constexpr int kTop = 1 << 20;
    if (v.patch > 0) return {v.major, v.minor, v.patch - 1};
    if (v.minor > 0) return {v.major, v.minor - 1, kTop};
    return {v.major - 1, kTop, kTop};
}

constexpr bool answered(std::string_view question, const KernelVersion& v) {
    for (const auto& r : kRows)
        if (r.question() == question && r.holds_on(v)) return true;
    return false;
}

// Every version question has a row that holds on every release: each
// range's ends, the release before each, and the first release.
constexpr bool questions_answered() {
    for (const auto& q : kQuestions) {
        if (!answered(q.name, {})) return false;
        for (const auto& r : kRows) {
            if (r.question() != q.name) continue;
            for (const auto& range : r.versions) {
                if (!range.used) continue;
                for (const auto& end : {range.from, range.until}) {
                    if (end.major == 0) continue;
                    if (!answered(q.name, end) || !answered(q.name, release_before(end))) return false;
                }
            }
        }
    }
    return true;
}
static_assert(questions_answered());

std::atomic<bool> g_consulted[kRowCount];

const KernelRow& consulted(std::size_t i) {
    g_consulted[i].store(true, std::memory_order_relaxed);
    return kRows[i];
}

}  // namespace

const char* to_string(KnownBy k) { return util::name_of(kKnownBy, k); }

bool KernelRow::beyond_observed(const KernelVersion& v) const {
    if (known_by != KnownBy::version && known_by != KnownBy::version_and_probe) return false;
    const bool open_ended = std::any_of(versions.begin(), versions.end(),
                                        [&](const VersionRange& r) { return r.contains(v) && r.until.major == 0; });
    if (!open_ended || newest_seen.major == 0) return false;
    return v.major > newest_seen.major || (v.major == newest_seen.major && v.minor > newest_seen.minor);
}

std::string standing_on(const KernelRow& r, const KernelVersion& v) {
    if (!r.holds_on(v)) return "does not hold";
    if (!r.beyond_observed(v)) return "holds";
    return "not observed past " + std::to_string(r.newest_seen.major) + "." + std::to_string(r.newest_seen.minor) +
           (r.known_by == KnownBy::version_and_probe ? ": probe" : ": read back");
}

std::span<const KernelRow> kernel_rows() { return kRows; }

const KernelRow& kernel_row(KRow handle) { return consulted(static_cast<std::size_t>(handle)); }

const KernelRow& kernel_row_for(KQuestion question, const KernelVersion& v) {
    const std::string_view name = util::name_of(kQuestions, question);
    std::size_t last = 0;
    for (std::size_t i = 0; i < kRowCount; ++i) {
        if (kRows[i].question() != name) continue;
        if (kRows[i].holds_on(v)) return consulted(i);
        last = i;
    }
    return consulted(last);  // not reached: questions_answered() holds at compile time
}

std::vector<std::string_view> kernel_rows_consulted() {
    std::vector<std::string_view> out;
    for (std::size_t i = 0; i < kRowCount; ++i)
        if (g_consulted[i].load(std::memory_order_relaxed)) out.push_back(kRows[i].id);
    return out;
}

std::optional<KernelVersion> parse_kernel_release(std::string_view r) {
    KernelVersion v;
    auto [p, ec] = std::from_chars(r.data(), r.data() + r.size(), v.major);
    if (ec != std::errc{} || p == r.data() + r.size() || *p != '.') return std::nullopt;
    auto [p2, ec2] = std::from_chars(p + 1, r.data() + r.size(), v.minor);
    if (ec2 != std::errc{}) return std::nullopt;
    if (p2 != r.data() + r.size() && *p2 == '.') std::from_chars(p2 + 1, r.data() + r.size(), v.patch);
    return v;
}

ReadaheadOnCommit readahead_on_commit(const KernelVersion& v) {
    const auto& row = kernel_row_for(KQuestion::readahead_on_commit, v);
    // Past the newest kernel it was seen on, the version alone says nothing:
    // every write is read back, as on a series that may or may not carry it.
    if (row.beyond_observed(v)) return ReadaheadOnCommit::unknown;
    switch (row.handle) {
        case KRow::readahead_on_commit_untouched:
            return ReadaheadOnCommit::untouched;
        case KRow::readahead_on_commit_reset:
            return ReadaheadOnCommit::reset;
        case KRow::readahead_on_commit_raise:
            return ReadaheadOnCommit::raise;
        default:
            return ReadaheadOnCommit::unknown;
    }
}

bool bfq_off_wbt_reads_zero(const KernelVersion& v) {
    return kernel_row_for(KQuestion::bfq_off_wbt_reads, v).handle == KRow::bfq_off_wbt_reads_0;
}

bool loop_created_rotational(const KernelVersion& v) {
    return kernel_row_for(KQuestion::loop_created_rotational, v).handle == KRow::loop_created_rotational_1;
}

std::int64_t nr_requests_default(std::int64_t hw_tags, bool scheduler_none) {
    kernel_row(scheduler_none ? KRow::nr_requests_default_none : KRow::nr_requests_default_scheduler);
    return scheduler_none ? hw_tags : 2 * std::min<std::int64_t>(hw_tags, 128);
}

std::int64_t registration_readahead_kb(std::int64_t optimal_io_bytes) {
    kernel_row(KRow::readahead_default_2x_io_opt);
    return std::max<std::int64_t>(2 * (optimal_io_bytes / 1024), 128);
}

std::optional<std::int64_t> kernel_readahead_kb(const KernelVersion& v, bool rotational, std::int64_t optimal_io_bytes,
                                                std::int64_t max_sectors_kb) {
    if (readahead_on_commit(v) == ReadaheadOnCommit::untouched) return std::nullopt;
    const std::int64_t io_opt_kb = optimal_io_bytes / 1024;
    const auto& row = rotational && io_opt_kb == 0 ? kernel_row_for(KQuestion::readahead_default, v)
                                                   : kernel_row(KRow::readahead_default_2x_io_opt);
    if (row.handle == KRow::readahead_default_2x_max_sectors) return 2 * max_sectors_kb;
    return std::max<std::int64_t>(2 * io_opt_kb, 128);
}

std::int64_t wbt_default_usec(bool rotational) {
    kernel_row(KRow::wbt_default_rotational_at_init);
    return rotational ? 75000 : 2000;
}

std::int64_t readahead_readback(std::int64_t kb, std::int64_t page_size) {
    kernel_row(KRow::read_ahead_whole_pages);
    if (page_size < 1024) return kb;
    const std::int64_t page_kb = page_size / 1024;
    return (kb / page_kb) * page_kb;
}

std::optional<std::string> write_cache_readback(std::string_view value) {
    kernel_row(KRow::write_cache_two_words);
    if (value.starts_with("write back")) return "write back";
    if (value.starts_with("write through") || value.starts_with("none")) return "write through";
    return std::nullopt;
}

std::int64_t io_timeout_readback(std::int64_t ms, int hz) {
    kernel_row(KRow::io_timeout_whole_ticks);
    if (hz <= 0 || ms <= 0) return ms;
    const std::uint64_t ticks = ms >= kIoTimeoutLongest
                                    ? 0xFFFFFFFEull  // the longest timer, cut to the queue's 32 bits
                                    : (static_cast<std::uint64_t>(ms) * static_cast<std::uint64_t>(hz) + 999) / 1000;
    const std::uint64_t shown = (ticks * 1000 + static_cast<std::uint64_t>(hz) - 1) / static_cast<std::uint64_t>(hz);
    return static_cast<std::int64_t>(shown & 0xFFFFFFFFull);
}

std::optional<std::int64_t> io_timeout_default_ms(std::string_view driver,
                                                  std::optional<std::int64_t> nvme_io_timeout_s) {
    kernel_row(KRow::io_timeout_default_by_driver);
    if (driver == "nvme") return nvme_io_timeout_s.value_or(30) * 1000;
    if (driver == "sd") return 30'000;
    return std::nullopt;
}

bool rq_affinity_write_ignored(std::int64_t value) {
    kernel_row(KRow::rq_affinity_3_ignored);
    return value > 2;
}

std::int64_t async_depth_default(std::int64_t nr_requests, std::string_view scheduler) {
    kernel_row(KRow::async_depth_default_by_scheduler);
    if (scheduler == "kyber" || scheduler == "bfq") return nr_requests * 3 / 4;
    return nr_requests;
}

std::int64_t async_depth_rescaled(std::int64_t async_depth, std::int64_t old_nr, std::int64_t new_nr) {
    kernel_row(KRow::nr_requests_write_rescales_async_depth);
    if (old_nr <= 0) return async_depth;
    return std::max<std::int64_t>(1, async_depth * new_nr / old_nr);
}

std::optional<std::int64_t> async_depth_readback(std::int64_t value, std::int64_t nr_requests,
                                                 std::string_view scheduler) {
    kernel_row(KRow::async_depth_write_capped_refused_under_none);
    if (value <= 0 || scheduler == "none" || scheduler.empty()) return std::nullopt;
    return std::min(value, nr_requests);
}

const KernelRow* disturbed_by(WriteCause cause, Key attribute, const KernelVersion& v) {
    if (cause == WriteCause::none) return nullptr;
    // A kernel newer than any seen here is treated like an unknown one:
    // whatever some kernel's write disturbed is checked for.
    const bool known =
        v.major != 0 && !(v.major > kNewest.major || (v.major == kNewest.major && v.minor > kNewest.minor));
    for (std::size_t i = 0; i < kRowCount; ++i) {
        const auto& r = kRows[i];
        if (r.cause != cause || (known && !r.holds_on(v))) continue;
        if (r.disturbs == attribute) return &consulted(i);
    }
    return nullptr;
}

const KernelRow& rotational_row(RotationalSource s) {
    // The rows of "rotational-default", in the order of RotationalSource.
    constexpr KRow kRowsBySource[] = {
        KRow::rotational_default_virtio_blk,   KRow::rotational_default_nvme,
        KRow::rotational_default_sd_vpd_b1,    KRow::rotational_default_sd_no_vpd,
        KRow::rotational_default_loop_backing, KRow::rotational_default_loop_unbound,
        KRow::rotational_default_stacked,      KRow::rotational_default_driver,
    };
    static_assert(std::size(kRowsBySource) == static_cast<std::size_t>(RotationalSource::driver) + 1);
    return kernel_row(kRowsBySource[static_cast<std::size_t>(s)]);
}

const KernelRow& scheduler_default_row(SchedulerDefault s) {
    // The rows of "scheduler-default", in the order of SchedulerDefault.
    constexpr KRow kRowsByDefault[] = {
        KRow::scheduler_default_loop_none,
        KRow::scheduler_default_one_queue_mq_deadline,
        KRow::scheduler_default_many_queues_none,
        KRow::scheduler_default_bio_based,
    };
    static_assert(std::size(kRowsByDefault) == static_cast<std::size_t>(SchedulerDefault::bio_based) + 1);
    return kernel_row(kRowsByDefault[static_cast<std::size_t>(s)]);
}

std::optional<std::int64_t> bdi_default(Key key) {
    kernel_row(KRow::bdi_defaults);
    switch (key) {
        case Key::bdi_max_ratio:
            return 100;
        case Key::bdi_min_ratio:
        case Key::bdi_strict_limit:
            return 0;
        default:
            return std::nullopt;
    }
}

std::optional<std::string> md_default(Key key) {
    kernel_row(KRow::md_defaults);
    switch (key) {
        case Key::md_stripe_cache_size:
            return "256";
        case Key::md_sync_speed_min:
        case Key::md_sync_speed_max:
            return "system";
        default:
            return std::nullopt;
    }
}

bool md_has_stripe_cache(std::string_view level) {
    kernel_row(KRow::md_stripe_cache_raid456);
    return level == "raid4" || level == "raid5" || level == "raid6";
}

bool md_resyncs(std::string_view level) {
    kernel_row(KRow::md_sync_speed_redundancy);
    return level == "raid1" || level == "raid10" || md_has_stripe_cache(level);
}

std::string md_speed_value(std::string_view read) {
    kernel_row(KRow::md_sync_speed_local_or_system);
    const auto space = read.find(' ');
    if (space == std::string_view::npos) return std::string(read);
    if (read.substr(space) == " (system)") return "system";
    return std::string(read.substr(0, space));
}

bool md_speed_max_holds(std::int64_t min, std::int64_t max) {
    kernel_row(KRow::md_sync_speed_min_over_max_taken);
    return min <= max;
}

bool bdi_ratios_accepted(std::int64_t min, std::int64_t max) {
    kernel_row(KRow::bdi_min_not_above_max);
    return min <= max;
}

}  // namespace blkpolicy::kernel
