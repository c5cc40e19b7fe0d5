// SPDX-License-Identifier: MIT
#include "report/export.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "policy/attributes.hpp"
#include "policy/keys.hpp"
#include "policy/toml_text.hpp"
#include "util/text.hpp"

namespace blkpolicy::report {

using namespace blkpolicy::kernel;  // the rows this layer reads

namespace {

using policy::Key;

// The value as the policy writes it, or nullopt where the read-back is not
// one the policy accepts (then it is shown, not exported).
std::optional<std::string> toml_value(const std::string& key, const std::string& text) {
    const auto spec = policy::find_attribute(key);
    if (!spec) return std::nullopt;
    policy::GivenValue given;
    switch (spec->kind) {
        case policy::ValueKind::integer:
        case policy::ValueKind::flag:
        case policy::ValueKind::wbt: {
            const auto n = util::parse_int(text);
            if (!n) return std::nullopt;
            given = policy::GivenValue::of_integer(*n);
            break;
        }
        case policy::ValueKind::choice:
        case policy::ValueKind::scheduler:
            given = policy::GivenValue::of_string(util::trim(text));
            break;
    }
    if (!policy::check_value(*spec, given).ok()) return std::nullopt;
    return given.type == policy::GivenValue::Type::integer ? std::to_string(given.integer)
                                                           : policy::toml_quote(given.strings.front());
}

// A value that differs from the default by the kernel's own doing: bfq
// turns a default wbt off, and on the kernels where it then reads 0 that
// 0 is not a choice anyone made (explain's row "bfq-off-wbt-reads:0").
bool kernels_own(const Explanation& e, const policy::Values& v) {
    return e.attribute == "wbt_lat_usec" && e.current == "0" && policy::value_of(v, Key::scheduler) == "bfq" &&
           e.kernel_rule == "bfq-off-wbt-reads:0";
}

// fnmatch's special characters taken literally.
std::string literal_glob(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '*' || c == '?' || c == '[' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

std::size_t write_rank(const std::string& attribute) {
    const auto k = policy::key_of(attribute);
    return k ? static_cast<std::size_t>(*k) : 255;
}

struct DeviceExport {
    const ExportInput* in = nullptr;
    std::vector<ExportedValue> set;
    std::vector<std::string> not_compared;
    std::string signature;  // the set as text: devices with equal ones can share a rule
};

DeviceExport export_device(const ExportInput& in) {
    DeviceExport d;
    d.in = &in;
    std::set<std::string> compared;
    for (const auto& e : in.explained.attributes) {
        if (e.kernel_default.empty() || e.current.empty()) continue;
        compared.insert(e.attribute);
        if (e.current == e.kernel_default || kernels_own(e, in.values)) continue;
        const auto value = toml_value(e.attribute, e.current);
        if (!value) {
            d.not_compared.push_back(e.attribute + " = " + e.current + " (not a value the policy takes)");
            continue;
        }
        std::string why = "the kernel's default here is " + e.kernel_default;
        if (!e.derivation.empty()) why += ": " + e.derivation;
        d.set.push_back({e.attribute, *value, why});
    }
    for (const auto& [key, text] : in.values) {
        if (compared.count(key) || text.empty() || !policy::find_attribute(key)) continue;
        d.not_compared.push_back(key + " = " + text);
    }
    auto by_rank = [](const std::string& a, const std::string& b) {
        return std::make_pair(write_rank(a), a) < std::make_pair(write_rank(b), b);
    };
    std::sort(d.set.begin(), d.set.end(),
              [&](const ExportedValue& a, const ExportedValue& b) { return by_rank(a.attribute, b.attribute); });
    std::sort(d.not_compared.begin(), d.not_compared.end(), by_rank);
    for (const auto& v : d.set) d.signature += v.attribute + "=" + v.toml_value + "\n";
    return d;
}

// The match an operator would write: what the device is (its stack, or
// else its driver), its model, its rotational claim; with BY_SERIAL its
// serial too, where it has one.
std::vector<std::pair<std::string, std::string>> operator_key(const policy::DeviceFacts& f, bool by_serial) {
    std::vector<std::pair<std::string, std::string>> m;
    if (f.stack != policy::Stack::none)
        m.emplace_back("stack", policy::toml_quote(policy::to_string(f.stack)));
    else if (!f.driver.empty())
        m.emplace_back("driver", policy::toml_quote(literal_glob(f.driver)));
    if (!f.model.empty()) m.emplace_back("model", policy::toml_quote(literal_glob(f.model)));
    m.emplace_back("rotational", f.rotational ? "true" : "false");
    if (by_serial && !f.serial.empty()) m.emplace_back("serial", policy::toml_quote(literal_glob(f.serial)));
    return m;
}

std::string describe(const policy::DeviceFacts& f) {
    std::string s = f.stack != policy::Stack::none ? policy::to_string(f.stack)
                    : f.driver.empty()             ? std::string("no driver")
                                                   : f.driver;
    if (!f.model.empty()) s += ", " + f.model;
    return s + (f.rotational ? ", rotational" : ", non-rotational");
}

ExportedRule rule_of(const std::vector<const DeviceExport*>& devices,
                     std::vector<std::pair<std::string, std::string>> match, std::string name) {
    ExportedRule r;
    r.name = std::move(name);
    r.match = std::move(match);
    for (const auto* d : devices) r.devices.push_back(d->in->explained.facts.name);
    r.set = devices.front()->set;
    r.not_compared = devices.front()->not_compared;
    return r;
}

}  // namespace

PolicyExport export_policy(const std::vector<ExportInput>& devices, const ExportOptions& options) {
    PolicyExport out;
    out.devices_read = devices.size();
    std::vector<DeviceExport> exported;
    for (const auto& in : devices) exported.push_back(export_device(in));

    // Devices that share the operator's key, in the order first read.
    struct Group {
        std::vector<std::pair<std::string, std::string>> key;
        std::vector<const DeviceExport*> members;
    };
    std::vector<Group> groups;
    std::map<std::vector<std::pair<std::string, std::string>>, std::size_t> group_of;
    for (const auto& d : exported) {
        auto key = operator_key(d.in->explained.facts, options.by_serial);
        const auto [at, added] = group_of.try_emplace(key, groups.size());
        if (added) groups.push_back({std::move(key), {}});
        groups[at->second].members.push_back(&d);
    }

    std::set<std::string> names;
    auto unique_name = [&](std::string name) {
        const std::string base = name;
        for (int n = 2; !names.insert(name).second; ++n) name = base + " (" + std::to_string(n) + ")";
        return name;
    };
    for (const auto& group : groups) {
        const auto& key = group.key;
        const auto& members = group.members;  // not a structured binding: the lambdas below capture it
        const auto& first = members.front()->in->explained.facts;
        const bool serial_keyed = options.by_serial && !first.serial.empty();
        const bool alike = std::all_of(members.begin(), members.end(), [&](const DeviceExport* d) {
            return d->signature == members.front()->signature;
        });
        if (alike) {
            if (members.front()->set.empty()) continue;
            out.rules.push_back(rule_of(
                members, key,
                unique_name("exported: " + describe(first) + (serial_keyed ? ", serial " + first.serial : ""))));
            continue;
        }
        // Devices one key would select hold different values: each is
        // keyed by what tells it apart, or export then plan would write.
        std::map<std::string, int> serials, backing, dm_names;
        for (const auto* d : members) {
            const auto& f = d->in->explained.facts;
            ++serials[f.serial];
            ++backing[f.loop_backing_file];
            ++dm_names[f.dm_name];
        }
        const std::string shared = "devices that share the rest of this match hold other values here";
        for (const auto* d : members) {
            if (d->set.empty()) continue;
            const auto& f = d->in->explained.facts;
            auto own = key;
            ExportedRule r;
            if (!f.serial.empty() && serials[f.serial] == 1) {
                if (!serial_keyed) own.emplace_back("serial", policy::toml_quote(literal_glob(f.serial)));
                r = rule_of({d}, own, unique_name("exported: " + describe(f) + ", serial " + f.serial));
                r.keyed_note = "keyed by serial: " + shared;
            } else if (f.stack == policy::Stack::loop && !f.loop_backing_file.empty() &&
                       backing[f.loop_backing_file] == 1) {
                own.emplace_back(policy::toml_dotted("attr", "loop/backing_file"),
                                 policy::toml_quote(literal_glob(f.loop_backing_file)));
                r = rule_of({d}, own, unique_name("exported: loop on " + f.loop_backing_file));
                r.keyed_note = "keyed by its backing file: " + shared;
            } else if (f.stack == policy::Stack::dm && !f.dm_name.empty() && dm_names[f.dm_name] == 1) {
                own.emplace_back("dm_name", policy::toml_quote(literal_glob(f.dm_name)));
                r = rule_of({d}, own, unique_name("exported: dm " + f.dm_name));
                r.keyed_note = "keyed by its device-mapper name: " + shared;
            } else {
                own.emplace_back("kernel", policy::toml_quote(literal_glob(f.name)));
                r = rule_of({d}, own, unique_name("exported: " + describe(f) + ", " + f.name));
                r.keyed_note = "keyed by kernel name, which can change between boots: " + shared +
                               ", and nothing steadier tells them apart";
                out.notes.push_back(f.name + ": keyed by its kernel name (nothing steadier tells it from " +
                                    std::to_string(members.size() - 1) +
                                    " other device(s) of the same match holding other values)");
            }
            out.rules.push_back(std::move(r));
        }
    }
    return out;
}

std::string export_toml(const PolicyExport& exported, const std::vector<std::string>& header) {
    std::string text;
    for (const auto& line : header) text += "# " + policy::comment_text(line) + "\n";
    if (exported.rules.empty())
        text += "#\n# Nothing differs from the kernel's own defaults on the " + std::to_string(exported.devices_read) +
                " device(s) read.\n";
    for (const auto& r : exported.rules) {
        text += "\n# read on " + util::join(r.devices, ", ") + "\n";
        if (!r.keyed_note.empty()) text += "# " + r.keyed_note + "\n";
        policy::RuleToml t;
        t.name = r.name;
        for (const auto& [k, v] : r.match) t.match.push_back({k, v, ""});
        for (const auto& v : r.set) t.set.push_back({v.attribute, v.toml_value, policy::comment_text(v.why)});
        text += policy::emit_rule(t);
        if (!r.not_compared.empty()) {
            text +=
                "# not compared (blkpolicy knows no kernel default for them here), on " + r.devices.front() + " now:\n";
            for (const auto& v : r.not_compared) text += "#   " + policy::comment_text(v) + "\n";
        }
    }
    return text;
}

}  // namespace blkpolicy::report
