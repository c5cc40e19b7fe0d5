// SPDX-License-Identifier: MIT
#include "agent/state.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/files.hpp"

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

std::string identity_of(const policy::DeviceFacts& f) {
    // The kernel gives every new disk, medium and loop binding a diskseq
    // never used before in this boot: with the device number it names the
    // instance, and nothing more needs reading.
    if (!f.diskseq.empty()) return json({{"devnum", f.devnum}, {"diskseq", f.diskseq}, {"boot_id", boot_id()}}).dump();
    json id = {{"devnum", f.devnum},   {"diskseq", f.diskseq},
               {"driver", f.driver},   {"model", f.model},
               {"serial", f.serial},   {"wwid", f.wwid},
               {"dm_uuid", f.dm_uuid}, {"loop_backing_file", f.loop_backing_file}};
    return id.dump();
}

StateDir::StateDir(fs::path dir) : dir_(std::move(dir)) {}

fs::path StateDir::facts_path(const std::string& device) const { return dir_ / "facts" / (device + ".json"); }

std::optional<StateDir::Frozen> StateDir::load(const policy::DeviceFacts& live, std::string* problem) const {
    // open(2) rather than an ifstream: a new device has no record, and the
    // daemon asks on the way to its first write.
    const int fd = ::open(facts_path(live.name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (1u << 16))
        text.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("identity") || !j.contains("rotational") ||
        !j["rotational"].is_boolean() || !j["identity"].is_string()) {
        if (problem) *problem = "ignoring corrupt state file " + facts_path(live.name).string();
        return std::nullopt;
    }
    if (j["identity"].get<std::string>() != identity_of(live) && !same_instance_recorded_before(j, live))
        return std::nullopt;
    Frozen f;
    f.rotational = j["rotational"].get<bool>();
    f.removable = j.value("removable", false);
    return f;
}

util::Status StateDir::save(const policy::DeviceFacts& live) const {
    const json j = {{"device", live.name},
                    {"identity", identity_of(live)},
                    {"rotational", live.rotational},
                    {"removable", live.removable}};
    const auto path = facts_path(live.name).string();
    const auto text = j.dump(2) + "\n";
    auto st = util::write_atomically(path, text);
    if (!st.ok() && !std::filesystem::is_directory(dir_ / "facts")) {
        // First record: make the directory, once, not on every write.
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
}

policy::DeviceFacts freeze_facts(const StateDir& state, policy::DeviceFacts live, bool record, std::string* warning) {
    std::string problem;
    if (auto frozen = state.load(live, &problem)) {
        live.rotational = frozen->rotational;
        live.removable = frozen->removable;
        live.facts_frozen = true;
        return live;
    }
    if (!problem.empty() && warning) *warning = problem;
    if (record) {
        auto st = record_facts(state, live);
        if (!st.ok() && warning) *warning = st.message();
    }
    return live;
}

util::Status record_facts(const StateDir& state, const policy::DeviceFacts& live) {
    auto st = state.save(live);
    if (st.ok()) return st;
    return util::Status::failure(st.message() + "; facts of " + live.name +
                                 " are not frozen, so rules matching rotational may stop matching once it is written");
}

}  // namespace blkpolicy::agent
