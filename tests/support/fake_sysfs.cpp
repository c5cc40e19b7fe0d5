// SPDX-License-Identifier: MIT
#include "support/fake_sysfs.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace blkpolicy::test {

namespace fs = std::filesystem;

QueueFiles mq_queue(bool rotational, const std::string& scheduler_line) {
    return {
        {"rotational", rotational ? "1" : "0"},
        {"scheduler", scheduler_line},
        {"nr_requests", "256"},
        {"read_ahead_kb", rotational ? "8192" : "128"},
        {"max_sectors_kb", "1280"},
        {"max_hw_sectors_kb", "32767"},
        {"wbt_lat_usec", rotational ? "75000" : "2000"},
        {"write_cache", "write back"},
        {"rq_affinity", "1"},
        {"nomerges", "0"},
        {"add_random", "0"},
        {"iostats", "1"},
        {"discard_max_bytes", "0"},
        {"discard_granularity", "0"},
        {"optimal_io_size", "0"},
        {"logical_block_size", "512"},
        {"io_poll_delay", "-1"},
    };
}

QueueFiles bio_queue() {
    return {
        {"rotational", "0"},
        {"read_ahead_kb", "128"},
        {"max_sectors_kb", "1280"},
        {"max_hw_sectors_kb", "1280"},
        {"write_cache", "write through"},
        {"nomerges", "0"},
        {"add_random", "0"},
        {"iostats", "0"},
        {"discard_max_bytes", "0"},
        {"discard_granularity", "0"},
        {"optimal_io_size", "0"},
        {"logical_block_size", "512"},
        {"io_poll_delay", "-1"},
    };
}

FakeSysfs::FakeSysfs() {
    std::string tmpl = (fs::temp_directory_path() / "blkpolicy-fake-sysfs.XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    root_ = tmpl;
    make_skeleton();
}

FakeSysfs::FakeSysfs(std::filesystem::path root, Keep) : root_(std::move(root)), keep_(true) {
    if (fs::exists(root_ / "block")) throw std::runtime_error(root_.string() + " holds a tree already");
    make_skeleton();
}

void FakeSysfs::make_skeleton() {
    fs::create_directories(root_ / "block");
    fs::create_directories(root_ / "devices/virtual/block");
    for (auto d :
         {"bus/pci/drivers/virtio-pci", "bus/pci/drivers/nvme", "bus/pci/drivers/ahci", "bus/virtio/drivers/virtio_blk",
          "bus/virtio/drivers/virtio_scsi", "bus/scsi/drivers/sd", "class/nvme", "class/block"})
        fs::create_directories(root_ / d);
}

FakeSysfs::~FakeSysfs() {
    if (keep_) return;
    std::error_code ec;
    fs::remove_all(root_, ec);
}

void FakeSysfs::file(const std::string& rel, const std::string& content) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel, std::ios::trunc) << content << '\n';
}

void FakeSysfs::link(const std::string& rel, const std::string& target_rel) {
    const auto at = root_ / rel;
    if (fs::is_symlink(at)) return;  // shared parents (a controller with several disks) link once
    fs::create_directories(at.parent_path());
    // Like the kernel (sysfs_create_link), the path climbs to the target's
    // parent and names the target from there: block/vda/device is
    // "../../../virtio1", not "../..".
    const auto target = root_ / target_rel;
    fs::create_symlink(target.parent_path().lexically_relative(at.parent_path()) / target.filename(), at);
}

std::string FakeSysfs::read(const std::string& rel) const {
    std::ifstream in(root_ / rel);
    std::ostringstream ss;
    ss << in.rdbuf();
    auto s = ss.str();
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

std::string FakeSysfs::devpath_of(const std::string& name) const {
    return (fs::path("block") / fs::read_symlink(root_ / "block" / name)).lexically_normal().string();
}

void FakeSysfs::add_block(const std::string& devpath, const std::string& devnum, const QueueFiles& queue, bool mq) {
    const auto name = fs::path(devpath).filename().string();
    fs::create_directories(root_ / devpath / "holders");
    fs::create_directories(root_ / devpath / "slaves");
    file(devpath + "/dev", devnum);
    file(devpath + "/removable", "0");
    file(devpath + "/ro", "0");
    file(devpath + "/size", "2097152");
    file(devpath + "/diskseq", std::to_string(100 + std::hash<std::string>{}(name) % 100));
    file(devpath + "/uevent", "MAJOR=" + devnum.substr(0, devnum.find(':')) + "\nMINOR=" +
                                  devnum.substr(devnum.find(':') + 1) + "\nDEVNAME=" + name + "\nDEVTYPE=disk");
    link(devpath + "/subsystem", "class/block");
    for (const auto& [k, v] : queue) file(devpath + "/queue/" + k, v);
    if (mq) file(devpath + "/mq/0/nr_tags", "128");  // the hardware queue depth
    link("block/" + name, devpath);
}

void FakeSysfs::add_partition(const std::string& disk_devpath, const std::string& part, const std::string& devnum) {
    const auto p = disk_devpath + "/" + part;
    file(p + "/dev", devnum);
    file(p + "/partition", part.substr(part.find_last_not_of("0123456789") + 1));
    file(p + "/start", "2048");
    file(p + "/size", "1048576");
    fs::create_directories(root_ / p / "holders");
    link(p + "/subsystem", "class/block");
}

void FakeSysfs::set_iosched(const std::string& devpath, const std::map<std::string, std::string>& tunables) {
    fs::remove_all(root_ / devpath / "queue/iosched");
    fs::create_directories(root_ / devpath / "queue/iosched");
    for (const auto& [k, v] : tunables) file(devpath + "/queue/iosched/" + k, v);
}

namespace {
// A lower device is named either as a disk (block/NAME) or as a partition
// ("sda2": found inside its disk's directory).
std::string find_devpath(const FakeSysfs& fsys, const std::string& name) {
    if (fs::exists(fsys.root() / "block" / name)) return fsys.devpath_of(name);
    for (const auto& e : fs::directory_iterator(fsys.root() / "block")) {
        auto disk = fsys.devpath_of(e.path().filename().string());
        if (fs::exists(fsys.root() / disk / name)) return disk + "/" + name;
    }
    throw std::runtime_error("no device " + name);
}
}  // namespace

void FakeSysfs::stack(const std::string& upper, const std::string& lower) {
    const auto up = find_devpath(*this, upper);
    const auto low = find_devpath(*this, lower);
    link(up + "/slaves/" + lower, low);
    link(low + "/holders/" + upper, up);
}

void FakeSysfs::add_virtio_disk(const std::string& name, int virtio_index, const std::string& pci, int minor) {
    const std::string pcidir = "devices/pci0000:00/" + pci;
    const std::string vdev = pcidir + "/virtio" + std::to_string(virtio_index);
    link(pcidir + "/driver", "bus/pci/drivers/virtio-pci");
    link(pcidir + "/subsystem", "bus/pci");
    link(vdev + "/driver", "bus/virtio/drivers/virtio_blk");
    link(vdev + "/subsystem", "bus/virtio");
    file(vdev + "/vendor", "0x1af4");
    file(vdev + "/device", "0x0002");
    for (const auto& d : {std::string("devices/pci0000:00"), pcidir, vdev}) file(d + "/uevent", "");
    const std::string devpath = vdev + "/block/" + name;
    add_block(devpath, "254:" + std::to_string(minor), mq_queue(true, "none [mq-deadline] kyber bfq"), true);
    file(devpath + "/queue/max_sectors_kb", "4096");
    file(devpath + "/queue/max_hw_sectors_kb", "2147483647");
    file(devpath + "/queue/discard_max_bytes", "1073741824");
    file(devpath + "/queue/discard_granularity", "4096");
    set_iosched(devpath, {{"async_depth", "192"},
                          {"fifo_batch", "16"},
                          {"front_merges", "1"},
                          {"read_expire", "500"},
                          {"write_expire", "5000"},
                          {"writes_starved", "2"}});
    file(devpath + "/serial", "vd-serial-" + name);
    file(devpath + "/cache_type", "write back");
    link(devpath + "/device", vdev);
}

void FakeSysfs::add_scsi_qemu_harddisk(const std::string& name, const std::string& hctl,
                                       const std::string& cache_type) {
    const std::string pcidir = "devices/pci0000:00/0000:00:03.0";
    const std::string host = pcidir + "/virtio2/host0";
    const std::string sdev = host + "/target0:0:0/" + hctl;
    link(pcidir + "/driver", "bus/pci/drivers/virtio-pci");
    link(pcidir + "/subsystem", "bus/pci");
    link(pcidir + "/virtio2/driver", "bus/virtio/drivers/virtio_scsi");
    link(pcidir + "/virtio2/subsystem", "bus/virtio");
    // The SCSI host and target are devices of the scsi bus too.
    link(host + "/subsystem", "bus/scsi");
    link(host + "/target0:0:0/subsystem", "bus/scsi");
    link(sdev + "/driver", "bus/scsi/drivers/sd");
    link(sdev + "/subsystem", "bus/scsi");
    file(sdev + "/vendor", "QEMU    ");         // 8 bytes, space padded
    file(sdev + "/model", "QEMU HARDDISK   ");  // 16 bytes, space padded
    file(sdev + "/rev", "2.5+");
    file(sdev + "/timeout", "30");
    file(sdev + "/queue_depth", "128");
    file(sdev + "/wwid", "t10.QEMU    QEMU HARDDISK   drive-scsi0");
    // VPD page 0x80: header (qualifier, page code, length hi, length lo) + serial.
    {
        const std::string serial = "drive-scsi0";
        std::string vpd = std::string("\x00\x80\x00", 3) + static_cast<char>(serial.size()) + serial;
        fs::create_directories(root_ / sdev);
        std::ofstream(root_ / sdev / "vpd_pg80", std::ios::binary) << vpd;
    }
    file(sdev + "/scsi_disk/" + hctl + "/cache_type", cache_type);
    // Every device directory on the way up has its uevent (udev's parents).
    for (const auto& d :
         {std::string("devices/pci0000:00"), pcidir, pcidir + "/virtio2", host, host + "/target0:0:0", sdev})
        file(d + "/uevent", "");
    const std::string devpath = sdev + "/block/" + name;
    add_block(devpath, "8:0", mq_queue(true, "none [mq-deadline] kyber bfq"), true);
    file(devpath + "/queue/io_timeout", "30000");  // sd's 30 s: the same timer as device/timeout
    set_iosched(devpath, {{"fifo_batch", "16"}, {"read_expire", "500"}, {"write_expire", "5000"}});
    file(devpath + "/queue/write_cache", cache_type);
    link(devpath + "/device", sdev);
    add_partition(devpath, name + "1", "8:1");
    add_partition(devpath, name + "2", "8:2");
}

void FakeSysfs::add_scsi_disk(const std::string& name, const std::string& hctl, const std::string& vendor,
                              const std::string& model, const std::string& cache_type, bool rotational, int minor) {
    // On an AHCI controller, as a real drive in a server would be.
    const std::string host = hctl.substr(0, hctl.find(':'));
    const std::string pcidir = "devices/pci0000:00/0000:00:1f.2";
    link(pcidir + "/driver", "bus/pci/drivers/ahci");
    link(pcidir + "/subsystem", "bus/pci");
    const std::string sdev =
        pcidir + "/ata" + host + "/host" + host + "/target" + hctl.substr(0, hctl.rfind(':')) + "/" + hctl;
    link(sdev + "/driver", "bus/scsi/drivers/sd");
    link(sdev + "/subsystem", "bus/scsi");
    file(sdev + "/vendor", vendor);
    file(sdev + "/model", model);
    file(sdev + "/timeout", "30");
    file(sdev + "/queue_depth", "32");
    file(sdev + "/scsi_disk/" + hctl + "/cache_type", cache_type);
    const std::string ata = pcidir + "/ata" + host;
    link(ata + "/host" + host + "/subsystem", "bus/scsi");
    link(fs::path(sdev).parent_path().string() + "/subsystem", "bus/scsi");
    for (const auto& d : {std::string("devices/pci0000:00"), pcidir, ata, ata + "/host" + host,
                          fs::path(sdev).parent_path().string(), sdev})
        file(d + "/uevent", "");
    const std::string devpath = sdev + "/block/" + name;
    add_block(devpath, "8:" + std::to_string(minor), mq_queue(rotational, "none [mq-deadline] kyber bfq"), true);
    file(devpath + "/queue/io_timeout", "30000");
    file(devpath + "/queue/write_cache", cache_type.rfind("write back", 0) == 0 ? "write back" : "write through");
    link(devpath + "/device", sdev);
}

void FakeSysfs::add_cpus(int n, const std::function<std::string(int)>& l3_shared_list) {
    for (int i = 0; i < n; ++i) {
        const std::string c = "devices/system/cpu/cpu" + std::to_string(i) + "/cache/";
        file(c + "index0/level", "1");
        file(c + "index0/shared_cpu_list", std::to_string(i));
        file(c + "index3/level", "3");
        file(c + "index3/shared_cpu_list", l3_shared_list(i));
    }
}

void FakeSysfs::set_wbt_state(const std::string& name, int state) {
    file("kernel/debug/block/" + name + "/rqos/wbt/enabled", std::to_string(state));
}

void FakeSysfs::add_nvme(const std::string& name) {
    const std::string pcidir = "devices/pci0000:00/0000:00:04.0";
    const std::string ctrl = pcidir + "/nvme/nvme0";
    link(pcidir + "/driver", "bus/pci/drivers/nvme");
    link(pcidir + "/subsystem", "bus/pci");
    link(ctrl + "/subsystem", "class/nvme");
    file(ctrl + "/model", "QEMU NVMe Ctrl                          ");  // 40 bytes, space padded
    file(ctrl + "/serial", "deadbeef            ");                     // 20 bytes, space padded
    file(ctrl + "/firmware_rev", "8.2.0   ");
    file(ctrl + "/transport", "pcie");
    for (const auto& d : {std::string("devices/pci0000:00"), pcidir, ctrl}) file(d + "/uevent", "");
    const std::string devpath = ctrl + "/" + name;
    add_block(devpath, "259:0", mq_queue(false), true);
    file(devpath + "/queue/io_timeout", "30000");  // nvme_core.io_timeout's 30 s
    file(devpath + "/nsid", "1");
    file(devpath + "/queue/write_cache", "write back");
    file(devpath + "/wwid", "eui.0000000000000000525400123456");
    file(devpath + "/nguid", "00000000-0000-0000-0000-000000000000");
    link(devpath + "/device", ctrl);
}

void FakeSysfs::add_nvme_multipath(int subsys, int ns, const std::vector<int>& controllers, const std::string& model,
                                   const std::string& serial) {
    const auto padded = [](std::string s, std::size_t width) {
        if (s.size() < width) s.resize(width, ' ');
        return s;
    };
    const std::string S = std::to_string(subsys), N = std::to_string(ns);
    const std::string sub = "devices/virtual/nvme-subsystem/nvme-subsys" + S;
    const std::string wwid = "nvme.1b36-62706d70-51454d55204e564d65204374726c-0000000" + N;
    fs::create_directories(root_ / "class/nvme-subsystem");
    link(sub + "/subsystem", "class/nvme-subsystem");
    file(sub + "/uevent", "");
    file(sub + "/model", padded(model, 40));
    file(sub + "/serial", padded(serial, 20));
    file(sub + "/firmware_rev", "7.2.22  ");
    file(sub + "/subsysnqn", "nqn.2019-08.org.qemu:bp-mpath-subsys");
    file(sub + "/subsystype", "nvm");
    file(sub + "/iopolicy", "numa");
    link("class/nvme-subsystem/nvme-subsys" + S, sub);

    const std::string head = sub + "/nvme" + S + "n" + N;
    add_block(head, "259:" + std::to_string(40 + subsys * 8 + ns), bio_queue(), false);
    file(head + "/queue/write_cache", "write back");
    file(head + "/wwid", wwid);
    file(head + "/nsid", N);
    file(head + "/hidden", "0");
    link(head + "/device", sub);

    for (const int c : controllers) {
        const std::string C = std::to_string(c);
        const std::string pci =
            "devices/pci0000:00/0000:00:0" + std::to_string(3 + c) + ".0/0000:0" + std::to_string(1 + c) + ":00.0";
        const std::string ctrl = pci + "/nvme/nvme" + C;
        link(pci + "/driver", "bus/pci/drivers/nvme");
        link(pci + "/subsystem", "bus/pci");
        link(ctrl + "/subsystem", "class/nvme");
        link(ctrl + "/device", pci);
        for (const auto& d : {std::string("devices/pci0000:00"), pci, ctrl}) file(d + "/uevent", "");
        file(ctrl + "/model", padded(model, 40));
        file(ctrl + "/serial", padded(serial, 20));
        file(ctrl + "/transport", "pcie");
        file(ctrl + "/cntlid", C);
        file(ctrl + "/state", "live");
        link(sub + "/nvme" + C, ctrl);

        const std::string name = "nvme" + S + "c" + C + "n" + N;
        const std::string path = ctrl + "/" + name;
        add_block(path, "0:0", mq_queue(false, "[none] mq-deadline"), true);
        fs::remove(root_ / path / "dev");  // a hidden disk has no dev_t
        file(path + "/uevent", "DEVTYPE=disk\nDISKSEQ=" + std::to_string(2 + c));
        file(path + "/hidden", "1");
        file(path + "/queue/io_timeout", "30000");
        file(path + "/wwid", wwid);
        file(path + "/nsid", N);
        link(path + "/device", ctrl);
    }
}

void FakeSysfs::add_dm(const std::string& name, const std::string& dm_name, const std::string& uuid, int minor) {
    const std::string devpath = "devices/virtual/block/" + name;
    add_block(devpath, "253:" + std::to_string(minor), bio_queue(), false);
    file(devpath + "/dm/name", dm_name);
    file(devpath + "/dm/uuid", uuid);
    file(devpath + "/dm/suspended", "0");
}

void FakeSysfs::add_md(const std::string& name, const std::string& level, int minor) {
    const std::string devpath = "devices/virtual/block/" + name;
    add_block(devpath, "9:" + std::to_string(minor), bio_queue(), false);
    file(devpath + "/md/level", level);
    file(devpath + "/md/raid_disks", "2");
    file(devpath + "/md/array_state", "clean");
    // The array's own tunables, as a running array of the level has them
    // (the kernel rows md-sync-speed:arrays-with-redundancy and
    // md-stripe-cache:raid456-17-32768, seen in the guests' arrays).
    if (level != "raid0" && level != "linear") {
        file(devpath + "/md/sync_speed_min", "1000 (system)");
        file(devpath + "/md/sync_speed_max", "200000 (system)");
    }
    if (level == "raid4" || level == "raid5" || level == "raid6") file(devpath + "/md/stripe_cache_size", "256");
}

void FakeSysfs::add_loop(const std::string& name, int minor, const std::string& backing_file) {
    const std::string devpath = "devices/virtual/block/" + name;
    auto q = mq_queue(true);
    q["read_ahead_kb"] = "2560";
    q["wbt_lat_usec"] = "2000";  // fixed at queue creation, before attach made it rotational
    q["max_hw_sectors_kb"] = "1280";
    q["nr_requests"] = "128";
    add_block(devpath, "7:" + std::to_string(minor), q, true);
    file(devpath + "/loop/backing_file", backing_file);
    file(devpath + "/loop/offset", "0");
    file(devpath + "/loop/autoclear", "0");
}

void FakeSysfs::add_zram(const std::string& name) {
    const std::string devpath = "devices/virtual/block/" + name;
    add_block(devpath, "251:0", bio_queue(), false);
    file(devpath + "/disksize", "0");
}

void build_fleet(FakeSysfs& f) {
    f.add_scsi_qemu_harddisk("sda", "0:0:0:0", "write back");
    f.add_virtio_disk("vda", 1, "0000:00:02.0", 0);
    f.add_virtio_disk("vdb", 3, "0000:00:05.0", 16);
    f.add_virtio_disk("vdc", 4, "0000:00:06.0", 32);
    f.add_nvme("nvme0n1");
    f.add_dm("dm-0", "luks-root", "CRYPT-LUKS2-5f0c1a2b3c4d4e5f8a9b0c1d2e3f4a5b-luks-root", 0);
    f.add_dm("dm-1", "vg0-root", "LVM-Abc123Def456Ghi789Jkl012Mno345PqRstu678Vwx901Yz234Abc567Def890", 1);
    f.stack("dm-0", "sda2");
    f.stack("dm-1", "dm-0");
    f.add_md("md0", "raid1", 0);
    f.stack("md0", "vdb");
    f.stack("md0", "vdc");
    f.add_loop("loop0", 0, "/var/lib/images/disk.img");
    f.add_zram("zram0");
}

}  // namespace blkpolicy::test
