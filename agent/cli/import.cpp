// SPDX-License-Identifier: MIT
#include "agent/cli/import.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include "agent/policy_files.hpp"
#include "udev/discovery.hpp"
#include "util/files.hpp"
#include "writers/scan.hpp"
#include "writers/scan_udev.hpp"
#include "writers/udev_import.hpp"
#include "writers/writer_import.hpp"

namespace blkpolicy::agent {

namespace fs = std::filesystem;

namespace {

// What writes a file: the name and place say it (a.rules, tuned.conf,
// sysfs.conf, sysfs.d/, tmpfiles.d/), else the lines do.
std::string format_of(const std::string& path, const std::string& text) {
    const fs::path p(path);
    const auto name = p.filename().string();
    const auto dir = p.parent_path().filename().string();
    if (name.ends_with(".rules")) return "udev";
    if (name == "tuned.conf") return "tuned";
    if (name == "sysfs.conf" || dir == "sysfs.d") return "sysfsutils";
    if (dir == "tmpfiles.d" || dir == "user-tmpfiles.d") return "tmpfiles";
    for (const auto& a : writers::parse_tmpfiles(path, text))
        return a.kind == writers::WriterKind::tmpfiles ? "tmpfiles" : "";
    if (!writers::parse_sysfs_conf(path, text).empty()) return "sysfsutils";
    if (text.find("[main]") != std::string::npos || text.find("[disk]") != std::string::npos ||
        text.find("[sysfs]") != std::string::npos)
        return "tuned";
    return "udev";
}

// The files of a directory that its writer reads, in its order.
std::vector<std::string> files_in(const std::string& dir, const std::string& suffix) {
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().ends_with(suffix)) out.push_back(it->path().string());
    std::sort(out.begin(), out.end());
    return out;
}

struct Source {
    std::string path;    // a file, or for TuneD a profile name
    std::string format;  // udev, tuned, sysfsutils, tmpfiles
};

}  // namespace

int run_import(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    if (o.command == "import-udev")
        err << "blkpolicy: note: 'import-udev' is deprecated since 0.2.0 and is removed in 0.3.0; 'blkpolicy import' "
               "converts udev rules the same way (see NEWS.md)\n";
    if (o.devices.empty()) {
        err << "blkpolicy: " << o.command
            << " needs files, directories or TuneD profile names, e.g. blkpolicy import /etc/udev/rules.d\n"
               "Try 'blkpolicy --help'.\n";
        return kExitUsage;
    }
    std::string from = o.import_from;
    if (o.command == "import-udev" && from.empty()) from = "udev";

    std::vector<Source> sources;
    for (const auto& p : o.devices) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            if (fs::exists(fs::path(p) / "tuned.conf", ec) && (from.empty() || from == "tuned")) {
                sources.push_back({(fs::path(p) / "tuned.conf").string(), "tuned"});
                continue;
            }
            const auto base = fs::path(p).filename().string();
            std::string f = from;
            if (f.empty()) f = base == "sysfs.d" ? "sysfsutils" : base == "tmpfiles.d" ? "tmpfiles" : "udev";
            for (const auto& file : files_in(p, f == "udev" ? ".rules" : ".conf")) sources.push_back({file, f});
        } else if (fs::exists(p, ec)) {
            sources.push_back({p, from});
        } else if (from == "tuned" && p.find('/') == std::string::npos) {
            sources.push_back({p, "tuned-name"});  // a profile installed under --config-root
        } else {
            err << "blkpolicy: " << p << ": no such file or directory"
                << (from.empty() && p.find('/') == std::string::npos ? " (a TuneD profile name wants --from tuned)"
                                                                     : "")
                << "\n";
            return kExitUsage;
        }
    }

    // Read every file first: nothing is printed when one cannot be read.
    std::map<std::string, std::string> texts;
    for (auto& s : sources) {
        if (s.format == "tuned-name") continue;
        auto text = util::read_bounded_file(s.path, writers::kMaxWriterFileBytes, "a file to import");
        if (!text.ok()) {
            err << "blkpolicy: " << s.path << ": " << text.message() << "\n";
            return kExitRuntime;
        }
        if (s.format.empty()) s.format = format_of(s.path, *text);
        texts[s.path] = *text;
    }

    std::vector<std::string> names;
    for (const auto& s : sources)
        names.push_back(s.path + " (" + (s.format == "tuned-name" ? "tuned" : s.format) + ")");

    // udev rules keep their own converter (conditions, GOTO, ...).
    std::vector<writers::UdevRule> rules;
    std::vector<std::string> rule_files;
    std::vector<writers::WriterAssignment> writers;
    std::vector<std::string> diagnostics;
    int unreadable = 0;
    for (const auto& s : sources) {
        if (s.format == "udev") {
            auto parsed = writers::parse_udev_rules_text(s.path, texts[s.path]);
            rules.insert(rules.end(), parsed.begin(), parsed.end());
            rule_files.push_back(s.path);
        } else if (s.format == "sysfsutils") {
            auto found = writers::parse_sysfs_conf(s.path, texts[s.path]);
            writers.insert(writers.end(), found.begin(), found.end());
        } else if (s.format == "tmpfiles") {
            auto found = writers::parse_tmpfiles(s.path, texts[s.path]);
            writers.insert(writers.end(), found.begin(), found.end());
        } else {
            // A TuneD profile: its includes come from the installed profiles.
            std::string top;
            std::optional<writers::TunedProfileFile> given;
            if (s.format == "tuned-name") {
                top = s.path;
            } else {
                top = fs::path(s.path).parent_path().filename().string();
                if (top.empty()) top = "(profile)";
                given = writers::parse_tuned_conf(top, s.path, texts[s.path]);
            }
            auto res =
                writers::resolve_tuned({top}, [&](const std::string& n) -> std::optional<writers::TunedProfileFile> {
                    if (given && n == top) return given;
                    return writers::load_tuned_profile(o.config_root, n);
                });
            for (const auto& w : res.warnings) {
                diagnostics.push_back("warning: " + w);
                ++unreadable;
            }
            writers.insert(writers.end(), res.assignments.begin(), res.assignments.end());
        }
    }

    writers::ImportResult result;
    if (!rules.empty()) {
        result = writers::import_udev_rules(rules, rule_files);
        for (const auto& r : rules)
            if (!r.error.empty()) ++unreadable;
    }
    if (!writers.empty() || rules.empty()) {
        auto identity = [&](const std::string& name) -> std::optional<writers::DeviceIdentity> {
            if (!udev::valid_device_name(name)) return std::nullopt;
            auto f = udev::read_facts(sysfs, name, {}, policy::kFactModel | policy::kFactSerial | policy::kFactWwid);
            if (!f) return std::nullopt;
            return writers::DeviceIdentity{f->vendor, f->model, f->serial, f->wwid};
        };
        auto w = writers::import_writers(writers, names, identity);
        if (rules.empty()) {
            result = w;
        } else {
            // Both: the udev part first, then the others, as one policy.
            result.toml += "\n" + w.toml;
            result.diagnostics.insert(result.diagnostics.end(), w.diagnostics.begin(), w.diagnostics.end());
            result.tuning_rules += w.tuning_rules;
            result.converted += w.converted;
            result.left_out += w.left_out;
        }
    }
    for (const auto& d : diagnostics) err << d << '\n';
    for (const auto& d : result.diagnostics) err << d << '\n';
    const bool lost = result.left_out || result.attributes_left_out || unreadable || result.out_of_scope;
    if (result.tuning_rules == 0) {
        if (result.out_of_scope) {
            // It tunes something, just not block queues: a user must hear it.
            err << "blkpolicy: " << result.out_of_scope
                << " rule(s) write attributes of devices that are not block devices (see above): out of "
                   "blkpolicy's scope, nothing converted\n";
            return kExitPartial;
        }
        err << "blkpolicy: nothing that tunes block queues (queue/, bdi/, md/ or device/ writes) in " << sources.size()
            << " source(s): nothing to convert";
        if (unreadable) err << "; " << unreadable << " line(s) or profile(s) could not be read (see above)";
        err << '\n';
        return unreadable ? kExitPartial : kExitOk;
    }
    out << result.toml;
    const bool udev_only = writers.empty();
    err << "blkpolicy: " << result.converted << " of " << result.tuning_rules
        << (udev_only ? " tuning rule(s) converted" : " tuning rule(s) and setting(s) converted");
    if (result.left_out) err << ", " << result.left_out << (udev_only ? " rule(s) left out" : " left out");
    if (result.attributes_left_out)
        err << ", " << result.attributes_left_out << " assignment(s) left out of converted rules";
    if (result.out_of_scope) err << ", " << result.out_of_scope << " out of blkpolicy's scope";
    if (unreadable) err << ", " << unreadable << " line(s) or profile(s) could not be read";
    err << (lost ? " (see above)" : "") << '\n';
    return lost ? kExitPartial : kExitOk;
}

}  // namespace blkpolicy::agent
