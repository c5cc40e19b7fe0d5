// SPDX-License-Identifier: MIT
#include "support/run_binary.hpp"

#include <fcntl.h>
#include <signal.h>
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

Running::Running(const std::vector<std::string>& argv, const std::string& cwd) {
    char out_tmpl[] = "/tmp/blkpolicy-out.XXXXXX";
    char err_tmpl[] = "/tmp/blkpolicy-err.XXXXXX";
    int out_fd = ::mkstemp(out_tmpl);
    int err_fd = ::mkstemp(err_tmpl);
    if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
    out_path_ = out_tmpl;
    err_path_ = err_tmpl;
    std::vector<std::string> copy = argv;
    std::vector<char*> args;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
        ::dup2(out_fd, 1);
        ::dup2(err_fd, 2);
        int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, 0);
        if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    ::close(out_fd);
    ::close(err_fd);
}

Running::~Running() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    if (!out_path_.empty()) ::unlink(out_path_.c_str());
    if (!err_path_.empty()) ::unlink(err_path_.c_str());
}

void Running::signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
}

RunResult Running::wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out_path_);
    r.err = slurp(err_path_);
    return r;
}

std::vector<std::string> hermetic(std::vector<std::string> args) {
    // The commands that read other writers' files (udev rules, TuneD,
    // sysfsutils, tmpfiles.d, units): from an empty tree the tests own,
    // never from this host's /usr/lib or /etc, unless a test names its own.
    const bool reads_writers = !args.empty() && (args[0] == "run" || args[0] == "audit" || args[0] == "explain");
    if (!reads_writers) return args;
    auto given = [&](const char* option) {
        for (const auto& a : args)
            if (a == option || a.rfind(std::string(option) + "=", 0) == 0) return true;
        return false;
    };
    if (!given("--udev-rules-dir")) args.insert(args.end(), {"--udev-rules-dir", blkpolicy::test::empty_root()});
    if (!given("--config-root")) args.insert(args.end(), {"--config-root", blkpolicy::test::empty_root()});
    return args;
}

std::vector<std::string> blkpolicy_argv(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {blkpolicy::test::blkpolicy_binary()};
    const auto all = hermetic(args);
    argv.insert(argv.end(), all.begin(), all.end());
    return argv;
}

RunResult run_blkpolicy(const std::vector<std::string>& args, const std::string& cwd) {
    return Running(blkpolicy_argv(args), cwd).wait();
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
        s.replace(pos, from.size(), to);
    return s;
}

bool matches_golden(const std::string& name, const std::string& actual, std::string& diff_hint) {
    const auto path = std::filesystem::path(blkpolicy::test::source_dir()) / "tests/golden" / name;
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

}  // namespace blkpolicy::test
