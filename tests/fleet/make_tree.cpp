// SPDX-License-Identifier: MIT
// make-fake-sysfs DIR [--virtio N]: writes a fake sysfs tree at DIR. By
// default the tree of the golden tests (a QEMU HARDDISK SCSI disk with
// partitions, virtio disks, NVMe, dm-crypt under LVM, md raid1, a bound
// loop, zram), for the fleet test's simulated hosts (tests/fleet/run.py);
// with --virtio N, N virtio disks as bench/ builds them, for profiling a
// command at scale by hand (strace -c, valgrind --tool=callgrind).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "support/fake_sysfs.hpp"

namespace {
// vda .. vdz, vdaa ..: the kernel's names.
std::string vd_name(int i) {
    std::string s;
    int n = i;
    do {
        s.insert(s.begin(), static_cast<char>('a' + n % 26));
        n = n / 26 - 1;
    } while (n >= 0);
    return "vd" + s;
}
}  // namespace

int main(int argc, char** argv) {
    const bool virtio = argc == 4 && std::string(argv[2]) == "--virtio";
    if ((argc != 2 && !virtio) || argv[1][0] == '-') {  // "--help" is not a directory to fill
        std::cerr << "usage: make-fake-sysfs DIR [--virtio N]\n";
        return 2;
    }
    try {
        blkpolicy::test::FakeSysfs tree(argv[1], blkpolicy::test::FakeSysfs::Keep::yes);
        if (!virtio) {
            blkpolicy::test::build_fleet(tree);
            return 0;
        }
        const int n = std::atoi(argv[3]);
        for (int i = 0; i < n; ++i) {
            char pci[32];
            std::snprintf(pci, sizeof pci, "0000:%02x:%02x.0", (i / 32) % 256, i % 32);
            tree.add_virtio_disk(vd_name(i), 1000 + i,
                                 std::string(pci) + (i >= 8192 ? "/x" + std::to_string(i / 8192) : ""), i);
        }
    } catch (const std::exception& e) {
        std::cerr << "make-fake-sysfs: " << e.what() << '\n';
        return 1;
    }
    return 0;
}
