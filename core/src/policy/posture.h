#pragma once

// The posture every sandbox must have: the operator's sandbox settings, the posture the core
// requires for a run's limits and uid, and assertPosture(), checked on the spec and the read-back.

#include <scs/backend/backend.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/limits.h"

namespace scs::policy {

// The host uids sandboxes run as, one per live sandbox (sandbox/uid_pool.h). The default lies
// above systemd's container range (524288 to 1879048191) and below 2^31, where no host user is.
struct UidRange {
  std::uint32_t first = 1900000000;
  std::uint32_t last = 1900000999;
  bool operator==(const UidRange&) const = default;
};

// Operator settings that shape every sandbox. The model can choose none of them.
struct SandboxSettings {
  std::string image = "safe-code-sandbox:latest";
  std::string runtime = "runc";
  UidRange uids;
  std::string seccomp_profile;  // profile JSON text; empty: the engine's default
  std::int64_t open_files = 1024;
  std::int64_t file_size_bytes = 256ll << 20;
  std::string launcher = "/opt/scs/launcher.py";
  std::string python = "/usr/bin/python3";
  int deadline_grace_seconds = 10;  // the in-sandbox watchdog fires this long after the timeout
};

// The masked and read-only paths every sandbox gets (the modern engine lists, which
// older engines' defaults lack).
const std::vector<std::string>& requiredMaskedPaths();
const std::vector<std::string>& requiredReadonlyPaths();

// Host tasks (the pids cgroup's limit) a sandbox of `runtime` may hold when its processes are
// capped at `processes` by RLIMIT_NPROC: the same under runc; under gVisor room for every host
// task a working Sentry can have (docs/SECURITY.md, Processes): the threads of its Go runtime,
// which ends the Sentry itself past kRunscSentryThreads (Go's default SetMaxThreads), and the
// stubs that run each sandboxed task.
inline constexpr std::int64_t kRunscSentryThreads = 10000;
inline constexpr std::int64_t kRunscStubTasksPerProcess = 2;
inline constexpr std::int64_t kRunscSpareTasks = 256;
std::int64_t hostTaskLimit(const std::string& runtime, std::int64_t processes);

// The posture the core demands for a run with these limits, in a sandbox of host uid `uid`
// (from the operator's range: the sandbox runs as uid:uid and owns /workspace), of `image`: a
// run's packages' layer derived from the operator's (core/src/packages), or, when empty, the
// operator's own. Every other control is the same for both.
backend::Posture requiredPosture(const Limits& limits, const SandboxSettings& settings,
                                 std::uint32_t uid, const std::string& image = {});

// The sandbox's user must be "uid:gid" with gid = uid inside `range`. One sentence per
// violation; empty when it holds. Checked beside assertPosture() on the spec and the read-back.
std::vector<std::string> checkSandboxUser(const backend::Posture& observed, const UidRange& range);

// Whether the launcher's arguments (init_command from `first_argument` on) carry `--confine`
// as a flag, not as another flag's value. A sandbox the launcher confines (landlock.py,
// confine_filesystem(); docs/SECURITY.md, 2b) runs nothing from outside /usr and writes no file
// outside its scratch space, with Landlock, in every process; PID 1 applies it before anything
// else runs and ends the sandbox (125) on a kernel without Landlock, gVisor's included. That is
// the evidence assertPosture() accepts, and nothing else, for scratch mounts an engine cannot
// flag (an emptyDir): no execve outside /usr, set-user-ID or not, and no device node anywhere,
// which is noexec, nosuid and nodev but for mmap(PROT_EXEC) of a dropped file (SECURITY.md, 2b);
// and on a kernel with Landlock, RLIMIT_NPROC of the sandbox's own uid counts its host tasks as a
// pids cgroup would, so no pids limit of the engine's is needed beside it.
bool launcherConfines(const std::vector<std::string>& init_command, std::size_t first_argument);

// Checks `observed` against every control of SPEC section 4 and against `required`
// (limits, image, runtime, user). Returns one sentence per violation; empty means the
// posture holds. Called on the spec before create and on the engine's read-back before
// start; a backend cannot relax it.
std::vector<std::string> assertPosture(const backend::Posture& observed,
                                       const backend::Posture& required);

}  // namespace scs::policy
