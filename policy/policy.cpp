#include "policy/policy.hpp"

#include <array>

#include "policy/facts.hpp"

namespace blkpolicy::policy {

std::string SourcePos::str() const {
    if (line == 0) return file;
    std::string s = file + ":" + std::to_string(line);
    if (column) s += ":" + std::to_string(column);
    return s;
}

std::string SourcePos::file_line() const {
    if (line == 0) return file;
    return file + ":" + std::to_string(line);
}

std::string PolicyError::str() const { return pos.str() + ": " + message; }

namespace {
constexpr std::array<std::pair<MatchKey, const char*>, 13> kMatchKeys{{
    {MatchKey::kernel, "kernel"},
    {MatchKey::driver, "driver"},
    {MatchKey::model, "model"},
    {MatchKey::vendor, "vendor"},
    {MatchKey::serial, "serial"},
    {MatchKey::wwid, "wwid"},
    {MatchKey::stack, "stack"},
    {MatchKey::dm_name, "dm_name"},
    {MatchKey::dm_uuid, "dm_uuid"},
    {MatchKey::md_level, "md_level"},
    {MatchKey::rotational, "rotational"},
    {MatchKey::removable, "removable"},
    {MatchKey::env, "env"},
}};
}  // namespace

const char* to_string(MatchKey k) {
    for (const auto& [key, name] : kMatchKeys)
        if (key == k) return name;
    return "?";
}

std::optional<MatchKey> match_key_from_string(std::string_view s) {
    for (const auto& [key, name] : kMatchKeys)
        if (s == name) return key;
    return std::nullopt;
}

bool match_key_is_flag(MatchKey k) { return k == MatchKey::rotational || k == MatchKey::removable; }

const char* to_string(Mode m) { return m == Mode::enforce ? "enforce" : "observe"; }

const char* to_string(Stack s) {
    switch (s) {
        case Stack::none: return "none";
        case Stack::dm: return "dm";
        case Stack::md: return "md";
        case Stack::loop: return "loop";
    }
    return "?";
}

}  // namespace blkpolicy::policy
