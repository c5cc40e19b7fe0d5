// SPDX-License-Identifier: MIT
// The one way blkpolicy reports a failure that the caller handles (see
// ARCHITECTURE.md "Errors"): a Status is ok, or it failed and carries a
// message for the operator that names what failed and why. Result<T> is a
// value, or the Status of the failure that prevented it. Both must be looked
// at ([[nodiscard]]).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace blkpolicy::util {

class [[nodiscard]] Status {
public:
    Status() = default;  // ok
    static Status failure(std::string message) {
        assert(!message.empty());
        Status s;
        s.message_ = std::move(message);
        return s;
    }
    bool ok() const { return message_.empty(); }
    // Why it failed, e.g. "cannot rename /run/blkpolicy/daemon.json.PID.tmp: No space left on device".
    const std::string& message() const { return message_; }

private:
    std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : value_(std::move(value)) {}                                  // NOLINT: a value converts
    Result(Status failed) : status_(std::move(failed)) { assert(!status_.ok()); }  // NOLINT
    bool ok() const { return status_.ok(); }
    const Status& status() const { return status_; }
    const std::string& message() const { return status_.message(); }
    T& value() { return *value_; }
    const T& value() const { return *value_; }
    T& operator*() { return *value_; }
    const T& operator*() const { return *value_; }
    T* operator->() { return &*value_; }
    const T* operator->() const { return &*value_; }

private:
    std::optional<T> value_;
    Status status_;
};

}  // namespace blkpolicy::util
