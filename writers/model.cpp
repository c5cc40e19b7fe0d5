// SPDX-License-Identifier: MIT
#include "writers/model.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <iterator>

#include "policy/attributes.hpp"
#include "util/names.hpp"
#include "util/text.hpp"
#include "writers/patterns.hpp"

namespace blkpolicy::writers {

namespace {
// Each kind's name (journal fields, JSON) and how a sentence calls it.
struct KindRow {
    WriterKind value;
    const char* name;
    const char* label;
};
constexpr KindRow kKinds[] = {
    {WriterKind::udev_rule, "udev", "udev rule"},
    {WriterKind::tuned, "tuned", "TuneD profile"},
    {WriterKind::sysfsutils, "sysfsutils", "sysfsutils"},
    {WriterKind::tmpfiles, "tmpfiles", "tmpfiles.d"},
    {WriterKind::unit, "unit", "unit"},
    {WriterKind::rc_local, "rc.local", "rc.local"},
};
static_assert(util::in_enum_order(kKinds));

// Three-valued: a test no fact decides is unknown, and Kleene's logic
// carries it (false and unknown is false, true or unknown is true).
enum class Tri { no, unknown, yes };
Tri tri(bool b) { return b ? Tri::yes : Tri::no; }
Tri negate(Tri t) { return t == Tri::yes ? Tri::no : t == Tri::no ? Tri::yes : Tri::unknown; }

Tri matches(const UdevTest& t, const std::string& value) { return tri(contains({t.pattern}, value) == t.equal); }

// An attribute test: udevd's test fails, whatever its operator, when the
// attribute is not there.
Tri attribute_test(const UdevTest& t, const UdevLevel& level) {
    auto it = level.attributes.find(t.attr);
    if (it == level.attributes.end()) return Tri::unknown;
    if (!it->second) return Tri::no;
    return matches(t, *it->second);
}

Tri parent_test(const UdevTest& t, const UdevLevel& level) {
    if (t.key == "KERNELS") return matches(t, level.kernel);
    if (t.key == "SUBSYSTEMS") return matches(t, level.subsystem);
    if (t.key == "DRIVERS") return matches(t, level.driver);
    if (t.key == "ATTRS") return attribute_test(t, level);
    return Tri::unknown;  // TAGS: the tags of parents are not read
}

// The device's own tests, on one event. Block devices have no driver of
// their own, and their subsystem is "block".
Tri device_test(const UdevTest& t, const UdevDevice& d, const std::string& action) {
    if (t.key == "KERNEL") return matches(t, d.name);
    if (t.key == "SUBSYSTEM") return matches(t, "block");
    if (t.key == "ACTION") return matches(t, action);
    if (t.key == "DRIVER") return matches(t, "");
    if (t.key == "DEVPATH") return d.devpath.empty() ? Tri::unknown : matches(t, d.devpath);
    if (t.key == "ENV") {
        if (!d.properties_known) return Tri::unknown;
        auto it = d.properties.find(t.attr);
        return matches(t, it == d.properties.end() ? std::string() : it->second);
    }
    if (t.key == "ATTR") return d.levels.empty() ? Tri::unknown : attribute_test(t, d.levels.front());
    if (t.key == "TEST" && t.attr.empty()) {
        auto it = d.tested.find(t.pattern);
        return it == d.tested.end() ? Tri::unknown : tri(it->second == t.equal);
    }
    return Tri::unknown;
}

Tri literal_value(const Literal& l, const UdevDevice& d, const std::string& action) {
    if (!l.undecidable.empty() || l.tests.empty()) return Tri::unknown;
    Tri v;
    if (l.tests.front().on_parents()) {
        // All of the line's parent tests on one level, any level.
        v = d.levels.empty() ? Tri::unknown : Tri::no;
        for (const auto& level : d.levels) {
            Tri all = Tri::yes;
            for (const auto& t : l.tests) all = std::min(all, parent_test(t, level));
            v = std::max(v, all);
        }
    } else {
        v = Tri::yes;
        for (const auto& t : l.tests) v = std::min(v, device_test(t, d, action));
    }
    return l.holds ? v : negate(v);
}

// The condition on one event, and the first literal no fact decided.
Tri condition_value(const Condition& c, const UdevDevice& d, const std::string& action, std::string& because) {
    if (!c.too_complex.empty()) {
        because = c.too_complex;
        return Tri::unknown;
    }
    Tri any = Tri::no;
    for (const auto& term : c.terms) {
        Tri all = Tri::yes;
        std::string why;
        for (const auto& l : term.literals) {
            const Tri v = literal_value(l, d, action);
            if (v == Tri::unknown && why.empty()) why = l.undecidable.empty() ? l.text() : l.undecidable;
            all = std::min(all, v);
        }
        if (all == Tri::unknown && because.empty()) because = why;
        any = std::max(any, all);
    }
    return any;
}

// What the kernel moves when a queue attribute is written (KERNEL.md): a
// scheduler switch makes iosched/ anew and resets nr_requests and wbt; a
// rotational write recomputes wbt's default and, on newer kernels, the
// readahead, as a limits write (max_sectors_kb) does.
bool moved_by(const std::string& written, const std::string& path) {
    if (written == "queue/scheduler")
        return path.rfind("queue/iosched/", 0) == 0 || path == "queue/nr_requests" || path == "queue/wbt_lat_usec";
    if (written == "queue/rotational")
        return path == "queue/wbt_lat_usec" || path == "queue/read_ahead_kb" || path == "bdi/read_ahead_kb";
    if (written == "queue/max_sectors_kb") return path == "queue/read_ahead_kb" || path == "bdi/read_ahead_kb";
    return false;
}

// udevd writes an ATTR the moment it applies a line, and every later line
// (of the file and of the files after it) reads sysfs again. After udev
// rule W, which selects the device as VERDICT says: a certain write leaves
// its value to be read, as the kernel shows it (a scheduler's bracketed
// list is not its value: not known); a possible one leaves the attribute
// not known; what the kernel moves with it is not known either.
void after_write(UdevDevice& d, const WriterAssignment& w, Selects verdict) {
    if (w.kind != WriterKind::udev_rule || verdict == Selects::no || d.levels.empty()) return;
    const auto spec = policy::find_attribute(w.attribute);
    if (!spec) return;
    auto& attrs = d.levels.front().attributes;
    std::vector<std::string> paths = {spec->path};
    if (spec->path == "queue/read_ahead_kb" || spec->path == "bdi/read_ahead_kb")
        paths = {"queue/read_ahead_kb", "bdi/read_ahead_kb"};  // one value, two files
    for (auto it = attrs.begin(); it != attrs.end();)
        it = moved_by(spec->path, it->first) ? attrs.erase(it) : std::next(it);
    const bool known = verdict == Selects::yes && !w.value.empty() && spec->path != "queue/scheduler";
    for (const auto& p : paths) {
        if (known)
            attrs[p] = w.value;
        else
            attrs.erase(p);
    }
}

// Each writer's selection of the device, in udevd's order, each decided on
// the device as the udev rules before it left it.
std::vector<Selection> selections(const std::vector<WriterAssignment>& writers, const UdevDevice& device) {
    std::vector<Selection> out;
    out.reserve(writers.size());
    UdevDevice seen = device;
    for (const auto& w : writers) {
        out.push_back(w.selects(seen));
        after_write(seen, w, out.back().verdict);
    }
    return out;
}

bool glob_any(const std::vector<std::string>& patterns, const std::string& name) {
    return std::any_of(patterns.begin(), patterns.end(),
                       [&](const std::string& p) { return ::fnmatch(p.c_str(), name.c_str(), 0) == 0; });
}

}  // namespace

const char* to_string(WriterKind k) { return util::name_of(kKinds, k); }

const char* label(WriterKind k) {
    const auto i = static_cast<std::size_t>(k);
    return i < std::size(kKinds) ? kKinds[i].label : "?";
}

std::string UdevTest::text() const {
    return key + (attr.empty() ? "" : "{" + attr + "}") +
           (assigned ? "="
            : equal  ? "=="
                     : "!=") +
           "\"" + pattern + "\"";
}

bool UdevTest::on_parents() const {
    return key == "KERNELS" || key == "SUBSYSTEMS" || key == "DRIVERS" || key == "ATTRS" || key == "TAGS";
}

std::string Literal::text() const {
    std::string s;
    for (const auto& t : tests) s += (s.empty() ? "" : ", ") + t.text();
    return holds ? s : "not (" + s + ")";
}

Selection evaluate(const Condition& c, const UdevDevice& device) {
    Selection s;
    Tri best = Tri::no;
    for (const char* action : {"add", "change"}) best = std::max(best, condition_value(c, device, action, s.because));
    s.verdict = best == Tri::yes ? Selects::yes : best == Tri::unknown ? Selects::may : Selects::no;
    if (s.verdict != Selects::may) s.because.clear();
    return s;
}

std::string WriterAssignment::describe() const {
    std::string s = std::string(label(kind)) + " " + where();
    if (!context.empty()) s += " (" + context + ")";
    return s;
}

Selection WriterAssignment::selects(const UdevDevice& device) const {
    if (!kernel_patterns.empty() && !glob_any(kernel_patterns, device.name)) return {};
    if (glob_any(exclude_patterns, device.name)) return {};
    if (non_removable_only) {
        if (!device.removable) return {Selects::may, "whether " + device.name + " is removable"};
        if (*device.removable) return {};
    }
    if (!condition) return {Selects::yes, {}};
    return evaluate(*condition, device);
}

UdevReads reads_of(const std::vector<WriterAssignment>& writers) {
    UdevReads r;
    std::set<const Condition*> seen;
    for (const auto& w : writers) {
        if (!w.condition || !seen.insert(w.condition.get()).second) continue;
        for (const auto& term : w.condition->terms)
            for (const auto& l : term.literals)
                for (const auto& t : l.tests) {
                    if (t.key == "ATTR") r.own_attributes.insert(t.attr);
                    if (t.key == "ATTRS") r.parent_attributes.insert(t.attr);
                    if (t.key == "TEST" && t.attr.empty()) r.tested_paths.insert(t.pattern);
                }
    }
    return r;
}

FoundWriter find_writer(const std::vector<WriterAssignment>& writers, const UdevDevice& device,
                        const std::string& attribute, const std::string& current) {
    const auto all = selections(writers, device);
    for (const Selects wanted : {Selects::yes, Selects::may}) {
        FoundWriter first;
        for (std::size_t i = 0; i < writers.size(); ++i) {
            const auto& w = writers[i];
            if (w.attribute != attribute) continue;
            const auto& s = all[i];
            if (s.verdict != wanted) continue;
            if (!current.empty() && !w.value.empty() && util::trim(w.value) == util::trim(current)) return {&w, s};
            if (!first) first = {&w, s};
        }
        if (first) return first;
    }
    return {};
}

std::vector<FoundWriter> writers_of(const std::vector<WriterAssignment>& writers, const UdevDevice& device) {
    std::vector<FoundWriter> out;
    const auto all = selections(writers, device);
    for (std::size_t i = 0; i < writers.size(); ++i)
        if (all[i].verdict != Selects::no) out.push_back({&writers[i], all[i]});
    return out;
}

}  // namespace blkpolicy::writers
