// SPDX-License-Identifier: MIT
// make-fake-sysfs DIR: writes the fake sysfs tree of the golden tests (a
// QEMU HARDDISK SCSI disk with partitions, virtio disks, NVMe, dm-crypt under
// LVM, md raid1, a bound loop, zram) at DIR, for the fleet test's simulated
// hosts (tests/fleet/run.py): each a `blkpolicy run --sysfs-root DIR`.
#include <exception>
#include <iostream>

#include "support/fake_sysfs.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make-fake-sysfs DIR\n";
        return 2;
    }
    try {
        blkpolicy::test::FakeSysfs tree(argv[1], blkpolicy::test::FakeSysfs::Keep::yes);
        blkpolicy::test::build_fleet(tree);
    } catch (const std::exception& e) {
        std::cerr << "make-fake-sysfs: " << e.what() << '\n';
        return 1;
    }
    return 0;
}
