// SPDX-License-Identifier: MIT
#include "support/run_binary.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace blkpolicy::test {

namespace {
std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}
}  // namespace

RunResult run_blkpolicy(const std::vector<std::string>& args, const std::string& cwd) {
    char out_tmpl[] = "/tmp/blkpolicy-out.XXXXXX";
    char err_tmpl[] = "/tmp/blkpolicy-err.XXXXXX";
    int out_fd = ::mkstemp(out_tmpl);
    int err_fd = ::mkstemp(err_tmpl);
    if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
    std::vector<char*> argv;
    std::string bin = BLKPOLICY_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out_fd, 1);
        ::dup2(err_fd, 2);
        int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, 0);
        if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
        ::execv(bin.c_str(), argv.data());
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(out_fd);
    ::close(err_fd);
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out_tmpl);
    r.err = slurp(err_tmpl);
    ::unlink(out_tmpl);
    ::unlink(err_tmpl);
    return r;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
        s.replace(pos, from.size(), to);
    return s;
}

bool matches_golden(const std::string& name, const std::string& actual, std::string& diff_hint) {
    const auto path = std::filesystem::path(BLKPOLICY_SOURCE_DIR) / "tests/golden" / name;
    const char* update = std::getenv("BLKPOLICY_UPDATE_GOLDEN");
    if (update && std::string(update) == "1") {
        std::filesystem::create_directories(path.parent_path());
        std::ofstream(path, std::ios::trunc | std::ios::binary) << actual;
        return true;
    }
    const auto expected = slurp(path.string());
    if (expected == actual) return true;
    std::istringstream e(expected), a(actual);
    std::string el, al;
    int line = 1;
    while (true) {
        bool he = static_cast<bool>(std::getline(e, el));
        bool ha = static_cast<bool>(std::getline(a, al));
        if (!he && !ha) break;
        if (!he || !ha || el != al) {
            diff_hint = path.string() + ":" + std::to_string(line) + "\n  expected: " + (he ? el : "<end>") +
                        "\n  actual:   " + (ha ? al : "<end>") +
                        "\n(run the tests with BLKPOLICY_UPDATE_GOLDEN=1 to accept the new output)";
            break;
        }
        ++line;
    }
    return false;
}

void check_golden(const std::string& name, const std::string& actual) {
    std::string hint;
    const bool same = matches_golden(name, actual, hint);
    CHECK_MESSAGE(same, hint);
}

}  // namespace blkpolicy::test
