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
    if (p2 != r.data() + r.size() && *p2 == '.') std::from_chars(p2 + 1, r.data() + r.size(), v.patch);
    return v;
}

ReadaheadOnCommit readahead_on_commit(const KernelVersion& v) {
    if (!v.at_least(6, 9)) return ReadaheadOnCommit::untouched;
    if (v.at_least(6, 15)) return ReadaheadOnCommit::raise;
    // Stable series of 6.12 and 6.14 took the "only raise" rule back; from
    // which stable release is known only where it was observed.
    if (v.series(6, 12) && v.patch >= 117) return ReadaheadOnCommit::raise;
    if (v.series(6, 12) || v.series(6, 14)) return ReadaheadOnCommit::unknown;
    return ReadaheadOnCommit::reset;
}

bool bfq_off_wbt_reads_zero(const KernelVersion& v) { return v.at_least(6, 2); }

bool loop_created_rotational(const KernelVersion& v) { return !v.at_least(6, 11); }

std::int64_t nr_requests_default(std::int64_t hw_tags, bool scheduler_none) {
    return scheduler_none ? hw_tags : 2 * std::min<std::int64_t>(hw_tags, 128);
}

std::optional<std::int64_t> kernel_readahead_kb(const KernelVersion& v, bool rotational,
                                                std::int64_t optimal_io_bytes, std::int64_t max_sectors_kb) {
    if (!v.at_least(6, 9)) return std::nullopt;
    const std::int64_t io_opt_kb = optimal_io_bytes / 1024;
    if (v.at_least(6, 17) && rotational && io_opt_kb == 0) return 2 * max_sectors_kb;
    return std::max<std::int64_t>(2 * io_opt_kb, 128);
}

}  // namespace blkpolicy::policy
