// SPDX-License-Identifier: MIT
#include "udev/discovery.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

#include "policy/attributes.hpp"
#include "udev/sysfs_text.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace blkpolicy::udev {

namespace {
std::map<std::string, std::string> read_udev_properties(const std::string& db_dir, const std::string& devnum);
}  // namespace

using policy::DeviceFacts;
using policy::FactNeeds;
using util::trim;

namespace {

std::string read_trimmed(const Sysfs& s, const std::string& rel) {
    auto r = s.read(rel);
    return r.ok() ? trim(r.value) : std::string();
}

// SCSI VPD page 0x80 (unit serial number): 4-byte header, byte 3 = length.
std::string serial_from_vpd80(const std::string& raw) {
    if (raw.size() < 4) return {};
    const auto len = static_cast<unsigned char>(raw[3]);
    if (raw.size() < 4u + len) return {};
    return trim(raw.substr(4, len));
}

// SCSI VPD page 0x89 (ATA Information): the ATA IDENTIFY DEVICE data starts
// at byte 60; its model number is words 27-46, two characters per word,
// the first in the high byte.
std::string ata_model_from_vpd89(const std::string& raw) {
    constexpr std::size_t kIdentify = 60, kModel = kIdentify + 27 * 2, kLength = 40;
    if (raw.size() < kModel + kLength || static_cast<unsigned char>(raw[1]) != 0x89) return {};
    std::string model(kLength, ' ');
    for (std::size_t i = 0; i < kLength; i += 2) {
        model[i] = raw[kModel + i + 1];
        model[i + 1] = raw[kModel + i];
    }
    if (!std::all_of(model.begin(), model.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) return {};
    return trim(model);
}

std::string_view last_component(std::string_view path) {
    const auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Walks from the block device's directory up to the root of devices/,
// collecting the driver of each ancestor that has one (udev's DRIVERS==).
// The disk's own directory and the "block" directory above it are class
// devices, which no driver binds: not asked (two failed readlinks a device).
std::vector<std::string> drivers_of(const Sysfs& s, const std::string& syspath) {
    std::vector<std::string> out;
    std::string_view p = syspath;
    const auto up = [&p] {
        const auto slash = p.rfind('/');
        p = slash == std::string_view::npos ? std::string_view() : p.substr(0, slash);
    };
    up();
    if (last_component(p) == "block") up();
    std::string link;
    while (!p.empty() && p != "devices" && p != "/") {
        link.assign(p);
        link += "/driver";
        if (auto target = s.readlink(link)) out.emplace_back(last_component(*target));
        up();
    }
    return out;
}

// nvme<S>n<N> (ctrl empty) or nvme<S>c<C>n<N>, as the kernel names a
// multipath head and its paths.
struct NvmeName {
    std::string subsys, ctrl, ns;
};
std::optional<NvmeName> parse_nvme_name(std::string_view name) {
    if (!name.starts_with("nvme")) return std::nullopt;
    name.remove_prefix(4);
    const auto number = [&name]() -> std::string {
        std::size_t n = 0;
        while (n < name.size() && std::isdigit(static_cast<unsigned char>(name[n]))) ++n;
        std::string out(name.substr(0, n));
        name.remove_prefix(n);
        return out;
    };
    NvmeName out;
    out.subsys = number();
    if (out.subsys.empty()) return std::nullopt;
    if (name.starts_with("c")) {
        name.remove_prefix(1);
        out.ctrl = number();
        if (out.ctrl.empty()) return std::nullopt;
    }
    if (!name.starts_with("n")) return std::nullopt;
    name.remove_prefix(1);
    out.ns = number();
    if (out.ns.empty() || !name.empty()) return std::nullopt;
    return out;
}

// A head's parent device is its subsystem (class nvme-subsystem); a plain
// namespace's is its controller (class nvme).
bool is_nvme_head(const Sysfs& s, const std::string& name) {
    auto n = parse_nvme_name(name);
    if (!n || !n->ctrl.empty()) return false;
    auto bus = s.readlink("block/" + name + "/device/subsystem");
    return bus && last_component(*bus) == "nvme-subsystem";
}

}  // namespace

std::vector<std::string> nvme_paths_of(const Sysfs& s, const std::string& head) {
    std::vector<std::string> out;
    // One readlink tells a head from a plain namespace (named alike), so
    // only a head's lookups list block/.
    if (!is_nvme_head(s, head)) return out;
    const auto h = parse_nvme_name(head);
    for (auto& other : s.list("block")) {
        auto p = parse_nvme_name(other);
        if (p && !p->ctrl.empty() && p->subsys == h->subsys && p->ns == h->ns) out.push_back(std::move(other));
    }
    return out;
}

std::optional<std::string> nvme_head_of(const Sysfs& s, const std::string& path) {
    auto p = parse_nvme_name(path);
    if (!p || p->ctrl.empty()) return std::nullopt;
    std::string head = "nvme" + p->subsys + "n" + p->ns;
    if (!s.exists("block/" + head)) return std::nullopt;
    return head;
}

std::vector<std::string> lower_devices(const Sysfs& s, const std::string& name) {
    auto out = s.list("block/" + name + "/slaves");
    for (auto& path : nvme_paths_of(s, name))
        if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
    return out;
}

std::vector<std::string> upper_devices(const Sysfs& s, const std::string& name) {
    auto out = s.list("block/" + name + "/holders");
    if (auto head = nvme_head_of(s, name); head && std::find(out.begin(), out.end(), *head) == out.end())
        out.push_back(std::move(*head));
    return out;
}

bool valid_device_name(std::string_view name) {
    if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-' || c == ':' || c == '!';
    });
}

std::vector<std::string> list_block_devices(const Sysfs& sysfs) {
    auto names = sysfs.list("block");
    names.erase(std::remove_if(names.begin(), names.end(), [](const auto& n) { return !valid_device_name(n); }),
                names.end());
    return names;
}

std::optional<DeviceFacts> read_facts(const Sysfs& s, const std::string& name, const std::string& udev_db,
                                      FactNeeds needs, const policy::AttributeNames& attributes) {
    if (!valid_device_name(name)) return std::nullopt;
    const std::string dir = "block/" + name;

    DeviceFacts f;
    f.name = name;
    // dev is there for as long as the device is: a failed read means it is
    // gone, unless the disk is hidden (which has no dev at all).
    if (auto dev = s.read(dir + "/dev"); dev.ok())
        f.devnum = trim(dev.value);
    else if (read_trimmed(s, dir + "/hidden") == "1")
        f.hidden = true;
    else
        return std::nullopt;
    f.diskseq = read_trimmed(s, dir + "/diskseq");
    // Without a diskseq (kernels before 5.15, fake trees), identity falls
    // back to what names the hardware or the stacked device.
    if (f.diskseq.empty()) needs |= policy::kIdentityFacts;
    f.read = needs;
    f.removable = read_trimmed(s, dir + "/removable") == "1";
    f.request_based = s.is_dir(dir + "/mq");
    if (auto rot = s.read(dir + "/queue/rotational"); rot.ok()) {
        f.has_queue = true;
        const auto& row = policy::fixed_attribute(policy::Key::rotational);
        f.live_values[row.key] = normalise_readback(&row, rot.value);
        f.rotational = f.live_values[row.key] == "1";
    }
    if (auto sched = s.read(dir + "/queue/scheduler"); sched.ok()) {
        f.has_queue = true;
        auto line = parse_scheduler_line(sched.value);
        f.schedulers = line.offered;
        f.scheduler = line.active;
        f.live_values[std::string(policy::key_text(policy::Key::scheduler))] = line.active;
    }
    // A file read from queue/ says it is there; asked only when none could be.
    if (!f.has_queue) f.has_queue = s.is_dir(dir + "/queue");

    if (needs & policy::kFactDrivers) {
        auto syspath = s.resolve(dir);
        if (!syspath) return std::nullopt;
        f.syspath = *syspath;
        f.drivers = drivers_of(s, *syspath);
        if (!f.drivers.empty()) f.driver = f.drivers.front();
    }
    // Identity strings: SCSI and NVMe keep them on the parent device,
    // virtio and NVMe namespaces on the disk itself. Only SCSI's vendor is a
    // name (virtio's device/vendor is a numeric PCI vendor id).
    if (needs & policy::kFactModel) {
        const auto parent_bus = s.readlink(dir + "/device/subsystem");
        const auto bus = parent_bus ? last_component(*parent_bus) : std::string_view();
        if (bus == "scsi") f.vendor = read_trimmed(s, dir + "/device/vendor");
        // An NVMe multipath head's parent is its subsystem, which has the
        // model and serial its controllers share.
        if (bus == "scsi" || bus == "nvme" || bus == "nvme-subsystem") f.model = read_trimmed(s, dir + "/device/model");
        // A SATA disk behind libata: the SCSI model is the first 16
        // characters of the ATA one; the whole model (what udev's ID_MODEL,
        // lsblk and smartctl show) is in the ATA Information VPD page.
        if (f.vendor == "ATA") {
            if (auto ata = ata_model_from_vpd89(s.read(dir + "/device/vpd_pg89").value); !ata.empty()) f.model = ata;
        }
    }
    if (needs & policy::kFactSerial) {
        f.serial = read_trimmed(s, dir + "/serial");
        if (f.serial.empty()) f.serial = read_trimmed(s, dir + "/device/serial");
        if (f.serial.empty()) {
            auto vpd = s.read(dir + "/device/vpd_pg80");
            if (vpd.ok()) f.serial = serial_from_vpd80(vpd.value);
        }
    }
    if (needs & policy::kFactWwid) {
        f.wwid = read_trimmed(s, dir + "/wwid");
        if (f.wwid.empty()) f.wwid = read_trimmed(s, dir + "/device/wwid");
    }
    if (needs & policy::kFactCache) {
        f.cache_type = read_trimmed(s, dir + "/cache_type");
        if (f.cache_type.empty()) {
            for (const auto& hctl : s.list(dir + "/device/scsi_disk")) {
                f.cache_type = read_trimmed(s, dir + "/device/scsi_disk/" + hctl + "/cache_type");
                if (!f.cache_type.empty()) break;
            }
        }
    }
    if (f.devnum.rfind("7:", 0) == 0) f.stack = policy::Stack::loop;  // major 7 is loop, bound or not
    // dm, md and loop devices have no parent device: they live under
    // devices/virtual/. A disk found elsewhere is not asked for dm/, md/ and
    // loop/ (three failed stats a device).
    const bool may_stack = f.syspath.empty() || f.syspath.rfind("devices/virtual/", 0) == 0;
    if ((needs & policy::kFactStack) && may_stack) {
        if (s.is_dir(dir + "/dm")) {
            f.stack = policy::Stack::dm;
            f.dm_name = read_trimmed(s, dir + "/dm/name");
            f.dm_uuid = read_trimmed(s, dir + "/dm/uuid");
        } else if (s.is_dir(dir + "/md")) {
            f.stack = policy::Stack::md;
            f.md_level = read_trimmed(s, dir + "/md/level");
        } else if (f.stack == policy::Stack::loop || s.is_dir(dir + "/loop")) {
            f.stack = policy::Stack::loop;  // loop/ exists only while bound
            f.loop_backing_file = read_trimmed(s, dir + "/loop/backing_file");
        } else if (is_nvme_head(s, name)) {
            f.stack = policy::Stack::nvme_multipath;
        }
    }
    if (needs & policy::kFactTopology) {
        f.slaves = lower_devices(s, name);
        f.holders = upper_devices(s, name);
    }
    if (needs & policy::kFactProperties) {
        // udev's ENV{} sees the kernel's uevent properties (DEVTYPE, DEVNAME,
        // ...) and what its rules added, kept in its database.
        std::istringstream uevent(s.read(dir + "/uevent").value);
        std::string line;
        while (std::getline(uevent, line)) {
            const auto eq = line.find('=');
            if (eq != std::string::npos && eq > 0) f.properties[line.substr(0, eq)] = line.substr(eq + 1);
        }
        if (!f.devnum.empty())
            for (auto& [k, v] : read_udev_properties(udev_db, f.devnum)) f.properties[k] = v;
    }
    if ((needs & policy::kFactAttributes) && !attributes.empty()) {
        for (const auto& a : attributes.own)
            if (auto v = read_attribute(s, dir + "/" + a)) f.own_attributes[a] = *v;
        if (!attributes.parents.empty() || attributes.levels) {
            const auto syspath = f.syspath.empty() ? s.resolve(dir) : std::optional<std::string>(f.syspath);
            for (const auto& level : syspath ? device_levels(s, *syspath) : std::vector<DeviceLevel>{}) {
                for (const auto& a : attributes.parents)
                    if (auto v = read_attribute(s, level.dir + "/" + a)) f.parent_attributes[a].push_back(*v);
                if (!attributes.levels) continue;
                policy::DeviceFacts::Level l{level.kernel, level.subsystem, level.driver, {}};
                for (const auto& a : attributes.level_attributes)
                    if (auto v = read_attribute(s, level.dir + "/" + a)) l.attributes[a] = *v;
                f.levels.push_back(std::move(l));
            }
        }
    }
    return f;
}

std::optional<std::string> read_attribute(const Sysfs& s, const std::string& path) {
    auto r = s.read(path);
    if (!r.ok()) return std::nullopt;
    auto& v = r.value;
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    return v;
}

std::vector<DeviceLevel> device_levels(const Sysfs& s, const std::string& syspath) {
    std::vector<DeviceLevel> out;
    std::string_view p = syspath;
    while (!p.empty() && p != "devices" && p.find('/') != std::string_view::npos) {
        const std::string dir(p);
        // udev's parents are the directories that are devices (an uevent file);
        // the device itself always counts.
        if (out.empty() || s.exists(dir + "/uevent")) {
            DeviceLevel l;
            l.dir = dir;
            l.kernel = std::string(last_component(p));
            if (auto sub = s.readlink(dir + "/subsystem")) l.subsystem = std::string(last_component(*sub));
            if (auto drv = s.readlink(dir + "/driver")) l.driver = std::string(last_component(*drv));
            out.push_back(std::move(l));
        }
        p = p.substr(0, p.rfind('/'));
    }
    return out;
}

namespace {

// udev's properties for a device (E: lines of <db_dir>/b<major>:<minor>);
// empty when udevd has not recorded the device.
std::map<std::string, std::string> read_udev_properties(const std::string& db_dir, const std::string& devnum) {
    std::map<std::string, std::string> out;
    if (db_dir.empty() || devnum.empty()) return out;
    std::ifstream in(db_dir + "/b" + devnum);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("E:", 0) != 0) continue;
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        out[line.substr(2, eq - 2)] = line.substr(eq + 1);
    }
    return out;
}

// modprobe's name for a module file: no directory, no .ko[.xz|.zst|.gz],
// and '-' the same as '_' (kyber-iosched.ko.xz is kyber_iosched).
std::string module_name(std::string_view path) {
    path = last_component(path);
    if (auto ko = path.find(".ko"); ko != std::string_view::npos) path = path.substr(0, ko);
    return std::string(path);
}

bool same_module_name(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];
        if (x != y) return false;
    }
    return true;
}

}  // namespace

std::optional<std::vector<std::string>> loadable_schedulers(const std::string& modules_dir) {
    // The elevator asks for "NAME-iosched" (request_module in
    // block/elevator.c). modprobe finds that as an alias ("alias bfq-iosched
    // bfq": bfq.ko declares one), or as a module's own name with '-' and '_'
    // alike (Debian's kyber-iosched.ko declares none), in modules.dep; a
    // module built in (modules.builtin) satisfies it at once.
    static constexpr std::string_view kSuffix = "-iosched";
    auto scheduler_of = [](std::string_view name) -> std::optional<std::string> {
        if (name.size() <= kSuffix.size() || !same_module_name(name.substr(name.size() - kSuffix.size()), kSuffix))
            return std::nullopt;
        return std::string(name.substr(0, name.size() - kSuffix.size()));
    };
    std::vector<std::string> out;
    auto add = [&](std::optional<std::string> name) {
        if (name && std::find(out.begin(), out.end(), *name) == out.end()) out.push_back(std::move(*name));
    };
    // Only the lines that name "iosched": a distribution kernel's
    // modules.alias has some 26,000 lines, and reading each through a stream
    // cost about 100 million instructions, 95% of a run's, which every run of
    // plan, apply and status, each early run in the initramfs and each
    // audit of the daemon paid (under TCG most of a second).
    bool readable = false;
    auto each_line_naming_iosched = [&](const char* file, auto&& take) {
        // Mapped, not read: modules.alias of a distribution kernel is about
        // 1.3 MB, and nothing here needs a copy of it.
        const util::Fd fd{::open((modules_dir + file).c_str(), O_RDONLY | O_CLOEXEC)};
        struct stat st {};
        if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return;
        readable = true;
        if (st.st_size <= 0) return;
        const auto size = static_cast<std::size_t>(st.st_size);
        void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
        if (map == MAP_FAILED) return;
        const std::string_view all(static_cast<const char*>(map), size);
        // The word found by its 'h', the rarest of its letters in these
        // files (one byte in 200 of modules.alias, against one in 13 for
        // 'i'): memchr skips the rest, a search for the word's first letter
        // or memmem stops at many more places.
        static constexpr std::string_view kWord = "iosched";
        static constexpr std::size_t kAt = kWord.find('h');
        for (std::size_t pos = kAt; pos < all.size();) {
            const void* h = std::memchr(all.data() + pos, kWord[kAt], all.size() - pos);
            if (!h) break;
            const auto at = static_cast<std::size_t>(static_cast<const char*>(h) - all.data());
            if (all.compare(at - kAt, kWord.size(), kWord) != 0) {
                pos = at + 1;
                continue;
            }
            const auto begin = all.rfind('\n', at);
            const auto from = begin == std::string_view::npos ? 0 : begin + 1;
            const auto to = std::min(all.find('\n', at), all.size());
            take(all.substr(from, to - from));
            pos = to + 1 + kAt;
        }
        ::munmap(map, size);
    };
    // modules.alias: "alias ALIAS MODULE".
    each_line_naming_iosched("/modules.alias", [&](std::string_view line) {
        constexpr std::string_view kBlank = " \t\r";
        auto word = [&](std::size_t& at) {
            const auto from = std::min(line.find_first_not_of(kBlank, at), line.size());
            at = std::min(line.find_first_of(kBlank, from), line.size());
            return line.substr(from, at - from);
        };
        std::size_t at = 0;
        if (word(at) == "alias") add(scheduler_of(word(at)));
    });
    // modules.dep: "kernel/block/kyber-iosched.ko.xz:" then its dependencies;
    // modules.builtin: one path a line.
    for (const char* file : {"/modules.dep", "/modules.builtin"})
        each_line_naming_iosched(file, [&](std::string_view line) {
            const auto path = line.substr(0, line.find(':'));
            if (!path.empty()) add(scheduler_of(module_name(path)));
        });
    if (!readable) return std::nullopt;
    std::sort(out.begin(), out.end());
    return out;
}

std::optional<int> rotation_rate(const Sysfs& s, const std::string& name) {
    // Block Device Characteristics: 4-byte header, then MEDIUM ROTATION RATE
    // (big-endian, bytes 4-5).
    auto r = s.read("block/" + name + "/device/vpd_pgb1");
    if (!r.ok() || r.value.size() < 6) return std::nullopt;
    return (static_cast<unsigned char>(r.value[4]) << 8) | static_cast<unsigned char>(r.value[5]);
}

std::int64_t hw_tags(const Sysfs& s, const std::string& name) {
    return util::parse_int(s.read("block/" + name + "/mq/0/nr_tags").value).value_or(0);
}

BackingStore loop_backing_store(const Sysfs& s, const std::string& backing_file) {
    BackingStore out;
    struct stat st {};
    if (backing_file.empty() || ::stat(backing_file.c_str(), &st) != 0) return out;
    out.known = true;
    if (major(st.st_dev) == 0) {
        // An anonymous device: tmpfs and friends have no block device, and
        // the loop driver then calls the backing store non-rotational.
        struct statfs fs {};
        out.what = ::statfs(backing_file.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC ? "tmpfs" : "a filesystem";
        return out;
    }
    const std::string dev = "dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
    auto path = s.resolve(dev);
    if (!path) {
        out.known = false;
        return out;
    }
    std::filesystem::path p(*path);
    out.what = p.filename().string();
    // A partition has no queue of its own: its disk's counts.
    if (s.exists(*path + "/partition")) p = p.parent_path();
    out.disk = p.filename().string();
    auto rot = s.read(p.string() + "/queue/rotational");
    if (!rot.ok()) {
        out.known = false;
        return out;
    }
    out.rotational = util::trim(rot.value) == "1";
    if (auto wc = s.read(p.string() + "/queue/write_cache"); wc.ok()) out.write_cache = util::trim(wc.value);
    return out;
}

std::vector<std::pair<std::string, std::string>> lowers_queue(const Sysfs& s, const std::string& name,
                                                              const std::string& attribute) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& lower : lower_devices(s, name)) {
        // slaves/ names partitions too, which block/ does not list.
        auto path = s.resolve("block/" + name + "/slaves/" + lower);
        if (!path) path = s.resolve("block/" + lower);
        if (!path) continue;
        std::filesystem::path p(*path);
        if (s.exists(*path + "/partition")) p = p.parent_path();
        auto v = s.read(p.string() + "/queue/" + attribute);
        if (v.ok()) out.emplace_back(lower, util::trim(v.value));
    }
    return out;
}

std::vector<std::pair<std::string, bool>> lowers_rotational(const Sysfs& s, const std::string& name) {
    std::vector<std::pair<std::string, bool>> out;
    for (const auto& [lower, value] : lowers_queue(s, name, "rotational")) out.emplace_back(lower, value == "1");
    return out;
}

ReadResult read_value(const Sysfs& s, const std::string& name, const std::string& key) {
    // Its row (an iosched.NAME's is made for it), whose path and reading it asks.
    const policy::AttributeSpec* spec = policy::fixed_attribute(key);
    std::optional<policy::AttributeSpec> family;
    if (!spec && (family = policy::find_attribute(key))) spec = &*family;
    auto r = s.read("block/" + name + "/" + (spec ? spec->path : "queue/" + key));
    if (!r.ok()) return r;
    r.value = normalise_readback(spec, r.value);
    if (key == policy::key_text(policy::Key::wbt_lat_usec) && r.value != "0" && s.has_debugfs_block()) {
        // debugfs (when mounted) has the real state: 3 off by default (bfq
        // turned it off), 4 off by hand. 6.1 keeps showing the old latency
        // in sysfs after bfq turned wbt off.
        auto state = s.read("kernel/debug/block/" + name + "/rqos/wbt/enabled");
        if (state.ok()) {
            const auto st = util::trim(state.value);
            if (st == "3" || st == "4") r.value = "0";
        }
    }
    return r;
}

policy::Values read_values(const Sysfs& s, const std::string& name, const std::vector<std::string>& keys,
                           const policy::Values& known) {
    policy::Values v;
    for (const auto& key : keys) {
        if (auto k = known.find(key); k != known.end()) {
            v[key] = k->second;
            continue;
        }
        if (auto r = read_value(s, name, key); r.ok()) v[key] = std::move(r.value);
    }
    return v;
}

policy::Values read_values(const Sysfs& s, const std::string& name) {
    policy::Values v;
    const std::string dir = "block/" + name + "/";
    auto put = [&](const std::string& key) {
        if (auto r = read_value(s, name, key); r.ok()) v[key] = std::move(r.value);
    };
    for (const auto& key : policy::fixed_attribute_keys()) put(key);
    for (const auto key :
         {policy::Key::max_hw_sectors_kb, policy::Key::discard_granularity, policy::Key::optimal_io_size})
        put(std::string(policy::key_text(key)));
    for (const auto& tunable : s.list(dir + "queue/iosched")) {
        if (auto spec = policy::find_attribute("iosched." + tunable)) put(spec->key);
    }
    return v;
}

}  // namespace blkpolicy::udev
