// SPDX-License-Identifier: MIT
// When udevd applies each line of a rules file, found the way udevd walks
// the file: a line applies when udevd reaches it and all its tests hold; a
// GOTO whose line applies jumps forward to the first line of the same file
// with that LABEL (one with no such LABEL later in the file is ignored, as
// udevd ignores it), and otherwise udevd goes on to the next line. The
// result for each line is a condition in disjunctive form (writers/model),
// simplified with what the patterns prove (writers/patterns): a path whose
// tests contradict each other is dropped, a test another one implies is
// dropped. One reading for the writer model (explain, audit, the daemon's
// conflict alerts) and the importer alike. Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "writers/model.hpp"
#include "writers/patterns.hpp"
#include "writers/udev_rules.hpp"

namespace blkpolicy::writers {

// The most paths a condition keeps; a line reached by more gets
// Condition::too_complex instead (nothing in the rules real hosts ship
// comes near).
inline constexpr std::size_t kMaxTerms = 32;

// For each rule of one file, in the file's order: when udevd applies the
// line's assignments. A line udevd could not parse never applies.
std::vector<Condition> line_conditions(const std::vector<UdevRule>& file_rules);

// For each rule of one file: the line its GOTO lands on, the first later
// line with that LABEL (udevd's reading), or none (no GOTO, no such label,
// a line udevd could not parse).
std::vector<std::optional<std::size_t>> goto_targets(const std::vector<UdevRule>& file_rules);

// A literal read as "one value of the device is in a set": the value
// (KERNEL, ENV{ID_MODEL}, ATTR{queue/zoned}, ATTRS{model}), the strings in
// the set, and whether a device without the value is in it (only values a
// device can lack: attributes). nullopt for what is not one value (a
// PROGRAM, several parent tests together, a test no fact decides).
// ATTRS{NAME} is read as one value: the attribute of the nearest level that
// has it (true of model, vendor, serial and nsid, which one level of a disk
// carries); udevd itself would take any level that has it.
struct ValueSet {
    std::string value;  // KERNEL, ENV{ID_MODEL}, ATTRS{model}
    PatternSet strings;
    bool absent_in = false;  // a device without the value is in the set
    bool can_be_absent = false;
};
std::optional<ValueSet> value_set(const Literal& l);

// nullopt when the term can never hold (two of its literals contradict
// each other); otherwise the term without literals the others imply.
std::optional<Term> simplify(const Term& term);
// Each term simplified, and terms that another term's literals already
// cover (a subset of theirs) dropped.
Condition simplify(const Condition& c);

}  // namespace blkpolicy::writers
