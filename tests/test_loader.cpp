// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include <map>

#include "policy/attributes.hpp"
#include "policy/loader.hpp"
#include "policy/toml_text.hpp"
#include "writers/udev_import.hpp"

using namespace blkpolicy::policy;
using namespace blkpolicy::writers;

namespace {

std::vector<std::string> errors_of(const std::string& text) {
    auto r = load_policy({{"p.toml", text}});
    std::vector<std::string> out;
    for (const auto& e : r.errors) out.push_back(e.str());
    return out;
}

std::string only_error(const std::string& text) {
    auto errs = errors_of(text);
    REQUIRE(errs.size() == 1);
    return errs.front();
}

const char* kGoodPolicy = R"(
[daemon]
mode = "observe"
verify_interval = "5s"

[[rule]]
name = "virtual disks do not spin"
[rule.match]
driver = ["virtio_blk", "sd"]
model = ["QEMU HARDDISK"]
rotational = true
stack = "none"
[rule.set]
rotational = 0
wbt_lat_usec = 2000
read_ahead_kb = 128
scheduler = ["kyber", "mq-deadline"]
iosched.fifo_batch = 8
device.timeout = 60

[[rule]]
name = "hdd"
acknowledge = ["write-through-drops-flushes"]
[rule.set]
write_cache = "write through"
wbt_lat_usec = "default"
add_random = true
)";

}  // namespace

TEST_CASE("a valid policy loads with positions") {
    auto r = load_policy({{"p.toml", kGoodPolicy}});
    REQUIRE(r.ok());
    CHECK(r.policy.daemon.mode == Mode::observe);
    CHECK(r.policy.daemon.verify_interval == std::chrono::seconds(5));
    REQUIRE(r.policy.rules.size() == 2);
    const auto& rule = r.policy.rules[0];
    CHECK(rule.name == "virtual disks do not spin");
    CHECK(rule.pos.str() == "p.toml:6:1");
    REQUIRE(rule.match.size() == 4);
    CHECK(rule.match[0].key == MatchKey::driver);
    CHECK(rule.match[0].patterns == std::vector<std::string>{"virtio_blk", "sd"});
    CHECK(rule.match[2].patterns == std::vector<std::string>{"true"});
    std::map<std::string, std::vector<std::string>> set;
    for (const auto& s : rule.set) set[s.attribute] = s.values;
    CHECK(set["rotational"] == std::vector<std::string>{"0"});
    CHECK(set["scheduler"] == std::vector<std::string>{"kyber", "mq-deadline"});
    CHECK(set["iosched.fifo_batch"] == std::vector<std::string>{"8"});
    CHECK(set["device.timeout"] == std::vector<std::string>{"60"});
    const auto& hdd = r.policy.rules[1];
    std::map<std::string, std::vector<std::string>> set2;
    for (const auto& s : hdd.set) set2[s.attribute] = s.values;
    CHECK(set2["wbt_lat_usec"] == std::vector<std::string>{"default"});
    CHECK(set2["add_random"] == std::vector<std::string>{"1"});
    CHECK(hdd.match.empty());
}

TEST_CASE("TOML syntax errors carry the position") {
    auto e = only_error("[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = = 5\n");
    CHECK(e.rfind("p.toml:4:", 0) == 0);
}

TEST_CASE("TOML syntax errors in words a policy's author knows, with the position") {
    const std::pair<const char*, const char*> cases[] = {
        {"[[rule]]\nname = \"virtual disks\n",
         "p.toml:2:22: unterminated string: the closing \" is missing on this line"},
        {"[[rule]]\nname = 'virtual disks\n",
         "p.toml:2:22: unterminated string: the closing ' is missing on this line"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nscheduler = [\"bfq\", \"none\"\n",
         "p.toml:4:28: unterminated array: the closing ] is missing"},
        {"[rule.set\n", "p.toml:1:10: missing ] at the end of the table header"},
        {"[[rule]\n", "p.toml:1:8: missing ] at the end of the table header"},
        {"[[rule]]\nname =\n", "p.toml:2:7: no value after = (a string needs quotes)"},
        {"[[rule]]\nname = \"x\" mode = 1\n", "p.toml:2:12: more text after the value: one key = value per line"},
        {"[daemon]\nmode = enforce\n", "p.toml:2:8: not a value: a string needs quotes, a boolean is true or false"},
        {"[daemon]\nmode = tru\n", "p.toml:2:11: not a value: a string needs quotes, a boolean is true or false"},
        {"[[rule]]\nname = \"x\"\nname = \"y\"\n", "p.toml:3:8: this key is set twice in the same table"},
        {"[[rule]]\nname = \"a\\qb\"\n",
         "p.toml:2:11: unknown escape sequence in a string: write \\\\ for a backslash, or use a 'literal string'"},
    };
    for (const auto& [text, want] : cases) {
        const std::string& policy_text = text;  // (named again: clang 14 captures no structured binding)
        CAPTURE(policy_text);
        auto got = only_error(text);
        CHECK(got == want);  // the position is toml++'s, the words are ours
        CHECK(got.find('\n') == std::string::npos);
    }
}

TEST_CASE("validation messages - exactly") {
    const struct {
        const char* text;
        const char* error;
    } cases[] = {
        {"[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = -5\n",
         "p.toml:4:17: read_ahead_kb = -5 is negative: must be 0..1048576 (KiB, at most 1 GiB)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = \"128\"\n",
         "p.toml:4:17: read_ahead_kb must be an integer, not a string"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = 1.5\n",
         "p.toml:4:17: read_ahead_kb must be an integer, not a float"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nrq_affinity = 3\n",
         "p.toml:4:15: rq_affinity = 3 is out of range: must be 0..2 (the kernel accepts 3 without error and "
         "ignores it)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nnr_requests = 2\n",
         "p.toml:4:15: nr_requests = 2 is out of range: must be 4..65536 (the kernel silently raises values "
         "below 4)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nwrite_cache = \"write backwards\"\n",
         "p.toml:4:15: write_cache = \"write backwards\" is not exactly one of \"write back\", \"write through\" "
         "(the kernel matches only the start of the text, so a typo would silently apply another mode)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nwrite_cache = \"none\"\n",
         "p.toml:4:15: write_cache = \"none\" is not exactly one of \"write back\", \"write through\" (the "
         "kernel matches only the start of the text, so a typo would silently apply another mode)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nwrite_cache = \"write through\"\n",
         "p.toml:4:15: write_cache = \"write through\" makes the kernel stop sending cache flushes: fsync still "
         "succeeds, but data in the device's volatile cache is lost on power failure; if that is intended, add "
         "acknowledge = [\"write-through-drops-flushes\"] to rule \"x\""},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nreadahead_kb = 5\n",
         "p.toml:4:1: unknown attribute \"readahead_kb\" in [rule.set] (writable: rotational, max_sectors_kb, "
         "discard_max_bytes, write_cache, add_random, iostats, scheduler, nr_requests, async_depth, wbt_lat_usec, "
         "nomerges, rq_affinity, device.timeout, device.queue_depth, device.iopolicy, io_timeout, bdi.max_ratio, "
         "bdi.min_ratio, bdi.strict_limit, md.stripe_cache_size, md.sync_speed_min, md.sync_speed_max, read_ahead_kb, "
         "iosched.<tunable>)"},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nmodel_name = \"x\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:1: unknown match key \"model_name\" (known: kernel, driver, model, vendor, serial, wwid, "
         "stack, dm_name, dm_uuid, md_level, rotational, removable, env.<udev property>, attr.<sysfs attribute>, "
         "attrs.<sysfs attribute>, parent.<level test>, host.<host fact>)"},
        {"[[rule]]\nname = \"x\"\n[rule.unless]\nmodel_name = \"x\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:1: unknown unless key \"model_name\" (known: kernel, driver, model, vendor, serial, wwid, "
         "stack, dm_name, dm_uuid, md_level, rotational, removable, env.<udev property>, attr.<sysfs attribute>, "
         "attrs.<sysfs attribute>, parent.<level test>, host.<host fact>)"},
        {"[[rule]]\nname = \"x\"\n[rule.unless]\n[rule.set]\nnomerges = 1\n",
         "p.toml:3:7: [rule.unless] is empty: leave it out"},
        {"[[rule]]\nname = \"x\"\n[rule.unless]\nrotational = \"yes\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:14: unless.rotational must be true or false, not a string"},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nattr.\"../../../etc/shadow\" = \"x\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:6: match.attr.../../../etc/shadow: a sysfs attribute is a relative path of letters, digits, "
         "'_', '-', '.' and ':' (at most 128 characters, no empty, '.' or '..' part)"},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nattrs = \"model\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:1: match.attrs must be a table of sysfs attributes of the device or a parent, e.g. attrs.nsid = "
         "\"?*\""},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nparent = \"usb\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:1: match.parent must be a table of tests one level of the device and its parents meets together: "
         "kernel, subsystem, driver, attr.<sysfs attribute>, e.g. parent.subsystem = \"usb\" with "
         "parent.attr.idVendor = \"0781\""},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nparent.bus = \"usb\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:8: unknown key \"bus\" in match.parent (known: kernel, subsystem, driver, attr.<sysfs attribute>)"},
        {"[[rule]]\nname = \"x\"\n[rule.unless]\nparent.attr = \"idVendor\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:8: unless.parent.attr must be a table of sysfs attributes, e.g. unless.parent.attr.idVendor = "
         "\"0781\""},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nparent.attr.\"../idVendor\" = \"0781\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:13: match.parent.attr.../idVendor: a sysfs attribute is a relative path of letters, digits, "
         "'_', '-', '.' and ':' (at most 128 characters, no empty, '.' or '..' part)"},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nparent.subsystem = 3\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:20: match.parent.subsystem must be a string or an array of strings, not an integer"},
        {"[[rule]]\nname = \"x\"\n[rule.unless]\nattr.\"queue/zoned\" = []\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:22: unless.attr.queue/zoned must not be an empty array (it could never match)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nio_timeout = 0\n",
         "p.toml:4:14: io_timeout = 0 is out of range: must be 1..4294967295 (milliseconds, 1 to 4294967295; only "
         "blk-mq drivers with a timeout handler (NVMe, SCSI) have it)"},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nenv = \"ID_BUS\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:1: match.env must be a table of udev properties, e.g. env.ID_BUS = \"ata\""},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nenv.\"ID-BUS\" = \"ata\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:5: match.env.ID-BUS: a udev property name has only letters, digits and _"},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nrotational = 1\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:14: match.rotational must be true or false, not an integer"},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nstack = \"lvm\"\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:9: match.stack \"lvm\" is not one of \"none\", \"dm\", \"md\", \"loop\", \"nvme-multipath\""},
        {"[[rule]]\nname = \"x\"\n[rule.match]\nkernel = []\n[rule.set]\nnomerges = 1\n",
         "p.toml:4:10: match.kernel must not be an empty array (it could never match)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nscheduler = \"deadline\"\n",
         "p.toml:4:13: scheduler \"deadline\" is the kernel's alias of mq-deadline, and sysfs shows mq-deadline: "
         "write \"mq-deadline\""},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nscheduler = [\"kyber\", \"mq-dedline\"]\n",
         "p.toml:4:13: unknown scheduler \"mq-dedline\": did you mean \"mq-deadline\"? (a name that is not a typo of "
         "\"none\", \"mq-deadline\", \"kyber\", \"bfq\" is taken as an out-of-tree scheduler's)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nscheduler = \"Kyber \"\n",
         "p.toml:4:13: scheduler \"Kyber \" is not a scheduler's name (1 to 15 of a-z, 0-9, '-' and '_', as the "
         "kernel registers them)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nscheduler = [\"bfq\", \"bfq\"]\n",
         "p.toml:4:13: scheduler \"bfq\" is listed twice"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nwbt_lat_usec = \"off\"\n",
         "p.toml:4:16: wbt_lat_usec must be an integer (microseconds, 0 turns wbt off) or \"default\""},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nrotational = 2\n", "p.toml:4:14: rotational must be 0, 1, true or false"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\ndiscard_max_bytes = 0\n",
         "p.toml:4:21: discard_max_bytes = 0 is out of range: must be 1..9223372036854775807 (0 can disable "
         "discard for good on recent kernels; leave the key out instead)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nmax_sectors_kb = 0\n",
         "p.toml:4:18: max_sectors_kb = 0 is out of range: must be 4..2147483647 (at least one 4 KiB page; the "
         "kernel rejects values above max_hw_sectors_kb)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\niosched.Fifo-Batch = 1\n",
         "p.toml:4:9: unknown attribute \"iosched.Fifo-Batch\" in [rule.set] (writable: rotational, "
         "max_sectors_kb, discard_max_bytes, write_cache, add_random, iostats, scheduler, nr_requests, "
         "async_depth, wbt_lat_usec, nomerges, rq_affinity, device.timeout, device.queue_depth, device.iopolicy, "
         "io_timeout, bdi.max_ratio, bdi.min_ratio, bdi.strict_limit, "
         "md.stripe_cache_size, md.sync_speed_min, md.sync_speed_max, read_ahead_kb, iosched.<tunable>)"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\ndevice.eh_deadline = 1\n",
         "p.toml:4:8: unknown attribute \"device.eh_deadline\" in [rule.set] (writable: rotational, "
         "max_sectors_kb, discard_max_bytes, write_cache, add_random, iostats, scheduler, nr_requests, "
         "async_depth, wbt_lat_usec, nomerges, rq_affinity, device.timeout, device.queue_depth, device.iopolicy, "
         "io_timeout, bdi.max_ratio, bdi.min_ratio, bdi.strict_limit, "
         "md.stripe_cache_size, md.sync_speed_min, md.sync_speed_max, read_ahead_kb, iosched.<tunable>)"},
        {"[[rule]]\nname = \"x\"\n", "p.toml:1:1: rule \"x\" has no [rule.set] table: it would do nothing"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\n", "p.toml:3:7: [rule.set] is empty: the rule would do nothing"},
        {"[[rule]]\n[rule.set]\nnomerges = 1\n", "p.toml:1:1: rule has no name: add name = \"...\""},
        {"[[rule]]\nname = \"x\"\nenabled = false\n[rule.set]\nnomerges = 1\n",
         "p.toml:3:1: unknown key \"enabled\" in rule (expected \"name\", \"match\", \"unless\", \"set\" or "
         "\"acknowledge\")"},
        {"[[rule]]\nname = \"x\"\nacknowledge = [\"yolo\"]\n[rule.set]\nnomerges = 1\n",
         "p.toml:3:15: unknown acknowledgement \"yolo\" (known: \"write-through-drops-flushes\", "
         "\"volatile-cache-data-loss\")"},
        {"[[rule]]\nname = \"x\"\n[rule.set]\nnomerges = 1\nacknowledge = [\"write-through-drops-flushes\"]\n",
         "p.toml:5:1: \"acknowledge\" belongs to the rule itself: put it under [[rule]], before [rule.match] and "
         "[rule.set]"},
        {"[rules]\nx = 1\n", "p.toml:1:2: unknown top-level key \"rules\" (expected \"daemon\" or \"rule\")"},
        {"[daemon]\nmode = \"enforcing\"\n", "p.toml:2:8: daemon.mode must be \"enforce\" or \"observe\""},
        {"[daemon]\nverify_interval = 30\n",
         "p.toml:2:19: daemon.verify_interval must be a duration such as \"30s\", \"500ms\" or \"5m\""},
        {"[daemon]\nverify_interval = \"10ms\"\n", "p.toml:2:19: daemon.verify_interval must be between 100ms and 24h"},
        {"[daemon]\nverbose = true\n",
         "p.toml:2:1: unknown key \"verbose\" in [daemon] (expected \"mode\", \"verify_interval\", \"measure\", "
         "\"measure_window\", \"measure_sample\" or \"on_removal\")"},
        {"[daemon]\non_removal = \"undo\"\n",
         "p.toml:2:14: daemon.on_removal must be \"restore\" (a value the policy stops declaring goes back to what "
         "the device had) or \"keep\" (it stays until the next boot)"},
        {"[daemon]\nmeasure_sample = 101\n", "p.toml:2:18: daemon.measure_sample must be a percentage from 0 to 100"},
        {"[daemon]\nmeasure_sample = \"10%\"\n",
         "p.toml:2:18: daemon.measure_sample must be a percentage from 0 to 100"},
        {"[daemon]\nmeasure = \"yes\"\n", "p.toml:2:11: daemon.measure must be true or false"},
        {"[daemon]\nmeasure_window = 60\n",
         "p.toml:2:18: daemon.measure_window must be a duration such as \"60s\" or \"5m\""},
        {"[daemon]\nmeasure_window = \"500ms\"\n", "p.toml:2:18: daemon.measure_window must be between 1s and 24h"},
        {"rule = 5\n", "p.toml:1:1: \"rule\" must be an array of tables: write each rule as [[rule]]"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        CHECK(only_error(c.text) == c.error);
    }
}

TEST_CASE("duplicate rule names are errors - across files too") {
    auto r = load_policy({{"a.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nnomerges = 1\n"},
                          {"b.toml", "\n[[rule]]\nname = \"x\"\n[rule.set]\nnomerges = 2\n"}});
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].str() == "b.toml:2:1: duplicate rule name \"x\" (first defined at a.toml:1:1)");
}

TEST_CASE("every error in a file is reported - not just the first") {
    auto errs = errors_of("[[rule]]\nname = \"x\"\n[rule.set]\nrq_affinity = 3\nnomerges = 7\nfoo = 1\n");
    REQUIRE(errs.size() == 3);
    CHECK(errs[0].rfind("p.toml:4:15: rq_affinity", 0) == 0);
    CHECK(errs[1].rfind("p.toml:5:12: nomerges = 7", 0) == 0);
    CHECK(errs[2].rfind("p.toml:6:1: unknown attribute \"foo\"", 0) == 0);
}

TEST_CASE("a rule with an error is not half-loaded") {
    auto r = load_policy({{"p.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nnomerges = 1\nrq_affinity = 9\n"}});
    CHECK_FALSE(r.ok());
    CHECK(r.policy.rules.empty());
}

TEST_CASE("write through with both acknowledgements") {
    auto r = load_policy({{"p.toml",
                           "[[rule]]\nname = \"x\"\nacknowledge = [\"write-through-drops-flushes\", "
                           "\"volatile-cache-data-loss\"]\n[rule.set]\nwrite_cache = \"write through\"\n"}});
    REQUIRE(r.ok());
    CHECK(r.policy.rules[0].acknowledge.size() == 2);
}

TEST_CASE("later files override daemon keys") {
    auto r = load_policy({{"a.toml", "[daemon]\nmode = \"observe\"\nverify_interval = \"1m\"\n"},
                          {"b.toml", "[daemon]\nmode = \"enforce\"\n"}});
    REQUIRE(r.ok());
    CHECK(r.policy.daemon.mode == Mode::enforce);
    CHECK(r.policy.daemon.verify_interval == std::chrono::minutes(1));
    CHECK_FALSE(r.policy.daemon.measure);  // off unless asked for
    CHECK(r.policy.daemon.measure_window == std::chrono::seconds(60));
    CHECK(r.policy.daemon.measure_sample == 10);
    auto m = load_policy({{"m.toml", "[daemon]\nmeasure = true\nmeasure_window = \"5m\"\nmeasure_sample = 100\n"}});
    REQUIRE(m.ok());
    CHECK(m.policy.daemon.measure);
    CHECK(m.policy.daemon.measure_window == std::chrono::minutes(5));
    CHECK(m.policy.daemon.measure_sample == 100);
}

TEST_CASE("durations") {
    CHECK(parse_duration("30s") == std::chrono::seconds(30));
    CHECK(parse_duration("500ms") == std::chrono::milliseconds(500));
    CHECK(parse_duration("1m30s") == std::chrono::seconds(90));
    CHECK(parse_duration("2h") == std::chrono::hours(2));
    CHECK_FALSE(parse_duration("30").has_value());
    CHECK_FALSE(parse_duration("s").has_value());
    CHECK_FALSE(parse_duration("5 s").has_value());
    CHECK_FALSE(parse_duration("").has_value());
    CHECK_FALSE(parse_duration("9999999999s").has_value());
}

TEST_CASE("bounds: size, rule count and pattern complexity are clear errors") {
    auto big = load_policy({{"big.toml", std::string(kMaxPolicyBytes + 1, '#')}});
    REQUIRE(big.errors.size() == 1);
    CHECK(big.errors[0].str() == "big.toml: the file is 1048577 bytes; a policy file may have at most 1 MiB");

    std::string many;
    for (std::size_t i = 0; i <= kMaxRules; ++i)
        many += "[[rule]]\nname = \"r" + std::to_string(i) + "\"\n[rule.set]\nnomerges = 1\n";
    auto lots = load_policy({{"many.toml", many}});
    REQUIRE(lots.errors.size() == 1);
    CHECK(lots.errors[0].str() == "many.toml:16385:1: more than 4096 rules in the policy");

    CHECK(only_error(
              "[[rule]]\nname = \"x\"\n[rule.match]\nmodel = \"a*a*a*a*a*a*a*a*a*b\"\n[rule.set]\nnomerges = 1\n") ==
          "p.toml:4:9: match.model: a pattern with 9 '*'; the limit is 8 (patterns like a*a*a*b take very long to "
          "match)");
    CHECK(only_error("[[rule]]\nname = \"x\"\n[rule.match]\nkernel = \"" + std::string(300, 'a') +
                     "\"\n[rule.set]\nnomerges = 1\n") ==
          "p.toml:4:10: match.kernel: a pattern of 300 characters; the limit is 256");
}

TEST_CASE("pathological input gets a clear error with a position") {
    const std::string deep = "[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = " + std::string(5000, '[') + "\n";
    auto d = load_policy({{"deep.toml", deep}});
    REQUIRE_FALSE(d.ok());
    CHECK(d.errors[0].pos.line == 4);

    auto huge =
        load_policy({{"huge.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = 99999999999999999999999\n"}});
    REQUIRE(huge.errors.size() == 1);
    CHECK(huge.errors[0].pos.line == 4);

    auto nul = load_policy({{"nul.toml", std::string("[[rule]]\nname = \"x\0\"\n", 20)}});
    REQUIRE_FALSE(nul.ok());
    CHECK(nul.errors[0].pos.line == 2);
}

TEST_CASE("warnings: iosched.async_depth is valid but moved to async_depth on 7.0 and later") {
    const auto r = blkpolicy::policy::load_policy(
        {{"p.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nscheduler = \"mq-deadline\"\niosched.async_depth = 16\n"}});
    REQUIRE(r.ok());
    const auto w = blkpolicy::policy::policy_warnings(r.policy);
    REQUIRE(w.size() == 1);
    CHECK(w[0].str() ==
          "p.toml:5:23: iosched.async_depth: since kernel 7.0 mq-deadline has no such tunable and queue/async_depth "
          "replaces it (set async_depth); there plan and apply skip it as moved");
    const auto clean =
        blkpolicy::policy::load_policy({{"p.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nasync_depth = 16\n"}});
    CHECK(blkpolicy::policy::policy_warnings(clean.policy).empty());
}

TEST_CASE("check_value: one check on the attribute's row, the same words from a policy file and from an import") {
    using G = GivenValue;
    struct Row {
        const char* key;
        G given;
        std::vector<std::string> values;  // written, when accepted
        const char* error;                // otherwise
    };
    const std::vector<Row> rows = {
        {"read_ahead_kb", G::of_integer(256), {"256"}, ""},
        {"read_ahead_kb",
         G::of_integer(2'000'000),
         {},
         "read_ahead_kb = 2000000 is out of range: must be 0..1048576 (KiB, at most 1 GiB)"},
        {"read_ahead_kb",
         G::of_integer(-1),
         {},
         "read_ahead_kb = -1 is negative: must be 0..1048576 (KiB, at most 1 GiB)"},
        {"read_ahead_kb", G::of_string("256"), {}, "read_ahead_kb must be an integer, not a string"},
        {"rotational", G::of_boolean(true), {"1"}, ""},
        {"rotational", G::of_integer(0), {"0"}, ""},
        {"rotational", G::of_integer(2), {}, "rotational must be 0, 1, true or false"},
        {"write_cache", G::of_string("write back"), {"write back"}, ""},
        {"write_cache",
         G::of_string("write backwards"),
         {},
         "write_cache = \"write backwards\" is not exactly one of \"write back\", \"write through\" (the kernel "
         "matches only the start of the text, so a typo would silently apply another mode)"},
        {"scheduler", G::of_strings({"kyber", "mq-deadline"}), {"kyber", "mq-deadline"}, ""},
        {"scheduler",
         G::of_string("cfq"),
         {},
         "scheduler \"cfq\" went with the legacy block layer in Linux 5.0: a blk-mq kernel refuses it (\"none\" and "
         "bfq are today's nearest)"},
        // An out-of-tree scheduler's name is the user's: taken as written.
        {"scheduler", G::of_strings({"adios", "mq-deadline"}), {"adios", "mq-deadline"}, ""},
        {"scheduler", G::of_string("bore"), {"bore"}, ""},
        {"scheduler",
         G::of_string("kyberr"),
         {},
         "unknown scheduler \"kyberr\": did you mean \"kyber\"? (a name that "
         "is not a typo of \"none\", \"mq-deadline\", \"kyber\", \"bfq\" is taken as an out-of-tree scheduler's)"},
        {"scheduler",
         G::of_string("an-elevator-name-too-long"),
         {},
         "scheduler \"an-elevator-name-too-long\" is not "
         "a scheduler's name (1 to 15 of a-z, 0-9, '-' and '_', as the kernel registers them)"},
        {"scheduler", G::of_strings({"bfq", "bfq"}), {}, "scheduler \"bfq\" is listed twice"},
        {"scheduler", G::of_integer(1), {}, "scheduler must be a string or an array of strings, not an integer"},
        {"wbt_lat_usec", G::of_string("default"), {"default"}, ""},
        {"wbt_lat_usec", G::of_integer(0), {"0"}, ""},
        {"wbt_lat_usec",
         G::of_string("off"),
         {},
         "wbt_lat_usec must be an integer (microseconds, 0 turns wbt off) or \"default\""},
        {"iosched.fifo_batch", G::of_integer(8), {"8"}, ""},
    };
    for (const auto& r : rows) {
        CAPTURE(r.key);
        const auto spec = find_attribute(r.key);
        REQUIRE(spec);
        const auto got = check_value(*spec, r.given);
        CHECK(got.values == r.values);
        CHECK(got.error == r.error);
    }
    // A float is named by the loader, which alone sees one.
    CHECK(only_error("[[rule]]\nname = \"x\"\n[rule.set]\nnr_requests = 1.5\n") ==
          "p.toml:4:15: nr_requests must be an integer, not a float");

    // The same refusal from a policy file and from an imported value.
    std::string toml_value;
    CHECK(convert_policy_value("read_ahead_kb", "2000000", toml_value) ==
          "read_ahead_kb = 2000000 is out of range: must be 0..1048576 (KiB, at most 1 GiB)");
    CHECK(only_error("[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = 2000000\n") ==
          "p.toml:4:17: read_ahead_kb = 2000000 is out of range: must be 0..1048576 (KiB, at most 1 GiB)");
    CHECK(convert_policy_value("wbt_lat_usec", "-1", toml_value).empty());
    CHECK(toml_value == "\"default\"");
    CHECK(convert_policy_value("write_cache", " write through ", toml_value).empty());
    CHECK(toml_value == "\"write through\"");
    CHECK(convert_policy_value("nomerges", "x", toml_value) == "nomerges must be a whole number");
}

TEST_CASE("a name blkpolicy writes into TOML loads back as it was: every ASCII byte, DEL and UTF-8 included") {
    // toml_quote (policy/toml_text) writes import's and audit's rule names;
    // TOML refuses a raw control character, DEL (0x7f) among them.
    std::vector<std::string> names;
    for (int c = 1; c < 0x80; ++c) names.push_back(std::string("a") + static_cast<char>(c) + "b");
    for (const char* s : {"tab\there", "q\"uo\\te", "caf\xc3\xa9", "\xf0\x9f\x92\xbe disk", "del\x7f end"})
        names.push_back(s);
    for (const auto& name : names) {
        CAPTURE(name);
        const auto r =
            load_policy({{"p.toml", "[[rule]]\nname = " + toml_quote(name) + "\n[rule.set]\nnomerges = 1\n"}});
        REQUIRE_MESSAGE(r.ok(), (r.errors.empty() ? std::string() : r.errors.front().str()));
        REQUIRE(r.policy.rules.size() == 1);
        CHECK(r.policy.rules.front().name == name);
    }
}

TEST_CASE("a control character inside a string is named, not taken for the string's end") {
    // toml++ says the same words for both; the byte at its position tells them apart.
    CHECK(only_error("[[rule]]\nname = \"del\x7f end\"\n[rule.set]\nnomerges = 1\n") ==
          "p.toml:2:12: a control character (U+007F) in a string: TOML wants it escaped, as \\u007F");
    CHECK(only_error("[[rule]]\nname = \"a\x01\"\n[rule.set]\nnomerges = 1\n") ==
          "p.toml:2:10: a control character (U+0001) in a string: TOML wants it escaped, as \\u0001");
    CHECK(only_error("[[rule]]\nname = \"caf\xc3\xa9 \x7f\"\n[rule.set]\nnomerges = 1\n") ==
          "p.toml:2:14: a control character (U+007F) in a string: TOML wants it escaped, as \\u007F");
    // The line's end is still an unterminated string.
    CHECK(only_error("[[rule]]\nname = \"open\n[rule.set]\nnomerges = 1\n") ==
          "p.toml:2:13: unterminated string: the closing \" is missing on this line");
}
