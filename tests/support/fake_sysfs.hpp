// SPDX-License-Identifier: MIT
// Builds fake sysfs trees on disk that mirror the real layout: /sys/block/NAME
// is a relative symlink into /sys/devices/..., `device`, `driver` and
// `subsystem` are relative symlinks, SCSI strings carry their padding,
// bio-based queues have no scheduler files and no mq/ directory. Used for the
// layouts this kernel cannot produce (SCSI, NVMe, dm, md).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace blkpolicy::test {

using QueueFiles = std::map<std::string, std::string>;

// queue/ of a blk-mq disk (scheduler, nr_requests, wbt, rq_affinity, iosched/).
QueueFiles mq_queue(bool rotational, const std::string& scheduler_line = "[none] mq-deadline kyber bfq");
// queue/ of a bio-based device (dm linear/crypt, md, zram).
QueueFiles bio_queue();

class FakeSysfs {
public:
    // A fresh tree in a new temporary directory, removed on destruction.
    FakeSysfs();
    // A fresh tree at `root` (created; it must not hold a tree already),
    // left in place: for tools that hand it to other processes.
    enum class Keep { yes };
    FakeSysfs(std::filesystem::path root, Keep);
    ~FakeSysfs();
    FakeSysfs(const FakeSysfs&) = delete;
    FakeSysfs& operator=(const FakeSysfs&) = delete;

    const std::filesystem::path& root() const { return root_; }

    void file(const std::string& rel, const std::string& content);
    // A symlink at `rel` pointing at `target_rel` (both relative to the root),
    // stored as a relative path the way sysfs does.
    void link(const std::string& rel, const std::string& target_rel);
    std::string read(const std::string& rel) const;

    // Registers a block device at `devpath` (relative to the root, under
    // devices/) with block/NAME -> devpath, dev, queue/ and friends.
    void add_block(const std::string& devpath, const std::string& devnum, const QueueFiles& queue, bool mq);
    void add_partition(const std::string& disk_devpath, const std::string& part, const std::string& devnum);
    // Puts iosched/ tunables for the active scheduler.
    void set_iosched(const std::string& devpath, const std::map<std::string, std::string>& tunables);
    void stack(const std::string& upper, const std::string& lower);  // slaves/holders links, by name

    // Ready-made devices, each as on a QEMU guest.
    void add_virtio_disk(const std::string& name, int virtio_index, const std::string& pci, int minor);
    void add_scsi_qemu_harddisk(const std::string& name, const std::string& hctl, const std::string& cache_type);
    // A SCSI disk on an AHCI controller (host N of hctl "N:0:0:0"), any vendor/model.
    void add_scsi_disk(const std::string& name, const std::string& hctl, const std::string& vendor,
                       const std::string& model, const std::string& cache_type, bool rotational, int minor);
    void add_nvme(const std::string& name);
    // NVMe multipath as Debian's 6.12 shows one namespace behind two
    // controllers (QEMU's nvme-subsys, read in a guest): the head
    // nvme<S>n<N> under devices/virtual/nvme-subsystem/nvme-subsys<S>
    // (bio-based; device/ is the subsystem, with model, serial and
    // iopolicy), and per controller C a hidden path nvme<S>c<C>n<N> (blk-mq,
    // no dev file, hidden 1) under that controller's PCI function.
    void add_nvme_multipath(int subsys, int ns, const std::vector<int>& controllers, const std::string& model,
                            const std::string& serial);
    // CPUs cpu0..cpuN-1, each with an L3 shared as `l3_shared_list` says ("0-3").
    void add_cpus(int n, const std::function<std::string(int)>& l3_shared_list);
    // debugfs (mounted under sysfs) rqos/wbt/enabled for a device.
    void set_wbt_state(const std::string& name, int state);
    void add_dm(const std::string& name, const std::string& dm_name, const std::string& uuid, int minor);
    void add_md(const std::string& name, const std::string& level, int minor);
    void add_loop(const std::string& name, int minor, const std::string& backing_file);
    void add_zram(const std::string& name);

    // The devpath a name's block/ link points at.
    std::string devpath_of(const std::string& name) const;

private:
    void make_skeleton();
    std::filesystem::path root_;
    bool keep_ = false;
};

// A tree with every layout the issue names: a QEMU HARDDISK SCSI disk sda
// with partitions sda1, sda2 (cache_type write back), a virtio disk vda, an
// NVMe namespace nvme0n1, dm-0 (dm-crypt on sda2) under dm-1 (LVM linear),
// md0 (raid1 over vdb and vdc), a bound loop0 and zram0.
void build_fleet(FakeSysfs& fs);

}  // namespace blkpolicy::test
