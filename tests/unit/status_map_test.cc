#include "policy/status_map.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace scs::policy {
namespace {

const Limits kLimits{5, 600, 2, 256};

// The sandbox ended with `code` and nothing else is known: no record from its launcher.
Evidence exited(int code, bool oom = false) {
  Evidence evidence;
  evidence.exit_code = code;
  evidence.oom_killed = oom;
  return evidence;
}

// The launcher saw the program's process exit with `code`, and exited so itself.
Evidence programExited(int code) {
  Evidence evidence = exited(code);
  evidence.program_reported = true;
  evidence.program_exit_code = code;
  return evidence;
}

// The launcher saw signal `number` end the program's process; it exited 128 + number.
Evidence programKilledBy(int number) {
  Evidence evidence = exited(128 + number);
  evidence.program_reported = true;
  evidence.program_signal = number;
  return evidence;
}

void expectVerdict(const Verdict& verdict, RunStatus status, std::optional<int> exit_code,
                   std::optional<std::string> signal, const std::string& reason) {
  EXPECT_EQ(statusName(verdict.status), statusName(status));
  EXPECT_EQ(verdict.exit_code, exit_code);
  EXPECT_EQ(verdict.signal, signal);
  EXPECT_EQ(verdict.reason, reason);
}

TEST(StatusNameTest, EveryStatusHasItsWireName) {
  EXPECT_EQ(statusName(RunStatus::kQueued), "queued");
  EXPECT_EQ(statusName(RunStatus::kRunning), "running");
  EXPECT_EQ(statusName(RunStatus::kSucceeded), "succeeded");
  EXPECT_EQ(statusName(RunStatus::kFailed), "failed");
  EXPECT_EQ(statusName(RunStatus::kTimedOut), "timed_out");
  EXPECT_EQ(statusName(RunStatus::kOutOfMemory), "out_of_memory");
  EXPECT_EQ(statusName(RunStatus::kStopped), "stopped");
  EXPECT_EQ(statusName(RunStatus::kSandboxError), "sandbox_error");
}

TEST(StatusNameTest, OnlyQueuedAndRunningAreNotFinal) {
  EXPECT_FALSE(isFinal(RunStatus::kQueued));
  EXPECT_FALSE(isFinal(RunStatus::kRunning));
  for (const RunStatus status :
       {RunStatus::kSucceeded, RunStatus::kFailed, RunStatus::kTimedOut, RunStatus::kOutOfMemory,
        RunStatus::kStopped, RunStatus::kSandboxError}) {
    EXPECT_TRUE(isFinal(status)) << statusName(status);
  }
}

TEST(SignalNameTest, LinuxNumbering) {
  const char* const kNames[] = {
      "SIGHUP",  "SIGINT",    "SIGQUIT", "SIGILL",   "SIGTRAP", "SIGABRT", "SIGBUS",  "SIGFPE",
      "SIGKILL", "SIGUSR1",   "SIGSEGV", "SIGUSR2",  "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT",
      "SIGCHLD", "SIGCONT",   "SIGSTOP", "SIGTSTP",  "SIGTTIN", "SIGTTOU", "SIGURG",  "SIGXCPU",
      "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO",   "SIGPWR",  "SIGSYS"};
  for (int number = 1; number <= 31; ++number) {
    EXPECT_EQ(signalName(number), kNames[number - 1]) << number;
  }
  EXPECT_EQ(signalName(0), "SIG0");
  EXPECT_EQ(signalName(34), "SIG34");
  EXPECT_EQ(signalName(64), "SIG64");
}

TEST(DecideTest, ExitZeroSucceeds) {
  expectVerdict(decide(exited(0), kLimits), RunStatus::kSucceeded, 0, std::nullopt,
                "Exited with code 0.");
}

TEST(DecideTest, ChildKilledByOomWhileMainExitsZeroStillSucceeds) {
  expectVerdict(decide(exited(0, /*oom=*/true), kLimits), RunStatus::kSucceeded, 0, std::nullopt,
                "Exited with code 0, although a child process was killed by the OOM killer at "
                "the 5 GB memory limit.");
}

TEST(DecideTest, NonZeroExitFails) {
  for (const int code : {3, 1, 128, 137, 255}) {
    expectVerdict(decide(programExited(code), kLimits), RunStatus::kFailed, code, std::nullopt,
                  "Exited with code " + std::to_string(code) + ".");
  }
}

// The reason for a death by `signal` that the sandbox did not send.
std::string unsentSignalReason(const std::string& signal) {
  return "Killed by " + signal +
         ", which the sandbox did not send: the program crashed or killed itself.";
}

TEST(DecideTest, DeathByASignalTheServerDidNotSendFails) {
  for (const auto& [number, code, signal] :
       std::vector<std::tuple<int, int, std::string>>{{11, 139, "SIGSEGV"},
                                                      {6, 134, "SIGABRT"},
                                                      {1, 129, "SIGHUP"},
                                                      {64, 192, "SIG64"},
                                                      {9, 137, "SIGKILL"}}) {
    expectVerdict(decide(programKilledBy(number), kLimits), RunStatus::kFailed, code, signal,
                  unsentSignalReason(signal));
  }
}

TEST(DecideTest, AnExitCodeOf137AloneIsNeitherASignalNorOutOfMemory) {
  // sys.exit(137): the launcher saw a plain exit.
  expectVerdict(decide(programExited(137), kLimits), RunStatus::kFailed, 137, std::nullopt,
                "Exited with code 137.");
  // Nothing from inside: the code says no more than that the sandbox ended.
  for (const int code : {137, 139, 3}) {
    expectVerdict(decide(exited(code), kLimits), RunStatus::kSandboxError, code, std::nullopt,
                  "Sandbox error: the sandbox ended with code " + std::to_string(code) +
                      " before its launcher reported how the program ended.");
  }
}

TEST(DecideTest, AKillFromOutsideTheServerSaysSoAndBlamesNotTheProgram) {
  Evidence evidence = exited(137);
  evidence.killed_outside = true;
  expectVerdict(decide(evidence, kLimits), RunStatus::kSandboxError, 137, std::nullopt,
                "Killed from outside the server: the container engine or an operator killed or "
                "removed the sandbox; the program did not cause it.");
  // The server's own stop and timer still come first.
  evidence.timer_fired = true;
  EXPECT_EQ(decide(evidence, kLimits).status, RunStatus::kTimedOut);
}

TEST(DecideTest, OomEvidenceWithNonZeroExitIsOutOfMemory) {
  const std::string reason =
      "Out of memory: the run reached its 5 GB memory limit and the kernel's OOM killer ended "
      "it.";
  expectVerdict(decide(exited(137, true), kLimits), RunStatus::kOutOfMemory, 137, "SIGKILL",
                reason);
  expectVerdict(decide(exited(1, true), kLimits), RunStatus::kOutOfMemory, 1, std::nullopt, reason);
  Evidence no_code;
  no_code.oom_killed = true;
  expectVerdict(decide(no_code, kLimits), RunStatus::kOutOfMemory, std::nullopt, std::nullopt,
                reason);
  expectVerdict(decide(exited(137, true), Limits{0.25, 600, 2, 256}), RunStatus::kOutOfMemory, 137,
                "SIGKILL",
                "Out of memory: the run reached its 0.25 GB memory limit and the kernel's OOM "
                "killer ended it.");
}

TEST(DecideTest, TimerFiredIsTimedOutWhateverTheExitCode) {
  const std::string reason = "Timed out: the 600-second limit was reached and the run was killed.";
  Evidence evidence = exited(137, /*oom=*/true);
  evidence.timer_fired = true;
  expectVerdict(decide(evidence, kLimits), RunStatus::kTimedOut, 137, "SIGKILL", reason);
  evidence = exited(0);
  evidence.timer_fired = true;
  expectVerdict(decide(evidence, kLimits), RunStatus::kTimedOut, 0, std::nullopt, reason);
  evidence = Evidence{};
  evidence.timer_fired = true;
  expectVerdict(decide(evidence, Limits{5, 2.5, 2, 256}), RunStatus::kTimedOut, std::nullopt,
                std::nullopt,
                "Timed out: the 2.5-second limit was reached and the run was killed.");
}

TEST(DecideTest, StopComesBeforeEverything) {
  Evidence evidence = exited(137, /*oom=*/true);
  evidence.stop_requested = true;
  evidence.timer_fired = true;
  evidence.sandbox_failure = "create failed";
  evidence.engine_error = "runc broke";
  expectVerdict(decide(evidence, kLimits), RunStatus::kStopped, 137, "SIGKILL",
                "Stopped by stop_run; the run was killed.");
  evidence = Evidence{};
  evidence.stop_requested = true;
  expectVerdict(decide(evidence, kLimits), RunStatus::kStopped, std::nullopt, std::nullopt,
                "Stopped by stop_run; the run was killed.");
  evidence.by_shutdown = true;
  expectVerdict(decide(evidence, kLimits), RunStatus::kStopped, std::nullopt, std::nullopt,
                "Stopped by the server's shutdown; the run was killed.");
}

TEST(DecideTest, TimerComesBeforeASandboxFailure) {
  Evidence evidence;
  evidence.timer_fired = true;
  evidence.sandbox_failure = "wait failed";
  EXPECT_EQ(decide(evidence, kLimits).status, RunStatus::kTimedOut);
}

TEST(DecideTest, SandboxFailureComesBeforeTheExitCode) {
  Evidence evidence = exited(0);
  evidence.sandbox_failure = "the posture check failed: read_only_root must be true";
  evidence.engine_error = "also this";
  expectVerdict(decide(evidence, kLimits), RunStatus::kSandboxError, 0, std::nullopt,
                "Sandbox error: the posture check failed: read_only_root must be true");
}

TEST(DecideTest, EngineErrorComesBeforeOomAndTheExitCode) {
  Evidence evidence = exited(137, /*oom=*/true);
  evidence.engine_error = "OCI runtime start failed";
  expectVerdict(decide(evidence, kLimits), RunStatus::kSandboxError, 137, std::nullopt,
                "Sandbox error: OCI runtime start failed");
}

TEST(DecideTest, NoExitCodeIsASandboxError) {
  expectVerdict(decide(Evidence{}, kLimits), RunStatus::kSandboxError, std::nullopt, std::nullopt,
                "Sandbox error: the engine reported no exit code.");
}

}  // namespace
}  // namespace scs::policy
