// SPDX-License-Identifier: MIT
// A real systemd-udevd for tests where udev's behaviour is the point: started
// here when none runs (and stopped again, by its pid), with one rules file in
// /run/udev/rules.d that is removed afterwards.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernel/daemon_process.hpp"
#include "udev/monitor.hpp"

namespace blkpolicy::test {

class StandaloneUdevd {
public:
    StandaloneUdevd(const std::string& rules_name, const std::string& rules_text)
        : rules_file_(std::filesystem::path("/run/udev/rules.d") / rules_name) {
        if (!udev::udevd_running()) {
            pid_ = ::fork();
            if (pid_ == 0) {
                int devnull = ::open("/dev/null", O_RDWR);
                ::dup2(devnull, 1);
                ::dup2(devnull, 2);
                ::execl("/lib/systemd/systemd-udevd", "systemd-udevd", static_cast<char*>(nullptr));
                ::_exit(127);
            }
            started_ = eventually([] { return udev::udevd_running(); }, std::chrono::seconds(10));
        } else {
            started_ = true;
        }
        dir_existed_ = std::filesystem::exists(rules_file_.parent_path());
        std::filesystem::create_directories(rules_file_.parent_path());
        std::ofstream(rules_file_) << rules_text;
        reload();
    }
    ~StandaloneUdevd() {
        remove_rules();
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    StandaloneUdevd(const StandaloneUdevd&) = delete;
    StandaloneUdevd& operator=(const StandaloneUdevd&) = delete;

    bool running() const { return started_; }
    const std::filesystem::path& rules_file() const { return rules_file_; }
    void remove_rules() {
        if (removed_) return;
        removed_ = true;
        std::filesystem::remove(rules_file_);
        if (!dir_existed_) std::filesystem::remove(rules_file_.parent_path());
        reload();
    }
    static void settle() { (void)std::system("udevadm settle --timeout=10"); }
    // A udevd that has just started can answer EAGAIN: try again a few times.
    static void reload() {
        for (int i = 0; i < 20; ++i) {
            if (std::system("udevadm control --reload 2>/dev/null") == 0) return;
            ::usleep(50'000);
        }
        (void)std::system("udevadm control --reload");
    }

private:
    std::filesystem::path rules_file_;
    pid_t pid_ = -1;
    bool started_ = false;
    bool dir_existed_ = true;
    bool removed_ = false;
};

}  // namespace blkpolicy::test
