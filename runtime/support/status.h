// Status and StatusOr: the one error style of pcc. No exceptions cross an API.
#pragma once

#include <cassert>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace pcc {

/// Error classes map one-to-one onto the tools' exit codes (see exitCode()).
enum class StatusCode {
  kOk = 0,
  kInvalidInput,  ///< bad model, plan, tensor file or option: exit 2
  kUnsupported,   ///< valid input pcc cannot handle yet: exit 2
  kCheckFailed,   ///< a numeric check found a mismatch: exit 1
  kInternal,      ///< a bug: exit 3
  kEnvironment,   ///< the machine failed the run (out of memory, a peer rank that
                  ///< never arrives, dies or stops answering): exit 4
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// \returns the process exit code for this status: 0, 1, 2 or 3.
  int exitCode() const;
  /// \returns this status with `prefix: ` put before its message (no-op when ok).
  Status withContext(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(code_, prefix + ": " + message_);
  }
  void ignore() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status s) : v_(std::move(s)) { assert(!std::get<Status>(v_).ok()); }
  StatusOr(T value) : v_(std::move(value)) {}
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U, T> && !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

namespace detail {
/// Appends `a` as `std::ostream << a` prints it: strings and integers
/// directly (a string stream per call was a tenth of a large compile),
/// anything else through a stream of its own.
template <typename A>
void strAppend(std::string& out, const A& a) {
  using T = std::decay_t<A>;
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view> || std::is_array_v<A>) {
    out.append(a);
  } else if constexpr (std::is_same_v<T, const char*> || std::is_same_v<T, char*>) {
    if (a) out.append(a);
  } else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> || std::is_same_v<T, unsigned char>) {
    out.push_back(static_cast<char>(a));
  } else if constexpr (std::is_same_v<T, bool>) {
    out.push_back(a ? '1' : '0');
  } else if constexpr (std::is_integral_v<T>) {
    out.append(std::to_string(a));
  } else {
    std::ostringstream os;
    os << a;
    out.append(os.str());
  }
}
}  // namespace detail

/// \returns the concatenation of the arguments as a stream prints them.
template <typename... A>
std::string strCat(const A&... a) {
  std::string out;
  (detail::strAppend(out, a), ...);
  return out;
}

template <typename... A>
Status invalidInput(const A&... a) { return Status(StatusCode::kInvalidInput, strCat(a...)); }
template <typename... A>
Status unsupported(const A&... a) { return Status(StatusCode::kUnsupported, strCat(a...)); }
template <typename... A>
Status internalError(const A&... a) { return Status(StatusCode::kInternal, strCat(a...)); }
template <typename... A>
Status environmentError(const A&... a) { return Status(StatusCode::kEnvironment, strCat(a...)); }
template <typename... A>
Status checkFailed(const A&... a) { return Status(StatusCode::kCheckFailed, strCat(a...)); }

inline int Status::exitCode() const {
  switch (code_) {
    case StatusCode::kOk: return 0;
    case StatusCode::kCheckFailed: return 1;
    case StatusCode::kInvalidInput:
    case StatusCode::kUnsupported: return 2;
    case StatusCode::kInternal: return 3;
    case StatusCode::kEnvironment: return 4;
  }
  return 3;
}

}  // namespace pcc

#define PCC_CONCAT_INNER(a, b) a##b
#define PCC_CONCAT(a, b) PCC_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    ::pcc::Status pcc_status_ = (expr);       \
    if (!pcc_status_.ok()) return pcc_status_; \
  } while (0)

#define PCC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  PCC_ASSIGN_OR_RETURN_IMPL(PCC_CONCAT(pcc_statusor_, __LINE__), lhs, expr)
