// SPDX-License-Identifier: MIT
// The model of the other writers of queue attributes on a host (udev rules,
// TuneD profiles, sysfsutils, tmpfiles.d `w` lines, units and rc.local that
// echo into /sys/block): who writes which attribute of which devices, from
// which file and line, and under which conditions. audit, explain and the
// reconciler include this and never a parser (writers/parsers,
// writers/udev_rules). Pure: the device a writer's conditions are decided
// on (UdevDevice) is read by agent/.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace blkpolicy::writers {

enum class WriterKind { udev_rule, tuned, sysfsutils, tmpfiles, unit, rc_local };
const char* to_string(WriterKind k);  // "udev", "tuned", "sysfsutils", "tmpfiles", "unit", "rc.local"
const char* label(WriterKind k);      // "udev rule", "TuneD profile", ...

// One token of a udev rule line that udevd evaluates as a condition:
// KERNEL=="sd*", ATTRS{model}!="nvme_card*", PROGRAM="...".
struct UdevTest {
    std::string key;        // KERNEL, SUBSYSTEM, ACTION, ENV, ATTR, ATTRS, TEST, PROGRAM, ...
    std::string attr;       // in braces: queue/zoned, ID_FS_TYPE; empty without
    bool equal = true;      // == (a PROGRAM, IMPORT, ... is a test too: it "holds" when it succeeds)
    bool assigned = false;  // written with = (PROGRAM="...", IMPORT{program}="..."), not ==
    std::string pattern;
    int line = 0;
    std::string text() const;  // as written: ATTRS{model}!="nvme_card*"
    // KERNELS, SUBSYSTEMS, DRIVERS, ATTRS, TAGS: udevd walks the device and
    // its parents, and all such tests of one line must hold on the same one.
    bool on_parents() const;
    friend bool operator==(const UdevTest&, const UdevTest&) = default;
};

// A test of a rule line, or its negation: on the path to a line, a GOTO
// that was taken (holds) or not (the line's tests did not all hold).
struct Literal {
    // One test; several only for the parent tests of one line, which
    // udevd decides together.
    std::vector<UdevTest> tests;
    bool holds = true;
    // Non-empty: no fact of the device decides it, and why ("PROGRAM at line
    // 12", "ENV{TYPE} is set by line 7 of the same file").
    std::string undecidable;
    std::string text() const;  // KERNEL=="sd*", or not (ATTRS{model}=="x")
    friend bool operator==(const Literal&, const Literal&) = default;
};

// Every literal holds.
struct Term {
    std::vector<Literal> literals;
};

// When udevd reaches and applies a rule line's assignments: any of the terms.
struct Condition {
    std::vector<Term> terms;  // none: never
    // Non-empty: the paths to the line were too many to follow, so the
    // condition is not known (a writer then "may" write; an import leaves it out).
    std::string too_complex;
    static Condition always() { return {{Term{}}, {}}; }
};

// The device as udevd sees it when it runs the rules for it: what a
// writer's conditions are decided on. Anything not read is undecidable, so
// a device known only by its name still gets every answer that name can
// give.
struct UdevLevel {
    std::string kernel;     // KERNEL, KERNELS
    std::string subsystem;  // SUBSYSTEM, SUBSYSTEMS
    std::string driver;     // DRIVER, DRIVERS; empty: no driver bound
    // ATTR{}/ATTRS{} values read for the writers' conditions, trailing
    // whitespace trimmed as udevd does; nullopt: the level has no such
    // attribute. A name not here was not read.
    std::map<std::string, std::optional<std::string>> attributes;
};
struct UdevDevice {
    std::string name;
    std::string devpath;  // DEVPATH: "/devices/..."; empty when not read
    // The device itself first, then its parents up to the root; empty when
    // only the name is known.
    std::vector<UdevLevel> levels;
    // ENV{}: udev's database where udevd runs, else the kernel's uevent
    // properties; meaningful only when properties_known.
    std::map<std::string, std::string> properties;
    bool properties_known = false;
    std::optional<bool> removable;       // TuneD's disks that are not removable
    std::map<std::string, bool> tested;  // TEST: a path as the rule writes it -> whether it exists
    static UdevDevice named(std::string name) {
        UdevDevice d;
        d.name = std::move(name);
        return d;
    }
};

// What the writers' conditions read of a device, for agent/ to fill in a
// UdevDevice: the attributes of the device (ATTR) and of any level (ATTRS),
// and the paths TEST asks about.
struct UdevReads {
    std::set<std::string> own_attributes;
    std::set<std::string> parent_attributes;
    std::set<std::string> tested_paths;
};

// Whether a writer writes a device: certainly, maybe (a condition no fact
// decides, named in `because`), or not.
enum class Selects { no, may, yes };
struct Selection {
    Selects verdict = Selects::no;
    std::string because;  // for may, what it depends on: "PROGRAM at line 12"
};

// Whether the condition holds for the device, on an add or change event
// (the events blkpolicy acts on; a rule that runs on either writes).
Selection evaluate(const Condition& c, const UdevDevice& device);

// One write of one attribute by another writer.
struct WriterAssignment {
    std::string file;
    int line = 0;
    std::string attribute;                     // policy key: read_ahead_kb, scheduler, device.timeout, ...
    std::string value;                         // in the policy's terms (read_ahead_kb in KiB); empty: not a fixed value
    std::vector<std::string> kernel_patterns;  // fnmatch, any of them; empty: any device
    std::vector<std::string> exclude_patterns;  // fnmatch, none of them (TuneD's "!sda")
    WriterKind kind = WriterKind::udev_rule;
    std::string context;              // "profile throughput-performance, unit [disk]", "unit tune-disks.service", ...
    bool non_removable_only = false;  // TuneD's disk plugin: disks that are not removable
    std::string why_inexact;          // non-empty: what the writer does cannot be a policy value as it stands
    // udev rules: when udevd reaches the line and its tests hold (the
    // file's GOTOs and LABELs followed); null: only the patterns above select.
    std::shared_ptr<const Condition> condition;
    std::string where() const { return file + ":" + std::to_string(line); }
    // "TuneD profile /etc/tuned/x/tuned.conf:4 (profile x, unit [disk])"
    std::string describe() const;
    // Whether it writes the device (its patterns, then its conditions).
    Selection selects(const UdevDevice& device) const;
};

UdevReads reads_of(const std::vector<WriterAssignment>& writers);

// A writer of an attribute of a device, and how certain that is.
struct FoundWriter {
    const WriterAssignment* writer = nullptr;
    Selection selection;
    explicit operator bool() const { return writer != nullptr; }
};

// The writer that writes `attribute` on `device`: among those that select it
// for certain, the one whose value is `current` when there is one (it wrote
// last), else the first; only then one that may select it, likewise.
FoundWriter find_writer(const std::vector<WriterAssignment>& writers, const UdevDevice& device,
                        const std::string& attribute, const std::string& current = {});

// Every writer of any attribute of the device, in file order, with how
// certain each is (those that do not select it left out).
std::vector<FoundWriter> writers_of(const std::vector<WriterAssignment>& writers, const UdevDevice& device);

}  // namespace blkpolicy::writers
