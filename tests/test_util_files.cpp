// SPDX-License-Identifier: MIT
// util/files: bounded reads, atomic writes, errno text.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "support/temp_dir.hpp"
#include "util/files.hpp"

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
    // A non-empty directory where the file should go: rename(2) refuses it.
    const auto target = dir.path() / "daemon.json";
    std::filesystem::create_directories(target / "inside");
    const auto st = util::write_atomically(target.string(), "{}\n");
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("cannot rename " + target.string() + ".tmp: ") == 0);
    CHECK_FALSE(std::filesystem::exists(target.string() + ".tmp"));
    CHECK(std::filesystem::is_directory(target / "inside"));

    // And the ordinary case replaces the file whole, temporary file gone.
    const auto plain = dir.path() / "plain.json";
    CHECK(util::write_atomically(plain.string(), "one\n").ok());
    CHECK(util::write_atomically(plain.string(), "two\n").ok());
    std::ifstream in(plain);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text == "two\n");
    CHECK_FALSE(std::filesystem::exists(plain.string() + ".tmp"));

    // A missing directory: the failure names the temporary file.
    const auto nodir = util::write_atomically((dir.path() / "gone" / "x.json").string(), "{}\n");
    CHECK(nodir.message() ==
          "cannot write " + (dir.path() / "gone" / "x.json.tmp").string() + ": No such file or directory");
}

TEST_CASE("errno text names the constant") {
    CHECK(util::errno_text(EINVAL) == "Invalid argument (EINVAL)");
    CHECK(util::errno_text(ENOENT) == "No such file or directory (ENOENT)");
}
