// The posture rules: the required posture built from limits and settings (tmpfs sizes, host
// task cap, masked paths), and every invariant checked on an observed posture, one sentence each.

#include "policy/posture.h"

#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace scs::policy {
namespace {

using backend::Posture;
using backend::TmpfsMount;

constexpr std::int64_t kPageBytes = 4096;
constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::string_view kWorkspace = "/workspace";
constexpr std::string_view kTmp = "/tmp";

std::uint64_t tmpfsSize(std::int64_t cap, std::int64_t share) {
  return static_cast<std::uint64_t>(std::min(cap, share) / kPageBytes * kPageBytes);
}

std::uint64_t saturatingAdd(std::uint64_t total, std::uint64_t size) {
  return size > std::numeric_limits<std::uint64_t>::max() - total
             ? std::numeric_limits<std::uint64_t>::max()
             : total + size;
}

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) {
    text += (text.empty() ? "" : ", ") + item;
  }
  return "[" + text + "]";
}

std::string octal(std::uint32_t mode) {
  char text[16];
  const auto end = std::to_chars(text, text + sizeof text, mode, 8).ptr;
  return "0" + std::string(text, end);
}

// A numeric "uid:gid" with neither part 0.
bool isNonRootNumericUser(std::string_view user) {
  const auto colon = user.find(':');
  if (colon == std::string_view::npos) {
    return false;
  }
  const auto positiveNumber = [](std::string_view digits) {
    std::uint32_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return error == std::errc() && end == digits.data() + digits.size() && value != 0;
  };
  return positiveNumber(user.substr(0, colon)) && positiveNumber(user.substr(colon + 1));
}

class Violations {
 public:
  void check(bool holds, std::string sentence) {
    if (!holds) {
      sentences_.push_back(std::move(sentence));
    }
  }

  void flag(std::string_view field, bool observed, bool wanted, std::string_view why) {
    check(observed == wanted, std::string(field) + " must be " + (wanted ? "true" : "false") +
                                  " (" + std::string(why) + ")");
  }

  void positive(std::string_view field, std::int64_t observed) {
    check(observed > 0, std::string(field) + " must be positive, got " + std::to_string(observed));
  }

  void empty(std::string_view field, const std::vector<std::string>& observed) {
    check(observed.empty(), std::string(field) + " must be empty, got " + joined(observed));
  }

  void superset(std::string_view field, const std::vector<std::string>& observed,
                const std::vector<std::string>& wanted) {
    std::vector<std::string> missing;
    for (const std::string& path : wanted) {
      if (std::find(observed.begin(), observed.end(), path) == observed.end()) {
        missing.push_back(path);
      }
    }
    check(missing.empty(), std::string(field) + " lacks " + joined(missing));
  }

  template <std::integral Number>
  void equal(std::string_view field, Number observed, Number wanted) {
    check(observed == wanted, std::string(field) + " must be " + std::to_string(wanted) + ", got " +
                                  std::to_string(observed));
  }

  void equal(std::string_view field, std::string_view observed, std::string_view wanted) {
    check(observed == wanted,
          std::string(field) + " must be " + quoted(wanted) + ", got " + quoted(observed));
  }

  std::vector<std::string> take() { return std::move(sentences_); }

 private:
  std::vector<std::string> sentences_;
};

std::vector<std::string> unionOf(const std::vector<std::string>& a,
                                 const std::vector<std::string>& b) {
  std::vector<std::string> result = a;
  for (const std::string& item : b) {
    if (std::find(result.begin(), result.end(), item) == result.end()) {
      result.push_back(item);
    }
  }
  return result;
}

// What a sandbox the launcher confines may have in place of the mount flags (launcherConfines()).
constexpr std::string_view kOrConfined = " (or the launcher must confine the sandbox: --confine)";

// The controls of SPEC section 4 that hold for every sandbox, whatever `required` says,
// so that a policy refactor that drops one from requiredPosture() is still caught.
void checkInvariants(const Posture& observed, bool confined, Violations& violations) {
  violations.flag("network_disabled", observed.network_disabled, true, "no network at all");
  violations.flag("read_only_root", observed.read_only_root, true,
                  "the root filesystem is read-only");
  violations.flag("privileged", observed.privileged, false, "never privileged");
  violations.flag("all_capabilities_dropped", observed.all_capabilities_dropped, true,
                  "every Linux capability is dropped");
  violations.empty("added_capabilities", observed.added_capabilities);
  violations.flag("no_new_privileges", observed.no_new_privileges, true,
                  "no process may gain privileges");
  violations.flag("seccomp_enabled", observed.seccomp_enabled, true, "a seccomp filter is on");
  violations.flag("engine_init", observed.engine_init, false,
                  "PID 1 is the launcher, which reaps orphans and holds a deadline the program "
                  "cannot stop");
  violations.check(!observed.init_command.empty(), "init_command must name PID 1");
  violations.empty("host_namespaces", observed.host_namespaces);
  violations.empty("host_mounts", observed.host_mounts);
  violations.empty("devices", observed.devices);
  violations.check(isNonRootNumericUser(observed.user),
                   "user must be a numeric non-root uid:gid, got " + quoted(observed.user));

  std::vector<std::string> paths;
  std::uint64_t total = 0;
  for (const TmpfsMount& mount : observed.tmpfs) {
    paths.push_back(mount.path);
    violations.check((mount.noexec && mount.nosuid && mount.nodev) || confined,
                     "tmpfs " + mount.path + " must be mounted noexec, nosuid and nodev" +
                         std::string(kOrConfined));
    // An emptyDir has no inode cap: in a confined sandbox a flood of empty files ends as its
    // own out_of_memory, since the memory cgroup charges every inode, instead of ENOSPC.
    violations.check(mount.size_bytes > 0 && (mount.max_inodes > 0 || confined),
                     "tmpfs " + mount.path + " must cap its size and inodes, got size_bytes " +
                         std::to_string(mount.size_bytes) + " and max_inodes " +
                         std::to_string(mount.max_inodes));
    total = saturatingAdd(total, mount.size_bytes);
  }
  std::sort(paths.begin(), paths.end());
  const std::vector<std::string> writable{std::string(kTmp), std::string(kWorkspace)};
  violations.check(paths == writable,
                   "tmpfs mounts must be exactly " + joined(writable) + ", got " + joined(paths));
  // /dev/shm is a tmpfs too: capped, and counted with the scratch space below.
  violations.positive("shm_bytes", observed.shm_bytes);
  if (observed.shm_bytes > 0) {
    total = saturatingAdd(total, static_cast<std::uint64_t>(observed.shm_bytes));
  }
  // tmpfs pages count against the memory limit: a full scratch space must leave room to run.
  const std::uint64_t budget = observed.memory_bytes > 0 ? observed.memory_bytes / 2 : 0;
  violations.check(total <= budget, "tmpfs sizes and shm_bytes total " + std::to_string(total) +
                                        " bytes, more than half of memory_bytes (" +
                                        std::to_string(budget) + ")");

  violations.positive("memory_bytes", observed.memory_bytes);
  violations.check(observed.memory_swap_bytes == observed.memory_bytes,
                   "memory_swap_bytes must equal memory_bytes (no swap), got " +
                       std::to_string(observed.memory_swap_bytes) + " and " +
                       std::to_string(observed.memory_bytes));
  violations.positive("nano_cpus", observed.nano_cpus);
  violations.check(observed.pids_limit > 0 || confined, "pids_limit must be positive, got " +
                                                            std::to_string(observed.pids_limit) +
                                                            std::string(kOrConfined));
  violations.positive("processes_limit", observed.processes_limit);
  violations.positive("open_files_limit", observed.open_files_limit);
  violations.positive("file_size_limit_bytes", observed.file_size_limit_bytes);
  violations.flag("core_dumps_disabled", observed.core_dumps_disabled, true,
                  "a crash must not write a core file");
}

void checkTmpfs(const std::vector<TmpfsMount>& observed, const std::vector<TmpfsMount>& required,
                bool confined, Violations& violations) {
  for (const TmpfsMount& wanted : required) {
    const auto mount = std::find_if(observed.begin(), observed.end(),
                                    [&](const TmpfsMount& m) { return m.path == wanted.path; });
    if (mount == observed.end()) {
      violations.check(false, "tmpfs " + wanted.path + " is missing");
      continue;
    }
    const std::string field = "tmpfs " + wanted.path + " ";
    violations.equal(field + "size_bytes", mount->size_bytes, wanted.size_bytes);
    // A confined sandbox's scratch may be an emptyDir as the kubelet makes it: no inode cap, and
    // mode 0777 owned by root. Its Pod has one container and one uid (the backend refuses any
    // other), so that uid is still the only one that can reach it.
    const bool empty_dir =
        confined && mount->max_inodes == 0 && mount->owner.empty() && mount->mode == 0777;
    if (!empty_dir) {
      violations.equal(field + "max_inodes", mount->max_inodes, wanted.max_inodes);
      violations.equal(field + "owner", mount->owner, wanted.owner);
      violations.check(mount->mode == wanted.mode, field + "mode must be " + octal(wanted.mode) +
                                                       ", got " + octal(mount->mode));
    }
  }
}

}  // namespace

const std::vector<std::string>& requiredMaskedPaths() {
  static const std::vector<std::string> kPaths{"/proc/acpi",
                                               "/proc/asound",
                                               "/proc/interrupts",
                                               "/proc/kcore",
                                               "/proc/keys",
                                               "/proc/latency_stats",
                                               "/proc/sched_debug",
                                               "/proc/scsi",
                                               "/proc/timer_list",
                                               "/proc/timer_stats",
                                               "/sys/devices/virtual/powercap",
                                               "/sys/firmware"};
  return kPaths;
}

const std::vector<std::string>& requiredReadonlyPaths() {
  static const std::vector<std::string> kPaths{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                               "/proc/sysrq-trigger"};
  return kPaths;
}

std::int64_t hostTaskLimit(const std::string& runtime, std::int64_t processes) {
  // Under runc a task in the sandbox is a task on the host. The gVisor Sentry runs each
  // sandboxed task in a host stub and serves them from the threads of its Go runtime, which
  // grow with the tasks blocked in the host at once: a program whose processes each fork 16
  // times (a fork bomb within the RLIMIT_NPROC cap of 256) peaked at 7285 host tasks here
  // (2 cores), and a limit of 2304 made the Sentry fail to start a thread and end the sandbox
  // (exit code 2). A working Sentry never holds more than Go lets it (it ends itself past
  // kRunscSentryThreads) plus its stubs, so that is the limit: it never binds a working Sentry,
  // and RLIMIT_NPROC is the cap a program meets.
  if (runtime == "runsc") {
    return kRunscSentryThreads + processes * kRunscStubTasksPerProcess + kRunscSpareTasks;
  }
  return processes;
}

Posture requiredPosture(const Limits& limits, const SandboxSettings& settings, std::uint32_t uid,
                        const std::string& image) {
  const std::string user = std::to_string(uid) + ":" + std::to_string(uid);
  Posture posture;
  posture.image = image.empty() ? settings.image : image;
  posture.runtime = settings.runtime;
  posture.user = user;
  posture.network_disabled = true;
  posture.read_only_root = true;
  posture.privileged = false;
  posture.all_capabilities_dropped = true;
  posture.no_new_privileges = true;
  posture.seccomp_enabled = true;
  posture.seccomp_profile = settings.seccomp_profile;
  posture.engine_init = false;
  posture.init_command = {settings.python, "-I", settings.launcher};
  posture.memory_bytes = std::llround(limits.memory_gb * kBytesPerGb);
  posture.memory_swap_bytes = posture.memory_bytes;
  posture.nano_cpus = std::llround(limits.cpus * 1e9);
  posture.processes_limit = limits.processes;
  posture.pids_limit = hostTaskLimit(settings.runtime, limits.processes);
  posture.open_files_limit = settings.open_files;
  posture.core_dumps_disabled = true;
  // Shares of memory: /workspace 1/4, /tmp 1/8, /dev/shm 1/8, together at most the half
  // checkInvariants() allows.
  const std::uint64_t workspace = tmpfsSize(512 * kMiB, posture.memory_bytes / 4);
  posture.tmpfs = {
      {std::string(kWorkspace), workspace, 16384, true, true, true, user, 0700},
      {std::string(kTmp), tmpfsSize(128 * kMiB, posture.memory_bytes / 8), 4096, true, true, true,
       "", 01777},
  };
  posture.shm_bytes = std::max(
      kPageBytes, static_cast<std::int64_t>(tmpfsSize(64 * kMiB, posture.memory_bytes / 8)));
  posture.file_size_limit_bytes =
      std::min(settings.file_size_bytes, static_cast<std::int64_t>(workspace));
  posture.masked_paths = requiredMaskedPaths();
  posture.readonly_paths = requiredReadonlyPaths();
  return posture;
}

std::vector<std::string> checkSandboxUser(const Posture& observed, const UidRange& range) {
  const auto colon = observed.user.find(':');
  const auto number = [](std::string_view digits) -> std::optional<std::uint32_t> {
    std::uint32_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) {
      return std::nullopt;
    }
    return value;
  };
  const auto uid = colon == std::string::npos
                       ? std::nullopt
                       : number(std::string_view(observed.user).substr(0, colon));
  const auto gid = colon == std::string::npos
                       ? std::nullopt
                       : number(std::string_view(observed.user).substr(colon + 1));
  if (uid && gid && *uid == *gid && *uid >= range.first && *uid <= range.last) {
    return {};
  }
  return {"user must be uid:uid with the uid in the sandbox range " + std::to_string(range.first) +
          "-" + std::to_string(range.last) + ", got " + quoted(observed.user)};
}

bool launcherConfines(const std::vector<std::string>& init_command, std::size_t first_argument) {
  // The launcher's grammar (arguments.parse()): these three take no value, every other flag one.
  for (std::size_t at = first_argument; at < init_command.size(); ++at) {
    const std::string& flag = init_command[at];
    if (flag == backend::launcher::kFlagConfine) {
      return true;
    }
    if (flag != backend::launcher::kFlagSession && flag != backend::launcher::kFlagNoNetwork) {
      ++at;  // its value
    }
  }
  return false;
}

std::vector<std::string> assertPosture(const Posture& observed, const Posture& required) {
  Violations violations;
  const bool confined = launcherConfines(observed.init_command, required.init_command.size());
  checkInvariants(observed, confined, violations);
  violations.superset("masked_paths", observed.masked_paths,
                      unionOf(requiredMaskedPaths(), required.masked_paths));
  violations.superset("readonly_paths", observed.readonly_paths,
                      unionOf(requiredReadonlyPaths(), required.readonly_paths));

  violations.equal("image", observed.image, required.image);
  violations.equal("runtime", observed.runtime, required.runtime);
  violations.equal("user", observed.user, required.user);
  violations.check(observed.seccomp_profile == required.seccomp_profile,
                   "seccomp_profile differs from the configured profile");
  violations.equal("memory_bytes", observed.memory_bytes, required.memory_bytes);
  violations.equal("memory_swap_bytes", observed.memory_swap_bytes, required.memory_swap_bytes);
  violations.equal("nano_cpus", observed.nano_cpus, required.nano_cpus);
  if (!confined || observed.pids_limit != 0) {
    violations.equal("pids_limit", observed.pids_limit, required.pids_limit);
  }
  violations.equal("processes_limit", observed.processes_limit, required.processes_limit);
  const auto& init = observed.init_command;
  violations.check(
      init.size() >= required.init_command.size() &&
          std::equal(required.init_command.begin(), required.init_command.end(), init.begin()),
      "init_command must begin with " + joined(required.init_command) + ", got " + joined(init));
  violations.equal("open_files_limit", observed.open_files_limit, required.open_files_limit);
  violations.equal("file_size_limit_bytes", observed.file_size_limit_bytes,
                   required.file_size_limit_bytes);
  checkTmpfs(observed.tmpfs, required.tmpfs, confined, violations);
  violations.equal("shm_bytes", observed.shm_bytes, required.shm_bytes);
  return violations.take();
}

}  // namespace scs::policy
