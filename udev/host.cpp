// SPDX-License-Identifier: MIT
#include "udev/host.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <string_view>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "udev/discovery.hpp"
#include "udev/probes.hpp"
#include "util/text.hpp"

namespace blkpolicy::udev {

namespace {

// DMI strings that name a hypervisor, by how they begin (systemd's table).
constexpr std::pair<std::string_view, std::string_view> kDmiVendors[] = {
    {"KVM", "kvm"},
    {"OpenStack", "kvm"},
    {"KubeVirt", "kvm"},
    {"Amazon EC2", "amazon"},
    {"QEMU", "qemu"},
    {"VMware", "vmware"},
    {"VMW", "vmware"},
    {"innotek GmbH", "oracle"},
    {"VirtualBox", "oracle"},
    {"Oracle Corporation", "oracle"},
    {"Xen", "xen"},
    {"Bochs", "bochs"},
    {"Parallels", "parallels"},
    {"BHYVE", "bhyve"},
    {"Hyper-V", "microsoft"},
    {"Apple Virtualization", "apple"},
    {"Google Compute Engine", "google"},
};

// CPUID hypervisor signatures.
constexpr std::pair<std::string_view, std::string_view> kCpuidVendors[] = {
    {"XenVMMXenVMM", "xen"},    {"KVMKVMKVM", "kvm"},          {"Linux KVM Hv", "kvm"},   {"TCGTCGTCGTCG", "qemu"},
    {"VMwareVMware", "vmware"}, {"Microsoft Hv", "microsoft"}, {"bhyve bhyve ", "bhyve"}, {"QNXQVMBSQG", "qnx"},
    {"ACRNACRNACRN", "acrn"},   {"SRESRESRESRE", "sre"},       {"Apple VZ", "apple"},
};

std::string dmi_virtualization(const VirtualizationSigns& s) {
    for (const std::string* field :
         {&s.product_name, &s.sys_vendor, &s.board_vendor, &s.bios_vendor, &s.product_version})
        for (const auto& [prefix, name] : kDmiVendors)
            if (std::string_view(*field).starts_with(prefix)) return std::string(name);
    return {};
}

void read_cpuid(VirtualizationSigns& s) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    s.cpuid_hypervisor = (c >> 31) & 1;
    if (!s.cpuid_hypervisor) return;
    __cpuid(0x40000000, a, b, c, d);
    std::array<char, 12> sig{};
    std::memcpy(sig.data(), &b, 4);
    std::memcpy(sig.data() + 4, &c, 4);
    std::memcpy(sig.data() + 8, &d, 4);
    s.cpuid_signature.assign(sig.data(), sig.size());
    while (!s.cpuid_signature.empty() && s.cpuid_signature.back() == '\0') s.cpuid_signature.pop_back();
#else
    (void)s;
#endif
}

}  // namespace

std::string virtualization_from(const VirtualizationSigns& s) {
    const std::string dmi = dmi_virtualization(s);
    if (dmi == "amazon" || dmi == "google" || dmi == "oracle" || dmi == "parallels" || dmi == "xen") return dmi;
    bool other = false;
    if (s.cpuid_hypervisor) {
        for (const auto& [sig, name] : kCpuidVendors)
            if (s.cpuid_signature == sig) return std::string(name);
        other = true;
    }
    if (!dmi.empty()) return dmi;
    if (!s.hypervisor_type.empty()) return s.hypervisor_type == "xen" ? "xen" : "vm-other";
    return other ? "vm-other" : "none";
}

policy::HostFacts read_host_facts(const Sysfs& sysfs, bool this_host, const std::string& kernel_release) {
    policy::HostFacts host;
    // Trailing blanks removed, as udev's ATTR{} reads them.
    auto dmi = [&](const char* name) {
        return read_attribute(sysfs, std::string("class/dmi/id/") + name).value_or("");
    };
    VirtualizationSigns signs;
    signs.product_name = dmi("product_name");
    signs.sys_vendor = dmi("sys_vendor");
    signs.board_vendor = dmi("board_vendor");
    signs.bios_vendor = dmi("bios_vendor");
    signs.product_version = dmi("product_version");
    signs.hypervisor_type = read_attribute(sysfs, "hypervisor/type").value_or("");
    if (this_host) read_cpuid(signs);
    host.virtualization = virtualization_from(signs);
    host.sys_vendor = signs.sys_vendor;
    host.product_name = signs.product_name;
    host.kernel = kernel_release;
    if (this_host) {
        utsname u{};
        if (::uname(&u) == 0) {
            if (host.kernel.empty()) host.kernel = u.release;
            host.hostname = u.nodename;
        }
        host.source = "this host";
    } else {
        host.source = sysfs.root().string();
    }
    return host;
}

policy::HostContext read_host_context(const Sysfs& sysfs, const std::string& kernel_release) {
    policy::HostContext host;
    const bool this_host = sysfs.root() == "/sys";
    if (const long page = ::sysconf(_SC_PAGESIZE); page > 0) host.page_size = page;
    host.facts = read_host_facts(sysfs, this_host, kernel_release);
    host.kernel_release = host.facts.kernel;
    if (auto k = kernel::parse_kernel_release(host.kernel_release)) host.kernel = *k;
    // Modules and the kernel's config belong to the running kernel: only a
    // look at the real /sys asks for them (whatever --kernel-release says).
    if (this_host) {
        utsname u{};
        if (::uname(&u) == 0) {
            host.loadable_schedulers = loadable_schedulers(std::string("/lib/modules/") + u.release);
            if (auto hz = kernel_hz(std::string("/boot/config-") + u.release)) {
                host.hz = *hz;
                host.hz_known = true;
            }
        }
    }
    if (auto nvme = read_attribute(sysfs, "module/nvme_core/parameters/io_timeout"))
        host.nvme_io_timeout_s = util::parse_int(*nvme);
    return host;
}

}  // namespace blkpolicy::udev
