// SPDX-License-Identifier: MIT
// Rule files of the shapes hosts carry (tests/data/udev-corpus: each in
// the shape of a published file, named in its first lines): every line
// that writes a storage setting is converted or named with its file:line,
// none passed over. The figures per file are printed (MESSAGE).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/paths.hpp"
#include "writers/udev_import.hpp"
#include "writers/udev_rules.hpp"

using namespace blkpolicy::writers;

namespace {

// Whether a line writes a setting of a device (as this test reads it, apart
// from the importer's own classification): an ATTR{} assignment (not a
// uevent, which asks for an event), a program it runs, or a program whose
// output it reads that writes sysfs or runs a tool that tunes disks.
bool writes_a_setting(const UdevRule& r) {
    return std::any_of(r.tokens.begin(), r.tokens.end(), [](const UdevToken& t) {
        if (t.op == UdevOp::match || t.op == UdevOp::nomatch) return false;
        if (t.key == "ATTR") return t.attr != "uevent" && t.attr.find("/uevent") == std::string::npos;
        // Every program a storage file runs (RUN+=, not a builtin): what it
        // sets no line shows (Lustre's l_tunedisk), and it stops with the file.
        if (t.key == "RUN") return t.attr != "builtin";
        if (t.key != "PROGRAM") return false;
        const bool sysfs = t.value.find("/sys") != std::string::npos && t.value.find('>') != std::string::npos;
        return sysfs || t.value.find("hdparm") != std::string::npos || t.value.find("blockdev") != std::string::npos;
    });
}

}  // namespace

TEST_CASE("import over rule files of real hosts' shapes: every storage line converted or named, none silent") {
    const auto dir = std::filesystem::path(blkpolicy::test::test_data_dir()) / "udev-corpus";
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".rules") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 23);
    int total_lines = 0, total_converted = 0, total_named = 0, total_silent = 0;
    std::ostringstream table;
    table << "file | storage lines | converted | named | silent\n";
    for (const auto& path : files) {
        std::ifstream in(path);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto name = path.filename().string();
        const auto rules = parse_udev_rules_text(name, text);
        const auto out = import_udev_rules(rules, {name});
        int lines = 0, converted = 0, named = 0, silent = 0;
        for (const auto& r : rules) {
            if (!r.error.empty() || !writes_a_setting(r)) continue;
            ++lines;
            const auto where = r.where();
            const bool said = std::any_of(out.diagnostics.begin(), out.diagnostics.end(), [&](const std::string& d) {
                return d.rfind(where + ": left out", 0) == 0 || d.rfind(where + ": out of blkpolicy's scope", 0) == 0;
            });
            const bool rule = out.toml.find("name = \"" + where + "\"") != std::string::npos ||
                              out.toml.find("name = \"" + where + " (path ") != std::string::npos;
            if (said)
                ++named;
            else if (rule)
                ++converted;
            else {
                ++silent;
                MESSAGE("silent: " << where << ": " << r.text);
            }
        }
        table << name << " | " << lines << " | " << converted << " | " << named << " | " << silent << "\n";
        CAPTURE(name);
        CHECK(lines > 0);
        CHECK(silent == 0);
        // Whatever was named, exit 1 says so (the counts the CLI's exit follows).
        CHECK((named > 0) == (out.left_out + out.attributes_left_out + out.out_of_scope > 0));
        total_lines += lines;
        total_converted += converted;
        total_named += named;
        total_silent += silent;
    }
    table << "all " << files.size() << " files | " << total_lines << " | " << total_converted << " | " << total_named
          << " | " << total_silent;
    MESSAGE("the corpus's figures:\n" << table.str());
    CHECK(total_silent == 0);
}
