// The observer that hears nothing (noRunEvents), for a run manager given none, and the
// categories and names of the reasons a start_run is refused.

#include "runs/run_events.h"

namespace scs::runs {

namespace {

class NoRunEvents final : public RunEvents {
 public:
  void refused(const std::string&, Refusal) override {}
  void accepted(const std::string&) override {}
  void finished(const std::string&, policy::RunStatus, std::optional<double>,
                std::optional<double>) override {}
  void preparedTaken(bool) override {}
};

}  // namespace

RunEvents& noRunEvents() {
  static NoRunEvents none;
  return none;
}

RunEvents::Refusal refusalOf(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kLimits:
      return RunEvents::Refusal::kLimits;
    case ErrorKind::kRefused:
      return RunEvents::Refusal::kQueueFull;
    case ErrorKind::kStopping:
      return RunEvents::Refusal::kShuttingDown;
    case ErrorKind::kInvalid:
    case ErrorKind::kInternal:
      break;
  }
  return RunEvents::Refusal::kInvalid;
}

std::string_view refusalName(RunEvents::Refusal why) {
  switch (why) {
    case RunEvents::Refusal::kInvalid:
      return "invalid";
    case RunEvents::Refusal::kLimits:
      return "limits";
    case RunEvents::Refusal::kQueueFull:
      return "queue_full";
    case RunEvents::Refusal::kShuttingDown:
      return "shutting_down";
  }
  return "invalid";
}

}  // namespace scs::runs
