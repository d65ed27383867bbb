// decide(): the evidence weighed in one fixed order, the server's own flags first, into a
// status, exit code, signal and one sentence; and the names of statuses and signals.

#include "policy/status_map.h"

#include <signal.h>
#include <string.h>

namespace scs::policy {
namespace {

constexpr int kSignalExitBase = 128;  // a shell-style exit code 128+N reports death by signal N
constexpr int kKilledExitCode = kSignalExitBase + 9;

// The server's own kill (or the engine's OOM evidence) is the evidence of a SIGKILL, when the
// exit code agrees; the code alone is not.
std::optional<std::string> serverKillSignal(const std::optional<int>& exit_code) {
  if (exit_code == kKilledExitCode) {
    return "SIGKILL";
  }
  return std::nullopt;
}

}  // namespace

std::string_view statusName(RunStatus status) {
  switch (status) {
    case RunStatus::kQueued:
      return "queued";
    case RunStatus::kRunning:
      return "running";
    case RunStatus::kSucceeded:
      return "succeeded";
    case RunStatus::kFailed:
      return "failed";
    case RunStatus::kTimedOut:
      return "timed_out";
    case RunStatus::kOutOfMemory:
      return "out_of_memory";
    case RunStatus::kStopped:
      return "stopped";
    case RunStatus::kSandboxError:
      return "sandbox_error";
  }
  return "sandbox_error";
}

bool isFinal(RunStatus status) {
  return status != RunStatus::kQueued && status != RunStatus::kRunning;
}

std::string signalName(int number) {
  // glibc's own table of abbreviations (SIGRTMIN+n and unknown numbers have none). It calls 29
  // POLL; Python and the shell call it SIGIO, the name a program's author knows.
  const char* name = number == SIGIO ? "IO" : number > 0 ? ::sigabbrev_np(number) : nullptr;
  return name != nullptr ? std::string("SIG") + name : "SIG" + std::to_string(number);
}

Verdict decide(const Evidence& evidence, const Limits& limits) {
  Verdict verdict;
  verdict.exit_code = evidence.exit_code;
  const std::string memory = formatNumber(limits.memory_gb) + " GB memory limit";
  if (evidence.stop_requested) {
    verdict.status = RunStatus::kStopped;
    verdict.signal = serverKillSignal(evidence.exit_code);
    verdict.reason = evidence.by_shutdown ? "Stopped by the server's shutdown; the run was killed."
                                          : "Stopped by stop_run; the run was killed.";
  } else if (evidence.timer_fired) {
    verdict.status = RunStatus::kTimedOut;
    verdict.signal = serverKillSignal(evidence.exit_code);
    verdict.reason = "Timed out: the " + formatNumber(limits.timeout_seconds) +
                     "-second limit was reached and the run was killed.";
  } else if (!evidence.sandbox_failure.empty() || !evidence.engine_error.empty()) {
    verdict.status = RunStatus::kSandboxError;
    verdict.reason =
        "Sandbox error: " +
        (evidence.sandbox_failure.empty() ? evidence.engine_error : evidence.sandbox_failure);
  } else if (evidence.killed_outside) {
    verdict.status = RunStatus::kSandboxError;
    verdict.reason =
        "Killed from outside the server: the container engine or an operator killed or removed "
        "the sandbox; the program did not cause it.";
  } else if (!evidence.launcher_refusal.empty()) {
    verdict.status = RunStatus::kFailed;
    verdict.reason = "Nothing of this run executed: " + evidence.launcher_refusal + ".";
  } else if (evidence.oom_killed && evidence.exit_code != 0) {
    verdict.status = RunStatus::kOutOfMemory;
    // The OOM killer sends SIGKILL: to the program, as the launcher saw, or to the sandbox.
    verdict.signal = evidence.program_signal ? signalName(*evidence.program_signal)
                                             : serverKillSignal(evidence.exit_code);
    verdict.reason =
        "Out of memory: the run reached its " + memory + " and the kernel's OOM killer ended it.";
  } else if (!evidence.exit_code) {
    verdict.status = RunStatus::kSandboxError;
    verdict.reason = "Sandbox error: the engine reported no exit code.";
  } else if (*evidence.exit_code == 0) {
    verdict.status = RunStatus::kSucceeded;
    verdict.reason = evidence.oom_killed
                         ? "Exited with code 0, although a child process was killed by the OOM "
                           "killer at the " +
                               memory + "."
                         : "Exited with code 0.";
  } else if (evidence.program_signal) {
    verdict.status = RunStatus::kFailed;
    verdict.signal = signalName(*evidence.program_signal);
    verdict.reason = "Killed by " + *verdict.signal +
                     ", which the sandbox did not send: the program crashed or killed itself.";
  } else if (evidence.program_reported) {
    verdict.status = RunStatus::kFailed;
    verdict.reason = "Exited with code " +
                     std::to_string(evidence.program_exit_code.value_or(*evidence.exit_code)) + ".";
  } else {
    // Without the launcher's record nothing says how the program ended: its PID 1 was killed
    // (by no one the server knows of) or broke, so an exit code of 137 proves no SIGKILL.
    verdict.status = RunStatus::kSandboxError;
    verdict.reason = "Sandbox error: the sandbox ended with code " +
                     std::to_string(*evidence.exit_code) +
                     " before its launcher reported how the program ended.";
  }
  return verdict;
}

}  // namespace scs::policy
