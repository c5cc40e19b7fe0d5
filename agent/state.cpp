// SPDX-License-Identifier: MIT
#include "agent/state.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "util/fd.hpp"
#include "util/files.hpp"
#include "util/quoted.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// Changes at every boot; a device's diskseq starts again with it.
const std::string& boot_id() {
    static const std::string id = [] {
        std::ifstream in("/proc/sys/kernel/random/boot_id");
        std::string s;
        std::getline(in, s);
        return s;
    }();
    return id;
}

// Records written before identities were devnum + diskseq + boot id hold the
// long identity, which has devnum and diskseq in it: the same pair (diskseq
// given) is the same device instance, so an upgraded daemon keeps the facts
// it froze rather than re-reading a rotational it has already written.
bool same_instance_recorded_before(const json& record, const policy::DeviceFacts& live) {
    if (live.diskseq.empty()) return false;
    const json id = json::parse(record["identity"].get<std::string>(), nullptr, false);
    return id.is_object() && !id.contains("boot_id") && id.contains("driver") &&
           id.value("devnum", "") == live.devnum && id.value("diskseq", "") == live.diskseq;
}
}  // namespace

// Written by hand rather than through a json document (a third of the
// frozen-facts work per device, by callgrind): the same bytes nlohmann's
// dump() gives, keys in its (sorted) order, so identities recorded by
// earlier releases still compare equal.
std::string identity_of(const policy::DeviceFacts& f) {
    std::string id;
    const auto field = [&id](const char* key, std::string_view value) {
        id += id.empty() ? '{' : ',';
        id += '"';
        id += key;
        id += "\":";
        util::append_json_string(id, value);
    };
    // The kernel gives every new disk, medium and loop binding a diskseq
    // never used before in this boot: with the device number it names the
    // instance, and nothing more needs reading.
    if (!f.diskseq.empty()) {
        field("boot_id", boot_id());
        field("devnum", f.devnum);
        field("diskseq", f.diskseq);
    } else {
        field("devnum", f.devnum);
        field("diskseq", f.diskseq);
        field("dm_uuid", f.dm_uuid);
        field("driver", f.driver);
        field("loop_backing_file", f.loop_backing_file);
        field("model", f.model);
        field("serial", f.serial);
        field("wwid", f.wwid);
    }
    id += '}';
    return id;
}

namespace {
// The record's text up to its first boolean, as save() writes it (and as
// nlohmann's dump(2) of the same object did).
std::string record_head(const std::string& device, const std::string& identity) {
    std::string t = "{\n  \"device\": ";
    util::append_json_string(t, device);
    t += ",\n  \"identity\": ";
    util::append_json_string(t, identity);
    t += ",\n  \"removable\": ";
    return t;
}

constexpr std::string_view kRotationalKey = ",\n  \"rotational\": ";
constexpr std::string_view kWriteCacheKey = ",\n  \"write_cache\": \"";
constexpr std::string_view kRecordEnd = "\n}\n";

// Reads "true" or "false" at `at`, moving past it.
std::optional<bool> take_bool(std::string_view text, std::size_t& at) {
    for (const bool b : {true, false}) {
        const std::string_view word = b ? "true" : "false";
        if (text.substr(at, word.size()) == word) {
            at += word.size();
            return b;
        }
    }
    return std::nullopt;
}

// The record as this release writes it, for this identity: read without a
// JSON parser. nullopt for anything else (another identity, an older or
// hand-edited layout), which the parser then judges.
std::optional<StateDir::Frozen> exact_record(std::string_view text, const std::string& head) {
    if (text.substr(0, head.size()) != head) return std::nullopt;
    std::size_t at = head.size();
    StateDir::Frozen f;
    const auto removable = take_bool(text, at);
    if (!removable || text.substr(at, kRotationalKey.size()) != kRotationalKey) return std::nullopt;
    at += kRotationalKey.size();
    const auto rotational = take_bool(text, at);
    if (!rotational) return std::nullopt;
    if (text.substr(at, kWriteCacheKey.size()) == kWriteCacheKey) {
        // Plain text only on this path ("write back"): anything escaped goes to the parser.
        at += kWriteCacheKey.size();
        const auto end = text.find('"', at);
        if (end == std::string_view::npos) return std::nullopt;
        const auto value = text.substr(at, end - at);
        if (value.find('\\') != std::string_view::npos) return std::nullopt;
        f.write_cache = std::string(value);
        at = end + 1;
    }
    if (text.substr(at) != kRecordEnd) return std::nullopt;
    f.removable = *removable;
    f.rotational = *rotational;
    return f;
}
}  // namespace

StateDir::StateDir(fs::path dir) : dir_(std::move(dir)) {}

std::string StateDir::facts_path(const std::string& device) const {
    std::string p = dir_.string();
    if (!p.empty() && p.back() != '/') p += '/';
    return p + "facts/" + device + ".json";
}

std::optional<StateDir::Frozen> StateDir::load(const policy::DeviceFacts& live, std::string* problem) const {
    // open(2) rather than an ifstream: a new device has no record, and the
    // daemon asks on the way to its first write.
    const auto path = facts_path(live.name);
    const util::Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) return std::nullopt;
    std::string text;
    char buf[4096];
    ssize_t n;
    // A read that does not fill the buffer reached the end of a regular
    // file: no second read(2) to be told so.
    while ((n = ::read(fd.get(), buf, sizeof buf)) > 0 && text.size() < (1u << 16)) {
        text.append(buf, static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < sizeof buf) break;
    }
    const auto identity = identity_of(live);
    if (auto exact = exact_record(text, record_head(live.name, identity))) return exact;
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("identity") || !j.contains("rotational") ||
        !j["rotational"].is_boolean() || !j["identity"].is_string()) {
        if (problem) *problem = "ignoring corrupt state file " + path;
        return std::nullopt;
    }
    if (j["identity"].get<std::string>() != identity && !same_instance_recorded_before(j, live)) return std::nullopt;
    Frozen f;
    f.rotational = j["rotational"].get<bool>();
    f.removable = j.value("removable", false);
    if (j.contains("write_cache") && j["write_cache"].is_string()) f.write_cache = j["write_cache"].get<std::string>();
    return f;
}

std::string StateDir::first_write_cache(const policy::DeviceFacts& live) const {
    const auto f = load(live);
    return f ? f->write_cache : std::string();
}

util::Status StateDir::save(const policy::DeviceFacts& live, const std::string& write_cache) const {
    auto text = record_head(live.name, identity_of(live));
    text += live.removable ? "true" : "false";
    text += kRotationalKey;
    text += live.rotational ? "true" : "false";
    if (!write_cache.empty()) {
        // Sorted after "rotational", as nlohmann's dump orders keys.
        text += ",\n  \"write_cache\": ";
        util::append_json_string(text, write_cache);
    }
    text += kRecordEnd;
    const auto path = facts_path(live.name);
    auto st = util::write_atomically(path, text);
    if (!st.ok()) {
        // First record (no facts/ yet): make the directory and try once more.
        // Not on every write, and not only when the directory is still
        // missing now: in the initramfs one blkpolicy per disk records at
        // the same moment, and another may have made it since this write
        // failed (create_directories is content with one that exists).
        std::error_code ec;
        fs::create_directories(dir_ / "facts", ec);
        if (ec) return util::Status::failure("cannot create " + (dir_ / "facts").string() + ": " + ec.message());
        st = util::write_atomically(path, text);
    }
    return st;
}

void StateDir::forget(const std::string& device) const {
    std::error_code ec;
    fs::remove(facts_path(device), ec);
    fs::remove(written_path(device), ec);
}

std::string StateDir::written_path(const std::string& device) const {
    return (dir_ / "written" / (device + ".json")).string();
}

WrittenValues StateDir::load_written(const policy::DeviceFacts& live, std::string* problem) const {
    const auto path = written_path(live.name);
    std::ifstream in(path);
    if (!in) return {};
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const json j = json::parse(text, nullptr, false);
    const auto corrupt = [&] {
        if (problem) *problem = "ignoring corrupt state file " + path + ": the values it names will not be put back";
        return WrittenValues{};
    };
    if (j.is_discarded() || !j.is_object() || !j.contains("identity") || !j["identity"].is_string() ||
        !j.contains("values") || !j["values"].is_object())
        return corrupt();
    if (j["identity"].get<std::string>() != identity_of(live)) return {};
    WrittenValues out;
    for (const auto& [key, v] : j["values"].items()) {
        if (!v.is_object() || !v.contains("original") || !v["original"].is_string() || !v.contains("written") ||
            !v["written"].is_string())
            return corrupt();
        out[key] = {v["original"].get<std::string>(), v["written"].get<std::string>()};
    }
    return out;
}

util::Status StateDir::save_written(const policy::DeviceFacts& live, const WrittenValues& values) const {
    const auto path = written_path(live.name);
    if (values.empty()) {
        std::error_code ec;
        fs::remove(path, ec);
        if (ec) return util::Status::failure("cannot remove " + path + ": " + ec.message());
        return {};
    }
    json j = {{"device", live.name}, {"identity", identity_of(live)}, {"values", json::object()}};
    for (const auto& [key, v] : values) j["values"][key] = {{"original", v.original}, {"written", v.written}};
    const auto text = j.dump(2) + "\n";
    auto st = util::write_atomically(path, text);
    if (!st.ok()) {  // the first record: as for the facts, make the directory and try once more
        std::error_code ec;
        fs::create_directories(dir_ / "written", ec);
        if (ec) return util::Status::failure("cannot create " + (dir_ / "written").string() + ": " + ec.message());
        st = util::write_atomically(path, text);
    }
    return st;
}

std::vector<std::string> StateDir::devices_written() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "written", ec)) {
        const auto name = e.path().filename().string();
        if (name.size() > 5 && name.ends_with(".json")) out.push_back(name.substr(0, name.size() - 5));
    }
    std::sort(out.begin(), out.end());
    return out;
}

policy::DeviceFacts freeze_facts(const StateDir& state, policy::DeviceFacts live, bool record, std::string* warning,
                                 const udev::Sysfs* sysfs) {
    std::string problem;
    if (auto frozen = state.load(live, &problem)) {
        live.rotational = frozen->rotational;
        live.removable = frozen->removable;
        live.facts_frozen = true;
        return live;
    }
    if (!problem.empty() && warning) *warning = problem;
    if (record) {
        auto st = record_facts(state, live, sysfs ? read_write_cache(*sysfs, live.name) : std::string());
        if (!st.ok() && warning) *warning = st.message();
    }
    return live;
}

std::string read_write_cache(const udev::Sysfs& sysfs, const std::string& device) {
    const auto r = sysfs.read("block/" + device + "/queue/write_cache");
    return r.ok() ? util::trim(r.value) : std::string();
}

util::Status record_facts(const StateDir& state, const policy::DeviceFacts& live, const std::string& write_cache) {
    auto st = state.save(live, write_cache);
    if (st.ok()) return st;
    return util::Status::failure(st.message() + "; facts of " + live.name +
                                 " are not frozen, so rules matching rotational may stop matching once it is written");
}

}  // namespace blkpolicy::agent
