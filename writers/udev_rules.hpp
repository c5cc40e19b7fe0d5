// SPDX-License-Identifier: MIT
// udev rules syntax, read the way udevd reads it: comments, backslash
// continuations, one rule per logical line, KEY{attr}OP"value" tokens
// separated by commas. Pure: writers/scan_udev reads the files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "writers/model.hpp"
#include "writers/patterns.hpp"

namespace blkpolicy::writers {

enum class UdevOp { match, nomatch, assign, add, remove, assign_final };
const char* to_string(UdevOp op);
bool is_assignment(UdevOp op);

// Every key of udev's rule grammar (udev(7); the token table of systemd's
// udev-rules.c), by what it does in a rule. A key udev evaluates as a
// condition is one whatever its operator: PROGRAM="x" runs x and the line
// stops matching when it fails; IMPORT{...}= stops it when the import finds
// nothing.
enum class UdevKeyRole {
    condition,  // decides whether the line applies
    effect,     // a match with == and !=, an assignment otherwise (ATTR, ENV, SYMLINK, RUN, ...)
    control,    // GOTO, LABEL: where udevd goes next
};
// nullopt: not a key udev knows (udevd ignores such a line; a reader treats
// it as a condition it cannot decide).
std::optional<UdevKeyRole> udev_key_role(const std::string& key);

struct UdevToken {
    std::string key;   // ACTION, KERNEL, ATTR, ATTRS, ENV, ...
    std::string attr;  // what is in braces: queue/scheduler, ID_SERIAL, ...
    UdevOp op = UdevOp::match;
    std::string value;
    std::string text() const;  // as written: ATTR{queue/scheduler}="none"
    // Whether udevd evaluates it as a condition of its line (an unknown key
    // counts as one).
    bool is_condition() const;
};

struct UdevRule {
    std::string file;
    int line = 0;      // first physical line
    std::string text;  // the logical line, continuations joined
    std::vector<UdevToken> tokens;
    std::string error;  // non-empty: the line could not be parsed
    std::string where() const { return file + ":" + std::to_string(line); }
};

std::vector<UdevRule> parse_udev_rules_text(const std::string& file, const std::string& text);

// udev's pattern matching: `|` alternatives, then fnmatch (*, ?, [], [!], [^]).
// (writers/patterns has split_alternatives and the sets they make.)
bool udev_pattern_match(const std::string& pattern, const std::string& value);

// Every tuning assignment in one rules file's text, each with the
// condition under which udevd applies it (writers/udev_flow).
std::vector<WriterAssignment> parse_udev_rules(const std::string& file, const std::string& text);

// Whether a token writes a queue, bdi or SCSI device attribute that has a
// policy key (ATTR{queue/scheduler}="none", ATTR{device/timeout}="60").
bool is_tuning_assignment(const UdevToken& t);

// Why an assignment that writes storage settings blkpolicy cannot take
// over as written: a partition's event writing its disk's queue through
// the parent (ATTR{../queue/scheduler}), an md array's attribute
// (ATTR{md/stripe_cache_size}), the SCSI device's own timeout
// (ATTR{timeout} on a scsi_device), a program that writes sysfs or runs
// blockdev, hdparm or sdparm (RUN, PROGRAM). Empty when it writes none of
// those (a tuning assignment included): an import names such a line with
// its file:line, never drops it without a word.
std::string unconvertible_storage_write(const UdevToken& t);

// An ATTR{} assignment that is neither a tuning assignment nor one of the
// storage writes above: on a block device's event, an attribute of the
// device no policy key sets (events_poll_msecs, zram's disksize). A write
// of uevent (ATTR{uevent}, ATTR{block/*/uevent}) asks for an event and is
// not one. Import names these too.
bool unmanaged_block_write(const UdevToken& t);

}  // namespace blkpolicy::writers
