// SPDX-License-Identifier: MIT
// Enum <-> text from one table per enum: what is printed and what is parsed
// come from the same entries, so they cannot drift apart. A table lists its
// enum's values in declaration order (checked at compile time with
// static_assert(in_enum_order(table))), which also makes name_of an index.
// Pure; used by every layer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkpolicy::util {

template <typename E>
struct Named {
    E value;
    const char* name;
};

// The functions below take a table of Named<E>, or of any row type with the
// same two members first (`value` and `name`) and more after them (the
// match keys carry how they match and what they read).

// Entry i names the enum value i, for every i: no value left out in the
// middle, none listed twice.
template <typename Row, std::size_t N>
constexpr bool in_enum_order(const Row (&table)[N]) {
    for (std::size_t i = 0; i < N; ++i)
        if (static_cast<std::size_t>(table[i].value) != i) return false;
    return true;
}

template <typename Row, std::size_t N, typename E = decltype(Row::value)>
constexpr const char* name_of(const Row (&table)[N], E value) {
    const auto i = static_cast<std::size_t>(value);
    return i < N ? table[i].name : "?";
}

template <typename Row, std::size_t N, typename E = decltype(Row::value)>
constexpr std::optional<E> value_named(const Row (&table)[N], std::string_view name) {
    for (const auto& e : table)
        if (name == e.name) return e.value;
    return std::nullopt;
}

template <typename Row, std::size_t N>
std::vector<std::string> names_of(const Row (&table)[N]) {
    std::vector<std::string> out;
    for (const auto& e : table) out.emplace_back(e.name);
    return out;
}

}  // namespace blkpolicy::util
