// SPDX-License-Identifier: MIT
// util/files: bounded reads, atomic writes, directory lists, errno text;
// util/fd; util/quoted.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "support/temp_dir.hpp"
#include "util/fd.hpp"
#include "util/files.hpp"
#include "util/quoted.hpp"

using namespace blkpolicy;
using blkpolicy::test::TempDir;

namespace {
void put(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }
}  // namespace

TEST_CASE("files are read bounded: too big, not regular, or fine") {
    TempDir dir;
    put(dir.path() / "ok.toml", "[[rule]]\n");
    auto ok = util::read_bounded_file((dir.path() / "ok.toml").string(), 1024, "a policy file");
    REQUIRE(ok.ok());
    CHECK(*ok == "[[rule]]\n");

    // Over the limit: refused from its size, before reading it.
    put(dir.path() / "big.toml", std::string(3 << 20, '#'));
    auto big = util::read_bounded_file((dir.path() / "big.toml").string(), 1 << 20, "a policy file");
    CHECK_FALSE(big.ok());
    CHECK(big.message() == "the file is 3145728 bytes; a policy file may have at most 1 MiB");

    // A FIFO (or /dev/zero) would never end: refused, not read.
    const auto fifo = (dir.path() / "fifo.toml").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(util::read_bounded_file(fifo, 1 << 20, "a udev rules file").message() ==
          "not a regular file: a udev rules file must be one");
    CHECK(util::read_bounded_file("/dev/zero", 1 << 20, "a policy file").message() ==
          "not a regular file: a policy file must be one");
    CHECK(util::read_bounded_file((dir.path() / "nosuch.toml").string(), 1 << 20, "a policy file").message() ==
          "cannot read: No such file or directory");
}

TEST_CASE("write_atomically keeps the old file and leaves no temporary file when the rename fails") {
    TempDir dir;
    const std::string tmp_suffix = "." + std::to_string(::getpid()) + ".tmp";
    // A non-empty directory where the file should go: rename(2) refuses it.
    const auto target = dir.path() / "daemon.json";
    std::filesystem::create_directories(target / "inside");
    const auto st = util::write_atomically(target.string(), "{}\n");
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("cannot rename " + target.string() + tmp_suffix + ": ") == 0);
    CHECK_FALSE(std::filesystem::exists(target.string() + tmp_suffix));
    CHECK(std::filesystem::is_directory(target / "inside"));

    // And the ordinary case replaces the file whole, temporary file gone.
    const auto plain = dir.path() / "plain.json";
    CHECK(util::write_atomically(plain.string(), "one\n").ok());
    CHECK(util::write_atomically(plain.string(), "two\n").ok());
    std::ifstream in(plain);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text == "two\n");
    CHECK_FALSE(std::filesystem::exists(plain.string() + tmp_suffix));

    // A missing directory: the failure names the temporary file.
    const auto nodir = util::write_atomically((dir.path() / "gone" / "x.json").string(), "{}\n");
    CHECK(nodir.message() ==
          "cannot write " + (dir.path() / "gone" / "x.json").string() + tmp_suffix + ": No such file or directory");
}

TEST_CASE("write_atomically: two processes writing one file at once both succeed, and it is always whole") {
    // The initramfs's udev rule and its pass can record one device's facts
    // at the same moment. With one temporary name for both, one process's
    // rename took the other's file away (rename: No such file or directory).
    TempDir dir;
    const auto target = (dir.path() / "facts.json").string();
    const std::string mine(4000, 'a'), theirs(4000, 'b');
    int pipefd[2];
    REQUIRE(::pipe(pipefd) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::close(pipefd[0]);
        char failed = 0;
        for (int i = 0; i < 3000; ++i)
            if (!util::write_atomically(target, theirs).ok()) failed = 1;
        (void)!::write(pipefd[1], &failed, 1);
        ::_exit(0);
    }
    ::close(pipefd[1]);
    int mine_failed = 0, torn = 0;
    for (int i = 0; i < 3000; ++i) {
        mine_failed += util::write_atomically(target, mine).ok() ? 0 : 1;
        std::ifstream in(target);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        torn += text == mine || text == theirs ? 0 : 1;
    }
    char child_failed = 1;
    CHECK(::read(pipefd[0], &child_failed, 1) == 1);
    ::close(pipefd[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(mine_failed == 0);
    CHECK(child_failed == 0);
    CHECK(torn == 0);
    std::vector<std::string> names;
    REQUIRE(util::list_directory(dir.path().string(), names) == 0);
    CHECK(names == std::vector<std::string>{"facts.json"});  // no temporary file left
}

TEST_CASE("list_directory gives the names without . and .., or opendir's errno") {
    TempDir dir;
    put(dir.path() / "a", "");
    std::filesystem::create_directory(dir.path() / "b");
    std::vector<std::string> names;
    REQUIRE(util::list_directory(dir.path().string(), names) == 0);
    CHECK(std::set<std::string>(names.begin(), names.end()) == std::set<std::string>{"a", "b"});
    names.clear();
    CHECK(util::list_directory((dir.path() / "missing").string(), names) == ENOENT);
    CHECK(util::list_directory((dir.path() / "a").string(), names) == ENOTDIR);
    CHECK(names.empty());
}

TEST_CASE("util::Fd closes once, and close() says how it went") {
    TempDir dir;
    put(dir.path() / "f", "x");
    util::Fd fd{::open((dir.path() / "f").c_str(), O_RDONLY | O_CLOEXEC)};
    REQUIRE(fd);
    const int raw = fd.get();
    CHECK(fd.close() == 0);
    CHECK_FALSE(fd);
    CHECK(fd.close() == 0);  // nothing left to close
    // The descriptor is really closed: fcntl on it fails (nothing reopened it meanwhile).
    CHECK(::fcntl(raw, F_GETFD) == -1);
    CHECK(errno == EBADF);
    util::Fd moved{::open((dir.path() / "f").c_str(), O_RDONLY | O_CLOEXEC)};
    util::Fd owner = std::move(moved);
    CHECK_FALSE(moved);
    CHECK(owner);
}

TEST_CASE("errno text names the constant") {
    CHECK(util::errno_text(EINVAL) == "Invalid argument (EINVAL)");
    CHECK(util::errno_text(ENOENT) == "No such file or directory (ENOENT)");
}

namespace {
std::string json_quoted(std::string_view s) {
    std::string out;
    util::append_json_string(out, s);
    return out;
}
}  // namespace

TEST_CASE("JSON strings written by hand are nlohmann's bytes for valid UTF-8") {
    // Every ASCII byte, alone and between others.
    for (int c = 0; c < 0x80; ++c) {
        const std::string s = std::string("a") + static_cast<char>(c) + "b";
        CAPTURE(c);
        CHECK(json_quoted(s) == nlohmann::json(s).dump());
    }
    for (const std::string s : {"", "vda", "QEMU HARDDISK", "ser\"ial\\x", "tab\there\nand\x01\x1f\x7f", "caf\xc3\xa9",
                                "\xe2\x82\xac 100", "\xf0\x9f\x92\xbe disk", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf"})
        CHECK(json_quoted(s) == nlohmann::json(s).dump());
    // Random valid UTF-8: code points of every length.
    std::mt19937 rng(22);
    std::uniform_int_distribution<std::uint32_t> cp(1, 0x10FFFF);
    for (int round = 0; round < 2000; ++round) {
        std::string s;
        for (int i = 0; i < 8; ++i) {
            std::uint32_t c = cp(rng) >> (rng() % 4 * 5);  // short and long code points alike
            if (c == 0 || (c >= 0xD800 && c <= 0xDFFF)) c = 'x';
            if (c < 0x80) {
                s += static_cast<char>(c);
            } else if (c < 0x800) {
                s += static_cast<char>(0xC0 | (c >> 6));
                s += static_cast<char>(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                s += static_cast<char>(0xE0 | (c >> 12));
                s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
                s += static_cast<char>(0x80 | (c & 0x3F));
            } else {
                s += static_cast<char>(0xF0 | (c >> 18));
                s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
                s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
                s += static_cast<char>(0x80 | (c & 0x3F));
            }
        }
        CAPTURE(s);
        REQUIRE(json_quoted(s) == nlohmann::json(s).dump());
    }
}

TEST_CASE("JSON strings: bytes that are not UTF-8 still give valid JSON, one escape a byte") {
    // nlohmann::json refuses these; a serial or model read from a device may
    // hold them. Overlong, surrogate, past U+10FFFF, truncated, stray.
    for (const std::string s : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x80x", "\xff"}) {
        CAPTURE(s);
        CHECK_THROWS(nlohmann::json(s).dump());
        const auto text = json_quoted(s);
        const auto parsed = nlohmann::json::parse(text, nullptr, false);
        REQUIRE_FALSE(parsed.is_discarded());
        // each byte came out as \u00XX: as many escapes as there were bytes
        std::size_t escapes = 0;
        for (std::size_t at = 0; (at = text.find("\\u00", at)) != std::string::npos; ++at) ++escapes;
        CHECK(escapes == s.size() - (s == "\x80x" ? 1 : 0));
    }
    CHECK(json_quoted("ok\xffok") == "\"ok\\u00ffok\"");
}
