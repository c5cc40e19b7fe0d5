// SPDX-License-Identifier: MIT
#include "writers/writer_import.hpp"

#include <filesystem>
#include <map>
#include <set>

#include "policy/loader.hpp"
#include "policy/policy.hpp"
#include "policy/toml_text.hpp"

namespace blkpolicy::writers {

namespace {

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// One policy rule: the assignments of one TuneD unit, or one line.
struct Group {
    std::string name;
    std::string where;   // file:line of the first assignment
    std::string origin;  // what the comment says it came from
    std::vector<std::string> kernel;
    bool disks_only = false;             // TuneD's disk plugin: non-removable disks
    std::vector<policy::TomlEntry> set;  // key, TOML value
    std::vector<const WriterAssignment*> from;
};

}  // namespace

ImportResult import_writers(const std::vector<WriterAssignment>& writers, const std::vector<std::string>& sources,
                            const IdentityLookup& identity) {
    ImportResult out;
    std::vector<Group> groups;
    std::map<std::string, std::size_t> by_unit;  // a TuneD unit's group
    std::string body;
    std::set<std::string> names;

    for (const auto& w : writers) {
        ++out.tuning_rules;
        auto diag = [&](const std::string& m) { out.diagnostics.push_back(w.where() + ": " + m); };
        auto leave_out = [&](const std::string& why) {
            ++out.left_out;
            diag("left out: " + w.attribute + ": " + why);
            body += "\n# from " + policy::comment_text(w.describe()) +
                    " (left out: " + policy::comment_text(w.attribute) + ": " + policy::comment_text(why) + ")\n";
        };
        if (!w.why_inexact.empty()) {
            leave_out(w.why_inexact);
            continue;
        }
        if (w.value.empty()) {
            leave_out("no value");
            continue;
        }
        if (!w.exclude_patterns.empty()) {
            std::string ex;
            for (const auto& p : w.exclude_patterns) ex += (ex.empty() ? "!" : " !") + p;
            leave_out("it excludes devices (" + ex +
                      "), which a policy cannot express; without that it would match more devices");
            continue;
        }
        std::string value;
        if (auto why = convert_policy_value(w.attribute, w.value, value); !why.empty()) {
            leave_out(why);
            continue;
        }
        std::string unit_key;
        if (w.kind == WriterKind::tuned && !w.context.empty()) {
            unit_key = w.context;
            for (const auto& p : w.kernel_patterns) unit_key += "|" + p;
        }
        Group* g = nullptr;
        if (!unit_key.empty()) {
            if (auto it = by_unit.find(unit_key); it != by_unit.end()) g = &groups[it->second];
        }
        if (!g) {
            groups.push_back({});
            g = &groups.back();
            if (!unit_key.empty()) by_unit[unit_key] = groups.size() - 1;
            g->where = w.where();
            g->origin = w.describe();
            g->kernel = w.kernel_patterns;
            // TuneD's [disk] plugin, with no devices=, tunes every disk that is
            // not removable; its [sysfs] lines write the paths they name.
            g->disks_only = w.non_removable_only && w.kernel_patterns.empty();
            // Named after the writer and the whole path, so that the imports
            // of files with the same name (sysfs.d/x.conf, tmpfiles.d/x.conf)
            // can sit side by side in policy.d.
            std::string name = policy::comment_text(std::string(to_string(w.kind)) + " " + w.where());
            if (w.kind == WriterKind::tuned) {
                const auto unit = w.context.substr(w.context.find("unit "));
                name =
                    policy::comment_text("tuned profile " + w.context.substr(8, w.context.find(',') - 8) + " " + unit);
            }
            while (names.count(name)) name += "'";
            names.insert(name);
            g->name = name;
        }
        for (auto& e : g->set)
            if (e.key == w.attribute) e.value = value;
        bool have = false;
        for (const auto& e : g->set) have |= e.key == w.attribute;
        if (!have) g->set.push_back({w.attribute, value, {}});
        g->from.push_back(&w);
    }

    for (const auto& g : groups) {
        policy::RuleToml parts{g.name, {}, {}, {}, g.set};
        for (const auto& e : g.set)
            if (e.key == policy::key_text(policy::Key::write_cache) && e.value == "\"write through\"") {
                parts.acknowledge = {policy::kAckWriteThrough};
                parts.acknowledge_comment = "the original already did this";
            }
        if (!g.kernel.empty()) parts.match.push_back({"kernel", policy::toml_list(g.kernel), {}});
        if (g.disks_only)
            parts.match.push_back({"removable", "false", "TuneD's disk plugin tunes disks that are not removable"});
        const std::string rule = policy::emit_rule(parts);
        auto probe = policy::load_policy({{"rule", rule}});
        if (!probe.ok()) {
            for (const auto* w : g.from) {
                ++out.left_out;
                out.diagnostics.push_back(
                    w->where() + ": left out: blkpolicy check would refuse it: " + probe.errors.front().message);
            }
            body += "\n# from " + policy::comment_text(g.origin) + " (left out: blkpolicy check would refuse it: " +
                    policy::comment_text(probe.errors.front().message) + ")\n";
            continue;
        }
        out.converted += static_cast<int>(g.from.size());
        body += "\n# from " + policy::comment_text(g.origin) + "\n";
        for (const auto& k : g.kernel) {
            if (is_glob(k)) continue;
            // One device by its kernel name: names can change between boots.
            std::string note = "# " + policy::comment_text(k) +
                               " is a kernel name, which can move to another disk at the next boot; match on who "
                               "the device is instead";
            bool offered = false;
            if (identity) {
                if (auto id = identity(k)) {
                    offered = true;
                    note += ", now:";
                    if (!id->vendor.empty())
                        note += "\n#   vendor = " + policy::comment_text(policy::toml_quote(id->vendor));
                    if (!id->model.empty())
                        note += "\n#   model = " + policy::comment_text(policy::toml_quote(id->model));
                    if (!id->serial.empty())
                        note += "\n#   serial = " + policy::comment_text(policy::toml_quote(id->serial));
                    if (!id->wwid.empty()) note += "\n#   wwid = " + policy::comment_text(policy::toml_quote(id->wwid));
                } else {
                    note += " (there is no " + policy::comment_text(k) + " on this host now)";
                }
            }
            body += note + "\n";
            out.diagnostics.push_back(g.where + ": note: " + k + " is a kernel name, which can change between boots" +
                                      (offered ? "; the output offers its identity for a stable match"
                                               : "; there is no such device here to say who it is"));
        }
        body += rule;
    }

    out.toml = policy::import_document(
        "Converted by blkpolicy import from:", sources,
        std::to_string(out.converted) + " setting(s) converted, " + std::to_string(out.left_out) + " left out", body);
    check_import_output(out);
    return out;
}

}  // namespace blkpolicy::writers
