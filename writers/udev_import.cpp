// SPDX-License-Identifier: MIT
#include "writers/udev_import.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "policy/attributes.hpp"
#include "policy/loader.hpp"
#include "policy/toml_text.hpp"
#include "policy/values.hpp"
#include "util/utf8.hpp"

namespace blkpolicy::writers {

namespace {

std::string token_text(const UdevToken& t) {
    return t.key + (t.attr.empty() ? "" : "{" + t.attr + "}") + to_string(t.op) + "\"" + t.value + "\"";
}

// Every key of udev's rule grammar (udev(7); the token table of systemd's
// udev-rules.c), by what it does in a rule. A key udev evaluates as a
// condition is one whatever its operator: PROGRAM="x" runs x and the rule
// stops matching when it fails; IMPORT{...}= stops it when the import finds
// nothing. Keys missing here are unknown, and a rule with one is left out.
enum class UdevKeyRole {
    condition,  // converted where a policy can express it, else the rule is left out
    effect,     // an assignment blkpolicy does not do (SYMLINK, RUN, ...): noted, not converted
    control,    // GOTO, LABEL: followed by the importer itself
};
struct UdevKeyInfo {
    const char* key;
    UdevKeyRole role;
};
constexpr UdevKeyInfo kUdevKeys[] = {
    {"ACTION", UdevKeyRole::condition},
    {"DEVPATH", UdevKeyRole::condition},
    {"KERNEL", UdevKeyRole::condition},
    {"SUBSYSTEM", UdevKeyRole::condition},
    {"DRIVER", UdevKeyRole::condition},
    {"KERNELS", UdevKeyRole::condition},
    {"SUBSYSTEMS", UdevKeyRole::condition},
    {"DRIVERS", UdevKeyRole::condition},
    {"ATTRS", UdevKeyRole::condition},
    {"TAGS", UdevKeyRole::condition},
    {"TEST", UdevKeyRole::condition},
    {"PROGRAM", UdevKeyRole::condition},
    {"RESULT", UdevKeyRole::condition},
    {"IMPORT", UdevKeyRole::condition},
    {"CONST", UdevKeyRole::condition},
    {"DEVTYPE", UdevKeyRole::condition},
    // Matches with == and != and assignments otherwise (by operator).
    {"ATTR", UdevKeyRole::effect},
    {"SYSCTL", UdevKeyRole::effect},
    {"ENV", UdevKeyRole::effect},
    {"TAG", UdevKeyRole::effect},
    {"NAME", UdevKeyRole::effect},
    {"SYMLINK", UdevKeyRole::effect},
    {"OWNER", UdevKeyRole::effect},
    {"GROUP", UdevKeyRole::effect},
    {"MODE", UdevKeyRole::effect},
    {"SECLABEL", UdevKeyRole::effect},
    {"RUN", UdevKeyRole::effect},
    {"OPTIONS", UdevKeyRole::effect},
    {"WAIT_FOR", UdevKeyRole::effect},
    {"GOTO", UdevKeyRole::control},
    {"LABEL", UdevKeyRole::control},
};

const UdevKeyInfo* udev_key(const std::string& key) {
    for (const auto& k : kUdevKeys)
        if (key == k.key) return &k;
    return nullptr;
}

// Whether udev evaluates this token as a condition of the rule.
bool is_condition(const UdevToken& t) {
    const auto* k = udev_key(t.key);
    if (!k) return true;  // unknown: treated as a condition, so the rule is left out
    if (k->role == UdevKeyRole::condition) return true;
    return k->role == UdevKeyRole::effect && !is_assignment(t.op);
}

struct Converted {
    std::vector<policy::TomlEntry> match;  // under [rule.match]
    // Adds "key = value"; a key can appear once in a policy, so the same key
    // with another value (KERNEL=="a*", KERNEL=="*b": both must hold) cannot
    // be converted exactly. Returns why not, or empty.
    std::string add_match(const std::string& key, const std::string& value) {
        for (const auto& m : match) {
            if (m.key != key) continue;
            if (m.value == value) return {};
            return "it matches " + key + " twice with different patterns, which a policy cannot express";
        }
        match.push_back({key, value, {}});
        return {};
    }
    std::vector<policy::TomlEntry> set;  // key, TOML value
    bool write_through = false;
    std::string left_out;            // non-empty: the whole rule is left out, and why
    std::vector<std::string> notes;  // per-rule diagnostics that do not stop it
};

// One match condition -> a policy match line, or a reason it cannot be one.
std::string convert_condition(const UdevToken& t, Converted& c, bool& add_only) {
    const auto alts = split_alternatives(t.value);
    const bool eq = t.op == UdevOp::match;
    if (!udev_key(t.key)) return token_text(t) + ": not a udev key blkpolicy knows";
    if (t.key == "PROGRAM")
        return token_text(t) + ": the rule applies only where the program succeeds, which a policy cannot express";
    if (t.key == "IMPORT")
        return token_text(t) +
               ": the rule applies only where the import finds something, which a policy cannot "
               "express";
    if (t.key == "RESULT") return token_text(t) + ": it matches a program's output, which a policy cannot express";
    if (t.key == "TEST") return token_text(t) + ": it tests a file, which a policy cannot express";
    if (t.key == "ACTION") {
        std::set<std::string> a(alts.begin(), alts.end());
        if (eq && !a.count("add") && !a.count("change"))
            return "it never runs on add or change (ACTION==\"" + t.value + "\")";
        if (eq && a.count("add") && !a.count("change")) add_only = true;
        if (!eq && (a.count("add") || a.count("change")))
            return "ACTION!=\"" + t.value + "\" limits it to events blkpolicy cannot single out";
        return {};
    }
    if (t.key == "SUBSYSTEM") {
        if (eq && std::find(alts.begin(), alts.end(), "block") != alts.end()) return {};
        return "it is not a rule for block devices (SUBSYSTEM" + std::string(to_string(t.op)) + "\"" + t.value + "\")";
    }
    if (t.key == "DEVTYPE") {
        if (eq && t.value == "disk") return {};
        return "DEVTYPE" + std::string(to_string(t.op)) + "\"" + t.value + "\": partitions have no queue/ to tune";
    }
    if (!eq) return token_text(t) + ": blkpolicy cannot match on a negation";
    if (t.key == "KERNEL") {
        return c.add_match("kernel", policy::toml_list(alts));
    }
    if (t.key == "DRIVERS") {
        return c.add_match("driver", policy::toml_list(alts));
    }
    if (t.key == "DRIVER") return "DRIVER==: a block device has no driver of its own, so the rule never matched";
    if (t.key == "ATTR" && (t.attr == "queue/rotational" || t.attr == "removable")) {
        if (t.value != "0" && t.value != "1") return token_text(t) + ": only \"0\" or \"1\" can be converted";
        return c.add_match(t.attr == "removable" ? "removable" : "rotational", t.value == "1" ? "true" : "false");
    }
    if (t.key == "ATTRS" && (t.attr == "model" || t.attr == "vendor" || t.attr == "wwid")) {
        std::vector<std::string> trimmed;
        for (const auto& a : alts) trimmed.push_back(policy::trim(a));  // udev ignores trailing blanks of the attribute
        return c.add_match(t.attr, policy::toml_list(trimmed));
    }
    if (t.key == "ENV" && !t.attr.empty()) {
        if (!std::all_of(t.attr.begin(), t.attr.end(),
                         [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }))
            return "ENV{" + t.attr + "}: not a property name a policy can match";
        return c.add_match("env." + t.attr, policy::toml_list(alts));
    }
    return token_text(t) + " cannot be expressed in a policy";
}

// ATTR{queue/x}="v" -> set key and TOML value, or a reason it cannot be.
std::string convert_assignment(const UdevToken& t, Converted& c) {
    const auto key = policy::policy_key_for_attr(t.attr);
    auto spec = policy::find_attribute(key);
    if (!spec) return token_text(t) + ": blkpolicy does not write " + t.attr;
    if (t.op == UdevOp::add || t.op == UdevOp::remove)
        return token_text(t) + ": += and -= make no sense for an attribute";
    std::string value;
    if (auto why = convert_policy_value(key, t.value, value); !why.empty()) return token_text(t) + ": " + why;
    if (key == policy::key_text(policy::Key::write_cache) && policy::trim(t.value) == "write through")
        c.write_through = true;
    c.set.erase(std::remove_if(c.set.begin(), c.set.end(), [&](const policy::TomlEntry& e) { return e.key == key; }),
                c.set.end());
    c.set.push_back({key, value, {}});
    return {};
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
            auto n = policy::parse_int(raw);
            if (!n) return key + " must be a whole number";
            given = *n == -1 && spec->kind == policy::ValueKind::wbt ? policy::GivenValue::of_string("default")
                                                                     : policy::GivenValue::of_integer(*n);
            break;
        }
        case policy::ValueKind::choice:
        case policy::ValueKind::scheduler:
            given = policy::GivenValue::of_string(policy::trim(raw));
            break;
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
    std::map<std::string, std::string> pending_goto;  // label -> where the GOTO is
    std::string current_file;
    std::set<std::string> names;

    for (const auto& r : rules) {
        if (r.file != current_file) {
            current_file = r.file;
            pending_goto.clear();
        }
        auto diag = [&](const std::string& m) { out.diagnostics.push_back(r.where() + ": " + m); };
        if (!r.error.empty()) {
            const bool tuning = r.text.find("ATTR{queue/") != std::string::npos ||
                                r.text.find("ATTR{bdi/") != std::string::npos ||
                                r.text.find("ATTR{device/") != std::string::npos;
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
        // LABEL ends a GOTO's reach; GOTO starts one after this rule.
        for (const auto& t : r.tokens)
            if (t.key == "LABEL") pending_goto.erase(t.value);

        bool tuning = false;
        for (const auto& t : r.tokens)
            if (t.key == "ATTR" && is_assignment(t.op) && !policy::policy_key_for_attr(t.attr).empty()) tuning = true;

        if (tuning) {
            ++out.tuning_rules;
            Converted c;
            bool add_only = false;
            if (!pending_goto.empty())
                c.left_out =
                    "a GOTO at " + pending_goto.begin()->second + " may skip this rule, which a policy cannot express";
            if (!util::valid_utf8(r.text)) c.left_out = "the rule has bytes that are not UTF-8";
            for (const auto& t : r.tokens) {
                if (!c.left_out.empty()) break;
                if (t.key == "ATTR" && is_assignment(t.op) && !policy::policy_key_for_attr(t.attr).empty()) continue;
                if (!is_condition(t)) {
                    if (t.key != "GOTO" && t.key != "LABEL")
                        c.notes.push_back("not converted: " + token_text(t) +
                                          " (blkpolicy writes only queue and device attributes)");
                    continue;
                }
                auto why = convert_condition(t, c, add_only);
                if (!why.empty()) c.left_out = why;
            }
            if (c.left_out.empty()) {
                for (const auto& t : r.tokens) {
                    if (!(t.key == "ATTR" && is_assignment(t.op) && !policy::policy_key_for_attr(t.attr).empty()))
                        continue;
                    auto why = convert_assignment(t, c);
                    if (!why.empty()) {
                        ++out.attributes_left_out;
                        diag("left out: " + why);
                        body += "\n# from " + policy::comment_text(r.where()) + ": left out " +
                                policy::comment_text(token_text(t)) + "\n";
                    }
                }
                if (c.set.empty()) c.left_out = "none of its assignments can be converted";
            }
            for (const auto& n : c.notes) diag(n);
            std::string rule_toml;
            std::string name;
            if (c.left_out.empty()) {
                name = policy::comment_text(std::filesystem::path(r.file).filename().string() + ":" +
                                            std::to_string(r.line));
                while (names.count(name)) name += "'";
                policy::RuleToml rule{name, {}, {}, c.match, c.set};
                if (c.write_through) {
                    rule.acknowledge = {policy::kAckWriteThrough};
                    rule.acknowledge_comment = "the udev rule already did this";
                }
                rule_toml = policy::emit_rule(rule);
                // Whatever check would refuse (bounds on patterns, values)
                // leaves the rule out here, with check's own words.
                auto probe = policy::load_policy({{"rule", rule_toml}});
                if (!probe.ok()) c.left_out = "blkpolicy check would refuse it: " + probe.errors.front().message;
            }
            if (!c.left_out.empty()) {
                ++out.left_out;
                diag("left out: " + c.left_out + "; converting it without that would match more devices");
                body += "\n# from " + policy::comment_text(r.where()) +
                        " (left out: " + policy::comment_text(c.left_out) + ")\n#   " + policy::comment_text(r.text) +
                        "\n";
            } else {
                ++out.converted;
                names.insert(name);
                if (add_only)
                    diag(
                        "warning: the rule matches only ACTION==\"add\", so udev never re-applied it after a change "
                        "event; blkpolicy applies it on add and change and keeps verifying it");
                if (c.write_through)
                    diag(
                        "warning: the rule sets write_cache to write through, which stops cache flushes; the "
                        "converted rule carries the acknowledgement that asks for");
                body += "\n# from " + policy::comment_text(r.where()) + "\n#   " + policy::comment_text(r.text) + "\n" +
                        rule_toml;
            }
        }
        for (const auto& t : r.tokens)
            if (t.key == "GOTO" && is_assignment(t.op)) pending_goto.emplace(t.value, r.where());
    }

    std::string counts =
        std::to_string(out.converted) + " rule(s) converted, " + std::to_string(out.left_out) + " left out";
    if (out.attributes_left_out)
        counts += ", " + std::to_string(out.attributes_left_out) + " assignment(s) left out of converted rules";
    out.toml = policy::import_document("Converted from udev rules by blkpolicy import:", sources, counts, body);
    check_import_output(out);
    return out;
}

}  // namespace blkpolicy::writers
