// SPDX-License-Identifier: MIT
#include "policy/loader.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "policy/attributes.hpp"
#include "policy/facts.hpp"
#include "policy/match.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy {

namespace {

// Whether NAME is the first part of dotted attribute keys: iosched (its
// tunables) or the prefix of a row's key ("device" of device.timeout).
bool is_key_family(const std::string& name) {
    if (name == key_text(Key::iosched)) return true;
    const std::string prefix = name + ".";
    for (const auto& k : fixed_attribute_keys())
        if (k.rfind(prefix, 0) == 0) return true;
    return false;
}

// The byte at LINE:COLUMN of TEXT (1-based; columns count characters, as
// toml++'s do), or -1 past the end of that line.
int byte_at(std::string_view text, std::uint32_t line, std::uint32_t column) {
    std::size_t at = 0;
    for (std::uint32_t l = 1; l < line; ++l) {
        at = text.find('\n', at);
        if (at == std::string_view::npos) return -1;
        ++at;
    }
    for (std::uint32_t c = 1; c < column && at < text.size() && text[at] != '\n'; ++at)
        if ((static_cast<unsigned char>(text[at]) & 0xC0) != 0x80) ++c;  // a UTF-8 character's lead byte
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    return at < text.size() && text[at] != '\n' && text[at] != '\r' ? static_cast<unsigned char>(text[at]) : -1;
}

// toml++'s description of a syntax error in words a policy's author knows
// ("unterminated string: ..."), for the common mistakes; others as toml++
// says them, on one line. BYTE_THERE: the byte at its position (byte_at).
std::string plain_parse_error(std::string_view description, int byte_there) {
    // A control character inside a string that is not the line's end: say
    // which, and how TOML writes it (toml++ says the same words for both).
    if (byte_there >= 0 && byte_there != '\t' && (byte_there < 0x20 || byte_there == 0x7f) &&
        description.find("control characters") != std::string_view::npos) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(byte_there));
        return std::string("a control character (U+") + hex + ") in a string: TOML wants it escaped, as \\u" + hex;
    }
    // What toml++ says (a part of it) -> what to tell the person.
    struct Plain {
        std::string_view said;
        std::string_view tell;
    };
    static constexpr Plain kPlain[] = {
        {"parsing string: unescaped control characters", "unterminated string: the closing \" is missing on this line"},
        {"parsing literal string: control characters", "unterminated string: the closing ' is missing on this line"},
        {"parsing array: encountered end-of-file", "unterminated array: the closing ] is missing"},
        {"parsing array: expected", "malformed array: items are separated by commas and the array ends with ]"},
        {"parsing table header: expected ']'", "missing ] at the end of the table header"},
        {"parsing inline table: expected key or closing '}'", "unterminated inline table: the closing } is missing"},
        {"parsing key-value pair: expected value", "no value after = (a string needs quotes)"},
        {"parsing key-value pair: expected a comment or whitespace",
         "more text after the value: one key = value per line"},
        {"parsing boolean", "not a value: a string needs quotes, a boolean is true or false"},
        {"could not determine value type", "not a value: a string needs quotes, a boolean is true or false"},
        {"cannot redefine existing", "this key is set twice in the same table"},
        {"unknown escape sequence",
         "unknown escape sequence in a string: write \\\\ for a backslash, or use a 'literal "
         "string'"},
    };
    for (const auto& p : kPlain)
        if (description.find(p.said) != std::string_view::npos) return std::string(p.tell);
    std::string out(description);
    if (out.rfind("Error while ", 0) == 0) out.erase(0, 12);
    for (char& c : out)
        if (c == '\n' || c == '\r') c = ' ';
    return out;
}

SourcePos pos_of(const toml::source_region& r, const std::string& file) {
    SourcePos p;
    p.file = file;
    p.line = r.begin.line;
    p.column = r.begin.column;
    return p;
}

std::string type_name(const toml::node& n) {
    switch (n.type()) {
        case toml::node_type::string:
            return "a string";
        case toml::node_type::integer:
            return "an integer";
        case toml::node_type::floating_point:
            return "a float";
        case toml::node_type::boolean:
            return "a boolean";
        case toml::node_type::array:
            return "an array";
        case toml::node_type::table:
            return "a table";
        default:
            return "a date or time";
    }
}

// One key of a TOML table and what reads it: the loader's dispatch, and
// the "expected ..." of its unknown-key messages, come from the same rows.
template <typename Handler>
struct KeyRow {
    std::string_view key;
    Handler read;
};

template <typename Row, std::size_t N>
const Row* find_key(const Row (&rows)[N], std::string_view key) {
    for (const auto& r : rows)
        if (r.key == key) return &r;
    return nullptr;
}

// "\"a\", \"b\" or \"c\""
template <typename Row, std::size_t N>
std::string expected_keys(const Row (&rows)[N]) {
    std::string out;
    for (std::size_t i = 0; i < N; ++i)
        out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + util::in_quotes(rows[i].key);
    return out;
}

class FileLoader {
public:
    FileLoader(const PolicySource& src, Policy& policy, std::vector<PolicyError>& errors,
               std::map<std::string, SourcePos>& rule_names)
        : src_(src), policy_(policy), errors_(errors), rule_names_(rule_names) {}

    void load() {
        const auto first_error = errors_.size();
        parse_and_check();
        // toml++ walks keys in sorted order; report in file order instead.
        std::stable_sort(errors_.begin() + static_cast<std::ptrdiff_t>(first_error), errors_.end(),
                         [](const PolicyError& a, const PolicyError& b) {
                             return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
                         });
    }

private:
    void parse_and_check() {
        toml::table root;
        try {
            root = toml::parse(src_.text, src_.name);
        } catch (const toml::parse_error& e) {
            error(
                pos_of(e.source(), src_.name),
                plain_parse_error(e.description(), byte_at(src_.text, e.source().begin.line, e.source().begin.column)));
            return;
        }
        using Read = void (FileLoader::*)(const toml::node&, const toml::key&);
        static constexpr KeyRow<Read> kTopLevel[] = {{"daemon", &FileLoader::load_daemon},
                                                     {"rule", &FileLoader::load_rules}};
        for (auto&& [key, node] : root) {
            if (const auto* row = find_key(kTopLevel, key.str()))
                (this->*row->read)(node, key);
            else
                error(pos(key), "unknown top-level key " + util::in_quotes(key.str()) + " (expected " +
                                    expected_keys(kTopLevel) + ")");
        }
    }

    SourcePos pos(const toml::key& k) const { return pos_of(k.source(), src_.name); }
    SourcePos pos(const toml::node& n) const { return pos_of(n.source(), src_.name); }
    void error(SourcePos p, std::string msg) { errors_.push_back({std::move(p), std::move(msg)}); }

    void load_daemon(const toml::node& node, const toml::key& key) {
        const auto* tbl = node.as_table();
        if (!tbl) {
            error(pos(key), "\"daemon\" must be a table, not " + type_name(node));
            return;
        }
        using Read = void (FileLoader::*)(const toml::node&);
        static constexpr KeyRow<Read> kDaemonKeys[] = {{"mode", &FileLoader::daemon_mode},
                                                       {"verify_interval", &FileLoader::daemon_verify_interval},
                                                       {"measure", &FileLoader::daemon_measure},
                                                       {"measure_window", &FileLoader::daemon_measure_window},
                                                       {"measure_sample", &FileLoader::daemon_measure_sample},
                                                       {"on_removal", &FileLoader::daemon_on_removal}};
        for (auto&& [k, v] : *tbl) {
            if (const auto* row = find_key(kDaemonKeys, k.str()))
                (this->*row->read)(v);
            else
                error(pos(k), "unknown key " + util::in_quotes(k.str()) + " in [daemon] (expected " +
                                  expected_keys(kDaemonKeys) + ")");
        }
    }

    void daemon_on_removal(const toml::node& v) {
        const auto* s = v.as_string();
        if (s && (s->get() == "restore" || s->get() == "keep"))
            policy_.daemon.restore_on_removal = s->get() == "restore";
        else
            error(pos(v),
                  "daemon.on_removal must be \"restore\" (a value the policy stops declaring goes back to "
                  "what the device had) or \"keep\" (it stays until the next boot)");
    }

    void daemon_mode(const toml::node& v) {
        const auto* s = v.as_string();
        if (auto m = s ? mode_from_string(s->get()) : std::nullopt)
            policy_.daemon.mode = *m;
        else
            error(pos(v), "daemon.mode must be \"enforce\" or \"observe\"");
    }

    // A duration within [least, most], named KEY in its errors ("such as" its examples).
    std::optional<std::chrono::milliseconds> duration_in(const toml::node& v, const char* key, const char* examples,
                                                         std::chrono::milliseconds least,
                                                         std::chrono::milliseconds most, const char* range) {
        const auto* s = v.as_string();
        auto d = s ? parse_duration(s->get()) : std::nullopt;
        if (!d)
            error(pos(v), std::string("daemon.") + key + " must be a duration such as " + examples);
        else if (*d < least || *d > most)
            error(pos(v), std::string("daemon.") + key + " must be between " + range);
        else
            return d;
        return std::nullopt;
    }

    void daemon_verify_interval(const toml::node& v) {
        if (auto d = duration_in(v, "verify_interval", "\"30s\", \"500ms\" or \"5m\"", std::chrono::milliseconds(100),
                                 std::chrono::hours(24), "100ms and 24h"))
            policy_.daemon.verify_interval = *d;
    }

    void daemon_measure(const toml::node& v) {
        if (const auto* b = v.as_boolean())
            policy_.daemon.measure = b->get();
        else
            error(pos(v), "daemon.measure must be true or false");
    }

    void daemon_measure_window(const toml::node& v) {
        if (auto d = duration_in(v, "measure_window", "\"60s\" or \"5m\"", std::chrono::seconds(1),
                                 std::chrono::hours(24), "1s and 24h"))
            policy_.daemon.measure_window = *d;
    }

    void daemon_measure_sample(const toml::node& v) {
        const auto* n = v.as_integer();
        if (!n || n->get() < 0 || n->get() > 100)
            error(pos(v), "daemon.measure_sample must be a percentage from 0 to 100");
        else
            policy_.daemon.measure_sample = static_cast<unsigned>(n->get());
    }

    void load_rules(const toml::node& node, const toml::key& key) {
        const auto* arr = node.as_array();
        if (!arr) {
            error(pos(key), "\"rule\" must be an array of tables: write each rule as [[rule]]");
            return;
        }
        for (const auto& elem : *arr) {
            const auto* tbl = elem.as_table();
            if (!tbl) {
                error(pos(elem), "each rule must be a table, not " + type_name(elem));
                continue;
            }
            load_rule(*tbl);
        }
    }

    // A rule as its keys are read: what the keys say, and what the checks
    // after them need to know.
    struct RuleRead {
        Rule rule;
        bool have_set = false;
        bool bad_name = false;
    };

    void load_rule(const toml::table& tbl) {
        using Read = void (FileLoader::*)(const toml::node&, const toml::key&, RuleRead&);
        static constexpr KeyRow<Read> kRuleKeys[] = {{"name", &FileLoader::rule_name},
                                                     {"match", &FileLoader::rule_match},
                                                     {"unless", &FileLoader::rule_unless},
                                                     {"set", &FileLoader::rule_set},
                                                     {"acknowledge", &FileLoader::rule_acknowledge}};
        RuleRead r;
        auto& rule = r.rule;
        rule.pos = pos(tbl);
        const auto errors_before = errors_.size();
        for (auto&& [k, v] : tbl) {
            if (const auto* row = find_key(kRuleKeys, k.str()))
                (this->*row->read)(v, k, r);
            else
                error(pos(k), "unknown key " + util::in_quotes(k.str()) + " in rule (expected " +
                                  expected_keys(kRuleKeys) + ")");
        }
        if (rule.name.empty() && !r.bad_name) error(rule.pos, "rule has no name: add name = \"...\"");
        if (!rule.name.empty()) {
            auto [it, inserted] = rule_names_.emplace(rule.name, rule.pos);
            if (!inserted)
                error(rule.pos, "duplicate rule name " + util::in_quotes(rule.name) + " (first defined at " +
                                    it->second.str() + ")");
        }
        if (!r.have_set)
            error(rule.pos, "rule " + util::in_quotes(rule.name) + " has no [rule.set] table: it would do nothing");
        check_write_through(rule);
        if (errors_.size() == errors_before) policy_.rules.push_back(std::move(rule));
    }

    void rule_name(const toml::node& v, const toml::key&, RuleRead& r) {
        const auto* s = v.as_string();
        if (!s || util::trim(s->get()).empty()) {
            error(pos(v), "rule name must be a non-empty string");
            r.bad_name = true;
        } else {
            r.rule.name = s->get();
        }
    }
    void rule_match(const toml::node& v, const toml::key& k, RuleRead& r) { load_match(v, k, r.rule, false); }
    void rule_unless(const toml::node& v, const toml::key& k, RuleRead& r) { load_match(v, k, r.rule, true); }
    void rule_set(const toml::node& v, const toml::key& k, RuleRead& r) {
        r.have_set = true;
        load_set(v, k, r.rule);
    }
    void rule_acknowledge(const toml::node& v, const toml::key&, RuleRead& r) { load_acknowledge(v, r.rule); }

    // Match patterns: string_list plus the bounds that keep matching cheap.
    std::optional<std::vector<std::string>> pattern_list(const toml::node& v, const std::string& what) {
        auto list = string_list(v, what);
        if (!list) return std::nullopt;
        if (list->size() > kMaxPatternsPerKey) {
            error(pos(v), what + " lists " + std::to_string(list->size()) + " patterns; the limit is " +
                              std::to_string(kMaxPatternsPerKey));
            return std::nullopt;
        }
        for (const auto& p : *list) {
            if (p.size() > kMaxPatternLength) {
                error(pos(v), what + ": a pattern of " + std::to_string(p.size()) + " characters; the limit is " +
                                  std::to_string(kMaxPatternLength));
                return std::nullopt;
            }
            const auto stars = static_cast<std::size_t>(std::count(p.begin(), p.end(), '*'));
            if (stars > kMaxPatternStars) {
                error(pos(v), what + ": a pattern with " + std::to_string(stars) + " '*'; the limit is " +
                                  std::to_string(kMaxPatternStars) +
                                  " (patterns like a*a*a*b take very long to match)");
                return std::nullopt;
            }
        }
        return list;
    }

    // Strings or a non-empty array of strings.
    std::optional<std::vector<std::string>> string_list(const toml::node& v, const std::string& what) {
        if (const auto* s = v.as_string()) return std::vector<std::string>{s->get()};
        const auto* arr = v.as_array();
        if (!arr) {
            error(pos(v), what + " must be a string or an array of strings, not " + type_name(v));
            return std::nullopt;
        }
        if (arr->empty()) {
            error(pos(v), what + " must not be an empty array (it could never match)");
            return std::nullopt;
        }
        std::vector<std::string> out;
        for (const auto& e : *arr) {
            const auto* s = e.as_string();
            if (!s) {
                error(pos(e), what + " must contain only strings, not " + type_name(e));
                return std::nullopt;
            }
            out.push_back(s->get());
        }
        return out;
    }

    // [rule.match], or [rule.unless] (negated): the same keys, and the rule
    // applies only where every match clause and no unless clause matches.
    void load_match(const toml::node& node, const toml::key& key, Rule& rule, bool negated) {
        const std::string section = negated ? "unless" : "match";
        const auto* tbl = node.as_table();
        if (!tbl) {
            error(pos(key), util::in_quotes(section) + " must be a table ([rule." + section + "])");
            return;
        }
        if (negated && tbl->empty()) {
            error(pos(key), "[rule.unless] is empty: leave it out");
            return;
        }
        for (auto&& [k, v] : *tbl) {
            const auto name = std::string(k.str());
            auto mk = match_key_from_string(name);
            if (!mk) {
                error(pos(k), "unknown " + section + " key " + util::in_quotes(name) +
                                  " (known: " + known_match_keys_text() + ")");
                continue;
            }
            if (*mk == MatchKey::parent) {
                load_parent_match(v, k, rule, section, negated);
                continue;
            }
            if (match_key_is_named(*mk)) {
                load_named_match(*mk, v, k, rule, section, negated);
                continue;
            }
            MatchClause c;
            c.key = *mk;
            c.pos = pos(k);
            c.negated = negated;
            if (match_key_is_flag(*mk)) {
                const auto* b = v.as_boolean();
                if (!b) {
                    error(pos(v), section + "." + name + " must be true or false, not " + type_name(v));
                    continue;
                }
                c.patterns = {b->get() ? "true" : "false"};
            } else {
                auto list = pattern_list(v, section + "." + name);
                if (!list) continue;
                if (*mk == MatchKey::stack) {
                    bool bad = false;
                    for (const auto& s : *list) {
                        if (!stack_from_string(s)) {
                            error(pos(v), section + ".stack " + util::in_quotes(s) + " is not one of " +
                                              util::quoted_list(stack_names()));
                            bad = true;
                        }
                    }
                    if (bad) continue;
                }
                c.patterns = std::move(*list);
            }
            rule.match.push_back(std::move(c));
        }
    }

    // env.NAME = "glob" (udev properties, as ENV{NAME}== in a udev rule),
    // attr.NAME and attrs.NAME (sysfs attributes, as ATTR{NAME}== and
    // ATTRS{NAME}==).
    void load_named_match(MatchKey mk, const toml::node& node, const toml::key& key, Rule& rule,
                          const std::string& section, bool negated) {
        const std::string family = section + "." + to_string(mk);
        const auto* tbl = node.as_table();
        if (!tbl || tbl->empty()) {
            error(pos(key), family + " must be a table of " + named_match_example(mk));
            return;
        }
        for (auto&& [k, v] : *tbl) {
            const auto name = std::string(k.str());
            if (auto why = invalid_match_name(mk, name); !why.empty()) {
                error(pos(k), family + "." + name + ": " + why);
                continue;
            }
            auto list = pattern_list(v, family + "." + name);
            if (!list) continue;
            if (mk == MatchKey::host) {
                bool bad = false;
                for (const auto& p : *list)
                    if (auto why = invalid_host_pattern(name, p); !why.empty()) {
                        error(pos(v), family + "." + name + ": " + why);
                        bad = true;
                    }
                if (bad) continue;
                // Decided by bind_host, once the host's facts are read.
                rule.host_ok = false;
                rule.host_why = "the host's facts were not read";
            }
            MatchClause c;
            c.key = mk;
            c.name = name;
            c.patterns = std::move(*list);
            c.pos = pos(k);
            c.negated = negated;
            rule.match.push_back(std::move(c));
        }
    }

    // parent.kernel, parent.subsystem, parent.driver and parent.attr.NAME:
    // one clause, every test on one level (udev's KERNELS, SUBSYSTEMS,
    // DRIVERS and ATTRS of one rule).
    void load_parent_match(const toml::node& node, const toml::key& key, Rule& rule, const std::string& section,
                           bool negated) {
        const std::string family = section + ".parent";
        const auto* tbl = node.as_table();
        if (!tbl || tbl->empty()) {
            error(pos(key), family + " must be a table of " + named_match_example(MatchKey::parent));
            return;
        }
        MatchClause c;
        c.key = MatchKey::parent;
        c.pos = pos(key);
        c.negated = negated;
        bool bad = false;
        for (auto&& [k, v] : *tbl) {
            const auto what = std::string(k.str());
            if (what == "kernel" || what == "subsystem" || what == "driver") {
                auto list = pattern_list(v, family + "." + what);
                if (!list) {
                    bad = true;
                    continue;
                }
                c.parent.push_back({what, {}, std::move(*list)});
                continue;
            }
            if (what != "attr") {
                error(pos(k), "unknown key " + util::in_quotes(what) + " in " + family +
                                  " (known: kernel, subsystem, driver, attr.<sysfs attribute>)");
                bad = true;
                continue;
            }
            const auto* attrs = v.as_table();
            if (!attrs || attrs->empty()) {
                error(pos(k), family + ".attr must be a table of sysfs attributes, e.g. " + family +
                                  ".attr.idVendor = \"0781\"");
                bad = true;
                continue;
            }
            for (auto&& [ak, av] : *attrs) {
                const auto name = std::string(ak.str());
                if (auto why = invalid_match_name(MatchKey::attrs, name); !why.empty()) {
                    error(pos(ak), family + ".attr." + name + ": " + why);
                    bad = true;
                    continue;
                }
                auto list = pattern_list(av, family + ".attr." + name);
                if (!list) {
                    bad = true;
                    continue;
                }
                c.parent.push_back({"attr", name, std::move(*list)});
            }
        }
        if (!bad) rule.match.push_back(std::move(c));
    }

    void load_set(const toml::node& node, const toml::key& key, Rule& rule) {
        const auto* tbl = node.as_table();
        if (!tbl) {
            error(pos(key), "\"set\" must be a table ([rule.set])");
            return;
        }
        if (tbl->empty()) {
            error(pos(key), "[rule.set] is empty: the rule would do nothing");
            return;
        }
        for (auto&& [k, v] : *tbl) {
            const auto name = std::string(k.str());
            // A dotted key (device.timeout, bdi.max_ratio, iosched.NAME) is
            // a table of its family's keys in TOML.
            if (v.is_table() && is_key_family(name)) {
                for (auto&& [k2, v2] : *v.as_table()) set_one(name + "." + std::string(k2.str()), k2, v2, rule);
                continue;
            }
            set_one(name, k, v, rule);
        }
    }

    void set_one(const std::string& name, const toml::key& k, const toml::node& v, Rule& rule) {
        auto spec = find_attribute(name);
        if (!spec && (name == "acknowledge" || name == "name")) {
            error(pos(k), util::in_quotes(name) +
                              " belongs to the rule itself: put it under [[rule]], before [rule.match] "
                              "and [rule.set]");
            return;
        }
        if (!spec) {
            error(pos(k), "unknown attribute " + util::in_quotes(name) + " in [rule.set] (writable: " +
                              util::join(fixed_attribute_keys(), ", ") + ", iosched.<tunable>)");
            return;
        }
        Setting s;
        s.id = spec->id;
        s.attribute = name;
        s.pos = pos(v);
        if (!validate(*spec, v, s.values)) return;
        rule.set.push_back(std::move(s));
    }

    // The node as a value for check_value; an array of anything but
    // strings is refused here, where each element's position is known.
    std::optional<GivenValue> given(const AttributeSpec& spec, const toml::node& v) {
        if (const auto* i = v.as_integer()) return GivenValue::of_integer(i->get());
        if (const auto* b = v.as_boolean()) return GivenValue::of_boolean(b->get());
        if (const auto* s = v.as_string()) return GivenValue::of_string(s->get());
        if (v.is_array() && spec.kind == ValueKind::scheduler) {
            auto list = string_list(v, spec.key);
            if (!list) return std::nullopt;
            return GivenValue::of_strings(std::move(*list));
        }
        GivenValue other;
        other.type_name = type_name(v);
        return other;
    }

    bool validate(const AttributeSpec& spec, const toml::node& v, std::vector<std::string>& out) {
        const auto g = given(spec, v);
        if (!g) return false;
        auto checked = check_value(spec, *g);
        if (!checked.ok()) {
            error(pos(v), checked.error);
            return false;
        }
        out = std::move(checked.values);
        return true;
    }

    void load_acknowledge(const toml::node& v, Rule& rule) {
        auto list = string_list(v, "acknowledge");
        if (!list) return;
        for (const auto& a : *list) {
            if (a != kAckWriteThrough && a != kAckVolatileCache) {
                error(pos(v), "unknown acknowledgement " + util::in_quotes(a) + " (known: \"" + kAckWriteThrough +
                                  "\", \"" + kAckVolatileCache + "\")");
                continue;
            }
            rule.acknowledge.insert(a);
        }
    }

    void check_write_through(const Rule& rule) {
        for (const auto& s : rule.set) {
            if (s.id != Key::write_cache || s.values.front() != "write through") continue;
            if (rule.acknowledge.count(kAckWriteThrough)) continue;
            error(s.pos, std::string("write_cache = \"write through\" makes the kernel stop sending cache flushes: "
                                     "fsync still succeeds, but data in the device's volatile cache is lost on "
                                     "power failure; if that is intended, add acknowledge = [\"") +
                             kAckWriteThrough + "\"] to rule " + util::in_quotes(rule.name));
        }
    }

    const PolicySource& src_;
    Policy& policy_;
    std::vector<PolicyError>& errors_;
    std::map<std::string, SourcePos>& rule_names_;
};

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
    if (text.empty()) return std::nullopt;
    std::int64_t total = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        std::size_t j = i;
        while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
        if (j == i || j - i > 9) return std::nullopt;
        const auto n = std::stoll(std::string(text.substr(i, j - i)));
        std::size_t k = j;
        while (k < text.size() && text[k] >= 'a' && text[k] <= 'z') ++k;
        const auto unit = text.substr(j, k - j);
        std::int64_t scale = 0;
        if (unit == "ms")
            scale = 1;
        else if (unit == "s")
            scale = 1000;
        else if (unit == "m" || unit == "min")
            scale = 60'000;
        else if (unit == "h")
            scale = 3'600'000;
        else
            return std::nullopt;
        total += n * scale;
        i = k;
    }
    return std::chrono::milliseconds(total);
}

namespace {
// FNV-1a, 64 bits: a fingerprint of what was loaded, not a security measure.
std::string digest_of(const std::vector<PolicySource>& sources) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    auto mix = [&](std::string_view s) {
        for (unsigned char c : s) {
            h ^= c;
            h *= 0x100000001b3ULL;
        }
        h ^= 0xff;  // a separator no text holds
        h *= 0x100000001b3ULL;
    };
    for (const auto& src : sources) {
        mix(src.name);
        mix(src.text);
    }
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
    return out;
}
}  // namespace

LoadResult load_policy(const std::vector<PolicySource>& sources) {
    LoadResult result;
    result.policy.digest = digest_of(sources);
    std::map<std::string, SourcePos> rule_names;
    for (const auto& src : sources) {
        result.policy.files.push_back(src.name);
        result.policy.file_digests.push_back(digest_of({src}));
        if (src.text.size() > kMaxPolicyBytes) {
            result.errors.push_back({SourcePos{src.name, 0, 0}, "the file is " + std::to_string(src.text.size()) +
                                                                    " bytes; a policy file may have at most 1 MiB"});
            continue;
        }
        FileLoader(src, result.policy, result.errors, rule_names).load();
        if (result.policy.rules.size() > kMaxRules) {
            const auto& extra = result.policy.rules[kMaxRules];
            result.errors.push_back({extra.pos, "more than " + std::to_string(kMaxRules) + " rules in the policy"});
            result.policy.rules.resize(kMaxRules);
            break;
        }
    }
    return result;
}

}  // namespace blkpolicy::policy

namespace blkpolicy::policy {

std::vector<PolicyError> policy_warnings(const Policy& policy) {
    std::vector<PolicyError> out;
    for (const auto& rule : policy.rules)
        for (const auto& s : rule.set)
            if (s.attribute == "iosched." + std::string(key_text(Key::async_depth)))
                out.push_back({s.pos,
                               "iosched.async_depth: since kernel 7.0 mq-deadline has no such tunable and "
                               "queue/async_depth replaces it (set async_depth); there plan and apply skip "
                               "it as moved"});
    return out;
}

}  // namespace blkpolicy::policy
