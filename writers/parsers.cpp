// SPDX-License-Identifier: MIT
#include "writers/parsers.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "policy/attributes.hpp"
#include "util/text.hpp"

namespace blkpolicy::writers {

std::optional<SysfsTarget> sysfs_target(std::string path) {
    if (path.rfind("/sys/", 0) == 0) path.erase(0, 5);
    while (!path.empty() && path.front() == '/') path.erase(0, 1);
    std::string rest;
    if (path.rfind("block/", 0) == 0) {
        rest = path.substr(6);
    } else if (path.rfind("class/block/", 0) == 0) {
        rest = path.substr(12);
    } else if (path.rfind("devices/", 0) == 0) {
        // /sys/devices/.../block/NAME/queue/x: the last "block/" component
        const auto at = path.rfind("/block/");
        if (at == std::string::npos) return std::nullopt;
        rest = path.substr(at + 7);
    } else {
        return std::nullopt;
    }
    const auto slash = rest.find('/');
    if (slash == std::string::npos || slash == 0) return std::nullopt;
    SysfsTarget t{rest.substr(0, slash), policy::policy_key_for_attr(rest.substr(slash + 1))};
    if (t.attribute.empty() || t.attribute.find('/') != std::string::npos) return std::nullopt;
    return t;
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// read_ahead_kb comes back in whole pages; other values as written.
WriterAssignment assignment(const std::string& file, int line, const SysfsTarget& t, const std::string& value,
                            WriterKind kind, const std::string& context = {}) {
    WriterAssignment a;
    a.file = file;
    a.line = line;
    a.attribute = t.attribute;
    a.value = value;
    if (t.device != "*") a.kernel_patterns = {t.device};
    a.kind = kind;
    a.context = context;
    return a;
}

}  // namespace

std::vector<WriterAssignment> parse_sysfs_conf(const std::string& file, const std::string& text) {
    // The way sysfsutils' loader reads a line: "#" starts a comment anywhere,
    // "PATH = VALUE" writes VALUE (one word) to every /sys/PATH the glob finds,
    // "mode PATH = M" and "owner PATH = U:G" change permissions only.
    std::vector<WriterAssignment> out;
    int n = 0;
    for (auto l : lines_of(text)) {
        ++n;
        if (auto hash = l.find('#'); hash != std::string::npos) l.erase(hash);
        const auto eq = l.find('=');
        if (eq == std::string::npos) continue;
        const auto lhs = words(l.substr(0, eq));
        const auto rhs = words(l.substr(eq + 1));
        if (lhs.size() != 1 || rhs.size() != 1) continue;  // mode/owner lines, or what sysfsutils refuses
        if (auto t = sysfs_target(lhs[0])) out.push_back(assignment(file, n, *t, rhs[0], WriterKind::sysfsutils));
    }
    return out;
}

std::vector<WriterAssignment> parse_tmpfiles(const std::string& file, const std::string& text) {
    std::vector<WriterAssignment> out;
    int n = 0;
    for (const auto& l : lines_of(text)) {
        ++n;
        const auto t = util::trim(l);
        if (t.empty() || t.front() == '#') continue;
        // Type Path Mode User Group Age Argument: the argument is the rest of the line.
        std::istringstream in(t);
        std::string type, path;
        in >> type >> path;
        std::string field;
        int skipped = 0;
        while (skipped < 4 && in >> field) ++skipped;
        std::string arg;
        std::getline(in, arg);
        arg = util::trim(arg);
        // "w", with the modifiers "+" (append), "-" (errors ignored), "!" (boot only), "=", "~", "^"
        std::string base = type;
        base.erase(std::remove_if(base.begin(), base.end(),
                                  [](char c) { return std::string("+-!=~^").find(c) != std::string::npos; }),
                   base.end());
        if (base != "w") continue;
        auto target = sysfs_target(path);
        if (!target) continue;
        auto a = assignment(file, n, *target, arg, WriterKind::tmpfiles);
        if (type.find('+') != std::string::npos) a.why_inexact = "w+ appends to the file";
        if (type.find('^') != std::string::npos) {
            a.value.clear();
            a.why_inexact = "the value comes from a credential";
        } else if (arg.find('%') != std::string::npos) {
            a.value.clear();
            a.why_inexact = "the value has % specifiers";
        } else if (arg.find('\\') != std::string::npos) {
            a.value.clear();
            a.why_inexact = "the value has C escapes";
        }
        out.push_back(a);
    }
    return out;
}

namespace {

// An unquoted shell word, or one in '...' or "...", from the start of `s`.
std::string shell_word(const std::string& s, std::size_t& i) {
    std::string w;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])) && s[i] != '>' && s[i] != ';' &&
           s[i] != '|' && s[i] != '&') {
        if (s[i] == '\'' || s[i] == '"') {
            const char q = s[i++];
            while (i < s.size() && s[i] != q) w += s[i++];
            if (i < s.size()) ++i;
        } else {
            w += s[i++];
        }
    }
    return w;
}

void skip_space(const std::string& s, std::size_t& i) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
}

}  // namespace

std::vector<WriterAssignment> parse_shell_writes(const std::string& file, const std::string& text, WriterKind kind,
                                                 const std::string& context) {
    std::vector<WriterAssignment> out;
    int n = 0;
    for (const auto& raw : lines_of(text)) {
        ++n;
        const auto l = util::trim(raw);
        if (l.empty() || l.front() == '#' || l.front() == ';') continue;
        // Every "/sys/.../queue/..." path in the line: what writes it?
        for (std::size_t at = l.find("/sys/"); at != std::string::npos; at = l.find("/sys/", at + 1)) {
            std::size_t end = at;
            while (end < l.size() && !std::isspace(static_cast<unsigned char>(l[end])) && l[end] != '\'' &&
                   l[end] != '"' && l[end] != ';' && l[end] != ')' && l[end] != '|' && l[end] != '&')
                ++end;
            auto target = sysfs_target(l.substr(at, end - at));
            if (!target) continue;
            // "echo V > PATH", "echo V >> PATH" or "echo V | tee PATH": the
            // command is the last echo before the path, with nothing between
            // them that ends it.
            std::size_t r = at;
            while (r > 0 && (l[r - 1] == ' ' || l[r - 1] == '\t' || l[r - 1] == '"' || l[r - 1] == '\'')) --r;
            std::size_t cmd_end = std::string::npos;
            std::string via = ">";
            if (r > 0 && l[r - 1] == '>') {
                cmd_end = (r >= 2 && l[r - 2] == '>') ? r - 2 : r - 1;
            } else if (r >= 3 && l.compare(r - 3, 3, "tee") == 0) {
                via = "tee";
                auto pipe = l.rfind('|', r - 3);
                if (pipe == std::string::npos) continue;
                cmd_end = pipe;
            } else if (r >= 6 && l.compare(r - 6, 6, "tee -a") == 0) {
                via = "tee";
                auto pipe = l.rfind('|', r - 6);
                if (pipe == std::string::npos) continue;
                cmd_end = pipe;
            } else {
                continue;  // the path is read, not written
            }
            std::string value;
            std::string why;
            const auto echo = cmd_end == 0 ? std::string::npos : l.rfind("echo", cmd_end - 1);
            const bool plain_echo = echo != std::string::npos && l.find_first_of(";&|", echo) >= cmd_end &&
                                    (echo == 0 || std::string(" \t'\"/;=(").find(l[echo - 1]) != std::string::npos);
            if (plain_echo) {
                std::string cmd = l.substr(echo + 4, cmd_end - echo - 4);
                std::size_t i = 0;
                skip_space(cmd, i);
                std::vector<std::string> args;
                while (i < cmd.size()) {
                    auto w = shell_word(cmd, i);
                    if (!w.empty()) args.push_back(w);
                    if (i < cmd.size() && !std::isspace(static_cast<unsigned char>(cmd[i]))) ++i;
                    skip_space(cmd, i);
                }
                while (!args.empty() && (args.front() == "-n" || args.front() == "-e")) args.erase(args.begin());
                std::string joined;
                for (const auto& a : args) joined += (joined.empty() ? "" : " ") + a;
                if (joined.find('$') != std::string::npos || joined.find('`') != std::string::npos)
                    why = "the value is a shell expansion";
                else
                    value = joined;
            } else {
                why = "the value comes from a command, not an echo";
            }
            if (value.empty() && why.empty()) why = "no value";
            auto a = assignment(file, n, *target, value, kind, context);
            a.why_inexact = why;
            out.push_back(a);
        }
    }
    return out;
}

// ---- TuneD ----

TunedProfileFile parse_tuned_conf(const std::string& name, const std::string& file, const std::string& text) {
    TunedProfileFile p;
    p.name = name;
    p.file = file;
    int n = 0;
    enum { none, main, unit } where = none;
    for (const auto& raw : lines_of(text)) {
        ++n;
        const auto l = util::trim(raw);
        if (l.empty() || l.front() == '#' || l.front() == ';') continue;
        if (l.front() == '[') {
            if (l.back() != ']') {
                p.errors.push_back(file + ":" + std::to_string(n) + ": a section header without its ]");
                where = none;
                continue;
            }
            const auto section = util::trim(l.substr(1, l.size() - 2));
            if (section == "main") {
                where = main;
            } else {
                where = unit;
                p.units.push_back({section, n, {}});
            }
            continue;
        }
        const auto eq = l.find('=');
        if (eq == std::string::npos) {
            p.errors.push_back(file + ":" + std::to_string(n) + ": not key=value");
            continue;
        }
        TunedOption o{util::trim(l.substr(0, eq)), util::trim(l.substr(eq + 1)), n};
        if (where == main)
            p.main.push_back(o);
        else if (where == unit)
            p.units.back().options.push_back(o);
        else
            p.errors.push_back(file + ":" + std::to_string(n) + ": an option outside any section");
    }
    return p;
}

std::optional<TunedReadahead> parse_tuned_readahead(const std::string& v) {
    auto s = util::trim(v);
    TunedReadahead r;
    if (!s.empty() && (s.front() == '>' || s.front() == '<')) {
        r.condition = s.front();
        s = util::trim(s.substr(1));
    }
    const auto w = words(s);
    if (w.empty() || w.size() > 2) return std::nullopt;
    auto n = util::parse_int(w[0]);
    if (!n || *n < 0) return std::nullopt;
    r.kib = *n;
    if (w.size() == 2) {
        if (w[1].front() != 's') return std::nullopt;
        r.kib = *n / 2;  // 512-byte sectors
    }
    return r;
}

namespace {

struct MergedOption {
    std::string value, file;
    int line = 0;
};
struct MergedUnit {
    std::string name;
    MergedOption type, devices, enabled, udev_regex, cpuinfo_regex, uname_regex;
    std::string file;
    int line = 0;
    std::string profile;
    std::map<std::string, MergedOption> options;  // the plugin's own options
    std::vector<std::string> order;               // of those, in the order first seen
};
// The profiles merged: TuneD's [variables] and its units by name.
struct MergedProfiles {
    std::map<std::string, std::string> variables;
    std::map<std::string, MergedUnit> units;
    std::vector<std::string> unit_order;
};

// The options TuneD reads for the unit itself, not for its plugin: where
// the merge keeps each one, or nothing (the merge acts on it, or it says
// nothing about what is written).
struct UnitKey {
    std::string_view key;
    MergedOption MergedUnit::*member;
};
constexpr UnitKey kUnitKeys[] = {
    {"type", &MergedUnit::type},
    {"devices", &MergedUnit::devices},
    {"enabled", &MergedUnit::enabled},
    {"devices_udev_regex", &MergedUnit::udev_regex},
    {"cpuinfo_regex", &MergedUnit::cpuinfo_regex},
    {"uname_regex", &MergedUnit::uname_regex},
    {"replace", nullptr},
    {"drop", nullptr},
    {"priority", nullptr},
    {"script_pre", nullptr},
    {"script_post", nullptr},
};

const UnitKey* unit_key(std::string_view key) {
    for (const auto& k : kUnitKeys)
        if (k.key == key) return &k;
    return nullptr;
}

// TuneD's devices= syntax: words separated by blanks or commas; "!" negates.
void split_devices(const std::string& spec, std::vector<std::string>& pos, std::vector<std::string>& neg) {
    std::string cleaned = spec;
    std::replace(cleaned.begin(), cleaned.end(), ',', ' ');
    for (const auto& w : words(cleaned)) {
        if (w.front() == '!')
            neg.push_back(w.substr(1));
        else
            pos.push_back(w);
    }
    if (std::find(pos.begin(), pos.end(), "*") != pos.end()) pos.clear();
}

bool truthy(const std::string& v) {
    auto t = util::trim(v);
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return t == "1" || t == "true" || t == "yes" || t == "y" || t == "on";
}

using ProfileLoader = std::function<std::optional<TunedProfileFile>(const std::string&)>;

// The active profiles and everything they include, in merge order
// (includes before their includer, each file once, as TuneD loads them).
std::vector<TunedProfileFile> walk_includes(const std::vector<std::string>& active, const ProfileLoader& load,
                                            TunedResult& res) {
    std::vector<TunedProfileFile> files;
    std::set<std::string> seen;
    std::function<void(const std::string&, int)> visit = [&](const std::string& name, int depth) {
        if (depth > 16) {
            res.warnings.push_back("TuneD profile " + name + ": includes nested more than 16 deep; not followed");
            return;
        }
        if (!seen.insert(name).second) return;
        auto p = load(name);
        if (!p) {
            res.warnings.push_back("TuneD profile " + name + " is not installed; its settings are not known");
            return;
        }
        for (const auto& e : p->errors) res.warnings.push_back(e);
        for (const auto& o : p->main) {
            if (o.key != "include") continue;
            std::string v = o.value;
            std::replace(v.begin(), v.end(), ';', ',');
            std::istringstream in(v);
            for (std::string inc; std::getline(in, inc, ',');) {
                inc = util::trim(inc);
                if (inc.find("${") != std::string::npos) {
                    res.warnings.push_back(p->file + ":" + std::to_string(o.line) + ": include " + inc +
                                           " names a variable; not followed");
                    continue;
                }
                if (!inc.empty()) visit(inc, depth + 1);
            }
        }
        res.chain.push_back(p->name);
        files.push_back(std::move(*p));
    };
    for (const auto& a : active) visit(a, 0);
    return files;
}

// One profile's unit merged over what came before: replace= starts it
// again, drop= removes options, a later value wins.
void merge_unit(const TunedProfileFile& p, const TunedUnit& u, MergedProfiles& merged) {
    auto last = [&](std::string_view k) -> const TunedOption* {
        for (auto it = u.options.rbegin(); it != u.options.rend(); ++it)
            if (it->key == k) return &*it;
        return nullptr;
    };
    const auto* replace = last("replace");
    auto found = merged.units.find(u.name);
    if (found == merged.units.end() || (replace && truthy(replace->value))) {
        if (found == merged.units.end()) merged.unit_order.push_back(u.name);
        MergedUnit fresh;
        fresh.name = u.name;
        fresh.type = {u.name, p.file, u.line};
        fresh.enabled = {"true", p.file, u.line};
        merged.units[u.name] = fresh;
    }
    auto& m = merged.units[u.name];
    m.file = p.file;
    m.line = u.line;
    m.profile = p.name;
    if (const auto* d = last("drop")) {
        std::string v = d->value;
        std::replace(v.begin(), v.end(), ',', ' ');
        for (const auto& k : words(v)) {
            m.options.erase(k);
            m.order.erase(std::remove(m.order.begin(), m.order.end(), k), m.order.end());
        }
    }
    for (const auto& o : u.options) {
        const MergedOption mo{o.value, p.file, o.line};
        if (const auto* k = unit_key(o.key)) {
            if (k->member) m.*(k->member) = mo;
            continue;
        }
        if (!m.options.count(o.key)) m.order.push_back(o.key);
        m.options[o.key] = mo;
    }
}

MergedProfiles merge_profiles(const std::vector<TunedProfileFile>& files) {
    MergedProfiles merged;
    for (const auto& p : files) {
        for (const auto& u : p.units) {
            if (u.name == "variables") {
                for (const auto& o : u.options) merged.variables[o.key] = o.value;
                continue;
            }
            merge_unit(p, u, merged);
        }
    }
    return merged;
}

// ${name} from [variables]; a value TuneD computes (${f:...}) or an
// unknown variable is said in `why` and gives no value.
std::string expand_variables(const std::map<std::string, std::string>& variables, const std::string& v,
                             std::string& why) {
    std::string out;
    for (std::size_t i = 0; i < v.size();) {
        if (v.compare(i, 2, "${") != 0) {
            out += v[i++];
            continue;
        }
        const auto close = v.find('}', i);
        if (close == std::string::npos) {
            why = "an unclosed ${";
            return {};
        }
        const auto name = v.substr(i + 2, close - i - 2);
        auto it = variables.find(name);
        if (name.find(':') != std::string::npos || it == variables.end()) {
            why = "the value is computed by TuneD (${" + name + "})";
            return {};
        }
        out += it->second;
        i = close + 1;
    }
    return out;
}

// The disk plugin's options that write a queue attribute (elevator,
// readahead, readahead_multiply) into `a`; false for any other option
// (apm, spindown, ...).
bool disk_option(const std::string& key, const std::string& raw, const std::string& value, WriterAssignment& a,
                 std::string& why) {
    if (key == "elevator") {
        a.attribute = policy::key_text(policy::Key::scheduler);
        a.value = value;
        return true;
    }
    if (key == "readahead") {
        a.attribute = policy::key_text(policy::Key::read_ahead_kb);
        if (auto ra = value.empty() ? std::nullopt : parse_tuned_readahead(value)) {
            a.value = std::to_string(ra->kib);
            if (ra->condition)
                why = "readahead=" + raw + ": written only when it " + (ra->condition == '>' ? "raises" : "lowers") +
                      " the device's value";
        } else if (why.empty()) {
            why = "readahead=" + raw + " is not a value TuneD accepts";
        }
        return true;
    }
    if (key == "readahead_multiply") {
        a.attribute = policy::key_text(policy::Key::read_ahead_kb);
        why = "readahead_multiply=" + raw + " multiplies whatever the device had";
        return true;
    }
    return false;
}

// The disk and sysfs units of the merged profiles as assignments.
void emit_assignments(const MergedProfiles& merged, TunedResult& res) {
    for (const auto& name : merged.unit_order) {
        const auto& m = merged.units.at(name);
        if (!truthy(m.enabled.value)) continue;
        const std::string type = util::trim(m.type.value);
        if (type != "disk" && type != "sysfs") continue;
        const std::string context = "profile " + m.profile + ", unit [" + m.name + "]";
        std::vector<std::string> pos, neg;
        std::string unit_why;
        if (!m.devices.value.empty()) {
            std::string why;
            auto devs = expand_variables(merged.variables, m.devices.value, why);
            if (!why.empty()) unit_why = "devices= " + why;
            split_devices(devs, pos, neg);
        }
        if (!m.udev_regex.value.empty())
            unit_why =
                "the unit applies only to devices whose udev properties match devices_udev_regex=" + m.udev_regex.value;
        if (!m.cpuinfo_regex.value.empty() || !m.uname_regex.value.empty())
            unit_why = "the unit applies only where cpuinfo_regex/uname_regex match";
        for (const auto& key : m.order) {
            const auto& o = m.options.at(key);
            std::string why = unit_why;
            const auto value = expand_variables(merged.variables, o.value, why);
            WriterAssignment a;
            a.file = o.file;
            a.line = o.line;
            a.kind = WriterKind::tuned;
            a.context = context;
            a.kernel_patterns = pos;
            a.exclude_patterns = neg;
            if (type == "disk") {
                a.non_removable_only = true;
                if (!disk_option(key, o.value, value, a, why)) continue;
            } else {
                auto t = sysfs_target(key);
                if (!t) continue;
                a.attribute = t->attribute;
                a.value = value;
                a.kernel_patterns = t->device == "*" ? std::vector<std::string>{} : std::vector<std::string>{t->device};
                a.exclude_patterns.clear();
            }
            if (!why.empty() && key != "readahead") a.value.clear();
            a.why_inexact = why;
            res.assignments.push_back(a);
        }
    }
}

}  // namespace

TunedResult resolve_tuned(const std::vector<std::string>& active, const ProfileLoader& load) {
    TunedResult res;
    const auto files = walk_includes(active, load, res);
    emit_assignments(merge_profiles(files), res);
    return res;
}

}  // namespace blkpolicy::writers
