// SPDX-License-Identifier: MIT
#include "support/paths.hpp"

namespace blkpolicy::test {

const std::string& blkpolicy_binary() {
    static const std::string path = BLKPOLICY_BINARY;
    return path;
}

const std::string& source_dir() {
    static const std::string path = BLKPOLICY_SOURCE_DIR;
    return path;
}

const std::string& test_data_dir() {
    static const std::string path = BLKPOLICY_TEST_DATA;
    return path;
}

const std::string& empty_root() {
    static const std::string path = BLKPOLICY_TEST_EMPTY_DIR;
    return path;
}

}  // namespace blkpolicy::test
