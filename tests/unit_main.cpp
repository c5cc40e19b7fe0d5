// SPDX-License-Identifier: MIT
// The unit tests' main. With BLKPOLICY_KERNEL_ROW_COVERAGE=1 (its own ctest
// entry, which runs every test case in one process) it also fails when a
// kernel row (kernel/rows) was consulted by no test: a new row needs a
// test that exercises it.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <set>

#include "kernel/rows.hpp"

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit() || !std::getenv("BLKPOLICY_KERNEL_ROW_COVERAGE")) return rc;

    const auto consulted = blkpolicy::kernel::kernel_rows_consulted();
    const std::set<std::string_view> hit(consulted.begin(), consulted.end());
    int missing = 0;
    for (const auto& row : blkpolicy::kernel::kernel_rows()) {
        if (hit.count(row.id)) continue;
        std::cerr << "kernel row " << row.id << " is exercised by no unit test\n";
        ++missing;
    }
    std::cout << "kernel rows: " << hit.size() << " of " << blkpolicy::kernel::kernel_rows().size()
              << " exercised by the unit tests\n";
    return rc != 0 ? rc : (missing ? 1 : 0);
}
