// SPDX-License-Identifier: MIT
// libFuzzer target: any bytes as each other writer's file (sysfsutils,
// tmpfiles.d, a unit, a TuneD profile that includes itself and another),
// through the parsers, the TuneD merge and the importer. The importer's
// output must always pass the policy loader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "writers/parsers.hpp"
#include "writers/writer_import.hpp"

using namespace blkpolicy::writers;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<WriterAssignment> all = parse_sysfs_conf("sysfs.conf", text);
    for (auto part : {parse_tmpfiles("t.conf", text), parse_shell_writes("u.service", text, WriterKind::unit, "u")})
        all.insert(all.end(), part.begin(), part.end());
    // Two profiles of the same text: whatever include= says, "a" and "b"
    // exist, and a loop through them must end.
    auto res = resolve_tuned({"a"}, [&](const std::string& name) -> std::optional<TunedProfileFile> {
        if (name != "a" && name != "b") return std::nullopt;
        return parse_tuned_conf(name, name + "/tuned.conf", text);
    });
    all.insert(all.end(), res.assignments.begin(), res.assignments.end());
    for (const auto& w : all) (void)find_writer(all, UdevDevice::named("sda"), w.attribute, w.value);
    auto out = import_writers(all, {"fuzz"}, [](const std::string&) { return std::optional<DeviceIdentity>(); });
    for (const auto& d : out.diagnostics)
        if (d.rfind("internal error", 0) == 0) __builtin_trap();  // the converter wrote an invalid policy
    return 0;
}
