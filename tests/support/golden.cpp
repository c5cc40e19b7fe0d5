// SPDX-License-Identifier: MIT
// check_golden, the one support function that is a doctest check: in a file
// of its own, so that programs linking the support library without doctest's
// runner (bench/) do not pull it in with the rest of run_binary.cpp.
#include <doctest/doctest.h>

#include "support/run_binary.hpp"

namespace blkpolicy::test {

void check_golden(const std::string& name, const std::string& actual) {
    std::string hint;
    const bool same = matches_golden(name, actual, hint);
    CHECK_MESSAGE(same, hint);
}

}  // namespace blkpolicy::test
