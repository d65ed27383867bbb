// What the launcher enforces and checks itself, for an engine that cannot set a process's limits
// or show its /proc masking, as a Kubernetes Pod cannot (docs/SECURITY.md, 2b): in real
// containers started by the engine without those settings, under runc and under runsc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "integration/harness.h"
#include "support/temp_file.h"

namespace scs::integration {
namespace {

using ::testing::HasSubstr;

const char* const kReportLimits = R"PY(import resource
for name in ("NPROC", "NOFILE", "FSIZE", "CORE"):
    print(name, *resource.getrlimit(getattr(resource, "RLIMIT_" + name)), flush=True)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    print("raised", flush=True)
except (OSError, ValueError):
    print("cannot raise", flush=True)
)PY";

// The sandbox's uid in these containers.
constexpr const char* kUid = "1900000998";

// The audit's checks, as the packer's pairs of source and name: the core sends them beside its
// main.py.
std::string auditChecks() {
  std::string pairs;
  for (const char* name : {"audit_process.py", "audit_filesystem.py"}) {
    pairs += " " + std::string(SCS_SOURCE_DIR) + "/docker/" + name + " " + name;
  }
  return pairs;
}

// Runs the launcher as PID 1 of a container the engine gave only its own defaults (no ulimits;
// Docker's default masked and read-only paths), with `flags` and main.py as its bundle. The
// scratch mounts are Docker's default for --tmpfs (noexec, nosuid, nodev) unless `mounts`
// names others; there is no network unless `network` names one (kPodLikeNetwork).
CommandResult launch(const std::string& flags, const std::string& main_py = "print('ran')\n",
                     const std::string& mounts = "", const std::string& audit_json = "",
                     const std::string& network = "--network none") {
  testing::TempFile source(main_py);
  testing::TempFile config(audit_json);
  testing::TempFile bundle("");
  // A bundle as the core sends one: an uncompressed ustar of main.py (and audit.json with the
  // audit's checks), mode 0644.
  const CommandResult packed = runCommand(
      "python3 -c \"import sys, tarfile; t = tarfile.open(sys.argv[1], 'w', "
      "format=tarfile.USTAR_FORMAT)\n"
      "for path, name in zip(sys.argv[2::2], sys.argv[3::2]):\n"
      "  i = t.gettarinfo(path, name); i.mode = 0o644; i.uid = i.gid = 0; "
      "i.uname = i.gname = ''; t.addfile(i, open(path, 'rb'))\n"
      "t.close()\" " +
      bundle.path() + " " + source.path() + " main.py" +
      (audit_json.empty() ? "" : " " + config.path() + " audit.json" + auditChecks()));
  if (packed.exit_code != 0) {
    return packed;
  }
  const std::string uid = kUid;
  const std::string scratch =
      mounts.empty() ? " --tmpfs /workspace:uid=" + uid + ",gid=" + uid + ",mode=0700 --tmpfs /tmp "
                     : " " + mounts + " ";
  return runCommand("docker run --rm -i --runtime " + testRuntime() + " " + network +
                    " --read-only --user " + uid + ":" + uid + scratch + kImage +
                    " /usr/bin/python3 -I /opt/scs/launcher.py --deadline 60 " + flags + " < " +
                    bundle.path());
}

// What a Pod's network leaves open: an interface (Docker's default bridge gives the container
// eth0 under runc, as a Pod has), which only a NetworkPolicy may cut, and the API server's
// address, which the kubelet puts into every container of a Pod whatever its enableServiceLinks.
const char* const kPodLikeNetwork =
    "--network bridge -e KUBERNETES_SERVICE_HOST=10.96.0.1 -e KUBERNETES_PORT=tcp://10.96.0.1:443";

// What a Pod's mounts leave open, as the kubelet makes them: scratch space (/workspace, /tmp and
// /dev/shm, 16 MiB each) that executes, and a writable file of the host's disk at
// /dev/termination-log.
class PodLikeMounts {
 public:
  PodLikeMounts() { chmod(host_file_.path().c_str(), 0666); }
  std::string flags() const {
    const std::string uid = kUid;
    return "--tmpfs /workspace:exec,size=16m,uid=" + uid + ",gid=" + uid +
           " --tmpfs /tmp:exec,size=16m --tmpfs /dev/shm:exec,size=16m --mount "
           "type=bind,source=" +
           host_file_.path() + ",target=/dev/termination-log";
  }
  const testing::TempFile& hostFile() const { return host_file_; }

 private:
  testing::TempFile host_file_{""};
};

TEST(LauncherTest, RlimitsOnItsCommandLineBindTheProgramWhereTheEngineSetNone) {
  const CommandResult run =
      launch("--rlimits nproc=64,nofile=77,fsize=123456,core=0", kReportLimits);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("NPROC 64 64"));
  EXPECT_THAT(run.output, HasSubstr("NOFILE 77 77"));
  EXPECT_THAT(run.output, HasSubstr("FSIZE 123456 123456"));
  EXPECT_THAT(run.output, HasSubstr("CORE 0 0"));
  EXPECT_THAT(run.output, HasSubstr("cannot raise"));
}

TEST(LauncherTest, AMalformedFlagIsRefusedBeforeAnyCodeRuns) {
  for (const char* flags : {"--rlimits nproc=64,stack=1", "--masked proc/keys", "--readonly"}) {
    const CommandResult run = launch(flags);
    EXPECT_EQ(run.exit_code, 125) << flags << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr("sandbox launcher: rejected setup: arguments")) << flags;
    EXPECT_THAT(run.output, ::testing::Not(HasSubstr("ran"))) << flags;
  }
}

// The paths the engine masked and made read-only pass; one it left readable, or writable, ends
// the sandbox before main.py runs.
TEST(LauncherTest, PathsTheEngineMaskedPassAndOneItDidNotEndsTheSandbox) {
  const CommandResult masked = launch(
      "--masked /proc/keys,/proc/timer_list,/proc/acpi,/sys/firmware,/proc/no-such "
      "--readonly /proc/sys,/proc/bus");
  EXPECT_EQ(masked.exit_code, 0) << masked.output;
  EXPECT_THAT(masked.output, HasSubstr("ran"));

  // Docker 20.10 does not mask /proc/interrupts; gVisor's /proc has none.
  const CommandResult interrupts = launch("--masked /proc/interrupts");
  if (underGvisor()) {
    EXPECT_EQ(interrupts.exit_code, 0) << interrupts.output;
  } else {
    EXPECT_EQ(interrupts.exit_code, 125) << interrupts.output;
    EXPECT_THAT(interrupts.output, HasSubstr("rejected setup: /proc/interrupts is not masked"));
    EXPECT_THAT(interrupts.output, ::testing::Not(HasSubstr("ran")));
  }

  const CommandResult writable = launch("--readonly /tmp");
  EXPECT_EQ(writable.exit_code, 125) << writable.output;
  EXPECT_THAT(writable.output, HasSubstr("rejected setup: /tmp is not read-only"));
  EXPECT_THAT(writable.output, ::testing::Not(HasSubstr("ran")));
}

const char* const kEscapes = R"PY(import os, shutil, subprocess
def attempt(name, action):
    try:
        action()
        print(name, "ALLOWED", flush=True)
    except OSError as error:
        print(name, error.strerror, flush=True)
for where in ("/tmp", "/workspace", "/dev/shm"):
    shutil.copy("/usr/bin/true", where + "/dropped")
    os.chmod(where + "/dropped", 0o755)
    attempt("exec " + where, lambda: subprocess.run([where + "/dropped"], check=True))
attempt("exec /usr", lambda: subprocess.run(["/usr/bin/true"], check=True))
attempt("write host file", lambda: open("/dev/termination-log", "a").write("x"))
attempt("write /dev/null", lambda: open("/dev/null", "w").write("x"))
attempt("mknod", lambda: os.mknod("/tmp/null", 0o666 | 0o020000, os.makedev(1, 3)))
attempt("xattr host file", lambda: os.setxattr("/dev/termination-log", "user.fill", b"x" * 4096))
print("oom_score_adj", open("/proc/self/oom_score_adj").read().strip(), flush=True)
import numpy
print("numpy", numpy.arange(3).sum(), flush=True)
)PY";

// What a Pod's mounts leave open (PodLikeMounts): `--confine` closes both with Landlock under
// runc; gVisor has no Landlock, so there the sandbox ends before main.py runs.
TEST(LauncherTest, ConfinedNothingRunsFromScratchAndNoHostFileIsWritten) {
  const PodLikeMounts pod;
  const std::string mounts = pod.flags();

  // The same mounts without --confine: the escapes work, so the test can fail.
  const CommandResult open = launch("", kEscapes, mounts);
  EXPECT_EQ(open.exit_code, 0) << open.output;
  EXPECT_THAT(open.output, HasSubstr("exec /tmp ALLOWED"));
  EXPECT_THAT(open.output, HasSubstr("exec /workspace ALLOWED"));
  EXPECT_THAT(open.output, HasSubstr("exec /dev/shm ALLOWED"));
  EXPECT_THAT(open.output, HasSubstr("write host file ALLOWED"));

  const CommandResult confined = launch("--confine", kEscapes, mounts);
  if (underGvisor()) {
    EXPECT_EQ(confined.exit_code, 125) << confined.output;
    EXPECT_THAT(confined.output, HasSubstr("rejected setup: --confine: Landlock is unavailable"));
    EXPECT_THAT(confined.output, ::testing::Not(HasSubstr("exec")));
    return;
  }
  EXPECT_EQ(confined.exit_code, 0) << confined.output;
  EXPECT_THAT(open.output, HasSubstr("mknod Operation not permitted"));  // no CAP_MKNOD
  for (const char* line :
       {"exec /tmp Permission denied", "exec /workspace Permission denied",
        "exec /dev/shm Permission denied", "exec /usr ALLOWED", "write host file Permission denied",
        "write /dev/null ALLOWED",
        "mknod Permission denied",  // Landlock, before the missing capability
        "numpy 3",
        // Extended attributes, which Landlock does not cover: the program's seccomp filter.
        "xattr host file Operation not permitted",
        // The program still offers itself to the OOM killer first (procfs is writable to it).
        "oom_score_adj 1000"}) {
    EXPECT_THAT(confined.output, HasSubstr(line));
  }
  EXPECT_EQ(runCommand("cat " + pod.hostFile().path()).output, "x")
      << "only the unconfined run wrote";
}

// The audit (docker/audit.py, run as main.py with its checks beside it) in such a container
// judges the confinement by behaviour: scratch mounts without their flags pass only where
// nothing copied there executes, and the host file only where it cannot be opened for writing.
TEST(LauncherTest, TheAuditSeesTheConfinementWhereTheMountsLackTheirFlags) {
  const PodLikeMounts pod;
  const std::string mounts = pod.flags();
  const std::string config =
      R"({"runtime": ")" + testRuntime() + R"(", "uid_first": 1900000000, "uid_last": 1900000999,
          "pids_limit": 64, "processes_limit": 64, "open_files_limit": 1024,
          "file_size_limit_bytes": 8388608, "masked_paths": [], "readonly_paths": [],
          "tmpfs": {"/tmp": {"size_bytes": 16777216, "max_inodes": 64},
                    "/workspace": {"size_bytes": 16777216, "max_inodes": 64}},
          "budget_seconds": 60})";
  const std::string audit =
      runCommand("cat " + std::string(SCS_SOURCE_DIR) + "/docker/audit.py").output;
  ASSERT_THAT(audit, HasSubstr("audit_filesystem.check_host_files"));
  const std::string rlimits = "--rlimits nproc=64,nofile=1024,fsize=8388608,core=0";

  const auto verdict = [](const std::string& output, const std::string& row) {
    const std::string key = "{\"name\": \"" + row + "\", \"ok\": ";
    const auto at = output.find(key);
    return at == std::string::npos                       ? std::string("absent")
           : output.substr(at + key.size(), 4) == "true" ? "ok"
                                                         : "FAIL";
  };
  const CommandResult open = launch(rlimits, audit, mounts, config);
  EXPECT_EQ(verdict(open.output, "tmpfs_options /tmp"), "FAIL") << open.output;
  EXPECT_EQ(verdict(open.output, "exec_refused /tmp"), "FAIL");
  EXPECT_EQ(verdict(open.output, "host_file_unwritable /dev/termination-log"), "FAIL");

  // As a Pod's launcher runs: with --no-network too, in a container with a network.
  const CommandResult confined =
      launch(rlimits + " --no-network --confine", audit, mounts, config, kPodLikeNetwork);
  if (underGvisor()) {  // no Landlock: the audit never runs
    EXPECT_EQ(confined.exit_code, 125) << confined.output;
    EXPECT_EQ(verdict(confined.output, "exec_refused /tmp"), "absent");
    return;
  }
  EXPECT_EQ(confined.exit_code, 0) << confined.output;
  for (const char* row : {"tmpfs_options /tmp", "tmpfs_options /workspace", "exec_refused /tmp",
                          "exec_refused /workspace", "host_file_unwritable /dev/termination-log",
                          "host_file_unwritable /etc/hosts", "pids_cap", "ip_sockets_refused",
                          "tcp4_egress", "tcp6_egress", "socket AF_PACKET"}) {
    EXPECT_EQ(verdict(confined.output, row), "ok") << row << "\n" << confined.output;
  }
  EXPECT_THAT(confined.output, HasSubstr("confined by the launcher instead"));
}

const char* const kNetworkProbe = R"PY(import errno, os, socket
for name, kind in (("AF_INET", socket.SOCK_STREAM), ("AF_INET6", socket.SOCK_STREAM),
                   ("AF_NETLINK", socket.SOCK_RAW), ("AF_PACKET", socket.SOCK_RAW)):
    try:
        socket.socket(getattr(socket, name), kind).close()
        print(name, "OPENED", flush=True)
    except OSError as error:
        print(name, errno.errorcode[error.errno], flush=True)
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
ours.sendall(b"x")
print("socketpair", "works" if theirs.recv(1) == b"x" else "broken", flush=True)
try:
    print("interfaces", ",".join(sorted(name for _, name in socket.if_nameindex())), flush=True)
except OSError as error:
    print("interfaces", errno.errorcode[error.errno], flush=True)
for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_PORT"):
    print(name, os.environ.get(name, "absent"), flush=True)
)PY";

// What a Pod's network leaves open (kPodLikeNetwork): `--no-network` refuses the program every
// socket but AF_UNIX with its seccomp filter, which gVisor applies too, and PID 1 drops the
// KUBERNETES_* variables from the environment every program inherits.
TEST(LauncherTest, NoNetworkRefusesEverySocketButUnixAndDropsTheKubeletsVariables) {
  // The same container without --no-network: an IP socket opens and the variables are there, so
  // the test can fail.
  const CommandResult open = launch("", kNetworkProbe, "", "", kPodLikeNetwork);
  EXPECT_EQ(open.exit_code, 0) << open.output;
  EXPECT_THAT(open.output, HasSubstr("AF_INET OPENED"));
  // scripts/setup.sh registers runsc with --network=none: under gVisor the container has only lo
  // whatever its engine's network. The refusal below needs no interface to show.
  if (!underGvisor()) {
    EXPECT_THAT(open.output, HasSubstr("interfaces eth0,lo"));
  }
  EXPECT_THAT(open.output, HasSubstr("KUBERNETES_SERVICE_HOST 10.96.0.1"));
  EXPECT_THAT(open.output, HasSubstr("KUBERNETES_PORT tcp://10.96.0.1:443"));

  const CommandResult refused = launch("--no-network", kNetworkProbe, "", "", kPodLikeNetwork);
  EXPECT_EQ(refused.exit_code, 0) << refused.output;
  for (const char* line :
       {"AF_INET EACCES", "AF_INET6 EACCES", "AF_NETLINK EACCES", "AF_PACKET EACCES",
        "socketpair works", "KUBERNETES_SERVICE_HOST absent", "KUBERNETES_PORT absent"}) {
    EXPECT_THAT(refused.output, HasSubstr(line)) << refused.output;
  }
  EXPECT_THAT(refused.output, ::testing::Not(HasSubstr("OPENED")));
}

}  // namespace
}  // namespace scs::integration
