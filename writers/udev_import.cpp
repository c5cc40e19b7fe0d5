// SPDX-License-Identifier: MIT
#include "writers/udev_import.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "policy/attributes.hpp"
#include "policy/loader.hpp"
#include "policy/match.hpp"
#include "policy/toml_text.hpp"
#include "util/text.hpp"
#include "util/utf8.hpp"
#include "writers/udev_flow.hpp"

namespace blkpolicy::writers {

namespace {

// What blkpolicy acts on, by itself: add and change events, block devices,
// whole disks. A test about these only restates that scope.
enum class Scope { restated, outside, other };
struct ScopeCheck {
    Scope scope = Scope::other;
    std::string why;  // outside: why a device in blkpolicy's scope never gets here
    bool add_only = false;
};

// A rule on a SCSI device's own event (ENV{DEVTYPE}=="scsi_device",
// SUBSYSTEM=="scsi"): its ATTR{timeout} and ATTR{queue_depth} are the
// disk's device/timeout and device/queue_depth, which blkpolicy sets on the
// disks the SCSI device carries.
bool on_scsi_device_event(const UdevRule& r) {
    return std::any_of(r.tokens.begin(), r.tokens.end(), [](const UdevToken& t) {
        if (t.op != UdevOp::match) return false;
        if (t.key == "ENV" && t.attr == "DEVTYPE") return udev_pattern_match(t.value, "scsi_device");
        return t.key == "SUBSYSTEM" && udev_pattern_match(t.value, "scsi") && !udev_pattern_match(t.value, "block");
    });
}

// The scsi_device attributes a policy key sets on its disks.
std::string scsi_device_key(const std::string& attr) {
    if (attr == "timeout" || attr == "queue_depth") return "device/" + attr;
    return {};
}

// The disk's attribute an assignment of rule R sets when R is on a SCSI
// device's event (ATTR{timeout} -> device/timeout), or empty.
std::string scsi_tuning(const UdevRule& r, const UdevToken& t) {
    if (t.key != "ATTR" || !is_assignment(t.op) || !on_scsi_device_event(r)) return {};
    return scsi_device_key(t.attr);
}

ScopeCheck scope_of(const Literal& l, bool scsi) {
    const auto v = value_set(l);
    if (!v) return {};
    if (scsi && v->value == "ENV{DEVTYPE}" && contains(v->strings, "scsi_device")) return {Scope::restated, {}};
    if (scsi && v->value == "SUBSYSTEM" && contains(v->strings, "scsi")) return {Scope::restated, {}};
    if (v->value == "ACTION") {
        const bool add = contains(v->strings, "add"), change = contains(v->strings, "change");
        if (!add && !change) return {Scope::outside, "it never runs on add or change (" + l.text() + ")"};
        return {Scope::restated, {}, add && !change};
    }
    if (v->value == "SUBSYSTEM") {
        if (contains(v->strings, "block")) return {Scope::restated, {}};
        return {Scope::outside, "it is not a rule for block devices (" + l.text() + ")"};
    }
    if (v->value == "ENV{DEVTYPE}") {
        if (contains(v->strings, "disk")) return {Scope::restated, {}};
        return {Scope::outside, l.text() + ": partitions have no queue/ to tune"};
    }
    if (v->value == "DRIVER") {
        // A block device has no driver of its own: DRIVER== sees "".
        if (contains(v->strings, "")) return {Scope::restated, {}};
        return {Scope::outside, l.text() + ": a block device has no driver of its own, so the rule never matched"};
    }
    return {};
}

// A rule's match in policy terms, built literal by literal.
struct MatchEntry {
    std::string key;
    std::vector<std::string> patterns;
    bool flag = false;  // true/false, written bare
    bool operator==(const MatchEntry&) const = default;
    policy::TomlEntry toml() const { return {key, flag ? patterns.front() : policy::toml_list(patterns), {}}; }
};
struct PolicyMatch {
    std::vector<MatchEntry> match, unless;
    // Adds "key = patterns" to match or unless; a key can appear once in
    // each, so the same key with other patterns (KERNEL=="a*" and
    // KERNEL=="*b": both must hold) cannot be converted exactly. Returns why
    // not, or empty.
    std::string add(bool negated, const std::string& key, const std::vector<std::string>& patterns, bool flag = false) {
        auto& into = negated ? unless : match;
        for (auto& m : into) {
            if (m.key != key) continue;
            if (m.patterns == patterns) return {};
            if (negated && !m.flag && !flag) {
                // KEY!="a", KEY!="b": neither may match, which is what one
                // unless entry listing both says.
                for (const auto& p : patterns)
                    if (std::find(m.patterns.begin(), m.patterns.end(), p) == m.patterns.end()) m.patterns.push_back(p);
                return {};
            }
            return std::string("it ") + (negated ? "excludes " : "matches ") + key +
                   " twice with different patterns, which a policy cannot express";
        }
        into.push_back({key, patterns, flag});
        return {};
    }
    bool operator==(const PolicyMatch&) const = default;
};

std::vector<policy::TomlEntry> toml_entries(const std::vector<MatchEntry>& entries) {
    std::vector<policy::TomlEntry> out;
    for (const auto& e : entries) out.push_back(e.toml());
    return out;
}

std::vector<std::string> alternatives_of(const std::string& pattern, bool trim) {
    auto out = split_alternatives(pattern);
    if (trim)  // udev ignores the trailing blanks of a sysfs value, and blkpolicy trims its facts
        for (auto& a : out) a = util::trim(a);
    return out;
}

// The policy key an attribute test becomes: blkpolicy's own facts for
// what it reads from the same level udev finds them on, attr.NAME and
// attrs.NAME for the rest.
std::string attribute_key(const UdevTest& t) {
    if (t.key == "ATTRS" && (t.attr == "model" || t.attr == "vendor" || t.attr == "wwid")) return t.attr;
    return policy::toml_dotted(t.key == "ATTR" ? "attr" : "attrs", t.attr);
}

// Flags: which of "0" and "1" the literal lets through.
std::string convert_flag(const Literal& l, const std::string& key, PolicyMatch& m) {
    const auto v = value_set(l);
    const bool zero = contains(v->strings, "0"), one = contains(v->strings, "1");
    if (zero && one) return {};  // every value: says nothing
    if (!zero && !one) return l.text() + ": only \"0\" or \"1\" can be converted";
    return m.add(false, key, {one ? "true" : "false"}, true);
}

// A TEST of the line itself for the one attribute it writes
// (TEST=="queue/scheduler", ATTR{queue/scheduler}="none"): udevd writes
// where the file is, and blkpolicy's write of an attribute a device lacks
// is not made either, so the test adds nothing. LINE and what it writes.
struct OwnWrites {
    int line = 0;
    std::set<std::string> attrs;
};

// One udev line's parent tests (KERNELS, SUBSYSTEMS, DRIVERS, ATTRS),
// which udevd requires of one device on the walk up: the policy's parent
// table, in [rule.match] where they hold on the path and in [rule.unless]
// where they must not (no level meets them all). Returns why not, or empty.
std::string add_parent_table(const Literal& l, PolicyMatch& m) {
    const bool negated = !l.holds;
    const auto& into = negated ? m.unless : m.match;
    if (std::any_of(into.begin(), into.end(), [](const MatchEntry& e) { return e.key.rfind("parent.", 0) == 0; }))
        return l.text() +
               ": a second line's parent tests, which udevd may meet on another parent than the first line's: a "
               "rule has one parent table";
    std::set<std::string> keys;
    for (const auto& p : l.tests) {
        if (!p.equal) return l.text() + ": a != among parent tests that must hold on one parent cannot be expressed";
        std::string key;
        if (p.key == "KERNELS") key = "parent.kernel";
        if (p.key == "SUBSYSTEMS") key = "parent.subsystem";
        if (p.key == "DRIVERS") key = "parent.driver";
        if (p.key == "ATTRS") {
            if (auto why = policy::invalid_match_name(policy::MatchKey::attrs, p.attr); !why.empty())
                return p.text() + ": " + why;
            key = policy::toml_dotted("parent.attr", p.attr);
        }
        if (key.empty()) return l.text() + ": " + p.key + " cannot be expressed in a policy";
        if (!keys.insert(key).second)
            return l.text() + ": the same parent key tested twice on one parent cannot be expressed";
        if (auto why = m.add(negated, key, alternatives_of(p.pattern, p.key == "ATTRS")); !why.empty()) return why;
    }
    return {};
}

// One literal of a path into policy terms; returns why it cannot be one.
std::string convert_literal(const Literal& l, PolicyMatch& m, bool scsi, const OwnWrites& own) {
    const auto& t = l.tests.front();
    if (scsi && l.tests.size() == 1 && l.undecidable.empty()) {
        // On the SCSI device's own event, where udevd's walk starts at the
        // SCSI device: its KERNEL is an H:C:T:L address, its ATTR{}s are
        // what the disk reads under device/, and SUBSYSTEMS=="scsi" holds.
        if (t.key == "KERNEL")
            return t.text() + ": on a scsi_device's event KERNEL is its H:C:T:L address, which a policy cannot match";
        if (t.key == "SUBSYSTEMS" && t.equal && l.holds && udev_pattern_match(t.pattern, "scsi")) return {};
        if (t.key == "ATTR") {
            const bool fact = t.attr == "model" || t.attr == "vendor";
            const auto alts = alternatives_of(t.pattern, true);
            const auto key = fact ? t.attr : policy::toml_dotted("attr", "device/" + t.attr);
            if (t.equal == l.holds) return m.add(false, key, alts);
            return m.add(true, key, alts);
        }
    }
    if (!l.undecidable.empty()) {
        const auto role = udev_key_role(t.key);
        std::string why = "cannot be expressed in a policy";
        if (!role)
            why = "not a udev key blkpolicy knows";
        else if (t.key == "PROGRAM")
            why = "the rule applies only where the program succeeds, which a policy cannot express";
        else if (t.key == "IMPORT")
            why = "the rule applies only where the import finds something, which a policy cannot express";
        else if (t.key == "RESULT")
            why = "it matches a program's output, which a policy cannot express";
        else if (t.key == "ENV")
            why = l.undecidable + ", which a policy cannot express";
        return (l.tests.size() == 1 ? t.text() : l.text()) + ": " + why;
    }
    if (t.key == "TEST" && t.equal && l.holds && l.undecidable.empty() && t.line == own.line &&
        own.attrs == std::set<std::string>{t.pattern})
        return {};
    if (t.key == "TEST") return t.text() + ": it tests a file, which a policy cannot express";
    if (l.tests.size() > 1) {
        // Several parent tests that must hold on one level. Model, vendor
        // and wwid alone are blkpolicy's own facts, read from the one level
        // that has them (on a SCSI device's event the walk starts at it: it
        // is the level in the scsi subsystem, and the one with model and
        // vendor). Anything else is a parent table: the driver chain, say,
        // is any level's, and DRIVERS=="ahci" with ATTRS{vendor}=="ATA" is
        // met by no one level.
        auto scsi_level = [&](const UdevTest& p) {
            return scsi && p.key == "SUBSYSTEMS" && p.equal && udev_pattern_match(p.pattern, "scsi");
        };
        auto fact = [](const UdevTest& p) {
            return p.equal && p.key == "ATTRS" && (p.attr == "model" || p.attr == "vendor" || p.attr == "wwid");
        };
        if (l.holds &&
            std::all_of(l.tests.begin(), l.tests.end(), [&](const auto& p) { return scsi_level(p) || fact(p); })) {
            for (const auto& p : l.tests) {
                if (scsi_level(p)) continue;
                if (auto why = m.add(false, p.attr, alternatives_of(p.pattern, true)); !why.empty()) return why;
            }
            return {};
        }
        // On a SCSI device's event udevd's walk starts above the disk, where
        // a policy's levels start at it.
        if (scsi) return l.text() + ": these parent tests together cannot be expressed";
        return add_parent_table(l, m);
    }
    const auto alts = alternatives_of(t.pattern, t.key == "ATTR" || t.key == "ATTRS");
    if (t.key == "KERNEL") return m.add(!t.equal, "kernel", alts);
    // A rule on an NVMe subsystem, read as one on its multipath heads
    // (writers/udev_rules).
    if (t.key == "SUBSYSTEMS" && t.equal && l.holds && alts == std::vector<std::string>{"nvme-subsystem"})
        return m.add(false, "stack", {"nvme-multipath"});
    if (t.key == "ENV") {
        if (policy::invalid_match_name(policy::MatchKey::env, t.attr).empty())
            return m.add(!t.equal, policy::toml_dotted("env", t.attr), alts);
        return "ENV{" + t.attr + "}: not a property name a policy can match";
    }
    if (t.key == "DRIVERS") {
        // udevd starts at the disk, which has no driver: DRIVERS!= holds there.
        if (!t.equal && l.holds) {
            if (!contains({t.pattern}, "")) return {};
            return l.text() + ": cannot be expressed";
        }
        if (t.equal && l.holds) return m.add(false, "driver", alts);
        if (t.equal && !l.holds) return m.add(true, "driver", alts);
        return l.text() + ": cannot be expressed";
    }
    // KERNELS=="...", SUBSYSTEMS=="...": the device or a parent, a parent table of one test.
    if ((t.key == "KERNELS" || t.key == "SUBSYSTEMS") && t.equal) return add_parent_table(l, m);
    if (t.key == "ATTR" && (t.attr == "queue/rotational" || t.attr == "removable")) {
        // As the kernel reported it at add (blkpolicy freezes the flag it saw first).
        return convert_flag(l, t.attr == "removable" ? "removable" : "rotational", m);
    }
    if (t.key == "ATTR" || t.key == "ATTRS") {
        const auto name_ok =
            policy::invalid_match_name(t.key == "ATTR" ? policy::MatchKey::attr : policy::MatchKey::attrs, t.attr);
        if (!name_ok.empty()) return t.key + "{" + t.attr + "}: " + name_ok;
        const auto key = attribute_key(t);
        // udevd's test fails where the attribute is missing; blkpolicy reads
        // a missing one as "", which only the empty pattern matches.
        if (t.equal && l.holds) return m.add(false, key, alts);
        if (t.equal && !l.holds) return m.add(true, key, alts);
        if (!t.equal && l.holds) {
            if (auto why = m.add(true, key, alts); !why.empty()) return why;
            const bool present =
                std::any_of(m.match.begin(), m.match.end(), [&](const auto& e) { return e.key == key; });
            return present ? std::string() : m.add(false, key, {"?*"});
        }
        auto with_absent = alts;
        with_absent.push_back("");
        return m.add(false, key, with_absent);
    }
    return l.text() + ": cannot be expressed in a policy";
}

// Whether line I of a file is on a block device's event, as its own keys
// or the file's filters before it say: SUBSYSTEM=="block", a DEVTYPE of
// disk or partition, a filesystem found on it, a kernel name of a block
// driver's, or an earlier SUBSYSTEM!="block" that jumps past it. A line
// that says none of these (KERNEL=="eth0", ATTR{mtu}) is not storage's.
bool on_block_event(const std::vector<UdevRule>& rules, const std::vector<std::optional<std::size_t>>& targets,
                    std::size_t i) {
    static const std::vector<std::string> kBlockNames = {"sd",   "vd",     "xvd",  "hd",   "nvme", "mmcblk",
                                                         "zram", "md",     "dm-",  "loop", "sr",   "nbd",
                                                         "rbd",  "bcache", "dasd", "pmem", "ram"};
    auto block_name = [&](const std::string& pattern) {
        const auto alts = alternatives_of(pattern, false);
        return !alts.empty() && std::all_of(alts.begin(), alts.end(), [&](const std::string& a) {
            return std::any_of(kBlockNames.begin(), kBlockNames.end(),
                               [&](const std::string& n) { return a.rfind(n, 0) == 0; });
        });
    };
    for (const auto& t : rules[i].tokens) {
        if (is_assignment(t.op) || t.op == UdevOp::nomatch) continue;
        if ((t.key == "SUBSYSTEM" || t.key == "SUBSYSTEMS") && contains({t.value, false}, "block")) return true;
        if (t.key == "ENV" && t.attr == "DEVTYPE" &&
            (contains({t.value, false}, "disk") || contains({t.value, false}, "partition")))
            return true;
        if (t.key == "ENV" && t.attr == "ID_FS_TYPE") return true;
        if (t.key == "KERNEL" && block_name(t.value)) return true;
    }
    // SUBSYSTEM!="block", GOTO="end" before it, its LABEL after it.
    for (std::size_t j = 0; j < i; ++j)
        if (targets[j] > i && std::any_of(rules[j].tokens.begin(), rules[j].tokens.end(), [](const UdevToken& t) {
                return t.key == "SUBSYSTEM" && t.op == UdevOp::nomatch && contains({t.value, false}, "block");
            }))
            return true;
    return false;
}

// udevd writes an ATTR the moment it applies the line, and every later
// line (of this file and the files after it) reads sysfs again: a later
// match on what an earlier line wrote sees the written value, which a
// policy's match (the device's own facts) does not. The read of line AT
// (its own keys and the filters that jump past it) against each earlier
// line's writes, in udevd's order; a reason to leave it out, or empty.
// TARGETS: where each GOTO of AT's file lands (goto_targets), by line of
// the file.
// Two lines whose KERNEL patterns cannot name one device (bcache* and
// sd[a-z]) do not meet.
std::string reads_an_earlier_write(const std::vector<UdevRule>& rules, std::size_t file_first, std::size_t at,
                                   const std::vector<std::optional<std::size_t>>& targets) {
    auto literal_prefix = [](const std::string& alt) { return alt.substr(0, alt.find_first_of("*?[")); };
    auto kernels = [](const UdevRule& r) {
        std::vector<std::string> out;
        for (const auto& t : r.tokens)
            if (t.key == "KERNEL" && t.op == UdevOp::match) {
                auto alts = alternatives_of(t.value, false);
                out.insert(out.end(), alts.begin(), alts.end());
            }
        return out;
    };
    auto disjoint = [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
        if (a.empty() || b.empty()) return false;
        for (const auto& x : a)
            for (const auto& y : b) {
                const auto px = literal_prefix(x), py = literal_prefix(y);
                if (px.rfind(py, 0) == 0 || py.rfind(px, 0) == 0) return false;
            }
        return true;
    };
    // What line AT reads, each with the line that reads it: its own tests,
    // and those of the file's earlier lines that jump past it (GOTO to a
    // LABEL after it), read there, before the lines between.
    auto jumps_past = [&](std::size_t j) { return targets[j - file_first] > at - file_first; };
    std::vector<std::pair<const UdevToken*, std::size_t>> reads;
    auto add_reads = [&](std::size_t j) {
        for (const auto& t : rules[j].tokens)
            if ((t.key == "ATTR" || t.key == "ATTRS" || t.key == "TEST") && !is_assignment(t.op))
                reads.emplace_back(&t, j);
    };
    add_reads(at);
    for (std::size_t j = file_first; j < at; ++j)
        if (jumps_past(j)) add_reads(j);
    if (reads.empty()) return {};
    const auto mine = kernels(rules[at]);
    for (std::size_t j = 0; j < at; ++j) {
        const auto& w = rules[j];
        if (!w.error.empty() || disjoint(kernels(w), mine)) continue;
        // A line of the same file that jumps past AT after its writes: the
        // devices it writes never reach AT.
        if (j >= file_first && jumps_past(j)) continue;
        for (const auto& t : w.tokens) {
            if (t.key != "ATTR" || !is_assignment(t.op)) continue;
            for (const auto& [rd, line] : reads) {
                if (line <= j) continue;  // read before the write
                const std::string path = rd->key == "TEST" ? rd->value : rd->attr;
                // The attribute itself; for TEST, what a scheduler switch
                // makes or removes (queue/iosched/...) too.
                const bool same = path == t.attr;
                const bool made =
                    rd->key == "TEST" && t.attr == "queue/scheduler" && path.rfind("queue/iosched/", 0) == 0;
                if (rd->key == "TEST" && same) continue;  // a write makes no file: the test's answer stands
                if (!same && !made) continue;
                return rd->text() + ": it reads " + path + ", which " + w.where() + " writes (" + t.text() +
                       ") before it; under udevd a device that line applies to reads the written value here, "
                       "and a policy's match reads the device's own";
            }
        }
    }
    return {};
}

// ATTR{queue/x}="v" -> set key and TOML value, or a reason it cannot be.
struct Settings {
    std::vector<policy::TomlEntry> set;
    bool write_through = false;
};
std::string convert_assignment(const UdevToken& t, Settings& c) {
    const auto key = policy::policy_key_for_attr(t.attr);
    auto spec = policy::find_attribute(key);
    if (!spec) return t.text() + ": blkpolicy does not write " + t.attr;
    if (t.op == UdevOp::add || t.op == UdevOp::remove) return t.text() + ": += and -= make no sense for an attribute";
    std::string value;
    if (auto why = convert_policy_value(key, t.value, value); !why.empty()) return t.text() + ": " + why;
    if (key == policy::key_text(policy::Key::write_cache) && util::trim(t.value) == "write through")
        c.write_through = true;
    std::erase_if(c.set, [&](const policy::TomlEntry& e) { return e.key == key; });
    c.set.push_back({key, value, {}});
    return {};
}

// Whether the line writes attributes of something that is not a block
// device (SUBSYSTEM=="bdi", "scsi", ...): said, with its line, as out of
// blkpolicy's scope.
std::string out_of_scope(const UdevRule& r) {
    const bool writes = std::any_of(r.tokens.begin(), r.tokens.end(),
                                    [](const UdevToken& t) { return t.key == "ATTR" && is_assignment(t.op); });
    if (!writes) return {};
    for (const auto& t : r.tokens) {
        if (t.key != "SUBSYSTEM" || is_assignment(t.op)) continue;
        if (contains({t.value, t.op == UdevOp::nomatch}, "block")) continue;
        return "out of blkpolicy's scope: " + t.text() +
               " writes attributes of devices that are not block devices (blkpolicy tunes block queues and "
               "their SCSI devices, as queue/*, bdi/*, md/* and device/* of a disk)";
    }
    return {};
}

// The lines a path passes through, for the comment: where its tests were
// written.
std::set<int> lines_of(const Term& t) {
    std::set<int> out;
    for (const auto& l : t.literals)
        for (const auto& x : l.tests) out.insert(x.line);
    return out;
}

// What became of each GOTO before the rule: the ones that only restate
// blkpolicy's scope, the ones proven never to skip it, and the ones whose
// tests are now part of its match.
std::string flow_note(const std::vector<UdevRule>& file_rules, const UdevRule& rule, const std::vector<Term>& terms,
                      const std::set<int>& scope_lines) {
    std::set<int> kept;
    for (const auto& t : terms) {
        auto l = lines_of(t);
        kept.insert(l.begin(), l.end());
    }
    std::vector<std::string> restated, never_skips, decides;
    for (const auto& r : file_rules) {
        if (r.line >= rule.line || !r.error.empty()) continue;
        const bool jumps = std::any_of(r.tokens.begin(), r.tokens.end(),
                                       [](const UdevToken& t) { return t.key == "GOTO" && is_assignment(t.op); });
        if (!jumps) continue;
        const auto n = std::to_string(r.line);
        if (kept.count(r.line))
            decides.push_back(n);
        else if (scope_lines.count(r.line))
            restated.push_back(n);
        else
            never_skips.push_back(n);
    }
    std::string note;
    auto say = [&](const std::vector<std::string>& lines, const std::string& what) {
        if (lines.empty()) return;
        note += "\n#   udev: line" + std::string(lines.size() > 1 ? "s " : " ") +
                policy::comment_text(util::join(lines, ", ") + ": " + what);
    };
    say(restated, "its GOTO restates blkpolicy's scope (add and change events, block devices, whole disks): dropped");
    say(never_skips, "its GOTO never skips this rule for a device it selects (proven from the patterns)");
    say(decides, "its GOTO decides which devices reach this rule: part of the match");
    return note;
}

struct RuleOutcome {
    std::vector<PolicyMatch> paths;  // one policy rule each
    std::string left_out;            // non-empty: the whole rule is left out, and why
    bool add_only = false;
    std::set<int> scope_lines;  // lines whose tests only restated the scope
    std::vector<Term> terms;    // the paths that reach the line, scope dropped
};

// The paths to a tuning line in policy terms: each of the condition's
// terms, the tests that restate blkpolicy's scope dropped, a path that
// leaves the scope dropped whole; identical paths once.
RuleOutcome convert_paths(const Condition& when, bool scsi, const OwnWrites& own) {
    RuleOutcome o;
    if (!when.too_complex.empty()) {
        o.left_out = when.too_complex;
        return o;
    }
    std::string outside;
    for (const auto& term : when.terms) {
        Term kept;
        bool dead = false;
        std::set<int> scope_lines;
        for (const auto& l : term.literals) {
            const auto sc = scope_of(l, scsi);
            if (sc.scope == Scope::outside) {
                dead = true;
                if (outside.empty()) outside = sc.why;
                break;
            }
            if (sc.scope == Scope::restated) {
                o.add_only = o.add_only || sc.add_only;
                for (const auto& t : l.tests) scope_lines.insert(t.line);
                continue;
            }
            kept.literals.push_back(l);
        }
        if (dead) continue;
        o.scope_lines.insert(scope_lines.begin(), scope_lines.end());
        PolicyMatch m;
        for (const auto& l : kept.literals) {
            auto why = convert_literal(l, m, scsi, own);
            if (!why.empty()) {
                o.left_out = why;
                return o;
            }
        }
        o.terms.push_back(std::move(kept));
        if (std::find(o.paths.begin(), o.paths.end(), m) == o.paths.end()) o.paths.push_back(std::move(m));
    }
    if (o.paths.empty()) o.left_out = outside.empty() ? "udevd never reaches it" : outside;
    return o;
}

// Paths that differ in the patterns of one match key only, and have no
// unless, become one path with both lists of patterns ("any of").
std::vector<PolicyMatch> merge_paths(std::vector<PolicyMatch> paths) {
    bool merged = true;
    while (merged) {
        merged = false;
        for (std::size_t i = 0; i < paths.size() && !merged; ++i)
            for (std::size_t j = i + 1; j < paths.size() && !merged; ++j) {
                auto& a = paths[i];
                auto& b = paths[j];
                if (!a.unless.empty() || !b.unless.empty() || a.match.size() != b.match.size()) continue;
                std::size_t differ = 0, at = 0;
                for (std::size_t k = 0; k < a.match.size(); ++k) {
                    if (a.match[k].key != b.match[k].key) differ = 2;
                    if (a.match[k].patterns != b.match[k].patterns) {
                        ++differ;
                        at = k;
                    }
                }
                if (differ != 1 || a.match[at].flag) continue;
                for (const auto& x : b.match[at].patterns)
                    if (std::find(a.match[at].patterns.begin(), a.match[at].patterns.end(), x) ==
                        a.match[at].patterns.end())
                        a.match[at].patterns.push_back(x);
                paths.erase(paths.begin() + static_cast<std::ptrdiff_t>(j));
                merged = true;
            }
    }
    return paths;
}

}  // namespace

std::string convert_policy_value(const std::string& key, const std::string& raw, std::string& toml_value) {
    auto spec = policy::find_attribute(key);
    if (!spec) return "blkpolicy does not manage " + key;
    policy::GivenValue given;
    switch (spec->kind) {
        case policy::ValueKind::integer:
        case policy::ValueKind::flag:
        case policy::ValueKind::wbt: {
            auto n = util::parse_int(raw);
            if (!n) return key + " must be a whole number";
            given = *n == -1 && spec->kind == policy::ValueKind::wbt ? policy::GivenValue::of_string("default")
                                                                     : policy::GivenValue::of_integer(*n);
            break;
        }
        case policy::ValueKind::choice:
            given = policy::GivenValue::of_string(util::trim(raw));
            break;
        case policy::ValueKind::scheduler: {
            auto name = util::trim(raw);
            // The kernel's own alias (mq-deadline registers "deadline" as
            // one): the same scheduler, written under its name.
            if (name == "deadline") name = "mq-deadline";
            // The single-queue schedulers went with the legacy block layer
            // (5.0): the write fails on every blk-mq kernel.
            if (name == "noop" || name == "cfq" || name == "anticipatory")
                return "\"" + name +
                       "\" is a scheduler of the legacy block layer, gone since Linux 5.0: on a blk-mq kernel the "
                       "write fails, so it never had an effect; nothing converted for it";
            given = policy::GivenValue::of_string(name);
            break;
        }
    }
    // The check `blkpolicy check` makes, on the attribute's row.
    const auto checked = policy::check_value(*spec, given);
    if (!checked.ok()) return checked.error;
    toml_value = given.type == policy::GivenValue::Type::integer ? std::to_string(given.integer)
                                                                 : policy::toml_quote(given.strings.front());
    return {};
}

void check_import_output(ImportResult& out) {
    // The output must pass check; if it does not, that is a bug here.
    auto verify = policy::load_policy({{"import output", out.toml}});
    for (const auto& e : verify.errors)
        out.diagnostics.push_back("internal error: the converted policy is invalid: " + e.str());
}

ImportResult import_udev_rules(const std::vector<UdevRule>& rules, const std::vector<std::string>& sources) {
    ImportResult out;
    std::string body;
    std::set<std::string> names;

    // udevd follows GOTOs within one file: each file's lines on their own.
    for (std::size_t begin = 0; begin < rules.size();) {
        std::size_t end = begin;
        while (end < rules.size() && rules[end].file == rules[begin].file) ++end;
        const std::vector<UdevRule> file_rules(rules.begin() + static_cast<std::ptrdiff_t>(begin),
                                               rules.begin() + static_cast<std::ptrdiff_t>(end));
        const std::size_t first = begin;
        begin = end;
        const bool tunes = std::any_of(file_rules.begin(), file_rules.end(), [](const UdevRule& r) {
            return r.error.empty() && std::any_of(r.tokens.begin(), r.tokens.end(), [&](const UdevToken& t) {
                       return is_tuning_assignment(t) || !scsi_tuning(r, t).empty();
                   });
        });
        const auto conditions = tunes ? line_conditions(file_rules) : std::vector<Condition>(file_rules.size());
        const auto targets = goto_targets(file_rules);

        for (std::size_t i = 0; i < file_rules.size(); ++i) {
            const auto& r = file_rules[i];
            auto diag = [&](const std::string& m) { out.diagnostics.push_back(r.where() + ": " + m); };
            if (!r.error.empty()) {
                const bool tuning =
                    r.text.find("ATTR{queue/") != std::string::npos || r.text.find("ATTR{bdi/") != std::string::npos ||
                    r.text.find("ATTR{md/") != std::string::npos || r.text.find("ATTR{device/") != std::string::npos;
                diag(std::string(tuning ? "left out: " : "skipped: ") + "cannot parse the rule: " + r.error);
                if (tuning) {
                    ++out.tuning_rules;
                    ++out.left_out;
                    body += "\n# from " + policy::comment_text(r.where()) +
                            " (left out: cannot parse the rule: " + r.error + ")\n#   " + policy::comment_text(r.text) +
                            "\n";
                }
                continue;
            }
            // Storage writes no policy key takes as written: named, never
            // dropped without a word (the whole line where it tunes nothing
            // else, the assignment where it does).
            // A SCSI device's own timeout and queue depth, on its event:
            // tuning assignments, as the disk's device/ attributes.
            const bool scsi = on_scsi_device_event(r);
            auto tuning = [&](const UdevToken& t) { return is_tuning_assignment(t) || !scsi_tuning(r, t).empty(); };
            std::vector<std::string> storage;
            for (const auto& t : r.tokens)
                if (auto why = unconvertible_storage_write(t); !why.empty() && scsi_tuning(r, t).empty())
                    storage.push_back(t.text() + ": " + why);
            const bool tunes_queue = std::any_of(r.tokens.begin(), r.tokens.end(), tuning);
            // Writes named as left out: the whole line where it tunes
            // nothing else (true: go on to the next line), each write
            // where it does.
            auto leave_out = [&](const std::vector<std::string>& whys) {
                if (whys.empty()) return false;
                if (!tunes_queue) {
                    ++out.tuning_rules;
                    ++out.left_out;
                    const auto why = util::join(whys, "; ");
                    diag("left out: " + why);
                    body += "\n# from " + policy::comment_text(r.where()) + " (left out: " + policy::comment_text(why) +
                            ")\n#   " + policy::comment_text(r.text) + "\n";
                    return true;
                }
                for (const auto& why : whys) {
                    ++out.attributes_left_out;
                    diag("left out: " + why);
                    body += "\n# from " + policy::comment_text(r.where()) + ": left out " + policy::comment_text(why) +
                            "\n";
                }
                return false;
            };
            if (leave_out(storage)) continue;
            if (auto why = scsi && tunes_queue ? std::string() : out_of_scope(r); !why.empty()) {
                ++out.out_of_scope;
                diag(why);
                body += "\n# from " + policy::comment_text(r.where()) + " (" + policy::comment_text(why) + ")\n#   " +
                        policy::comment_text(r.text) + "\n";
                continue;
            }
            // A block device's own attribute no policy key sets (the
            // disk's events_poll_msecs, zram's comp_algorithm and disksize):
            // named the same way, never passed over. A write of uevent asks
            // for an event and sets nothing.
            // A line that tunes a queue is a block device's line itself.
            const bool block = tunes_queue || on_block_event(file_rules, targets, i);
            // A program run on a block device's event (RUN+=, not one of
            // udevd's builtins) may tune it in ways no rule line shows
            // (Lustre's l_tunedisk sets the scheduler and max_sectors_kb):
            // blkpolicy runs no programs, so deleting the file stops it.
            auto runs_program = [&](const UdevToken& t) {
                return block && t.key == "RUN" && is_assignment(t.op) && t.attr != "builtin" &&
                       unconvertible_storage_write(t).empty();
            };
            std::vector<std::string> unmanaged;
            for (const auto& t : r.tokens) {
                if (block && unmanaged_block_write(t) && !tuning(t))
                    unmanaged.push_back(t.text() + ": blkpolicy does not manage the device's " + t.attr +
                                        " (it sets queue/, bdi/, md/ and device/ attributes)");
                if (runs_program(t))
                    unmanaged.push_back(t.text() +
                                        ": a program run on the block device's event, whose writes blkpolicy cannot "
                                        "see; blkpolicy runs no programs (keep this line where it tunes the device)");
            }
            if (leave_out(unmanaged) || !tunes_queue) continue;

            ++out.tuning_rules;
            OwnWrites own{r.line, {}};
            for (const auto& t : r.tokens)
                if (tuning(t)) own.attrs.insert(t.attr);
            auto o = convert_paths(conditions[i], scsi, own);
            for (const auto& t : r.tokens)
                if (!udev_key_role(t.key)) o.left_out = t.text() + ": not a udev key: udevd ignores the whole line";
            if (!util::valid_utf8(r.text)) o.left_out = "the rule has bytes that are not UTF-8";
            if (o.left_out.empty()) o.left_out = reads_an_earlier_write(rules, first, first + i, targets);
            Settings settings;
            if (o.left_out.empty()) {
                for (const auto& t : r.tokens) {
                    if (t.is_condition() || !tuning(t)) continue;
                    auto as_disk = t;
                    if (auto attr = scsi_tuning(r, t); !attr.empty()) as_disk.attr = attr;
                    auto why = convert_assignment(as_disk, settings);
                    if (!why.empty()) {
                        ++out.attributes_left_out;
                        diag("left out: " + why);
                        body += "\n# from " + policy::comment_text(r.where()) + ": left out " +
                                policy::comment_text(t.text()) + "\n";
                    }
                }
                if (settings.set.empty()) o.left_out = "none of its assignments can be converted";
            }
            for (const auto& t : r.tokens)
                if (!t.is_condition() && !tuning(t) && t.key != "GOTO" && t.key != "LABEL" &&
                    unconvertible_storage_write(t).empty() && !unmanaged_block_write(t) && !runs_program(t))
                    diag("not converted: " + t.text() + " (blkpolicy writes only queue and device attributes)");

            std::string rules_toml;
            std::vector<std::string> rule_names;
            if (o.left_out.empty()) {
                const auto paths = merge_paths(o.paths);
                const std::string base =
                    std::filesystem::path(r.file).filename().string() + ":" + std::to_string(r.line);
                for (std::size_t p = 0; p < paths.size(); ++p) {
                    std::string name =
                        policy::comment_text(paths.size() > 1 ? base + " (path " + std::to_string(p + 1) + " of " +
                                                                    std::to_string(paths.size()) + ")"
                                                              : base);
                    while (names.count(name) ||
                           std::find(rule_names.begin(), rule_names.end(), name) != rule_names.end())
                        name += "'";
                    policy::RuleToml rule{
                        name, {}, {}, toml_entries(paths[p].match), settings.set, toml_entries(paths[p].unless)};
                    if (settings.write_through) {
                        rule.acknowledge = {policy::kAckWriteThrough};
                        rule.acknowledge_comment = "the udev rule already did this";
                    }
                    auto one = policy::emit_rule(rule);
                    // Whatever check would refuse (bounds on patterns, values)
                    // leaves the rule out here, with check's own words.
                    auto probe = policy::load_policy({{"rule", one}});
                    if (!probe.ok()) {
                        o.left_out = "blkpolicy check would refuse it: " + probe.errors.front().message;
                        break;
                    }
                    rules_toml += (rules_toml.empty() ? "" : "\n") + one;
                    rule_names.push_back(name);
                }
            }
            if (!o.left_out.empty()) {
                ++out.left_out;
                diag("left out: " + o.left_out + "; converting it without that would match more devices");
                body += "\n# from " + policy::comment_text(r.where()) +
                        " (left out: " + policy::comment_text(o.left_out) + ")\n#   " + policy::comment_text(r.text) +
                        "\n";
                continue;
            }
            ++out.converted;
            names.insert(rule_names.begin(), rule_names.end());
            if (o.add_only)
                diag(
                    "warning: the rule matches only ACTION==\"add\", so udev never re-applied it after a change "
                    "event; blkpolicy applies it on add and change and keeps verifying it");
            if (settings.write_through)
                diag(
                    "warning: the rule sets write_cache to write through, which stops cache flushes; the "
                    "converted rule carries the acknowledgement that asks for");
            const std::string scsi_note =
                scsi ? "\n#   udev: on the SCSI device's own event; set on the disks it carries (one with no disk, "
                       "a tape or an enclosure, is not blkpolicy's)"
                     : "";
            body += "\n# from " + policy::comment_text(r.where()) + "\n#   " + policy::comment_text(r.text) +
                    flow_note(file_rules, r, o.terms, o.scope_lines) + scsi_note + "\n" + rules_toml;
        }
    }

    std::string counts =
        std::to_string(out.converted) + " rule(s) converted, " + std::to_string(out.left_out) + " left out";
    if (out.attributes_left_out)
        counts += ", " + std::to_string(out.attributes_left_out) + " assignment(s) left out of converted rules";
    if (out.out_of_scope) counts += ", " + std::to_string(out.out_of_scope) + " out of blkpolicy's scope";
    out.toml = policy::import_document("Converted from udev rules by blkpolicy import:", sources, counts, body);
    check_import_output(out);
    return out;
}

}  // namespace blkpolicy::writers
