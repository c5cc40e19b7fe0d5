// SPDX-License-Identifier: MIT
#include "writers/udev_flow.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

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

// The tests a path may carry before blkpolicy stops following it.
constexpr std::size_t kMaxLiterals = 32;

// The literals of one file, each by a number: a path is a list of numbers,
// compared as integers, and what two literals say of each other (one
// contradicts or covers the other) is worked out once.
class Book {
public:
    int id(const Literal& l) {
        std::string key = std::string(l.holds ? "+" : "-") + l.undecidable + '\x1f';
        for (const auto& t : l.tests)
            key += t.key + '\x1e' + t.attr + '\x1e' + (t.equal ? "=" : "!") + (t.assigned ? "a" : "m") + t.pattern +
                   '\x1e' + std::to_string(t.line) + '\x1f';
        auto [it, added] = ids_.emplace(std::move(key), static_cast<int>(literals_.size()));
        if (added) {
            literals_.push_back(l);
            sets_.push_back(value_set(l));
            negations_.push_back(-1);
        }
        return it->second;
    }
    const Literal& at(int i) const { return literals_[static_cast<std::size_t>(i)]; }
    int negation(int i) {
        const auto at_i = static_cast<std::size_t>(i);
        if (negations_[at_i] < 0) {
            const int n = id(negated(Literal(at(i))));  // may add a literal: no reference held across it
            negations_[at_i] = n;
        }
        return negations_[at_i];
    }
    enum class Rel : char { none, contradict, first_covers, second_covers };
    // What a says of b, on a path that holds both.
    Rel relation(int a, int b) {
        const auto key =
            static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32 | static_cast<std::uint32_t>(b);
        if (auto it = relations_.find(key); it != relations_.end()) return it->second;
        return relations_[key] = work_out(a, b);
    }
    // Whether x holding makes e hold.
    bool implies(int x, int e) {
        if (x == e) return true;
        const auto r = relation(x, e);
        return r == Rel::first_covers;
    }
    Term term(const std::vector<int>& path) const {
        Term t;
        for (int i : path) t.literals.push_back(at(i));
        return t;
    }

private:
    Rel work_out(int ia, int ib) {
        const auto& ka = at(ia);
        const auto& kb = at(ib);
        if (ka.tests == kb.tests && ka.undecidable == kb.undecidable && ka.holds != kb.holds) return Rel::contradict;
        const auto& a = sets_[static_cast<std::size_t>(ia)];
        const auto& b = sets_[static_cast<std::size_t>(ib)];
        if (!a || !b || a->value != b->value) return Rel::none;
        // Both may hold only on a device without the value, or on a string in both sets.
        if (!(a->absent_in && b->absent_in) && disjoint(a->strings, b->strings) == Proven::yes) return Rel::contradict;
        if (subset(a->strings, b->strings) == Proven::yes && (!a->absent_in || b->absent_in)) return Rel::first_covers;
        if (subset(b->strings, a->strings) == Proven::yes && (!b->absent_in || a->absent_in)) return Rel::second_covers;
        return Rel::none;
    }
    std::vector<Literal> literals_;
    std::map<std::string, int> ids_;
    std::vector<std::optional<ValueSet>> sets_;
    std::vector<int> negations_;
    std::unordered_map<std::uint64_t, Rel> relations_;
};

using Path = std::vector<int>;
struct Paths {
    std::vector<Path> paths;  // any of them; none: never
    std::string too_complex;
};

bool has(const Path& p, int i) { return std::find(p.begin(), p.end(), i) != p.end(); }

// nullopt when the path can never hold; otherwise without what its other
// literals imply.
std::optional<Path> simplify_path(const Path& path, Book& book) {
    Path kept;
    for (int l : path) {
        bool drop = false;
        for (std::size_t i = 0; i < kept.size() && !drop; ++i) {
            if (kept[i] == l) {
                drop = true;
                break;
            }
            switch (book.relation(kept[i], l)) {
                case Book::Rel::contradict:
                    return std::nullopt;
                case Book::Rel::first_covers:
                    drop = true;
                    break;
                case Book::Rel::second_covers:
                    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
                    --i;
                    break;
                case Book::Rel::none:
                    break;
            }
        }
        if (!drop) kept.push_back(l);
    }
    return kept;
}

// (A and x) or (A and Y and not x), where x implies every literal of Y, is
// A and Y: the paths join again. (Y is what a path kept that the other
// dropped as implied by x.)
std::optional<Path> resolve(const Path& a, const Path& b, Book& book) {
    if (a.size() > b.size()) return std::nullopt;
    int x = -1;
    for (int l : a) {  // exactly one literal of a is not in b: x
        if (has(b, l)) continue;
        if (x >= 0) return std::nullopt;
        x = l;
    }
    if (x < 0) return std::nullopt;
    const int not_x = book.negation(x);
    if (!has(b, not_x)) return std::nullopt;
    Path joined;
    for (int l : b) {
        if (l == not_x) continue;
        if (!has(a, l) && !book.implies(x, l)) return std::nullopt;  // what b has beyond a follows from x
        joined.push_back(l);
    }
    return joined;
}

Paths simplify_paths(const Paths& c, Book& book) {
    Paths out;
    out.too_complex = c.too_complex;
    std::vector<Path> paths;
    for (const auto& p : c.paths)
        if (auto s = simplify_path(p, book)) paths.push_back(std::move(*s));
    // Paths that differ only in a test and its negation join again (not
    // tried on more paths than are kept anyway).
    for (std::size_t i = 0; i < paths.size() && paths.size() <= 2 * kMaxTerms; ++i) {
        for (std::size_t j = 0; j < paths.size(); ++j) {
            if (i == j) continue;
            auto t = resolve(paths[i], paths[j], book);
            if (!t) continue;
            paths[i] = std::move(*t);
            paths.erase(paths.begin() + static_cast<std::ptrdiff_t>(j));
            i = static_cast<std::size_t>(-1);  // the joined path may join others: again from the start
            break;
        }
    }
    std::vector<Path> sorted = paths;  // for the subset tests below
    for (auto& p : sorted) std::sort(p.begin(), p.end());
    auto covers = [&](std::size_t a, std::size_t b) {  // every literal of a is in b
        return sorted[a].size() <= sorted[b].size() &&
               std::includes(sorted[b].begin(), sorted[b].end(), sorted[a].begin(), sorted[a].end());
    };
    for (std::size_t i = 0; i < paths.size(); ++i) {
        bool covered = false;
        for (std::size_t j = 0; j < paths.size() && !covered; ++j) {
            if (i == j || !covers(j, i)) continue;
            covered = !covers(i, j) || j < i;  // of two equal paths the first stays
        }
        if (!covered) out.paths.push_back(paths[i]);
    }
    return out;
}

// Past the bounds: the condition is not followed further (its paths
// dropped: a condition too complex is undecided whatever they say).
Paths given_up(std::string why) { return {{}, std::move(why)}; }

// a and all of literals.
Paths conjoin(const Paths& a, const Path& literals, int line, Book& book) {
    if (!a.too_complex.empty()) return given_up(a.too_complex);
    Paths out;
    for (auto p : a.paths) {
        if (p.size() + literals.size() > kMaxLiterals)
            return given_up("more tests than blkpolicy follows lead to line " + std::to_string(line));
        p.insert(p.end(), literals.begin(), literals.end());
        out.paths.push_back(std::move(p));
    }
    return simplify_paths(out, book);
}

// a and not (all of literals): a path per literal, each with it negated.
Paths conjoin_negation(const Paths& a, const Path& literals, int line, Book& book) {
    if (!a.too_complex.empty()) return given_up(a.too_complex);
    const std::string why = "more paths than blkpolicy follows lead past line " + std::to_string(line);
    if (a.paths.size() * literals.size() > 4 * kMaxTerms) return given_up(why);
    Paths out;
    for (const auto& p : a.paths)
        for (int l : literals) {
            Path n = p;
            n.push_back(book.negation(l));
            out.paths.push_back(std::move(n));
        }
    out = simplify_paths(out, book);
    if (out.paths.size() > kMaxTerms) return given_up(why);
    return out;
}

void disjoin(Paths& into, const Paths& other, int line, Book& book) {
    if (!into.too_complex.empty() || !other.too_complex.empty()) {
        into = given_up(into.too_complex.empty() ? other.too_complex : into.too_complex);
        return;
    }
    const std::string why = "more paths than blkpolicy follows lead to line " + std::to_string(line);
    into.paths.insert(into.paths.end(), other.paths.begin(), other.paths.end());
    if (into.paths.size() > 4 * kMaxTerms) {
        into = given_up(why);
        return;
    }
    into = simplify_paths(into, book);
    if (into.paths.size() > kMaxTerms) into = given_up(why);
}

Condition condition_of(const Paths& p, const Book& book) {
    Condition c;
    c.too_complex = p.too_complex;
    for (const auto& path : p.paths) c.terms.push_back(book.term(path));
    return c;
}

Paths paths_of(const Condition& c, Book& book) {
    Paths p;
    p.too_complex = c.too_complex;
    for (const auto& t : c.terms) {
        Path path;
        for (const auto& l : t.literals) path.push_back(book.id(l));
        p.paths.push_back(std::move(path));
    }
    return p;
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
    Book book;
    Path path;
    for (const auto& l : term.literals) path.push_back(book.id(l));
    auto s = simplify_path(path, book);
    if (!s) return std::nullopt;
    return book.term(*s);
}

Condition simplify(const Condition& c) {
    Book book;
    return condition_of(simplify_paths(paths_of(c, book), book), book);
}

std::vector<std::optional<std::size_t>> goto_targets(const std::vector<UdevRule>& file_rules) {
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
    return target;
}

std::vector<Condition> line_conditions(const std::vector<UdevRule>& file_rules) {
    std::vector<Condition> out(file_rules.size());
    // The lines a GOTO can reach: the first later line with the label.
    const auto target = goto_targets(file_rules);
    Book book;
    Paths reached{{Path{}}, {}};         // falling through from the line before: always, at first
    std::map<std::size_t, Paths> jumps;  // line -> the GOTOs that land there
    SetBefore before;
    for (std::size_t i = 0; i < file_rules.size(); ++i) {
        const auto& r = file_rules[i];
        if (auto it = jumps.find(i); it != jumps.end()) {
            disjoin(reached, it->second, r.line, book);
            jumps.erase(it);
        }
        // udevd drops a line it cannot parse, or one with a key it does not know.
        const bool dropped = !r.error.empty() || std::any_of(r.tokens.begin(), r.tokens.end(),
                                                             [](const UdevToken& t) { return !udev_key_role(t.key); });
        if (dropped) continue;  // never applies: out[i] stays empty
        Path own;
        for (const auto& l : own_literals(r, before)) own.push_back(book.id(l));
        const auto applies = conjoin(reached, own, r.line, book);
        out[i] = condition_of(applies, book);
        // OPTIONS+="last_rule" ends udevd's walk as a GOTO past the end would.
        const bool last = std::any_of(r.tokens.begin(), r.tokens.end(), [](const UdevToken& t) {
            return t.key == "OPTIONS" && t.value.find("last_rule") != std::string::npos;
        });
        if (target[i] || last) {
            if (target[i]) disjoin(jumps[*target[i]], applies, file_rules[*target[i]].line, book);
            // An unconditional GOTO ends every path: what follows is reached only through LABELs.
            reached = own.empty() ? Paths{} : conjoin_negation(reached, own, r.line, book);
        }
        before.note(r);
    }
    return out;
}

}  // namespace blkpolicy::writers
