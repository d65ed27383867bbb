#pragma once

// `safe-code-sandbox audit`: one sandbox started through the run manager (the production path)
// runs docker/audit.py inside, and its checks come back as a table with a verdict and exit code.

#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "policy/files.h"
#include "policy/limits.h"
#include "policy/posture.h"
#include "runs/run_manager.h"

namespace scs::audit {

// Exit codes of `safe-code-sandbox audit`.
inline constexpr int kExitPassed = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitSetupFailed = 2;

// The in-sandbox program's own deadline; the run's timeout is a little longer.
inline constexpr std::chrono::seconds kProgramBudget{90};
inline constexpr std::chrono::seconds kRunTimeout{120};

// One line of the audit table.
struct Check {
  std::string name;
  std::string expected;
  std::string observed;
  std::string detail;
  bool ok = false;
};

struct Report {
  std::string runtime;
  // What the engine says of itself and its runtimes (backend::CapacityReply::versions).
  std::map<std::string, std::string> versions;
  std::string image;
  std::string run_id;
  bool prepared_sandbox = false;  // the audited sandbox was prepared ahead of the run
  std::vector<Check> checks;
  // Non-empty: no verdict, because the sandbox could not be started or did not end (for
  // example the engine is gone, or the core's posture assertion refused the sandbox).
  std::string setup_error;
  double duration_seconds = 0;
};

// docker/audit.py, embedded at build time. It travels in the run as main.py, with its checks
// (docker/audit_process.py, docker/audit_filesystem.py, also embedded) beside it.
std::string_view program();

// audit.json, sent with the program: the runtime and the posture the program must observe.
std::string programConfig(const policy::Limits& limits, const policy::SandboxSettings& sandbox,
                          bool egress = false);

// The limits of the audit's sandbox: the server's defaults for a run that asks for nothing
// (so the posture, tmpfs sizes included, is a default run's), with a shorter timeout.
policy::Limits auditLimits(const policy::Limits& defaults);

// Reads the program's stdout: one JSON check per line, then a completion line. A missing
// completion line, a short count or a non-JSON line becomes a failed check.
std::vector<Check> parseChecks(const std::string& stdout_text);

// Starts ONE sandbox through `runs` (the production path: the core's posture assertions
// apply before start), runs the audit program in it with `limits`, waits for the end, and
// reads the verdicts. Blocks for at most kRunTimeout plus the engine's start and stop time.
// `egress`: whether the server carries egress (some tenant may reach hosts): then the audit's run
// gets a relay too, which the program checks answers with the server's policy (its own tenant
// may reach nothing); without, that no relay listens.
Report run(runs::RunManager& runs, const policy::Limits& limits,
           const policy::SandboxSettings& sandbox, const policy::FileSettings& files,
           bool egress = false);

// True when the audit ran and every check passed.
bool passed(const Report& report);

// kExitPassed, kExitFailed or kExitSetupFailed.
int exitCode(const Report& report);

// The runtime as the audit names it: "runc 1.1.5 (engine 20.10.24, containerd 1.6.20)".
std::string describeRuntime(const Report& report);
// A line on the 2025 runc CVEs when the runtime's version predates their fixes
// (docs/SECURITY.md 5); empty otherwise.
std::string runtimeNote(const Report& report);

// The readable table: check, expected, observed, PASS/FAIL, then a summary line.
std::string formatTable(const Report& report);

}  // namespace scs::audit
