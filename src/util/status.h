// Status and StatusOr<T>: the channel for expected failures (bad input, infeasible layouts).
// Library code returns these; only main() turns a Status into an exit code.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "src/util/check.h"

namespace shardsim {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  const std::string& message() const {
    static const std::string kOk = "OK";
    return message_ ? *message_ : kOk;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    CHECK(!status_.ok()) << "StatusOr built from an OK status without a value";
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    CHECK(ok()) << status_.message();
    return *value_;
  }
  T& value() & {
    CHECK(ok()) << status_.message();
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << status_.message();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace shardsim

// Propagates a non-OK Status out of the calling function.
#define SHARDSIM_RETURN_IF_ERROR(expr)      \
  do {                                      \
    ::shardsim::Status _st = (expr);        \
    if (!_st.ok()) return _st;              \
  } while (0)

#define SHARDSIM_CONCAT_INNER(a, b) a##b
#define SHARDSIM_CONCAT(a, b) SHARDSIM_CONCAT_INNER(a, b)
#define SHARDSIM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
// lhs = value of a StatusOr expression, or return its error.
#define SHARDSIM_ASSIGN_OR_RETURN(lhs, expr) \
  SHARDSIM_ASSIGN_OR_RETURN_IMPL(SHARDSIM_CONCAT(_status_or_, __LINE__), lhs, expr)
