#include "policy/posture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace scs::policy {
namespace {

using backend::Posture;
using backend::TmpfsMount;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::uint64_t kMiB = 1 << 20;
const Limits kLimits{5, 600, 2, 256};
constexpr std::uint32_t kUid = 1900000007;
const std::string kUser = "1900000007:1900000007";

Posture required() { return requiredPosture(kLimits, SandboxSettings{}, kUid); }

TmpfsMount& mountAt(Posture& posture, const std::string& path) {
  for (TmpfsMount& mount : posture.tmpfs) {
    if (mount.path == path) {
      return mount;
    }
  }
  throw std::runtime_error("no tmpfs " + path);
}

TEST(RequiredPostureTest, CarriesEveryControlAndTheLimits) {
  SandboxSettings settings;
  settings.image = "scs:test";
  settings.runtime = "runsc";
  settings.seccomp_profile = R"({"defaultAction":"SCMP_ACT_ERRNO"})";
  const Posture posture = requiredPosture(kLimits, settings, kUid);
  EXPECT_EQ(posture.image, "scs:test");
  EXPECT_EQ(posture.runtime, "runsc");
  EXPECT_EQ(posture.user, kUser);
  EXPECT_EQ(posture.seccomp_profile, settings.seccomp_profile);
  EXPECT_TRUE(posture.network_disabled);
  EXPECT_TRUE(posture.read_only_root);
  EXPECT_FALSE(posture.privileged);
  EXPECT_TRUE(posture.all_capabilities_dropped);
  EXPECT_TRUE(posture.no_new_privileges);
  EXPECT_TRUE(posture.seccomp_enabled);
  EXPECT_FALSE(posture.engine_init);
  EXPECT_EQ(posture.init_command,
            (std::vector<std::string>{"/usr/bin/python3", "-I", "/opt/scs/launcher.py"}));
  EXPECT_TRUE(posture.core_dumps_disabled);
  EXPECT_THAT(posture.added_capabilities, IsEmpty());
  EXPECT_THAT(posture.host_namespaces, IsEmpty());
  EXPECT_THAT(posture.host_mounts, IsEmpty());
  EXPECT_THAT(posture.devices, IsEmpty());
  EXPECT_EQ(posture.memory_bytes, 5 * kBytesPerGb);
  EXPECT_EQ(posture.memory_swap_bytes, 5 * kBytesPerGb);
  EXPECT_EQ(posture.nano_cpus, 2'000'000'000);
  // Under gVisor the host's pids cgroup counts the Sentry's tasks; RLIMIT_NPROC is the cap.
  EXPECT_EQ(posture.processes_limit, 256);
  EXPECT_EQ(posture.pids_limit,
            kRunscSentryThreads + 256 * kRunscStubTasksPerProcess + kRunscSpareTasks);
  EXPECT_EQ(posture.open_files_limit, 1024);
  EXPECT_EQ(posture.file_size_limit_bytes, 256 << 20);
  EXPECT_EQ(posture.masked_paths, requiredMaskedPaths());
  EXPECT_EQ(posture.readonly_paths, requiredReadonlyPaths());
  EXPECT_THAT(posture.tmpfs,
              ::testing::ElementsAre(
                  TmpfsMount{"/workspace", 512 * kMiB, 16384, true, true, true, kUser, 0700},
                  TmpfsMount{"/tmp", 128 * kMiB, 4096, true, true, true, "", 01777}));
  EXPECT_EQ(posture.shm_bytes, static_cast<std::int64_t>(64 * kMiB));
}

TEST(RequiredPostureTest, UnderRuncTheHostPidsLimitIsTheProcessCap) {
  const Posture posture = required();
  EXPECT_EQ(posture.runtime, "runc");
  EXPECT_EQ(posture.pids_limit, 256);
  EXPECT_EQ(posture.processes_limit, 256);
  EXPECT_EQ(hostTaskLimit("runsc", 64),
            kRunscSentryThreads + 64 * kRunscStubTasksPerProcess + kRunscSpareTasks);
  EXPECT_EQ(hostTaskLimit("runsc", 256), 10768);
}

TEST(RequiredPostureTest, SmallMemoryShrinksScratchSpaceToWholePages) {
  const Posture posture = requiredPosture(Limits{0.3, 60, 0.5, 256}, SandboxSettings{}, kUid);
  const std::int64_t memory = 322122547;  // llround(0.3 GiB)
  EXPECT_EQ(posture.memory_bytes, memory);
  EXPECT_EQ(posture.nano_cpus, 500'000'000);
  EXPECT_EQ(posture.tmpfs[0].size_bytes, static_cast<std::uint64_t>(memory / 4 / 4096 * 4096));
  EXPECT_EQ(posture.tmpfs[1].size_bytes, static_cast<std::uint64_t>(memory / 8 / 4096 * 4096));
  EXPECT_EQ(posture.shm_bytes, memory / 8 / 4096 * 4096);
  EXPECT_EQ(posture.tmpfs[0].size_bytes % 4096, 0u);
  EXPECT_EQ(posture.tmpfs[1].size_bytes % 4096, 0u);
  EXPECT_EQ(posture.shm_bytes % 4096, 0);
  EXPECT_LE(posture.tmpfs[0].size_bytes + posture.tmpfs[1].size_bytes +
                static_cast<std::uint64_t>(posture.shm_bytes),
            static_cast<std::uint64_t>(memory / 2));
  // The file-size cap never exceeds what the workspace can hold.
  EXPECT_EQ(posture.file_size_limit_bytes, static_cast<std::int64_t>(posture.tmpfs[0].size_bytes));
  EXPECT_THAT(assertPosture(posture, posture), IsEmpty());
}

struct ScratchSizes {
  double memory_gb;
  std::uint64_t workspace_mib;
  std::uint64_t tmp_mib;
  std::uint64_t shm_mib;
};

TEST(RequiredPostureTest, WorkspaceTmpAndShmTogetherStayWithinHalfOfMemory) {
  for (const ScratchSizes& want : {ScratchSizes{0.125, 32, 16, 16}, ScratchSizes{0.25, 64, 32, 32},
                                   ScratchSizes{1, 256, 128, 64}, ScratchSizes{5, 512, 128, 64},
                                   ScratchSizes{16, 512, 128, 64}}) {
    Posture posture = requiredPosture(Limits{want.memory_gb, 60, 1, 256}, SandboxSettings{}, kUid);
    EXPECT_EQ(mountAt(posture, "/workspace").size_bytes, want.workspace_mib * kMiB)
        << want.memory_gb;
    EXPECT_EQ(mountAt(posture, "/tmp").size_bytes, want.tmp_mib * kMiB) << want.memory_gb;
    EXPECT_EQ(posture.shm_bytes, static_cast<std::int64_t>(want.shm_mib * kMiB)) << want.memory_gb;
    EXPECT_LE((want.workspace_mib + want.tmp_mib + want.shm_mib) * kMiB,
              static_cast<std::uint64_t>(posture.memory_bytes / 2))
        << want.memory_gb;
    EXPECT_THAT(assertPosture(posture, posture), IsEmpty()) << want.memory_gb;
  }
}

TEST(RequiredPostureTest, ShmIsNeverBelowOnePage) {
  const Posture posture =
      requiredPosture(Limits{16384.0 / kBytesPerGb, 60, 1, 256}, SandboxSettings{}, kUid);
  EXPECT_EQ(posture.memory_bytes, 16384);
  EXPECT_EQ(posture.shm_bytes, 4096);
}

TEST(AssertPostureTest, TheRequiredPostureHolds) {
  EXPECT_THAT(assertPosture(required(), required()), IsEmpty());
  for (const double memory_gb : {0.125, 1.0, 16.0, 64.0}) {
    const Posture posture = requiredPosture(Limits{memory_gb, 1, 0.1, 1}, SandboxSettings{}, kUid);
    EXPECT_THAT(assertPosture(posture, posture), IsEmpty()) << memory_gb;
  }
}

// At the smallest memory the three fill exactly half, so one more page of /dev/shm is over.
TEST(AssertPostureTest, ShmCountsInTheHalfOfMemoryBudget) {
  const Posture wanted = requiredPosture(Limits{0.125, 60, 1, 256}, SandboxSettings{}, kUid);
  Posture observed = wanted;
  observed.shm_bytes += 4096;
  EXPECT_THAT(assertPosture(observed, observed),
              ::testing::ElementsAre("tmpfs sizes and shm_bytes total 67112960 bytes, more than "
                                     "half of memory_bytes (67108864)"));
  EXPECT_THAT(assertPosture(observed, wanted),
              Contains("shm_bytes must be 16777216, got 16781312"));
}

TEST(AssertPostureTest, ExtraMaskedAndReadonlyPathsAreFine) {
  Posture observed = required();
  observed.masked_paths.push_back("/sys/devices/system/cpu/cpu0/thermal_throttle");
  observed.readonly_paths.insert(observed.readonly_paths.begin(), "/proc/extra");
  EXPECT_THAT(assertPosture(observed, required()), IsEmpty());
}

TEST(AssertPostureTest, TmpfsOrderDoesNotMatter) {
  Posture observed = required();
  std::swap(observed.tmpfs[0], observed.tmpfs[1]);
  EXPECT_THAT(assertPosture(observed, required()), IsEmpty());
}

TEST(AssertPostureTest, PathsTheRequiredPostureAddsAreDemandedToo) {
  Posture wanted = required();
  wanted.masked_paths.push_back("/proc/extra");
  const auto violations = assertPosture(required(), wanted);
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0], "masked_paths lacks [/proc/extra]");
}

struct Fault {
  std::string name;
  std::function<void(Posture&)> apply;
  std::string violation;  // a substring of the sentence that must appear
  // An absolute control, checked whatever `required` says; false: an equality check only.
  bool invariant = true;
};

void PrintTo(const Fault& fault, std::ostream* out) { *out << fault.name; }

class PostureFaultTest : public ::testing::TestWithParam<Fault> {};

TEST_P(PostureFaultTest, ObservedFaultIsReported) {
  Posture observed = required();
  GetParam().apply(observed);
  const auto violations = assertPosture(observed, required());
  EXPECT_THAT(violations, Contains(HasSubstr(GetParam().violation)));
}

// A refactor of requiredPosture() that drops a control must not drop the check.
class PostureInvariantTest : public ::testing::TestWithParam<Fault> {};

TEST_P(PostureInvariantTest, CaughtEvenWhenRequiredAgrees) {
  Posture broken = required();
  GetParam().apply(broken);
  EXPECT_THAT(assertPosture(broken, broken), Contains(HasSubstr(GetParam().violation)));
}

const std::vector<Fault> kFaults = {
    {"image", [](Posture& p) { p.image = "python:latest"; },
     R"(image must be "safe-code-sandbox:latest", got "python:latest")", false},
    {"runtime", [](Posture& p) { p.runtime = "runsc"; }, R"(runtime must be "runc")", false},
    {"user_other", [](Posture& p) { p.user = "1900000008:1900000008"; },
     R"(user must be "1900000007:1900000007")", false},
    {"user_root", [](Posture& p) { p.user = "0:0"; }, "user must be a numeric non-root uid:gid"},
    {"user_root_uid", [](Posture& p) { p.user = "0:10001"; }, "non-root uid:gid, got \"0:10001\""},
    {"user_root_gid", [](Posture& p) { p.user = "10001:00"; }, "non-root uid:gid"},
    {"user_name", [](Posture& p) { p.user = "sandbox"; }, "non-root uid:gid"},
    {"user_uid_only", [](Posture& p) { p.user = "10001"; }, "non-root uid:gid"},
    {"user_empty", [](Posture& p) { p.user = ""; }, "non-root uid:gid"},
    {"user_signed", [](Posture& p) { p.user = "+10001:10001"; }, "non-root uid:gid"},
    {"network_disabled", [](Posture& p) { p.network_disabled = false; },
     "network_disabled must be true"},
    {"read_only_root", [](Posture& p) { p.read_only_root = false; }, "read_only_root must be true"},
    {"privileged", [](Posture& p) { p.privileged = true; }, "privileged must be false"},
    {"all_capabilities_dropped", [](Posture& p) { p.all_capabilities_dropped = false; },
     "all_capabilities_dropped must be true"},
    {"added_capabilities", [](Posture& p) { p.added_capabilities = {"SYS_ADMIN"}; },
     "added_capabilities must be empty, got [SYS_ADMIN]"},
    {"no_new_privileges", [](Posture& p) { p.no_new_privileges = false; },
     "no_new_privileges must be true"},
    {"seccomp_enabled", [](Posture& p) { p.seccomp_enabled = false; },
     "seccomp_enabled must be true"},
    {"seccomp_profile", [](Posture& p) { p.seccomp_profile = "{}"; }, "seccomp_profile differs",
     false},
    {"engine_init", [](Posture& p) { p.engine_init = true; }, "engine_init must be false"},
    {"init_command",
     [](Posture& p) {
       p.init_command = {"/usr/bin/timeout", "60"};
     },
     "init_command must begin with [/usr/bin/python3, -I, /opt/scs/launcher.py]", false},
    {"init_command_missing", [](Posture& p) { p.init_command.clear(); },
     "init_command must name PID 1"},
    {"processes_limit", [](Posture& p) { p.processes_limit = 0; },
     "processes_limit must be positive"},
    {"host_namespaces", [](Posture& p) { p.host_namespaces = {"pid"}; },
     "host_namespaces must be empty, got [pid]"},
    {"host_mounts", [](Posture& p) { p.host_mounts = {"/etc:/etc"}; },
     "host_mounts must be empty, got [/etc:/etc]"},
    {"devices", [](Posture& p) { p.devices = {"/dev/kvm"}; }, "devices must be empty"},
    {"tmpfs_exec", [](Posture& p) { mountAt(p, "/workspace").noexec = false; },
     "tmpfs /workspace must be mounted noexec, nosuid and nodev"},
    {"tmpfs_suid", [](Posture& p) { mountAt(p, "/tmp").nosuid = false; },
     "tmpfs /tmp must be mounted noexec, nosuid and nodev"},
    {"tmpfs_dev", [](Posture& p) { mountAt(p, "/tmp").nodev = false; },
     "tmpfs /tmp must be mounted noexec, nosuid and nodev"},
    {"tmpfs_unsized", [](Posture& p) { mountAt(p, "/tmp").size_bytes = 0; },
     "tmpfs /tmp must cap its size and inodes"},
    {"tmpfs_no_inode_cap", [](Posture& p) { mountAt(p, "/workspace").max_inodes = 0; },
     "tmpfs /workspace must cap its size and inodes"},
    {"tmpfs_size", [](Posture& p) { mountAt(p, "/workspace").size_bytes -= 4096; },
     "tmpfs /workspace size_bytes must be 536870912, got 536866816", false},
    {"tmpfs_inodes", [](Posture& p) { mountAt(p, "/tmp").max_inodes = 1 << 20; },
     "tmpfs /tmp max_inodes must be 4096, got 1048576", false},
    {"tmpfs_owner", [](Posture& p) { mountAt(p, "/workspace").owner = "0:0"; },
     R"(tmpfs /workspace owner must be "1900000007:1900000007", got "0:0")", false},
    {"tmpfs_mode", [](Posture& p) { mountAt(p, "/workspace").mode = 0777; },
     "tmpfs /workspace mode must be 0700, got 0777", false},
    {"tmpfs_missing", [](Posture& p) { p.tmpfs.pop_back(); },
     "tmpfs mounts must be exactly [/tmp, /workspace], got [/workspace]"},
    {"tmpfs_extra",
     [](Posture& p) {
       p.tmpfs.push_back({"/var", kMiB, 16, true, true, true, "", 0700});
     },
     "tmpfs mounts must be exactly [/tmp, /workspace], got [/tmp, /var, /workspace]"},
    {"tmpfs_twice", [](Posture& p) { p.tmpfs.push_back(p.tmpfs[1]); },
     "tmpfs mounts must be exactly"},
    {"tmpfs_over_half_memory",
     [](Posture& p) { mountAt(p, "/workspace").size_bytes = p.memory_bytes / 2; },
     "more than half of memory_bytes"},
    {"tmpfs_huge", [](Posture& p) { mountAt(p, "/workspace").size_bytes = ~std::uint64_t{0}; },
     "more than half of memory_bytes"},
    {"shm_missing", [](Posture& p) { p.shm_bytes = 0; }, "shm_bytes must be positive, got 0"},
    {"shm_negative", [](Posture& p) { p.shm_bytes = -1; }, "shm_bytes must be positive, got -1"},
    {"shm_larger", [](Posture& p) { p.shm_bytes *= 2; },
     "shm_bytes must be 67108864, got 134217728", false},
    {"shm_smaller", [](Posture& p) { p.shm_bytes -= 4096; },
     "shm_bytes must be 67108864, got 67104768", false},
    {"shm_over_half_memory", [](Posture& p) { p.shm_bytes = p.memory_bytes / 2; },
     "more than half of memory_bytes"},
    {"shm_huge", [](Posture& p) { p.shm_bytes = std::numeric_limits<std::int64_t>::max(); },
     "more than half of memory_bytes"},
    {"memory_bytes", [](Posture& p) { p.memory_bytes *= 2; },
     "memory_bytes must be 5368709120, got 10737418240", false},
    {"memory_zero", [](Posture& p) { p.memory_bytes = p.memory_swap_bytes = 0; },
     "memory_bytes must be positive, got 0"},
    {"memory_swap_bytes", [](Posture& p) { p.memory_swap_bytes = -1; },
     "memory_swap_bytes must equal memory_bytes (no swap)"},
    {"nano_cpus", [](Posture& p) { p.nano_cpus = 4'000'000'000; },
     "nano_cpus must be 2000000000, got 4000000000", false},
    {"nano_cpus_zero", [](Posture& p) { p.nano_cpus = 0; }, "nano_cpus must be positive, got 0"},
    {"pids_limit", [](Posture& p) { p.pids_limit = 100000; }, "pids_limit must be 256", false},
    {"pids_unlimited", [](Posture& p) { p.pids_limit = -1; },
     "pids_limit must be positive, got -1"},
    {"open_files_limit", [](Posture& p) { p.open_files_limit = 1 << 20; },
     "open_files_limit must be 1024", false},
    {"open_files_zero", [](Posture& p) { p.open_files_limit = 0; },
     "open_files_limit must be positive"},
    {"file_size_limit_bytes", [](Posture& p) { p.file_size_limit_bytes += 1; },
     "file_size_limit_bytes must be 268435456, got 268435457", false},
    {"file_size_unlimited", [](Posture& p) { p.file_size_limit_bytes = 0; },
     "file_size_limit_bytes must be positive"},
    {"core_dumps_disabled", [](Posture& p) { p.core_dumps_disabled = false; },
     "core_dumps_disabled must be true"},
    {"masked_paths", [](Posture& p) { p.masked_paths.erase(p.masked_paths.begin() + 2); },
     "masked_paths lacks [/proc/interrupts]"},
    {"masked_paths_empty", [](Posture& p) { p.masked_paths.clear(); },
     "masked_paths lacks [/proc/acpi, /proc/asound"},
    {"readonly_paths", [](Posture& p) { p.readonly_paths.pop_back(); },
     "readonly_paths lacks [/proc/sysrq-trigger]"},
};

std::vector<Fault> invariantFaults() {
  std::vector<Fault> faults;
  std::copy_if(kFaults.begin(), kFaults.end(), std::back_inserter(faults),
               [](const Fault& fault) { return fault.invariant; });
  return faults;
}

std::string faultName(const ::testing::TestParamInfo<Fault>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(EveryField, PostureFaultTest, ::testing::ValuesIn(kFaults), faultName);
INSTANTIATE_TEST_SUITE_P(Invariants, PostureInvariantTest, ::testing::ValuesIn(invariantFaults()),
                         faultName);

TEST(AssertPostureTest, EveryViolationIsReportedNotJustTheFirst) {
  Posture observed = required();
  observed.network_disabled = false;
  observed.privileged = true;
  observed.memory_bytes = observed.memory_swap_bytes = kBytesPerGb;
  const auto violations = assertPosture(observed, required());
  EXPECT_THAT(violations, Contains(HasSubstr("network_disabled")));
  EXPECT_THAT(violations, Contains(HasSubstr("privileged")));
  EXPECT_THAT(violations, Contains(HasSubstr("memory_bytes must be 5368709120")));
  EXPECT_THAT(violations, Contains(HasSubstr("memory_swap_bytes must be 5368709120")));
}

// A sandbox as the kubernetes backend reads one back: emptyDir scratch (no mount flags, no
// inode cap, mode 0777 owned by root), no pids limit of the engine's, the launcher's limits on
// its command line.
Posture emptyDirPosture(const std::vector<std::string>& launcher_flags) {
  Posture observed = required();
  for (TmpfsMount& mount : observed.tmpfs) {
    mount.noexec = mount.nosuid = mount.nodev = false;
    mount.max_inodes = 0;
    mount.owner.clear();
    mount.mode = 0777;
  }
  observed.pids_limit = 0;
  observed.init_command.insert(observed.init_command.end(),
                               {"--deadline", "680", "--rlimits", "nproc=256"});
  observed.init_command.insert(observed.init_command.end(), launcher_flags.begin(),
                               launcher_flags.end());
  return observed;
}

TEST(AssertPostureTest, ASandboxTheLauncherConfinesNeedsNoMountFlagsInodeCapOrPidsLimit) {
  EXPECT_THAT(assertPosture(emptyDirPosture({"--confine"}), required()), IsEmpty());
  EXPECT_THAT(assertPosture(emptyDirPosture({"--confine", "--session"}), required()), IsEmpty());

  const auto unconfined = assertPosture(emptyDirPosture({}), required());
  EXPECT_THAT(unconfined,
              Contains(HasSubstr("tmpfs /workspace must be mounted noexec, nosuid and nodev (or "
                                 "the launcher must confine the sandbox: --confine)")));
  EXPECT_THAT(unconfined, Contains(HasSubstr("tmpfs /tmp must cap its size and inodes")));
  EXPECT_THAT(unconfined, Contains(HasSubstr("tmpfs /workspace owner must be")));
  EXPECT_THAT(unconfined, Contains(HasSubstr("tmpfs /tmp mode must be 01777, got 0777")));
  EXPECT_THAT(unconfined, Contains(HasSubstr("pids_limit must be positive, got 0")));
}

TEST(AssertPostureTest, ConfineCountsOnlyAsTheLaunchersFlag) {
  // The launcher would take "--confine" here as another flag's value, and refuse it.
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--masked", "--confine"}, {"--warm", "--confine"}}) {
    EXPECT_THAT(assertPosture(emptyDirPosture(flags), required()),
                Contains(HasSubstr("tmpfs /tmp must be mounted noexec")))
        << flags[0];
  }
  // Before the core's own command ends, it is not the launcher's argument at all.
  Posture observed = emptyDirPosture({});
  observed.init_command.insert(observed.init_command.begin() + 1, "--confine");
  EXPECT_THAT(assertPosture(observed, required()),
              Contains(HasSubstr("tmpfs /tmp must be mounted noexec")));
  EXPECT_TRUE(launcherConfines({"python3", "-I", "l.py", "--session", "--confine"}, 3));
  EXPECT_FALSE(launcherConfines({"python3", "-I", "l.py", "--deadline", "--confine"}, 3));
  EXPECT_FALSE(launcherConfines({"--confine", "-I", "l.py"}, 3));
}

// Confinement stands in for the flags, the inode cap, the owner and mode, and the pids limit;
// nothing else, and only in the emptyDir's own shape.
TEST(AssertPostureTest, AConfinedSandboxIsHeldToEveryOtherControl) {
  const std::vector<std::pair<std::string, std::function<void(Posture&)>>> weakenings = {
      {"tmpfs /workspace size_bytes", [](Posture& p) { mountAt(p, "/workspace").size_bytes = 1; }},
      {"must cap its size", [](Posture& p) { mountAt(p, "/tmp").size_bytes = 0; }},
      {"tmpfs /workspace owner", [](Posture& p) { mountAt(p, "/workspace").owner = "0:0"; }},
      {"tmpfs /tmp mode must be 01777, got 0755",
       [](Posture& p) { mountAt(p, "/tmp").mode = 0755; }},
      {"tmpfs /tmp max_inodes", [](Posture& p) { mountAt(p, "/tmp").max_inodes = 1'000'000; }},
      {"pids_limit must be 256", [](Posture& p) { p.pids_limit = 100'000; }},
      {"processes_limit must be 256", [](Posture& p) { p.processes_limit = 100'000; }},
      {"read_only_root", [](Posture& p) { p.read_only_root = false; }},
      {"shm_bytes", [](Posture& p) { p.shm_bytes = 0; }},
  };
  for (const auto& [violation, weaken] : weakenings) {
    Posture observed = emptyDirPosture({"--confine"});
    weaken(observed);
    EXPECT_THAT(assertPosture(observed, required()), Contains(HasSubstr(violation))) << violation;
  }
}

}  // namespace
}  // namespace scs::policy
