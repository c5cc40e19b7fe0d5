// SPDX-License-Identifier: MIT
#include "writers/udev_rules.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <sstream>

#include "policy/attributes.hpp"
#include "util/names.hpp"
#include "writers/patterns.hpp"
#include "writers/udev_flow.hpp"

namespace blkpolicy::writers {

namespace {
constexpr util::Named<UdevOp> kUdevOps[] = {
    {UdevOp::match, "=="}, {UdevOp::nomatch, "!="}, {UdevOp::assign, "="},
    {UdevOp::add, "+="},   {UdevOp::remove, "-="},  {UdevOp::assign_final, ":="},
};
static_assert(util::in_enum_order(kUdevOps));

struct UdevKeyRow {
    const char* key;
    UdevKeyRole role;
};
constexpr UdevKeyRow kUdevKeys[] = {
    {"ACTION", UdevKeyRole::condition},     {"DEVPATH", UdevKeyRole::condition}, {"KERNEL", UdevKeyRole::condition},
    {"SUBSYSTEM", UdevKeyRole::condition},  {"DRIVER", UdevKeyRole::condition},  {"KERNELS", UdevKeyRole::condition},
    {"SUBSYSTEMS", UdevKeyRole::condition}, {"DRIVERS", UdevKeyRole::condition}, {"ATTRS", UdevKeyRole::condition},
    {"TAGS", UdevKeyRole::condition},       {"TEST", UdevKeyRole::condition},    {"PROGRAM", UdevKeyRole::condition},
    {"RESULT", UdevKeyRole::condition},     {"IMPORT", UdevKeyRole::condition},  {"CONST", UdevKeyRole::condition},
    {"ATTR", UdevKeyRole::effect},          {"SYSCTL", UdevKeyRole::effect},     {"ENV", UdevKeyRole::effect},
    {"TAG", UdevKeyRole::effect},           {"NAME", UdevKeyRole::effect},       {"SYMLINK", UdevKeyRole::effect},
    {"OWNER", UdevKeyRole::effect},         {"GROUP", UdevKeyRole::effect},      {"MODE", UdevKeyRole::effect},
    {"SECLABEL", UdevKeyRole::effect},      {"RUN", UdevKeyRole::effect},        {"OPTIONS", UdevKeyRole::effect},
    {"WAIT_FOR", UdevKeyRole::effect},      {"GOTO", UdevKeyRole::control},      {"LABEL", UdevKeyRole::control},
};
}  // namespace

const char* to_string(UdevOp op) { return util::name_of(kUdevOps, op); }

std::optional<UdevKeyRole> udev_key_role(const std::string& key) {
    for (const auto& k : kUdevKeys)
        if (key == k.key) return k.role;
    return std::nullopt;
}

std::string UdevToken::text() const {
    return key + (attr.empty() ? "" : "{" + attr + "}") + to_string(op) + "\"" + value + "\"";
}

bool UdevToken::is_condition() const {
    const auto role = udev_key_role(key);
    if (!role || *role == UdevKeyRole::condition) return true;
    return *role == UdevKeyRole::effect && !is_assignment(op);
}

bool is_assignment(UdevOp op) { return op != UdevOp::match && op != UdevOp::nomatch; }

namespace {

// Parses the tokens of one logical line; returns an error text or empty.
std::string tokenize(const std::string& line, std::vector<UdevToken>& out) {
    std::size_t i = 0;
    const std::size_t n = line.size();
    auto skip_space = [&] {
        while (i < n && (std::isspace(static_cast<unsigned char>(line[i])) || line[i] == ',')) ++i;
    };
    while (true) {
        skip_space();
        if (i >= n) break;
        UdevToken t;
        const std::size_t key_start = i;
        while (i < n && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) ++i;
        t.key = line.substr(key_start, i - key_start);
        if (t.key.empty()) return "expected a key at column " + std::to_string(key_start + 1);
        if (i < n && line[i] == '{') {
            const auto close = line.find('}', i);
            if (close == std::string::npos) return "unterminated { after " + t.key;
            t.attr = line.substr(i + 1, close - i - 1);
            i = close + 1;
        }
        while (i < n && line[i] == ' ') ++i;
        // The longest operator the line starts with here ("==" before "=").
        std::size_t op_len = 0;
        for (const auto& [op, text] : kUdevOps) {
            const std::string_view o(text);
            if (o.size() > op_len && line.compare(i, o.size(), o) == 0) {
                t.op = op;
                op_len = o.size();
            }
        }
        if (op_len == 0) return "expected an operator after " + t.key;
        i += op_len;
        while (i < n && line[i] == ' ') ++i;
        if (i >= n || line[i] != '"') return "expected a quoted value after " + t.key + to_string(t.op);
        ++i;
        bool closed = false;
        while (i < n) {
            char c = line[i++];
            if (c == '\\' && i < n && (line[i] == '"' || line[i] == '\\')) {
                t.value += line[i++];
            } else if (c == '"') {
                closed = true;
                break;
            } else {
                t.value += c;
            }
        }
        if (!closed) return "unterminated value of " + t.key;
        out.push_back(std::move(t));
    }
    return {};
}

// A rule udevd runs on an NVMe subsystem (SUBSYSTEM=="nvme-subsystem", as
// nvme-cli's 71-nvmf-iopolicy-netapp.rules) acts on what each multipath
// head of that subsystem has as its device/: the head's parent is the
// subsystem. Read as a rule on the head, it says the same: its ATTR{NAME}
// tests and writes are ATTR{device/NAME}, and its subsystem test is
// SUBSYSTEMS=="nvme-subsystem", which holds on heads only (a path's parents
// are its controller and the PCI function). The line's text stays as written.
void as_head_rule(UdevRule& r) {
    const auto on_subsystem = [](const UdevToken& t) {
        return t.key == "SUBSYSTEM" && t.op == UdevOp::match && t.value == "nvme-subsystem";
    };
    if (std::none_of(r.tokens.begin(), r.tokens.end(), on_subsystem)) return;
    for (const auto& t : r.tokens)
        if (t.key == "SUBSYSTEM" && !on_subsystem(t)) return;  // tested twice: left as it is
    for (auto& t : r.tokens) {
        if (on_subsystem(t))
            t.key = "SUBSYSTEMS";
        else if (t.key == "ATTR")
            t.attr = "device/" + t.attr;
    }
}

}  // namespace

std::vector<UdevRule> parse_udev_rules_text(const std::string& file, const std::string& text) {
    std::vector<UdevRule> rules;
    std::istringstream in(text);
    std::string physical;
    int line_no = 0;
    while (std::getline(in, physical)) {
        ++line_no;
        UdevRule r;
        r.file = file;
        r.line = line_no;
        std::string logical = physical;
        while (!logical.empty() && logical.back() == '\\' && std::getline(in, physical)) {
            logical.pop_back();
            logical += physical;
            ++line_no;
        }
        const auto start = logical.find_first_not_of(" \t\r");
        if (start == std::string::npos || logical[start] == '#') continue;
        r.text = logical.substr(start);
        while (!r.text.empty() && (r.text.back() == ' ' || r.text.back() == '\t' || r.text.back() == '\r'))
            r.text.pop_back();
        r.error = tokenize(r.text, r.tokens);
        if (r.error.empty()) as_head_rule(r);
        rules.push_back(std::move(r));
    }
    return rules;
}

bool udev_pattern_match(const std::string& pattern, const std::string& value) { return contains({pattern}, value); }

bool is_tuning_assignment(const UdevToken& t) {
    return t.key == "ATTR" && is_assignment(t.op) && !policy::policy_key_for_attr(t.attr).empty();
}

bool unmanaged_block_write(const UdevToken& t) {
    if (t.key != "ATTR" || !is_assignment(t.op) || is_tuning_assignment(t)) return false;
    if (!unconvertible_storage_write(t).empty()) return false;  // named with its own reason
    const auto& a = t.attr;
    return !a.empty() && a != "uevent" && !(a.size() > 7 && a.compare(a.size() - 7, 7, "/uevent") == 0);
}

std::string unconvertible_storage_write(const UdevToken& t) {
    if (!is_assignment(t.op)) return {};
    if (t.key == "ATTR") {
        if (is_tuning_assignment(t)) return {};
        const auto& a = t.attr;
        if (a.rfind("../", 0) == 0) {
            const auto parent = a.substr(3);
            if (parent.rfind("queue/", 0) == 0 || parent.rfind("bdi/", 0) == 0 || parent.rfind("device/", 0) == 0)
                return "it writes the parent disk's " + parent +
                       " from its child's event (a partition's, say), and a policy has no match on a disk's "
                       "partitions";
            return {};
        }
        if (a == "timeout" || a == "queue_depth")
            return "a SCSI device's own " + a +
                   ", which blkpolicy converts from a rule on that device's event "
                   "(ENV{DEVTYPE}==\"scsi_device\") as the disk's device/" +
                   a + ": this rule is not one";
        if (a == "eh_timeout" || a == "queue_type")
            return "the SCSI device's own " + a + ", which blkpolicy does not manage";
        return {};
    }
    if (t.key == "RUN" || t.key == "PROGRAM") {
        const auto& v = t.value;
        const bool sysfs = v.find("/sys/") != std::string::npos || v.find("/sys$") != std::string::npos ||
                           v.find("$sys") != std::string::npos || v.find("%S") != std::string::npos;
        const bool writes = v.find('>') != std::string::npos || v.find("tee ") != std::string::npos;
        // The tool as a word of the command: /sbin/blockdev --setra ...,
        // hdparm's own /lib/udev/hdparm (which applies /etc/hdparm.conf).
        for (const std::string tool : {"blockdev", "hdparm", "sdparm"})
            for (auto at = v.find(tool); at != std::string::npos; at = v.find(tool, at + 1)) {
                const bool starts = at == 0 || v[at - 1] == '/' || v[at - 1] == ' ' || v[at - 1] == '\'';
                const auto end = at + tool.size();
                const bool ends = end == v.size() || v[end] == ' ' || v[end] == '\'';
                if (starts && ends)
                    return "a program it runs tunes the device (" + tool + "), which blkpolicy cannot read as values";
            }
        if (sysfs && writes) return "a program it runs writes sysfs, which blkpolicy cannot read as values";
    }
    return {};
}

std::vector<WriterAssignment> parse_udev_rules(const std::string& file, const std::string& text) {
    std::vector<WriterAssignment> out;
    const auto rules = parse_udev_rules_text(file, text);
    const bool tunes = std::any_of(rules.begin(), rules.end(), [](const UdevRule& r) {
        return r.error.empty() && std::any_of(r.tokens.begin(), r.tokens.end(), is_tuning_assignment);
    });
    if (!tunes) return out;  // the control flow of a file that tunes nothing is not followed
    const auto conditions = line_conditions(rules);
    for (std::size_t i = 0; i < rules.size(); ++i) {
        const auto& r = rules[i];
        if (!r.error.empty()) continue;
        std::shared_ptr<const Condition> when;
        for (const auto& t : r.tokens) {
            if (!is_tuning_assignment(t)) continue;
            if (!when) when = std::make_shared<const Condition>(conditions[i]);
            WriterAssignment a;
            a.file = file;
            a.line = r.line;
            a.attribute = policy::policy_key_for_attr(t.attr);
            a.value = t.value;
            a.condition = when;
            out.push_back(std::move(a));
        }
    }
    return out;
}

}  // namespace blkpolicy::writers
