// SPDX-License-Identifier: MIT
// Real-kernel tests: need root and /dev/loop-control. Without them the whole
// suite is skipped (exit 77) with the reason, never silently passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <iostream>

#include "kernel/loop_device.hpp"

int main(int argc, char** argv) {
    if (::geteuid() != 0) {
        std::cout << "SKIPPED: real-kernel tests need root (they create loop devices)\n";
        return 77;
    }
    if (::access("/dev/loop-control", R_OK | W_OK) != 0) {
        std::cout << "SKIPPED: /dev/loop-control is missing (no loop driver)\n";
        return 77;
    }
    if (int n = blkpolicy::test::remove_leftover_loops())
        std::cout << "removed " << n << " loop device(s) left by an earlier crashed run\n";
    doctest::Context ctx(argc, argv);
    int rc = ctx.run();
    blkpolicy::test::remove_leftover_loops();
    return rc;
}
