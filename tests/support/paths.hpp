// SPDX-License-Identifier: MIT
// Where the tests find the built binary, the source tree, their data and the
// empty directory that stands in for the host's /etc and udev rules.
//
// Functions, not macros in every test's command line: the paths differ from
// one clone to the next, and only paths.cpp is compiled with them, so that a
// compiler cache keyed by each file's command line serves every other test
// file to a fresh clone.
#pragma once

#include <string>

namespace blkpolicy::test {

const std::string& blkpolicy_binary();  // the blkpolicy program of this build
const std::string& source_dir();        // the top of the source tree
const std::string& test_data_dir();     // tests/data
const std::string& empty_root();        // an empty directory of the build

}  // namespace blkpolicy::test
