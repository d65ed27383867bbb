#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "mocks/mock_backend.h"
#include "policy/posture.h"
#include "sandbox/bring_up.h"
#include "support/manual_clock.h"

namespace scs::kubernetes {

// What the core asks of a sandbox, for the kubernetes backend's tests: the posture a run with
// small limits needs, and the specs bring-up makes from it, with a deadline label.
class CoreSpecs {
 public:
  backend::SandboxSpec run(const std::string& run_id, std::int64_t deadline_unix) const {
    return labelled(bring_up_.spec(run_id, limits_, required_, false), deadline_unix);
  }
  backend::SandboxSpec session(const std::string& run_id, std::int64_t deadline_unix) const {
    return labelled(bring_up_.sessionSpec(run_id, limits_, required_), deadline_unix);
  }
  const backend::Posture& required() const { return required_; }

 private:
  static backend::SandboxSpec labelled(backend::SandboxSpec spec, std::int64_t deadline_unix) {
    spec.labels[backend::kDeadlineLabel] = std::to_string(deadline_unix);
    return spec;
  }

  scs::testing::ManualClock clock_;
  ::testing::NiceMock<mocks::MockRuntimeBackend> unused_;
  policy::SandboxSettings sandbox_;
  policy::Limits limits_{1, 30, 1, 256};
  backend::Posture required_ = policy::requiredPosture(limits_, sandbox_, sandbox_.uids.first);
  sandbox::SandboxBringUp bring_up_{
      unused_, sandbox_, "inst-9", std::chrono::seconds(300), std::chrono::seconds(300),
      {},      clock_};
};

}  // namespace scs::kubernetes
