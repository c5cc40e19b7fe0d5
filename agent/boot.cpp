// SPDX-License-Identifier: MIT
#include "agent/boot.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "policy/policy.hpp"
#include "report/audit.hpp"
#include "util/fd.hpp"
#include "util/files.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {
constexpr const char* kBootFile = "boot.json";
constexpr const char* kBoundFile = "boot-bound";
constexpr const char* kDigestFile = "/var/lib/blkpolicy/initramfs-policy.digest";
constexpr std::size_t kMaxRecordBytes = 1 << 16;

// "12.34" (the runner's uptime: seconds, two decimals) -> 12.34
std::optional<double> parse_uptime(const std::string& s) {
    const auto dot = s.find('.');
    const auto whole = util::parse_int(s.substr(0, dot));
    if (!whole || *whole < 0) return std::nullopt;
    if (dot == std::string::npos) return static_cast<double>(*whole);
    const std::string frac = s.substr(dot + 1);
    const auto f = util::parse_int(frac);
    if (frac.empty() || frac.size() > 6 || !f || *f < 0) return std::nullopt;
    double scale = 1;
    for (std::size_t i = 0; i < frac.size(); ++i) scale *= 10;
    return static_cast<double>(*whole) + static_cast<double>(*f) / scale;
}

// TEXT cut at each SEP (the last piece may be empty).
std::vector<std::string> pieces(const std::string& text, char sep) {
    std::vector<std::string> out;
    for (std::size_t a = 0;;) {
        const auto b = text.find(sep, a);
        out.push_back(text.substr(a, b == std::string::npos ? std::string::npos : b - a));
        if (b == std::string::npos) return out;
        a = b + 1;
    }
}

json bound_json(const std::vector<BootBound>& bound) {
    json out = json::array();
    for (const auto& b : bound)
        out.push_back({{"what", b.what}, {"outcome", b.outcome}, {"detail", b.detail}, {"uptime", b.uptime}});
    return out;
}
}  // namespace

json boot_json(const BootRecord& r) {
    json doc = {{"format", 1},
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
    if (!r.bound.empty()) doc["bound"] = bound_json(r.bound);
    return doc;
}

std::string bound_text(const BootBound& b) {
    return b.what + " " + b.outcome + (b.detail.empty() ? "" : ": " + b.detail);
}

std::string boot_line(const BootRecord& r) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
    std::string runner;
    for (const auto& b : r.bound) runner += (runner.empty() ? "" : "; ") + bound_text(b);
    if (!runner.empty()) runner = " [in the initramfs: " + runner + "]";
    if (!r.ok) return "initramfs pass: nothing set: " + r.error + runner;
    std::string s = "initramfs pass: " + std::to_string(r.devices) + " device(s)";
    for (const char* o : {"applied", "unchanged", "skipped", "failed", "not-stuck", "refused", "busy", "unavailable"}) {
        auto it = r.outcomes.find(o);
        const int n = it == r.outcomes.end() ? 0 : it->second;
        if (n || std::string(o) == "applied" || std::string(o) == "failed") s += ", " + std::to_string(n) + " " + o;
    }
    s += std::string(" in ") + secs + " s";
    if (r.devices_left) s += "; " + std::to_string(r.devices_left) + " device(s) left alone: out of time";
    return s + " (policy " + (r.policy_digest.empty() ? "-" : r.policy_digest) + ")" + runner;
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
    if (doc.contains("bound") && doc["bound"].is_array())
        for (const auto& b : doc["bound"]) {
            if (!b.is_object()) continue;
            auto field = [&](const char* k) {
                return b.contains(k) && b[k].is_string() ? b[k].get<std::string>() : "";
            };
            r.bound.push_back({field("what"), field("outcome"), field("detail"),
                               b.contains("uptime") && b["uptime"].is_number() ? b["uptime"].get<double>() : 0});
        }
    return r;
}

void boot_audit_input(const BootRecord& r, report::AuditInput& in) {
    in.boot_digest = r.policy_digest;
    for (const auto& b : r.bound) in.boot_unfinished.push_back(bound_text(b));
}

std::vector<BootBound> parse_boot_bound(const std::string& text) {
    std::vector<BootBound> out;
    for (const auto& line : pieces(text, '\n')) {
        if (util::trim(line).empty()) continue;
        const auto f = pieces(line, '\t');
        const auto uptime = f.size() == 4 ? parse_uptime(f[3]) : std::nullopt;
        if (uptime && !f[0].empty() && !f[1].empty())
            out.push_back({f[0], f[1], f[2], *uptime});
        else
            out.push_back({"?", "unreadable", line, 0});
    }
    return out;
}

util::Status write_boot_record(const std::string& state_dir, const BootRecord& r) {
    std::error_code ec;
    std::filesystem::create_directories(state_dir, ec);
    return util::write_atomically(state_dir + "/" + kBootFile, boot_json(r).dump(2) + "\n");
}

std::optional<json> read_boot_record(const std::string& state_dir) {
    std::vector<BootBound> bound;
    if (auto lines = util::read_bounded_file(state_dir + "/" + kBoundFile, kMaxRecordBytes, "the runner's lines");
        lines.ok())
        bound = parse_boot_bound(*lines);
    json doc;
    if (auto text = util::read_bounded_file(state_dir + "/" + kBootFile, kMaxRecordBytes, "the boot record");
        text.ok()) {
        doc = json::parse(*text, nullptr, false);
        if (doc.is_discarded() || !doc.is_object()) doc = json();
    }
    if (doc.is_null()) {
        if (bound.empty()) return std::nullopt;
        // No record of the pass: it was stopped, crashed or never started.
        BootRecord r;
        r.ok = false;
        r.exit_code = -1;
        r.error = "the pass left no record";
        for (const auto& b : bound)
            if (b.what == "pass") r.error = "the pass " + b.outcome + (b.detail.empty() ? "" : ": " + b.detail);
        doc = boot_json(r);
    }
    if (!bound.empty()) doc["bound"] = bound_json(bound);
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
    auto text = util::read_bounded_file(initramfs_digest_path(root), kMaxRecordBytes, "the initramfs digest");
    return text.ok() ? util::trim(text->substr(0, text->find('\n'))) : std::string();
}

void initramfs_audit_input(const policy::Policy& pol, const std::string& root, report::AuditInput& in) {
    in.policy_digest = pol.digest;
    for (std::size_t i = 0; i < pol.files.size() && i < pol.file_digests.size(); ++i)
        in.policy_files.push_back({pol.files[i], pol.file_digests[i]});
    auto text = util::read_bounded_file(initramfs_digest_path(root), kMaxRecordBytes, "the initramfs digest");
    if (!text.ok()) return;
    const auto lines = pieces(*text, '\n');
    in.initramfs_digest = util::trim(lines.front());
    for (std::size_t i = 1; i < lines.size(); ++i) {
        const std::string line = util::trim(lines[i]);
        const auto sp = line.find(' ');
        if (sp != std::string::npos && sp > 0 && sp + 1 < line.size())
            in.initramfs_files.push_back({line.substr(sp + 1), line.substr(0, sp)});
    }
}

}  // namespace blkpolicy::agent
