// SPDX-License-Identifier: MIT
// Enum <-> text tables (util/names.hpp): each direction reads one table.
#include <doctest/doctest.h>

#include <tuple>

#include "policy/facts.hpp"
#include "policy/policy.hpp"
#include "util/names.hpp"
#include "writers/model.hpp"
#include "writers/udev_rules.hpp"

using namespace blkpolicy;
using namespace blkpolicy::policy;
using namespace blkpolicy::writers;

namespace {
enum class Colour { red, green, blue };
constexpr util::Named<Colour> kGood[] = {{Colour::red, "red"}, {Colour::green, "green"}, {Colour::blue, "blue"}};
constexpr util::Named<Colour> kSwapped[] = {{Colour::green, "green"}, {Colour::red, "red"}, {Colour::blue, "blue"}};
constexpr util::Named<Colour> kGap[] = {{Colour::red, "red"}, {Colour::blue, "blue"}};
// The compile-time check a table gets beside its enum can fail.
static_assert(util::in_enum_order(kGood));
static_assert(!util::in_enum_order(kSwapped));
static_assert(!util::in_enum_order(kGap));
}  // namespace

TEST_CASE("a name table reads both ways, and answers nothing for what it does not list") {
    CHECK(std::string(util::name_of(kGood, Colour::green)) == "green");
    CHECK(util::value_named(kGood, "blue") == Colour::blue);
    CHECK_FALSE(util::value_named(kGood, "Blue"));
    CHECK_FALSE(util::value_named(kGood, ""));
    CHECK(std::string(util::name_of(kGap, Colour::blue)) == "?");  // index past a short table
    CHECK(util::names_of(kGood) == std::vector<std::string>{"red", "green", "blue"});
}

TEST_CASE("every name the product prints parses back to the same value") {
    for (const auto& n : stack_names()) {
        auto s = stack_from_string(n);
        REQUIRE(s);
        CHECK(to_string(*s) == n);
    }
    CHECK(stack_names() == std::vector<std::string>{"none", "dm", "md", "loop", "nvme-multipath"});
    for (const auto& n : match_key_names()) {
        auto k = match_key_from_string(n);
        REQUIRE(k);
        CHECK(to_string(*k) == n);
    }
    CHECK(match_key_names().size() == 17);
    for (const auto m : {Mode::enforce, Mode::observe}) CHECK(mode_from_string(to_string(m)) == m);
    CHECK_FALSE(mode_from_string("enforcing"));
}

TEST_CASE("udev operators parse by the longest match from the same table they print from") {
    const std::vector<std::pair<std::string, writers::UdevOp>> ops = {
        {"==", UdevOp::match}, {"!=", UdevOp::nomatch}, {"=", UdevOp::assign},
        {"+=", UdevOp::add},   {"-=", UdevOp::remove},  {":=", UdevOp::assign_final}};
    for (const auto& [text, op] : ops) {
        const auto& op_text = text;  // (named again: clang 14 captures no structured binding)
        CAPTURE(op_text);
        CHECK(to_string(op) == text);
        auto rules = writers::parse_udev_rules_text("t.rules", "KERNEL" + text + "\"sd*\"\n");
        REQUIRE(rules.size() == 1);
        CHECK(rules[0].error.empty());
        REQUIRE(rules[0].tokens.size() == 1);
        CHECK(rules[0].tokens[0].op == op);
        CHECK(rules[0].tokens[0].value == "sd*");
    }
    auto bad = writers::parse_udev_rules_text("t.rules", "KERNEL~\"sd*\"\n");
    REQUIRE(bad.size() == 1);
    CHECK(bad[0].error == "expected an operator after KERNEL");
}

TEST_CASE("writer kinds: the name journal fields and JSON use, and the label sentences use") {
    const std::vector<std::tuple<WriterKind, std::string, std::string>> kinds = {
        {WriterKind::udev_rule, "udev", "udev rule"},
        {WriterKind::tuned, "tuned", "TuneD profile"},
        {WriterKind::sysfsutils, "sysfsutils", "sysfsutils"},
        {WriterKind::tmpfiles, "tmpfiles", "tmpfiles.d"},
        {WriterKind::unit, "unit", "unit"},
        {WriterKind::rc_local, "rc.local", "rc.local"},
    };
    for (const auto& [kind, name, text] : kinds) {
        CHECK(std::string(to_string(kind)) == name);
        CHECK(std::string(label(kind)) == text);
    }
}
