#pragma once

// The core's one way of saying that something asked of it cannot be done: an Error (what kind
// of failure, and one sentence for whoever asked), in place of the value a call would return
// (Result<T>). Exceptions stay for what a handler catches (a request's, a run thread's); the
// plugin boundary keeps backend::Status, which the ABI fixes.

#include <string>
#include <utility>
#include <variant>

namespace scs {

enum class ErrorKind {
  kInvalid,   // the request breaks a rule (a path, a name, a setting): asking again fails again
  kLimits,    // the request's limits are more than this server allows: asking again fails again
  kRefused,   // no room now (queue, memory, uids, sessions): it may succeed later
  kStopping,  // the server is shutting down: ask the next one
  kInternal,  // the server's own failure, or evidence it cannot read
};

struct Error {
  ErrorKind kind = ErrorKind::kInvalid;
  std::string message;  // a sentence the caller can act on
};

inline Error invalid(std::string message) { return {ErrorKind::kInvalid, std::move(message)}; }
inline Error overLimits(std::string message) { return {ErrorKind::kLimits, std::move(message)}; }
inline Error refused(std::string message) { return {ErrorKind::kRefused, std::move(message)}; }
inline Error stopping(std::string message) { return {ErrorKind::kStopping, std::move(message)}; }
inline Error internal(std::string message) { return {ErrorKind::kInternal, std::move(message)}; }

// A value, or why there is none: std::get_if<Error>(&result) is the failure.
template <class T>
using Result = std::variant<T, Error>;

// The value of a call that has nothing to give back: Result<Done> is done, or the Error why not.
struct Done {};

}  // namespace scs
