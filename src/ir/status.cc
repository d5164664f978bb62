#include "ir/status.h"

namespace tessera {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(state_->code)) + ": " + state_->message;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(state_->code, context + ": " + state_->message);
}

void check_failed(const char* file, int line, const char* expr, const std::string& msg) {
  std::fprintf(stderr, "tessera: internal check failed at %s:%d: %s %s\n", file, line, expr,
               msg.c_str());
  std::abort();
}

}  // namespace tessera
