// SPDX-License-Identifier: MIT
#include "udev/probes.hpp"

#include <set>

#include "udev/discovery.hpp"
#include "util/files.hpp"
#include "util/text.hpp"

namespace blkpolicy::udev {

std::optional<int> read_wbt_state(const Sysfs& sysfs, const std::string& device) {
    // debugfs is mounted under sysfs (/sys/kernel/debug); readable only when mounted.
    if (!sysfs.has_debugfs_block()) return std::nullopt;
    auto r = sysfs.read("kernel/debug/block/" + device + "/rqos/wbt/enabled");
    if (!r.ok()) return std::nullopt;
    auto v = util::parse_int(r.value);
    if (!v || *v < 0 || *v > 4) return std::nullopt;
    return static_cast<int>(*v);
}

int count_hw_queues(const Sysfs& sysfs, const std::string& device) {
    return static_cast<int>(sysfs.list("block/" + device + "/mq").size());
}

std::optional<bool> single_last_level_cache(const Sysfs& sysfs) {
    const std::string base = "devices/system/cpu";
    int top_level = 0;
    std::set<std::string> shared_at_top;
    int cpus = 0;
    for (const auto& cpu : sysfs.list(base)) {
        if (cpu.size() < 4 || cpu.rfind("cpu", 0) != 0 || cpu.find_first_not_of("0123456789", 3) != std::string::npos)
            continue;
        ++cpus;
        for (const auto& idx : sysfs.list(base + "/" + cpu + "/cache")) {
            if (idx.rfind("index", 0) != 0) continue;
            const std::string dir = base + "/" + cpu + "/cache/" + idx;
            auto level = util::parse_int(sysfs.read(dir + "/level").value);
            auto shared = util::trim(sysfs.read(dir + "/shared_cpu_list").value);
            if (!level || shared.empty()) continue;
            if (*level > top_level) {
                top_level = static_cast<int>(*level);
                shared_at_top.clear();
            }
            if (*level == top_level) shared_at_top.insert(shared);
        }
    }
    if (top_level == 0 || cpus == 0) return std::nullopt;
    return shared_at_top.size() == 1;
}

std::vector<std::string> stacked_neighbours(const Sysfs& sysfs, const std::string& device) {
    auto out = upper_devices(sysfs, device);
    for (auto& other : lower_devices(sysfs, device)) out.push_back(std::move(other));
    return out;
}

bool has_medium(const Sysfs& sysfs, const std::string& device) {
    return util::parse_int(sysfs.read("block/" + device + "/size").value).value_or(1) > 0;
}

std::optional<int> kernel_hz(const std::string& config_path) {
    // One look through the whole file (some 10,000 lines; a line at a time
    // through a stream cost every run millions of instructions).
    auto text = util::read_bounded_file(config_path, 16 << 20, "the kernel's config");
    if (!text.ok()) return std::nullopt;
    static constexpr std::string_view kKey = "CONFIG_HZ=";
    const std::string_view all(*text);
    std::size_t at = all.rfind(kKey, 0) == 0 ? 0 : all.find("\n" + std::string(kKey));
    if (at == std::string_view::npos) return std::nullopt;
    if (all[at] == '\n') ++at;
    const auto end = std::min(all.find('\n', at), all.size());
    auto hz = util::parse_int(all.substr(at + kKey.size(), end - at - kKey.size()));
    if (hz && *hz > 0 && *hz <= 10000) return static_cast<int>(*hz);
    return std::nullopt;
}

}  // namespace blkpolicy::udev
