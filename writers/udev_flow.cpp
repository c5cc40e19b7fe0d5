// SPDX-License-Identifier: MIT
#include "writers/udev_flow.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace blkpolicy::writers {

namespace {

// Properties the kernel puts in the uevent: no rule's IMPORT replaces them.
bool kernel_property(const std::string& name) {
    static const std::set<std::string> names = {"ACTION",  "DEVPATH", "SUBSYSTEM", "DEVNAME", "DEVTYPE",  "MAJOR",
                                                "MINOR",   "DISKSEQ", "SEQNUM",    "PARTN",   "PARTNAME", "DRIVER",
                                                "DEVMODE", "DEVUID",  "DEVGID",    "MODALIAS"};
    return names.count(name) > 0;
}

// What the earlier lines of a file set, which makes an ENV{} test on them
// depend on the rules themselves rather than on the device.
struct SetBefore {
    std::map<std::string, int> env;           // ENV{NAME}= at line
    int import_any = 0;                       // IMPORT{program|file|builtin}: any property, at line
    std::map<std::string, int> import_named;  // IMPORT{cmdline|db}="NAME", IMPORT{parent}="GLOB"

    std::string taints(const std::string& name) const {
        if (auto it = env.find(name); it != env.end())
            return "ENV{" + name + "} is set by line " + std::to_string(it->second) + " of the same file";
        for (const auto& [pattern, line] : import_named)
            if (contains({pattern}, name))
                return "ENV{" + name + "} may be imported by line " + std::to_string(line) + " of the same file";
        if (import_any && !kernel_property(name))
            return "ENV{" + name + "} may come from the IMPORT at line " + std::to_string(import_any) +
                   " of the same file";
        return {};
    }
    void note(const UdevRule& r) {
        for (const auto& t : r.tokens) {
            if (t.key == "ENV" && is_assignment(t.op)) env.emplace(t.attr, r.line);
            if (t.key != "IMPORT") continue;
            if (t.attr == "cmdline" || t.attr == "db" || t.attr == "parent")
                import_named.emplace(t.value, r.line);
            else if (!import_any)
                import_any = r.line;
        }
    }
};

// Why no fact of a device decides the test, or empty.
std::string undecidable(const UdevTest& t, const SetBefore& before) {
    const std::string at = " at line " + std::to_string(t.line);
    if (t.key == "PROGRAM") return "PROGRAM" + at;
    if (t.key == "IMPORT") return "IMPORT{" + t.attr + "}" + at;
    if (t.key == "RESULT") return "RESULT" + at + " (a program's output)";
    if (t.key == "ENV") return before.taints(t.attr);
    if (t.key == "TEST" && !t.attr.empty()) return "TEST{" + t.attr + "}" + at + " (a file's mode)";
    static const std::set<std::string> decided = {"KERNEL", "SUBSYSTEM", "ACTION",  "DRIVER",     "DEVPATH", "ENV",
                                                  "ATTR",   "TEST",      "KERNELS", "SUBSYSTEMS", "DRIVERS", "ATTRS"};
    if (!decided.count(t.key)) return t.key + at;
    // A substitution ($kernel, %k, $env{...}) in what is matched.
    if (t.key == "TEST" && (t.pattern.find('$') != std::string::npos || t.pattern.find('%') != std::string::npos))
        return "TEST" + at + " (a path with a substitution)";
    return {};
}

// Values that are always there (an unset property reads as empty): their
// negation is the opposite operator.
bool always_there(const UdevTest& t) {
    return t.key == "KERNEL" || t.key == "SUBSYSTEM" || t.key == "ACTION" || t.key == "DRIVER" || t.key == "DEVPATH" ||
           t.key == "ENV";
}

Literal negated(Literal l) {
    if (l.tests.size() == 1 && l.undecidable.empty() && always_there(l.tests.front())) {
        l.tests.front().equal = !l.tests.front().equal;
        return l;
    }
    l.holds = !l.holds;
    return l;
}

// The line's tests: one literal each, the parent tests together as one.
std::vector<Literal> own_literals(const UdevRule& r, const SetBefore& before) {
    std::vector<Literal> out;
    Literal parents;
    for (const auto& tok : r.tokens) {
        if (!tok.is_condition()) continue;
        UdevTest t{tok.key, tok.attr, tok.op != UdevOp::nomatch, is_assignment(tok.op), tok.value, r.line};
        if (t.on_parents()) {
            parents.tests.push_back(std::move(t));
            continue;
        }
        Literal l;
        l.undecidable = undecidable(t, before);
        l.tests.push_back(std::move(t));
        out.push_back(std::move(l));
    }
    if (!parents.tests.empty()) {
        for (const auto& t : parents.tests) {
            if (t.key == "TAGS") parents.undecidable = "TAGS at line " + std::to_string(t.line);
        }
        out.push_back(std::move(parents));
    }
    return out;
}

Condition never() { return {}; }

// a and b: every pair of their terms.
Condition conjoin(const Condition& a, const std::vector<Literal>& literals) {
    Condition out;
    out.too_complex = a.too_complex;
    for (auto t : a.terms) {
        t.literals.insert(t.literals.end(), literals.begin(), literals.end());
        out.terms.push_back(std::move(t));
    }
    return simplify(out);
}

// a and not (all of literals): a term per literal, each with it negated.
Condition conjoin_negation(const Condition& a, const std::vector<Literal>& literals, int line) {
    Condition out;
    out.too_complex = a.too_complex;
    for (const auto& t : a.terms)
        for (const auto& l : literals) {
            Term n = t;
            n.literals.push_back(negated(l));
            out.terms.push_back(std::move(n));
        }
    out = simplify(out);
    if (out.terms.size() > kMaxTerms && out.too_complex.empty())
        out.too_complex = "more paths than blkpolicy follows lead past line " + std::to_string(line);
    return out;
}

void disjoin(Condition& into, const Condition& other, int line) {
    into.terms.insert(into.terms.end(), other.terms.begin(), other.terms.end());
    if (into.too_complex.empty()) into.too_complex = other.too_complex;
    into = simplify(into);
    if (into.terms.size() > kMaxTerms && into.too_complex.empty())
        into.too_complex = "more paths than blkpolicy follows lead to line " + std::to_string(line);
}

}  // namespace

std::optional<ValueSet> value_set(const Literal& l) {
    if (l.tests.size() != 1 || !l.undecidable.empty()) return std::nullopt;
    const auto& t = l.tests.front();
    if (always_there(t)) {
        ValueSet v{t.key + (t.attr.empty() ? "" : "{" + t.attr + "}"), {t.pattern, !t.equal}, false, false};
        if (!l.holds) v.strings = v.strings.negated();
        return v;
    }
    if (t.key == "ATTR" || t.key == "ATTRS") {
        // The test fails where the attribute is missing, whatever its operator.
        ValueSet v{t.key + "{" + t.attr + "}", {t.pattern, !t.equal}, false, true};
        if (!l.holds) {
            v.strings = v.strings.negated();
            v.absent_in = true;
        }
        return v;
    }
    return std::nullopt;
}

std::optional<Term> simplify(const Term& term) {
    std::vector<Literal> kept;
    for (const auto& l : term.literals) {
        bool drop = false;
        for (std::size_t i = 0; i < kept.size() && !drop; ++i) {
            const auto& k = kept[i];
            if (k == l) {
                drop = true;
                break;
            }
            if (k.tests == l.tests && k.undecidable == l.undecidable && k.holds != l.holds) return std::nullopt;
            const auto a = value_set(k), b = value_set(l);
            if (!a || !b || a->value != b->value) continue;
            // Both may hold only on a device without the value, or on a string in both sets.
            const bool absent_both = a->absent_in && b->absent_in;
            if (!absent_both && disjoint(a->strings, b->strings) == Proven::yes) return std::nullopt;
            // k covers l: l says nothing k does not.
            if (subset(a->strings, b->strings) == Proven::yes && (!a->absent_in || b->absent_in)) {
                drop = true;
            } else if (subset(b->strings, a->strings) == Proven::yes && (!b->absent_in || a->absent_in)) {
                kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
                --i;
            }
        }
        if (!drop) kept.push_back(l);
    }
    return Term{std::move(kept)};
}

namespace {

// Whether x holding makes e hold (the same value, and x's set within e's).
bool implies(const Literal& x, const Literal& e) {
    if (x == e) return true;
    const auto a = value_set(x), b = value_set(e);
    return a && b && a->value == b->value && subset(a->strings, b->strings) == Proven::yes &&
           (!a->absent_in || b->absent_in);
}

// (A and x) or (A and Y and not x), where x implies every literal of Y, is
// A and Y: the paths join again. (Y is what a path kept that the other
// dropped as implied by x.) Returns the joined term, or nullopt.
std::optional<Term> resolve(const Term& a, const Term& b) {
    for (const auto& x : a.literals) {
        const auto not_x = negated(x);
        if (std::find(b.literals.begin(), b.literals.end(), not_x) == b.literals.end()) continue;
        Term joined;
        for (const auto& l : b.literals)
            if (!(l == not_x)) joined.literals.push_back(l);
        const bool a_within = std::all_of(a.literals.begin(), a.literals.end(), [&](const Literal& l) {
            return l == x || std::find(joined.literals.begin(), joined.literals.end(), l) != joined.literals.end();
        });
        const bool extras_implied = std::all_of(joined.literals.begin(), joined.literals.end(), [&](const Literal& l) {
            return std::find(a.literals.begin(), a.literals.end(), l) != a.literals.end() || implies(x, l);
        });
        if (a_within && extras_implied) return joined;
    }
    return std::nullopt;
}

}  // namespace

Condition simplify(const Condition& c) {
    Condition out;
    out.too_complex = c.too_complex;
    std::vector<Term> terms;
    for (const auto& t : c.terms)
        if (auto s = simplify(t)) terms.push_back(std::move(*s));
    // Paths that differ only in a test and its negation join again.
    for (bool joined = true; joined;) {
        joined = false;
        for (std::size_t i = 0; i < terms.size() && !joined; ++i)
            for (std::size_t j = 0; j < terms.size() && !joined; ++j)
                if (i != j)
                    if (auto t = resolve(terms[i], terms[j])) {
                        terms[i] = std::move(*t);
                        terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(j));
                        joined = true;
                    }
    }
    auto covers = [](const Term& a, const Term& b) {  // every literal of a is in b
        return std::all_of(a.literals.begin(), a.literals.end(), [&](const Literal& l) {
            return std::find(b.literals.begin(), b.literals.end(), l) != b.literals.end();
        });
    };
    for (std::size_t i = 0; i < terms.size(); ++i) {
        bool covered = false;
        for (std::size_t j = 0; j < terms.size() && !covered; ++j) {
            if (i == j || !covers(terms[j], terms[i])) continue;
            // Of two equal terms the first stays.
            covered = !covers(terms[i], terms[j]) || j < i;
        }
        if (!covered) out.terms.push_back(terms[i]);
    }
    return out;
}

std::vector<Condition> line_conditions(const std::vector<UdevRule>& file_rules) {
    std::vector<Condition> out(file_rules.size());
    // The lines a GOTO can reach: the first later line with the label.
    std::vector<std::optional<std::size_t>> target(file_rules.size());
    for (std::size_t i = 0; i < file_rules.size(); ++i) {
        const auto& r = file_rules[i];
        if (!r.error.empty()) continue;
        for (const auto& t : r.tokens) {
            if (t.key != "GOTO" || !is_assignment(t.op)) continue;
            for (std::size_t j = i + 1; j < file_rules.size() && !target[i]; ++j)
                if (file_rules[j].error.empty())
                    for (const auto& u : file_rules[j].tokens)
                        if (u.key == "LABEL" && u.value == t.value) target[i] = j;
        }
    }
    Condition reached = Condition::always();  // falling through from the line before
    std::map<std::size_t, Condition> jumps;   // line -> the GOTOs that land there
    SetBefore before;
    for (std::size_t i = 0; i < file_rules.size(); ++i) {
        const auto& r = file_rules[i];
        if (auto it = jumps.find(i); it != jumps.end()) {
            disjoin(reached, it->second, r.line);
            jumps.erase(it);
        }
        // udevd drops a line it cannot parse, or one with a key it does not know.
        const bool dropped = !r.error.empty() || std::any_of(r.tokens.begin(), r.tokens.end(),
                                                             [](const UdevToken& t) { return !udev_key_role(t.key); });
        if (dropped) {
            out[i] = never();
            continue;
        }
        const auto own = own_literals(r, before);
        out[i] = conjoin(reached, own);
        // OPTIONS+="last_rule" ends udevd's walk as a GOTO past the end would.
        const bool last = std::any_of(r.tokens.begin(), r.tokens.end(), [](const UdevToken& t) {
            return t.key == "OPTIONS" && t.value.find("last_rule") != std::string::npos;
        });
        if (target[i] || last) {
            if (target[i]) disjoin(jumps[*target[i]], out[i], file_rules[*target[i]].line);
            reached = own.empty() ? never() : conjoin_negation(reached, own, r.line);
            if (own.empty()) reached.too_complex.clear();
        }
        before.note(r);
    }
    return out;
}

}  // namespace blkpolicy::writers
