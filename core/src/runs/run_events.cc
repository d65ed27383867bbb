// The observer that hears nothing (noRunEvents), for a run manager given none.

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

}  // namespace scs::runs
