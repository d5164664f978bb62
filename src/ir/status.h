// Status and Result<T>: the one error model of tessera.
//
// Anything a user or a file can get wrong (a malformed model, an unsupported op, a bad flag) is
// reported through Status / Result<T>. TESSERA_CHECK is only for internal invariants: it aborts.
// No exception crosses a library boundary.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the input is wrong (malformed model, bad shape, bad flag)
  kUnimplemented,    // valid input that tessera does not support (yet)
  kNotFound,         // a file, a name or a key that does not exist
  kIoError,          // the OS said no
  kInternal,         // a bug in tessera
};

const char* status_code_name(StatusCode code);

// A cheap status: ok is a null pointer; an error owns its code and message.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : state_(code == StatusCode::kOk ? nullptr
                                       : std::make_shared<State>(State{code, std::move(message)})) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "InvalidArgument: message"
  std::string to_string() const;
  // Returns a copy whose message is prefixed with `context: `.
  Status with_context(const std::string& context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

inline Status invalid_argument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status unimplemented(std::string msg) {
  return Status(StatusCode::kUnimplemented, std::move(msg));
}
inline Status not_found(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
inline Status io_error(std::string msg) { return Status(StatusCode::kIoError, std::move(msg)); }
inline Status internal_error(std::string msg) {
  return Status(StatusCode::kInternal, std::move(msg));
}

// A value or an error status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result from ok Status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* expr, const std::string& msg);

}  // namespace tessera

#define TESSERA_CONCAT_INNER(a, b) a##b
#define TESSERA_CONCAT(a, b) TESSERA_CONCAT_INNER(a, b)

#define TESSERA_RETURN_IF_ERROR(expr)              \
  do {                                             \
    ::tessera::Status _st = (expr);                \
    if (!_st.ok()) return _st;                     \
  } while (0)

#define TESSERA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL(TESSERA_CONCAT(_result_, __LINE__), lhs, expr)

// Internal invariant: aborts with a message. Never for user input.
#define TESSERA_CHECK(cond, ...)                                                   \
  do {                                                                             \
    if (!(cond)) ::tessera::check_failed(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
  } while (0)
