// SPDX-License-Identifier: MIT
// The host's own facts for host.* match keys: the kernel's release, the
// virtualization, DMI's maker and machine type, the hostname. Read from the
// sysfs root given (a fake tree in tests), and from the running system
// (uname, CPUID, the hostname) only when that root is the real /sys.
#pragma once

#include <string>

#include "policy/facts.hpp"
#include "policy/host.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::udev {

// What virtualization is decided from: DMI's strings, the CPUID hypervisor
// leaf and /sys/hypervisor/type.
struct VirtualizationSigns {
    std::string product_name, sys_vendor, board_vendor, bios_vendor, product_version;  // class/dmi/id
    bool cpuid_hypervisor = false;                                                     // CPUID leaf 1, ECX bit 31
    std::string cpuid_signature;  // leaf 0x40000000, trailing NULs dropped ("KVMKVMKVM")
    std::string hypervisor_type;  // /sys/hypervisor/type ("xen")
};

// The name systemd-detect-virt --vm gives, decided in its order: DMI first
// where a cloud or hypervisor runs on KVM but names itself there (amazon,
// google, oracle, parallels, xen), then CPUID's signature, then DMI, then
// /sys/hypervisor; "vm-other" for a hypervisor nobody names, "none" for
// bare metal. Pure.
std::string virtualization_from(const VirtualizationSigns& signs);

// `this_host`: the sysfs root is the running system's, so uname, CPUID and
// the hostname are its too; otherwise they are not known (a fake tree
// carries DMI and hypervisor/ only). `kernel_release`, when given
// (--kernel-release), stands for the kernel's.
policy::HostFacts read_host_facts(const Sysfs& sysfs, bool this_host, const std::string& kernel_release = {});

// Everything policy/host holds, read once: the page size, the kernel's
// release (`kernel_release` when given, else uname's where the root is the
// real /sys; a fake tree's kernel is not known), its loadable schedulers and
// tick rate (the running kernel's modules and config, only for the real
// /sys), nvme_core's io_timeout (the tree's module/ directory) and the host
// facts above.
policy::HostContext read_host_context(const Sysfs& sysfs, const std::string& kernel_release = {});

}  // namespace blkpolicy::udev
