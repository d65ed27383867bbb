#pragma once

// The one status table: a run's statuses, the evidence of how it ended (the server's flags, the
// engine's record, the launcher's), and decide(), which turns that into a Verdict.

#include <optional>
#include <string>
#include <string_view>

#include "policy/limits.h"

namespace scs::policy {

enum class RunStatus {
  kQueued,
  kRunning,
  kSucceeded,
  kFailed,
  kTimedOut,
  kOutOfMemory,
  kStopped,
  kSandboxError,
};

std::string_view statusName(RunStatus status);
bool isFinal(RunStatus status);

// Everything known about how a run ended. The server's own flags come first; the engine's
// record second; the exit code alone never decides a timeout or an OOM.
struct Evidence {
  bool stop_requested = false;   // stop_run or shutdown killed it
  bool by_shutdown = false;      // the stop came from the server's shutdown
  bool timer_fired = false;      // the server's wall-clock deadline killed it
  std::string sandbox_failure;   // non-empty: create/deliver/start/posture/engine broke
  std::optional<int> exit_code;  // the sandbox's main process (its launcher, PID 1)
  bool oom_killed = false;       // the engine's OOM evidence
  std::string engine_error;      // the runtime's own error
  bool killed_outside = false;   // the engine saw a kill or removal the server did not ask for
  // The launcher's record of how the program's own process ended, from inside the sandbox.
  bool program_reported = false;
  std::optional<int> program_exit_code;
  std::optional<int> program_signal;
  // The launcher did not start a session's run, for a reason the program made (the session's
  // workspace cannot take the run's files); non-empty: why.
  std::string launcher_refusal;
};

struct Verdict {
  RunStatus status = RunStatus::kSandboxError;
  std::optional<int> exit_code;
  std::optional<std::string> signal;  // e.g. "SIGSEGV": only when evidence says a signal killed it
  std::string reason;                 // one human sentence
};

// The one status table (SPEC section 2).
Verdict decide(const Evidence& evidence, const Limits& limits);

// "SIGSEGV" for 11; "SIG<n>" for numbers without a name.
std::string signalName(int number);

}  // namespace scs::policy
