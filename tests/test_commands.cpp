// SPDX-License-Identifier: MIT
// agent/cli/commands: the command and option-scope tables, and everything
// that must agree with them: parsing, --help, the bash completion.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "agent/cli/commands.hpp"
#include "agent/cli/parse.hpp"
#include "support/paths.hpp"

using namespace blkpolicy::agent;

namespace {

std::set<std::string> words(const std::string& s) {
    std::set<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.insert(w);
    return out;
}

std::set<std::string> commands_where(bool (*pred)(const Command&)) {
    std::set<std::string> out;
    for (const auto& c : commands())
        if (pred(c)) out.insert(std::string(c.name));
    return out;
}

std::string completion_text() {
    std::ifstream in(std::string(blkpolicy::test::source_dir()) + "/packaging/blkpolicy.bash-completion");
    REQUIRE(in);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("commands: each name once, each found by name, each in --help") {
    std::set<std::string> names;
    const auto help = usage_text();
    for (const auto& c : commands()) {
        CAPTURE(c.name);
        CHECK(names.insert(std::string(c.name)).second);
        CHECK(find_command(c.name) == &c);
        CHECK(help.find("\n  " + std::string(c.name) + " ") != std::string::npos);
        CHECK(static_cast<bool>(c.run));
    }
    CHECK(find_command("frobnicate") == nullptr);
    CHECK(parse_command_line({"frobnicate"}).error ==
          "unknown command frobnicate (commands: check, plan, apply, status, explain, export, restore, audit, measure, "
          "import, "
          "import-udev, run, reload)");
}

TEST_CASE("commands without operands refuse device names; the others take them") {
    for (const auto& c : commands()) {
        CAPTURE(c.name);
        auto r = parse_command_line({std::string(c.name), "sda"});
        if (c.operands == Operands::none)
            CHECK(r.error == std::string(c.name) + " takes no device arguments");
        else
            CHECK(r.error.empty());
    }
}

TEST_CASE("option scopes: an option of some commands is refused by every other, by name") {
    for (const auto& scope : option_scopes()) {
        // Every command a scope names exists.
        for (const auto& name : words(std::string(scope.commands))) CHECK_MESSAGE(find_command(name), name);
        const std::string opt(scope.option);
        // A value that each option accepts.
        const std::map<std::string, std::string> values = {{"--mode", "observe"},
                                                           {"--metrics-file", "/run/m"},
                                                           {"--log-target", "console"},
                                                           {"--receive-buffer", "8192"},
                                                           {"--udev-rules-dir", "/etc"},
                                                           {"--pid", "1"},
                                                           {"--kernel-release", "6.1.0"},
                                                           {"--config-root", "/"},
                                                           {"--from", "udev"},
                                                           {"--for", "2s"},
                                                           {"--trace-buffer-kb", "64"},
                                                           {"--sample", "10"}};
        for (const auto& c : commands()) {
            std::vector<std::string> args = {std::string(c.name), opt};
            if (values.count(opt)) args.push_back(values.at(opt));
            const auto r = parse_command_line(args);
            CAPTURE(opt);
            CAPTURE(c.name);
            if (scope.allows(c.name)) {
                CHECK(r.error.empty());
            } else {
                CHECK(r.error.rfind(opt + " is for ", 0) == 0);
            }
        }
    }
    CHECK(parse_command_line({"status", "--udev-rules-dir", "/etc"}).error ==
          "--udev-rules-dir is for run, audit and explain");
    CHECK(parse_command_line({"plan", "--no-policy"}).error ==
          "--no-policy is for explain and audit; plan needs a policy");
}

TEST_CASE("the bash completion offers exactly the commands and per-command options of the tables") {
    const auto text = completion_text();
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex(R"re(local commands="([^"]*)")re")));
    CHECK(words(m[1]) == commands_where([](const Command&) { return true; }));

    // Per-command extras: `name) extra="..." ;;`
    std::map<std::string, std::set<std::string>> extras;
    const std::regex extra_re(R"re(\n\s*([a-z|-]+)\) extra="([^"]*)" ;;)re");
    for (std::sregex_iterator it(text.begin(), text.end(), extra_re), end; it != end; ++it)
        for (const auto& name : words(std::regex_replace((*it)[1].str(), std::regex("\\|"), " ")))
            extras[name] = words((*it)[2]);
    for (const auto& c : commands()) {
        std::set<std::string> scoped;
        for (const auto& scope : option_scopes())
            if (scope.allows(c.name)) scoped.insert(std::string(scope.option));
        CAPTURE(c.name);
        CHECK(extras[std::string(c.name)] == scoped);
    }

    // Device names are completed for the commands that take them.
    REQUIRE(std::regex_search(text, m,
                              std::regex(R"re(\n\s*([a-z|]+)\)\n\s*COMPREPLY=\(\$\(compgen -W "\$\(ls /sys/block)re")));
    CHECK(words(std::regex_replace(m[1].str(), std::regex("\\|"), " ")) ==
          commands_where([](const Command& c) { return c.operands == Operands::devices; }));
}
