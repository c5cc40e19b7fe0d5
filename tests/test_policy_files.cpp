// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/policy_files.hpp"
#include "agent/policy_watch.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy;
namespace fs = std::filesystem;

namespace {
struct Tree {
    test::TempDir tmp{"blkpolicy-policy"};
    const fs::path& root = tmp.path();
    void put(const std::string& rel, const std::string& text) {
        fs::create_directories((root / rel).parent_path());
        std::ofstream(root / rel) << text;
    }
    agent::PolicyLocations locations() const {
        agent::PolicyLocations l;
        l.main_file = (root / "etc/blkpolicy/policy.toml").string();
        l.dropin_dirs = {(root / "usr/lib/blkpolicy/policy.d").string(), (root / "run/blkpolicy/policy.d").string(),
                         (root / "etc/blkpolicy/policy.d").string()};
        return l;
    }
    std::vector<std::string> rel(const std::vector<std::string>& files) const {
        std::vector<std::string> out;
        for (const auto& f : files) out.push_back(fs::path(f).lexically_relative(root).string());
        return out;
    }
};
std::string rule(const std::string& name) { return "[[rule]]\nname = \"" + name + "\"\n[rule.set]\nnomerges = 1\n"; }
}  // namespace

TEST_CASE("default locations: main file - then drop-ins by file name - /etc masks /run masks /usr/lib") {
    Tree t;
    t.put("etc/blkpolicy/policy.toml", rule("main"));
    t.put("usr/lib/blkpolicy/policy.d/10-vendor.toml", rule("vendor"));
    t.put("usr/lib/blkpolicy/policy.d/50-site.toml", rule("shipped site"));
    t.put("etc/blkpolicy/policy.d/50-site.toml", rule("local site"));
    t.put("run/blkpolicy/policy.d/20-runtime.toml", rule("runtime"));
    t.put("etc/blkpolicy/policy.d/README", "not a policy");
    fs::create_directories(t.root / "etc/blkpolicy/policy.d");
    fs::create_symlink("/dev/null", t.root / "etc/blkpolicy/policy.d/10-vendor.toml");

    auto list = agent::find_policy_files({}, t.locations());
    CHECK(list.errors.empty());
    CHECK(t.rel(list.files) == std::vector<std::string>{"etc/blkpolicy/policy.toml",
                                                        "run/blkpolicy/policy.d/20-runtime.toml",
                                                        "etc/blkpolicy/policy.d/50-site.toml"});
    auto loaded = agent::load_policy_from({}, t.locations());
    REQUIRE(loaded.ok());
    REQUIRE(loaded.policy.rules.size() == 3);
    CHECK(loaded.policy.rules[2].name == "local site");
}

TEST_CASE("a policy file that is a link to nothing cannot be read: an error naming it, never left out") {
    Tree t;
    t.put("etc/blkpolicy/policy.d/50-site.toml", rule("site"));
    fs::create_symlink(t.root / "gone.toml", t.root / "etc/blkpolicy/policy.toml");
    auto loaded = agent::load_policy_from({}, t.locations());
    CHECK_FALSE(loaded.ok());
    CHECK_FALSE(loaded.missing);
    REQUIRE_FALSE(loaded.errors.empty());
    CHECK(loaded.errors[0].str().rfind((t.root / "etc/blkpolicy/policy.toml").string() + ":", 0) == 0);
    // The same for a drop-in.
    fs::remove(t.root / "etc/blkpolicy/policy.toml");
    t.put("etc/blkpolicy/policy.toml", rule("main"));
    fs::create_symlink(t.root / "gone.toml", t.root / "etc/blkpolicy/policy.d/60-gone.toml");
    auto dropin = agent::load_policy_from({}, t.locations());
    CHECK_FALSE(dropin.ok());
    REQUIRE_FALSE(dropin.errors.empty());
    CHECK(dropin.errors[0].str().rfind((t.root / "etc/blkpolicy/policy.d/60-gone.toml").string() + ":", 0) == 0);
}

TEST_CASE("--policy: files and directories in the order given") {
    Tree t;
    t.put("a.toml", rule("a"));
    t.put("d/20-c.toml", rule("c"));
    t.put("d/10-b.toml", rule("b"));
    auto list = agent::find_policy_files({(t.root / "a.toml").string(), (t.root / "d").string()}, t.locations());
    CHECK(t.rel(list.files) == std::vector<std::string>{"a.toml", "d/10-b.toml", "d/20-c.toml"});
}

TEST_CASE("missing policy: a clear error - never an empty policy") {
    Tree t;
    auto none = agent::load_policy_from({}, t.locations());
    REQUIRE(none.errors.size() == 1);
    CHECK(none.missing);
    CHECK(none.errors[0].str().find("no policy file: looked for ") != std::string::npos);
    CHECK(none.errors[0].str().find("or pass --policy PATH") != std::string::npos);

    auto missing = agent::load_policy_from({(t.root / "nope.toml").string()}, t.locations());
    REQUIRE(missing.errors.size() == 1);
    CHECK(missing.missing);  // a path given that is not there is missing, not invalid, like the default path
    CHECK(missing.errors[0].str() == (t.root / "nope.toml").string() + ": no such policy file or directory");

    fs::create_directories(t.root / "empty");
    auto empty = agent::load_policy_from({(t.root / "empty").string()}, t.locations());
    REQUIRE(empty.errors.size() == 1);
    CHECK(empty.errors[0].str() == (t.root / "empty").string() + ": directory holds no *.toml policy files");
}

TEST_CASE("a drop-in directory that cannot be read is an error, never a policy without its files") {
    Tree t;
    t.put("etc/blkpolicy/policy.toml", rule("main"));
    t.put("usr/lib/blkpolicy/policy.d/10-vendor.toml", rule("vendor"));
    // Not a directory where the drop-ins go (a tool wrote a file there):
    // the files meant to be in it are the policy too.
    t.put("etc/blkpolicy/policy.d", "not a directory\n");
    auto r = agent::load_policy_from({}, t.locations());
    REQUIRE(r.errors.size() == 1);
    CHECK_FALSE(r.missing);  // invalid, not missing: the daemon keeps its old policy
    CHECK(r.errors[0].str() ==
          (t.root / "etc/blkpolicy/policy.d").string() + ": cannot read the policy directory: Not a directory");

    // Alone, with nothing else there: still that error, not "no policy file".
    Tree alone;
    alone.put("run/blkpolicy/policy.d", "");
    auto only = agent::load_policy_from({}, alone.locations());
    REQUIRE(only.errors.size() == 1);
    CHECK_FALSE(only.missing);
    CHECK(only.errors[0].str().find(": cannot read the policy directory: Not a directory") != std::string::npos);

    // Where permissions bind (not root): a directory that cannot be listed.
    if (::geteuid() != 0) {
        Tree locked;
        locked.put("etc/blkpolicy/policy.d/50-a.toml", rule("a"));
        fs::permissions(locked.root / "etc/blkpolicy/policy.d", fs::perms::none);
        auto l = agent::load_policy_from({}, locked.locations());
        fs::permissions(locked.root / "etc/blkpolicy/policy.d", fs::perms::owner_all);
        REQUIRE(l.errors.size() == 1);
        CHECK(l.errors[0].str().find(": cannot read the policy directory: Permission denied") != std::string::npos);
    }
}

TEST_CASE("trust: a policy others can write is refused, naming the file and why") {
    Tree t;
    const unsigned me = ::geteuid();
    t.put("ok/policy.toml", rule("fine"));
    CHECK(agent::untrusted_reason((t.root / "ok/policy.toml").string(), me).empty());

    t.put("open/policy.toml", rule("open"));
    fs::permissions(t.root / "open/policy.toml", fs::perms::others_write, fs::perm_options::add);
    CHECK(agent::untrusted_reason((t.root / "open/policy.toml").string(), me) ==
          "it is writable by group or others (mode 0646): anyone who can write it decides what blkpolicy writes as "
          "root; chmod go-w " +
              (t.root / "open/policy.toml").string());

    t.put("opendir/policy.toml", rule("in an open dir"));
    fs::permissions(t.root / "opendir", fs::perms::all);
    CHECK(agent::untrusted_reason((t.root / "opendir/policy.toml").string(), me)
              .rfind("the directory " + (t.root / "opendir").string() +
                         " above it is writable by group or others (mode 0777)",
                     0) == 0);

    t.put("sticky/policy.toml", rule("in a sticky dir"));
    fs::permissions(t.root / "sticky", fs::perms::all | fs::perms::sticky_bit);
    CHECK(agent::untrusted_reason((t.root / "sticky/policy.toml").string(), me).empty());  // like /tmp

    fs::create_symlink(t.root / "open/policy.toml", t.root / "ok/link.toml");
    const auto via_link = agent::untrusted_reason((t.root / "ok/link.toml").string(), me);
    CHECK(via_link.find("leads to " + (t.root / "open/policy.toml").string()) != std::string::npos);

    if (me == 0) {
        // Owned by another user: that user could chmod it at will.
        t.put("theirs/policy.toml", rule("theirs"));
        REQUIRE(::chown((t.root / "theirs/policy.toml").c_str(), 12345, 12345) == 0);
        CHECK(agent::untrusted_reason((t.root / "theirs/policy.toml").string(), 0) ==
              "it is owned by uid 12345, not root: that user could change what blkpolicy writes as root");
        // and loading refuses it with the reason, as root
        auto loaded =
            agent::load_policy_from({(t.root / "open/policy.toml").string(), (t.root / "ok/policy.toml").string()});
        REQUIRE(loaded.errors.size() == 1);
        CHECK(loaded.errors[0].str().rfind((t.root / "open/policy.toml").string() +
                                               ": refusing to read the policy: it is writable by group or others",
                                           0) == 0);
    }
}

TEST_CASE("a policy file over the size limit is an error naming the file") {
    Tree t;
    t.put("big.toml", std::string(3 << 20, '#'));
    // Loading goes through it: the error names the file.
    auto loaded = agent::load_policy_from({(t.root / "big.toml").string()});
    REQUIRE(loaded.errors.size() == 1);
    CHECK(loaded.errors[0].str() ==
          (t.root / "big.toml").string() + ": the file is 3145728 bytes; a policy file may have at most 1 MiB");
}

TEST_CASE("watches: each place the policy is read from, and the names there that concern it") {
    Tree t;
    t.put("etc/blkpolicy/policy.toml", rule("main"));
    t.put("etc/blkpolicy/policy.d/50-site.toml", rule("site"));
    fs::create_directories(t.root / "run/blkpolicy");  // its policy.d not made yet
    // /usr/lib/blkpolicy not there at all: nothing to watch.
    using W = agent::PolicyWatch;
    const auto r = t.root.string();
    CHECK(agent::policy_watches({}, t.locations()) == std::vector<W>{{r + "/etc/blkpolicy", "policy.toml"},
                                                                     {r + "/run/blkpolicy", "policy.d"},
                                                                     {r + "/etc/blkpolicy/policy.d", ""}});
    // --policy: a file's directory for its name, a directory for its drop-ins.
    CHECK(agent::policy_watches({r + "/etc/blkpolicy/policy.toml", r + "/etc/blkpolicy/policy.d"}) ==
          std::vector<W>{{r + "/etc/blkpolicy", "policy.toml"}, {r + "/etc/blkpolicy/policy.d", ""}});
    CHECK(agent::policy_watches({r + "/nowhere/policy.toml"}).empty());

    const W dropins{r + "/etc/blkpolicy/policy.d", ""};
    const W main_file{r + "/etc/blkpolicy", "policy.toml"};
    // Written and closed, moved in or out, deleted: read again.
    for (std::uint32_t m : {IN_CLOSE_WRITE, IN_MOVED_TO, IN_MOVED_FROM, IN_DELETE}) {
        CAPTURE(m);
        CHECK(agent::concerns_policy(dropins, "60-new.toml", m));
        CHECK(agent::concerns_policy(main_file, "policy.toml", m));
        CHECK_FALSE(agent::concerns_policy(main_file, "other.toml", m));
        CHECK_FALSE(agent::concerns_policy(dropins, "README", m));
        // A tool's temporary file (hidden), an editor's backup: not read.
        CHECK_FALSE(agent::concerns_policy(dropins, ".60-new.toml.tmp", m));
        CHECK_FALSE(agent::concerns_policy(dropins, ".60-new.toml", m));
        CHECK_FALSE(agent::concerns_policy(dropins, "60-new.toml~", m));
    }
    // A file created is read at its close, not before; a link or a
    // directory created is whole.
    CHECK_FALSE(agent::concerns_policy(dropins, "60-new.toml", IN_CREATE));
    CHECK(agent::concerns_policy(dropins, "60-new.toml", IN_CREATE, true));
    CHECK(agent::concerns_policy({r + "/run/blkpolicy", "policy.d"}, "policy.d", IN_CREATE | IN_ISDIR));
    // A write still going on is never asked for.
    CHECK((agent::policy_watch_mask() & IN_MODIFY) == 0u);
}
