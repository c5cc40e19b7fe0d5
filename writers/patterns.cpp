// SPDX-License-Identifier: MIT
#include "writers/patterns.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace blkpolicy::writers {

namespace {

using Chars = std::bitset<256>;

// One element of a glob: a set of characters it takes once, or `*`.
struct Element {
    bool star = false;
    Chars chars;
};

// A glob as elements; nullopt when it uses syntax this reading does not
// follow (character classes [[:alpha:]], equivalence classes, collating symbols).
std::optional<std::vector<Element>> compile(const std::string& glob) {
    std::vector<Element> out;
    const std::size_t n = glob.size();
    for (std::size_t i = 0; i < n;) {
        const char c = glob[i];
        Element e;
        if (c == '*') {
            e.star = true;
            ++i;
        } else if (c == '?') {
            e.chars.set();
            ++i;
        } else if (c == '[') {
            // fnmatch: a bracket expression, unless it never closes (then a literal '[').
            std::size_t j = i + 1;
            bool negate = false;
            if (j < n && (glob[j] == '!' || glob[j] == '^')) {
                negate = true;
                ++j;
            }
            Chars set;
            bool closed = false;
            bool first = true;
            while (j < n) {
                if (glob[j] == ']' && !first) {
                    closed = true;
                    break;
                }
                if (glob[j] == '[' && j + 1 < n && (glob[j + 1] == ':' || glob[j + 1] == '=' || glob[j + 1] == '.'))
                    return std::nullopt;
                unsigned char lo = static_cast<unsigned char>(glob[j]);
                if (glob[j] == '\\' && j + 1 < n) lo = static_cast<unsigned char>(glob[++j]);
                if (j + 2 < n && glob[j + 1] == '-' && glob[j + 2] != ']') {
                    unsigned char hi = static_cast<unsigned char>(glob[j + 2]);
                    j += 2;
                    if (glob[j] == '\\' && j + 1 < n) hi = static_cast<unsigned char>(glob[++j]);
                    for (unsigned v = lo; v <= hi; ++v) set.set(v);
                } else {
                    set.set(lo);
                }
                ++j;
                first = false;
            }
            if (!closed) {
                e.chars.set(static_cast<unsigned char>('['));
                ++i;
            } else {
                e.chars = negate ? ~set : set;
                i = j + 1;
            }
        } else if (c == '\\' && i + 1 < n) {
            e.chars.set(static_cast<unsigned char>(glob[i + 1]));
            i += 2;
        } else {
            e.chars.set(static_cast<unsigned char>(c));
            ++i;
        }
        if (e.star && !out.empty() && out.back().star) continue;  // ** is *
        out.push_back(e);
    }
    return out;
}

std::vector<std::string> alternatives(const std::string& pattern) { return split_alternatives(pattern); }

// A pattern's alternatives as one automaton: a state is (alternative,
// position); position == size accepts.
struct Automaton {
    std::vector<std::vector<Element>> alts;
    bool complement = false;

    using State = std::vector<std::uint32_t>;  // sorted (alt << 16 | pos)

    static std::uint32_t id(std::size_t alt, std::size_t pos) { return static_cast<std::uint32_t>(alt << 16 | pos); }

    // Adds (alt, pos) and every position a `*` there lets it skip to.
    void close(std::size_t alt, std::size_t pos, std::set<std::uint32_t>& into) const {
        while (true) {
            into.insert(id(alt, pos));
            if (pos < alts[alt].size() && alts[alt][pos].star)
                ++pos;
            else
                break;
        }
    }
    State start() const {
        std::set<std::uint32_t> s;
        for (std::size_t a = 0; a < alts.size(); ++a) close(a, 0, s);
        return {s.begin(), s.end()};
    }
    State step(const State& from, unsigned char c) const {
        std::set<std::uint32_t> s;
        for (const auto st : from) {
            const std::size_t alt = st >> 16, pos = st & 0xffff;
            if (pos >= alts[alt].size()) continue;
            const auto& e = alts[alt][pos];
            if (e.star)
                close(alt, pos, s);
            else if (e.chars.test(c))
                close(alt, pos + 1, s);
        }
        return {s.begin(), s.end()};
    }
    bool accepts(const State& s) const {
        bool any = false;
        for (const auto st : s)
            if ((st & 0xffff) == alts[st >> 16].size()) any = true;
        return any != complement;
    }
};

// Patterns longer than this, or with more alternatives, are not compared.
constexpr std::size_t kMaxPatternLength = 256;
constexpr std::size_t kMaxAlternatives = 16;

std::optional<Automaton> automaton(const PatternSet& set) {
    if (set.pattern.size() > kMaxPatternLength) return std::nullopt;
    Automaton a;
    a.complement = set.complement;
    const auto alts = alternatives(set.pattern);
    if (alts.size() > kMaxAlternatives) return std::nullopt;
    for (const auto& alt : alts) {
        auto elements = compile(alt);
        if (!elements || elements->size() >= 0xffff) return std::nullopt;
        a.alts.push_back(std::move(*elements));
    }
    return a;
}

// One character of each class of characters the two automata cannot tell
// apart: enough to explore every distinct transition.
std::vector<unsigned char> representatives(const Automaton& a, const Automaton& b) {
    std::vector<const Chars*> sets;
    for (const auto* m : {&a, &b})
        for (const auto& alt : m->alts)
            for (const auto& e : alt)
                if (!e.star) sets.push_back(&e.chars);
    std::set<std::vector<bool>> seen;
    std::vector<unsigned char> out;
    for (unsigned c = 0; c < 256; ++c) {
        if (c == 0) continue;  // a C string never holds NUL
        std::vector<bool> sig;
        sig.reserve(sets.size());
        for (const auto* s : sets) sig.push_back(s->test(c));
        if (seen.insert(sig).second) out.push_back(static_cast<unsigned char>(c));
    }
    return out;
}

// The search through the product of the two automata gives up past this
// many pairs of states: far beyond any pattern a rule file holds.
constexpr std::size_t kMaxPairs = 4096;

}  // namespace

namespace {

// A pattern without glob characters: a finite set of strings.
bool plain(const std::string& pattern) { return pattern.find_first_of("*?[\\") == std::string::npos; }

Proven subset_by_automata(const PatternSet& a, const PatternSet& b) {
    auto ma = automaton(a), mb = automaton(b);
    if (!ma || !mb) return Proven::unknown;
    const auto chars = representatives(*ma, *mb);
    using Pair = std::pair<Automaton::State, Automaton::State>;
    std::set<Pair> seen;
    std::deque<Pair> todo;
    todo.emplace_back(ma->start(), mb->start());
    seen.insert(todo.front());
    while (!todo.empty()) {
        auto [sa, sb] = std::move(todo.front());
        todo.pop_front();
        // A string `a` holds and `b` does not.
        if (ma->accepts(sa) && !mb->accepts(sb)) return Proven::no;
        for (const auto c : chars) {
            Pair next{ma->step(sa, c), mb->step(sb, c)};
            if (seen.count(next)) continue;
            if (seen.size() >= kMaxPairs) return Proven::unknown;
            seen.insert(next);
            todo.push_back(std::move(next));
        }
    }
    return Proven::yes;
}

Proven subset_uncached(const PatternSet& a, const PatternSet& b) {
    if (a.pattern == b.pattern && a.complement == b.complement) return Proven::yes;
    // A finite set of strings: each is in b or not, as udev would match it.
    if (!a.complement && plain(a.pattern)) {
        for (const auto& s : alternatives(a.pattern))
            if (!contains(b, s)) return Proven::no;
        return Proven::yes;
    }
    // Every string but a finite set, within a finite set: never.
    if (a.complement && !b.complement && plain(b.pattern)) return Proven::no;
    // not A within not B: B within A.
    if (a.complement && b.complement && plain(b.pattern)) return subset_uncached({b.pattern}, {a.pattern});
    return subset_by_automata(a, b);
}

}  // namespace

Proven subset(const PatternSet& a, const PatternSet& b) {
    // The same few patterns are compared again and again while a file's
    // paths are simplified: remembered, within bounds.
    thread_local std::map<std::tuple<std::string, bool, std::string, bool>, Proven> known;
    const auto key = std::make_tuple(a.pattern, a.complement, b.pattern, b.complement);
    if (auto it = known.find(key); it != known.end()) return it->second;
    if (known.size() > 4096) known.clear();
    const auto r = subset_uncached(a, b);
    known.emplace(key, r);
    return r;
}

Proven disjoint(const PatternSet& a, const PatternSet& b) { return subset(a, b.negated()); }

std::vector<std::string> split_alternatives(const std::string& pattern) {
    std::vector<std::string> out(1);
    for (char c : pattern) {
        if (c == '|')
            out.emplace_back();
        else
            out.back() += c;
    }
    return out;
}

bool contains(const PatternSet& set, const std::string& value) {
    bool in = false;
    for (const auto& alt : alternatives(set.pattern))
        if (::fnmatch(alt.c_str(), value.c_str(), 0) == 0) in = true;
    return in != set.complement;
}

}  // namespace blkpolicy::writers
