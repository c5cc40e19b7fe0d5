// SPDX-License-Identifier: MIT
// JSON text written without building a document, for the per-device hot
// path (the frozen-facts record and its identity). The bytes are the ones
// nlohmann::json's dump() gives for valid UTF-8 (tests/test_util_files.cpp
// compares the two), so records written by either read back the same.
#pragma once

#include <string>
#include <string_view>

namespace blkpolicy::util {

// Appends `s` as a JSON string, quotes included: " and \ escaped, control
// characters as \b \f \n \r \t or \u00XX, valid UTF-8 as it is. A byte that
// is not part of valid UTF-8 is written as \u00XX (nlohmann::json would
// refuse the whole string), so any bytes give valid JSON.
void append_json_string(std::string& out, std::string_view s);

}  // namespace blkpolicy::util
