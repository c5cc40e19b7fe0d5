// SPDX-License-Identifier: MIT
// A fresh directory under /tmp, removed with everything in it on destruction.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace blkpolicy::test {

class TempDir {
public:
    explicit TempDir(const std::string& prefix = "blkpolicy-test") {
        std::string t = "/tmp/" + prefix + ".XXXXXX";
        if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp " + t + " failed");
        path_ = t;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace blkpolicy::test
