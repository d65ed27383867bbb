#pragma once

// How a sandbox comes up: the spec the core builds for it, then one containment step per
// function (check the spec, create, check the engine's record, deliver the code, start), each
// failing closed. The first failure ends the sequence with a sentence saying which step failed;
// no user code has run by then. A run's sandbox and a prepared one come up through the same
// steps; a prepared one starts without its code, which reaches the idle launcher later.

#include <scs/backend/backend.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "policy/limits.h"
#include "policy/posture.h"

namespace scs::sandbox {

class SandboxBringUp {
 public:
  // A prepared sandbox's interpreter imports `warm_modules` while it waits for its run; a
  // session lives at most `session_lifetime`.
  SandboxBringUp(backend::RuntimeBackend& backend, const policy::SandboxSettings& sandbox,
                 std::string instance_id, std::chrono::seconds prepared_max_idle,
                 std::chrono::seconds session_lifetime, std::vector<std::string> warm_modules,
                 const common::Clock& clock);

  // When the in-sandbox watchdog ends a run whose server could not: the timeout and a grace.
  long long watchdogSeconds(const policy::Limits& limits) const;

  // The spec of a sandbox for `limits` that must have the posture `required`, labelled for
  // `label_run_id`. A prepared sandbox's watchdog allows for its time idle (a sandbox idle
  // longer is replaced), its launcher is told the modules to warm, and it may become a
  // session's (sessionFrame()): so it takes several deliveries (SandboxSpec::session) and its
  // deadline label allows for its whole watchdog and then a session's lifetime.
  backend::SandboxSpec spec(const std::string& label_run_id, const policy::Limits& limits,
                            const backend::Posture& required, bool prepared) const;

  // The spec of a session's sandbox: as a run's for `limits`, but its launcher keeps one
  // interpreter for every run (`--session`), its deadline is the session's lifetime and a
  // grace, and it takes several deliveries (SandboxSpec::session).
  backend::SandboxSpec sessionSpec(const std::string& label_id, const policy::Limits& limits,
                                   const backend::Posture& required) const;
  // What a prepared sandbox is sent first to become a session's: its launcher ends the warm
  // interpreter and serves a session with sessionSpec()'s deadline, counted from then.
  std::string sessionFrame() const;

  struct Steps {
    const std::string* archive = nullptr;  // the code, delivered before start; null: start idle
    backend::OutputSink* sink = nullptr;   // receives the sandbox's output from start on
    // Called as soon as the sandbox exists, so the caller owns its removal on every path.
    std::function<void(const std::string& sandbox_id)> created;
    // Asked between steps; true ends the sequence before the next step, with no failure.
    std::function<bool()> stopped;
    // The sandbox's stdin stays open after its code (SandboxSpec::session): egress frames
    // follow it.
    bool stdin_open = false;
  };

  struct Outcome {
    std::string sandbox_id;  // set once created
    std::string failure;     // empty: started, unless stopped
    bool stopped = false;
    bool started() const { return failure.empty() && !stopped; }
  };

  // Brings the sandbox of `spec` up: checkSpec, create, checkReadBack, deliver (when there is
  // an archive), start.
  Outcome bringUp(const backend::SandboxSpec& spec, const backend::Posture& required,
                  const Steps& steps);

  // Reads the posture of a created sandbox back from the engine and checks it against
  // `required` (also for a sandbox resumed from a snapshot); empty when it passes.
  std::string checkReadBack(const std::string& sandbox_id, const backend::Posture& required);

 private:
  long long sessionDeadlineSeconds() const;  // the session's lifetime and a grace
  std::vector<std::string> violations(const backend::Posture& observed,
                                      const backend::Posture& required) const;
  // Each returns an empty string when the step succeeded, else why it failed.
  std::string checkSpec(const backend::SandboxSpec& spec, const backend::Posture& required) const;
  std::string create(const backend::SandboxSpec& spec, std::string* sandbox_id);
  std::string deliver(const std::string& sandbox_id, const std::string& archive);
  std::string start(const std::string& sandbox_id, backend::OutputSink* sink);

  backend::RuntimeBackend& backend_;
  const policy::SandboxSettings& sandbox_;
  const std::string instance_id_;
  const std::chrono::seconds prepared_max_idle_;
  const std::chrono::seconds session_lifetime_;
  const std::vector<std::string> warm_modules_;
  const common::Clock& clock_;
};

}  // namespace scs::sandbox
