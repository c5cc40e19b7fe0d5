// SPDX-License-Identifier: MIT
#include "agent/boot.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "policy/values.hpp"
#include "util/fd.hpp"
#include "util/files.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {
constexpr const char* kBootFile = "boot.json";
constexpr const char* kDigestFile = "/var/lib/blkpolicy/initramfs-policy.digest";
constexpr std::size_t kMaxRecordBytes = 1 << 16;
}  // namespace

json boot_json(const BootRecord& r) {
    return {{"format", 1},
            {"ok", r.ok},
            {"error", r.error.empty() ? json(nullptr) : json(r.error)},
            {"kernel", r.kernel},
            {"policy", {{"digest", r.policy_digest}, {"files", r.policy_files}}},
            {"devices", r.devices},
            {"devices_left", r.devices_left},
            {"outcomes", r.outcomes},
            {"seconds", r.seconds},
            {"exit", r.exit_code},
            {"when", r.when}};
}

std::string boot_line(const BootRecord& r) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
    if (!r.ok) return "initramfs pass: nothing set: " + r.error;
    std::string s = "initramfs pass: " + std::to_string(r.devices) + " device(s)";
    for (const char* o : {"applied", "unchanged", "skipped", "failed", "not-stuck", "refused", "busy", "unavailable"}) {
        auto it = r.outcomes.find(o);
        const int n = it == r.outcomes.end() ? 0 : it->second;
        if (n || std::string(o) == "applied" || std::string(o) == "failed") s += ", " + std::to_string(n) + " " + o;
    }
    s += std::string(" in ") + secs + " s";
    if (r.devices_left) s += "; " + std::to_string(r.devices_left) + " device(s) left alone: out of time";
    return s + " (policy " + (r.policy_digest.empty() ? "-" : r.policy_digest) + ")";
}

BootRecord boot_record_from(const json& doc) {
    BootRecord r;
    auto str = [&](const char* k) { return doc.contains(k) && doc[k].is_string() ? doc[k].get<std::string>() : ""; };
    r.ok = doc.value("ok", true);
    r.error = str("error");
    r.kernel = str("kernel");
    if (doc.contains("policy") && doc["policy"].is_object()) {
        r.policy_digest = doc["policy"].value("digest", "");
        if (doc["policy"].contains("files") && doc["policy"]["files"].is_array())
            for (const auto& f : doc["policy"]["files"])
                if (f.is_string()) r.policy_files.push_back(f.get<std::string>());
    }
    r.devices = doc.value("devices", 0);
    r.devices_left = doc.value("devices_left", 0);
    if (doc.contains("outcomes") && doc["outcomes"].is_object())
        for (const auto& [k, v] : doc["outcomes"].items())
            if (v.is_number_integer()) r.outcomes[k] = v.get<int>();
    r.seconds = doc.value("seconds", 0.0);
    r.exit_code = doc.value("exit", 0);
    r.when = str("when");
    return r;
}

util::Status write_boot_record(const std::string& state_dir, const BootRecord& r) {
    std::error_code ec;
    std::filesystem::create_directories(state_dir, ec);
    return util::write_atomically(state_dir + "/" + kBootFile, boot_json(r).dump(2) + "\n");
}

std::optional<json> read_boot_record(const std::string& state_dir) {
    auto text = util::read_bounded_file(state_dir + "/" + kBootFile, kMaxRecordBytes, "the boot record");
    if (!text.ok()) return std::nullopt;
    auto doc = json::parse(*text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
    return doc;
}

bool kernel_log(int level, const std::string& line) {
    util::Fd fd(::open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return false;
    const std::string msg = "<" + std::to_string(level) + ">blkpolicy: " + line + "\n";
    return ::write(fd.get(), msg.data(), msg.size()) == static_cast<ssize_t>(msg.size());
}

std::string initramfs_digest_path(const std::string& root) { return (root == "/" ? "" : root) + kDigestFile; }

std::string read_initramfs_digest(const std::string& root) {
    auto text = util::read_bounded_file(initramfs_digest_path(root), 4096, "the initramfs digest");
    return text.ok() ? policy::trim(*text) : std::string();
}

}  // namespace blkpolicy::agent
