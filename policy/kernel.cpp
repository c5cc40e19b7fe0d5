#include "policy/kernel.hpp"

#include <algorithm>
#include <charconv>

namespace blkpolicy::policy {

std::optional<KernelVersion> parse_kernel_release(std::string_view r) {
    KernelVersion v;
    auto [p, ec] = std::from_chars(r.data(), r.data() + r.size(), v.major);
    if (ec != std::errc{} || p == r.data() + r.size() || *p != '.') return std::nullopt;
    auto [p2, ec2] = std::from_chars(p + 1, r.data() + r.size(), v.minor);
    if (ec2 != std::errc{}) return std::nullopt;
    return v;
}

std::optional<std::int64_t> kernel_readahead_kb(const KernelVersion& v, bool rotational,
                                                std::int64_t optimal_io_bytes, std::int64_t max_sectors_kb) {
    if (!v.at_least(6, 9)) return std::nullopt;
    const std::int64_t io_opt_kb = optimal_io_bytes / 1024;
    if (v.at_least(6, 17) && rotational && io_opt_kb == 0) return 2 * max_sectors_kb;
    return std::max<std::int64_t>(2 * io_opt_kb, 128);
}

}  // namespace blkpolicy::policy
