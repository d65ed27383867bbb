// The categories of a refused start_run and their names.

#include "admission/refusal.h"

namespace scs::admission {

Refusal refusalOf(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kLimits:
      return Refusal::kLimits;
    case ErrorKind::kRefused:
      return Refusal::kQueueFull;
    case ErrorKind::kStopping:
      return Refusal::kShuttingDown;
    case ErrorKind::kInvalid:
    case ErrorKind::kInternal:
      break;
  }
  return Refusal::kInvalid;
}

std::string_view refusalName(Refusal why) {
  switch (why) {
    case Refusal::kInvalid:
      return "invalid";
    case Refusal::kLimits:
      return "limits";
    case Refusal::kQueueFull:
      return "queue_full";
    case Refusal::kShuttingDown:
      return "shutting_down";
  }
  return "invalid";
}

}  // namespace scs::admission
