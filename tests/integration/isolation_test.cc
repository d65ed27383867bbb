// What one run does must not reach another run, the launcher or the report: each attack runs
// inside a real sandbox (under runc, and again under runsc when the engine has it), and the
// tests assert on what it could do. Issue 11.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "integration/harness.h"

namespace scs::integration {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char* const kPrelude = R"PY(import ctypes, errno, os, platform, signal, sys, time

libc = ctypes.CDLL(None, use_errno=True)

def say(*parts):
    print(*parts, flush=True)

def errname(code):
    return errno.errorcode.get(code, str(code))

def call(result):
    """'OK', or the errno name of a failed C call."""
    return "OK" if result >= 0 else errname(ctypes.get_errno())
)PY";

// Holds what the kernel counts per user: every inotify instance it may have, the POSIX
// message-queue bytes, and pending real-time signals, for long enough that the run beside it
// tries the same.
const char* const kPerUserExhaust = R"PY(
instances = 0
while instances < 100000 and libc.inotify_init1(0) >= 0:
    instances += 1
say("inotify", instances, errname(ctypes.get_errno()))
librt = ctypes.CDLL("librt.so.1", use_errno=True)
librt.mq_open.restype = ctypes.c_int
queues = 0
while queues < 1000 and librt.mq_open(b"/scs-%d" % queues, os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:
    queues += 1
say("mqueues", queues, errname(ctypes.get_errno()))
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
queued = 0
value = (ctypes.c_int * 2)(0, 0)
while queued < 1000000 and libc.sigqueue(os.getpid(), signal.SIGRTMIN, value) == 0:
    queued += 1
say("rt-signals", queued, errname(ctypes.get_errno()))
time.sleep(25)
)PY";

// Runs beside the exhauster: once it has had time to exhaust everything, tries the same.
const char* const kPerUserVictim = R"PY(
time.sleep(8)
say("inotify", call(libc.inotify_init1(0)))
librt = ctypes.CDLL("librt.so.1", use_errno=True)
librt.mq_open.restype = ctypes.c_int
say("mq_open", call(librt.mq_open(b"/scs-victim", os.O_CREAT | os.O_RDWR, 0o600, None)))
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
say("sigqueue", call(libc.sigqueue(os.getpid(), signal.SIGRTMIN, (ctypes.c_int * 2)(0, 0))))
)PY";

// Stops, kills and traces every other process it can see: PID 1 above all.
const char* const kReachPid1 = R"PY(
PTRACE_SEIZE = 0x4206
me = os.getpid()
for name in sorted(os.listdir("/proc")):
    if not name.isdigit() or int(name) == me:
        continue
    pid = int(name)
    label = "pid1" if pid == 1 else "other"
    for verb, sig in (("stop", signal.SIGSTOP), ("kill", signal.SIGKILL)):
        say(verb, label, call(libc.kill(pid, sig)))
    say("seize", label, call(libc.ptrace(PTRACE_SEIZE, pid, 0, 0)))
# The int is cut to 32 bits by the kernel: 2**32 + 1 is PID 1.
say("kill-wrapped", call(libc.syscall(62 if platform.machine() == "x86_64" else 129,
                                      ctypes.c_long(2**32 + 1), ctypes.c_long(9))))
with open("/proc/1/stat") as stat:
    say("pid1-state", stat.read().rsplit(")", 1)[1].split()[0])
)PY";

// A thread group whose leader has exited, with a thread that starts writing the moment main.py's
// process is gone, and a stopped process: neither may outlive main.py for longer than the
// launcher takes to end them, nor write after its report.
const char* const kOutliveMain = R"PY(import threading

main = os.getpid()
if os.fork() == 0:
    def writer():
        while os.getppid() == main:
            time.sleep(0.001)
        for _ in range(2000):
            os.write(1, b"late\n")
            time.sleep(0.001)
    threading.Thread(target=writer).start()
    libc.syscall(60 if platform.machine() == "x86_64" else 93, 0)  # SYS_exit: the leader only
if os.fork() == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
os.makedirs("/workspace/out", exist_ok=True)
with open("/workspace/out/kept.txt", "w") as out:
    out.write("kept")
say("main done")
)PY";

// Writes an exception record of its own on every descriptor it inherited, then ends as `END`.
const char* const kForgeReport = R"PY(import json

record = json.dumps({"type": "Forged", "message": "made up", "traceback": "none"}).encode()
for name in os.listdir("/proc/self/fd"):
    if int(name) > 2:
        try:
            os.write(int(name), record + b"\n")
        except OSError:
            pass
say("forged")
END
)PY";

const char* const kMemfdExec = R"PY(
say("memfd_create", call(libc.syscall(319 if platform.machine() == "x86_64" else 279,
                                      b"elf", 0)))
)PY";

std::string withPrelude(const std::string& body) { return std::string(kPrelude) + body; }

std::string forging(const std::string& end) {
  std::string body = kForgeReport;
  body.replace(body.find("END"), 3, end);
  return withPrelude(body);
}

class IsolationTest : public BatchedIntegrationTest<IsolationTest> {
 protected:
  static void SetUpTestSuite() {
    batch_ = std::make_unique<RunBatch>();
    const Limits limits{.timeout_seconds = 120};
    // First, so that both run at once.
    batch_->add("per_user_exhaust", {withPrelude(kPerUserExhaust), limits, nullptr});
    batch_->add("per_user_victim", {withPrelude(kPerUserVictim), limits, nullptr});
    batch_->add("reach_pid1", {withPrelude(kReachPid1), limits, nullptr});
    batch_->add("outlive_main", {withPrelude(kOutliveMain), limits, nullptr});
    batch_->add("forge_exit_0", {forging("pass"), limits, nullptr});
    batch_->add("forge_then_raise", {forging("raise ValueError('the real one')"), limits, nullptr});
    batch_->add("exit_137", {"raise SystemExit(137)\n", limits, nullptr});
    batch_->add("memfd", {withPrelude(kMemfdExec), limits, nullptr});
    batch_->startAll(sharedServer());
  }

  static Poco::JSON::Object::Ptr reportOf(const std::string& name) {
    return batch_->report(sharedServer(), name);
  }
};

TEST_F(IsolationTest, ARunExhaustingPerUserKernelCountersLeavesTheRunBesideItUnharmed) {
  const auto exhauster = reportOf("per_user_exhaust");
  const auto victim = reportOf("per_user_victim");
  ASSERT_EQ(text(victim, "status"), "succeeded") << describe(victim);
  if (!underGvisor()) {
    // The exhauster really reached the kernel's per-user limits (under gVisor they are the
    // Sentry's own, per sandbox, anyway).
    EXPECT_THAT(verdict(exhauster, "inotify"), HasSubstr("EMFILE")) << describe(exhauster);
    EXPECT_THAT(verdict(exhauster, "mqueues"), HasSubstr("EMFILE")) << describe(exhauster);
    EXPECT_THAT(verdict(exhauster, "rt-signals"), HasSubstr("EAGAIN")) << describe(exhauster);
  }
  // Its own uid: none of the exhauster's counters is the victim's.
  EXPECT_EQ(verdict(victim, "inotify"), "OK");
  EXPECT_EQ(verdict(victim, "mq_open"), "OK");
  EXPECT_EQ(verdict(victim, "sigqueue"), "OK");
}

TEST_F(IsolationTest, NoSignalOrTraceReachesPid1AndItsDeadline) {
  const auto report = reportOf("reach_pid1");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(verdict(report, "stop pid1"), "EPERM");
  EXPECT_EQ(verdict(report, "kill pid1"), "EPERM");
  EXPECT_EQ(verdict(report, "seize pid1"), "EPERM");
  EXPECT_EQ(verdict(report, "kill-wrapped"), "EPERM");
  EXPECT_NE(verdict(report, "pid1-state"), "T") << "PID 1 was stopped";
}

TEST_F(IsolationTest, NothingOfTheProgramOutlivesMainPyOrWritesAfterTheReport) {
  const auto report = reportOf("outlive_main");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_LT(number(report, "duration_seconds"), 10.0);
  // The report's trailer came last: the files it carries are intact.
  const auto files = report->getArray("files");
  ASSERT_FALSE(files.isNull()) << describe(report);
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ(files->getObject(0)->getValue<std::string>("path"), "kept.txt");
  // The late writer began once main.py's process was gone: it was ended at once (in the
  // moment the launcher takes to see main.py end), not 2000 lines later.
  const std::string out = stream(report, "stdout");
  const auto done = out.find("main done\n");
  ASSERT_NE(done, std::string::npos) << tail(out);
  std::size_t late = 0;
  for (auto at = out.find("late", done); at != std::string::npos; at = out.find("late", at + 1)) {
    ++late;
  }
  EXPECT_LT(late, 50u) << tail(out);
}

TEST_F(IsolationTest, AForgedExceptionRecordNeverReachesTheReportOfARunThatExitedZero) {
  const auto report = reportOf("forge_exit_0");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_TRUE(absentOrNull(report, "exception")) << describe(report);
}

TEST_F(IsolationTest, TheRealUncaughtExceptionIsReportedAfterAForgedRecord) {
  const auto report = reportOf("forge_then_raise");
  EXPECT_EQ(text(report, "status"), "failed") << describe(report);
  const auto exception = report->getObject("exception");
  ASSERT_FALSE(exception.isNull()) << describe(report);
  EXPECT_EQ(exception->getValue<std::string>("type"), "ValueError");
  EXPECT_EQ(exception->getValue<std::string>("message"), "the real one");
}

TEST_F(IsolationTest, ExitCode137IsAnExitCodeNotASignal) {
  const auto report = reportOf("exit_137");
  EXPECT_EQ(text(report, "status"), "failed") << describe(report);
  EXPECT_EQ(integer(report, "exit_code"), 137);
  EXPECT_TRUE(absentOrNull(report, "signal")) << describe(report);
  EXPECT_EQ(text(report, "reason"), "Exited with code 137.");
}

TEST_F(IsolationTest, MemfdCreateIsRefusedSoWrittenBytesCannotBeExecutedFromMemory) {
  const auto report = reportOf("memfd");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(verdict(report, "memfd_create"), "EPERM");
}

class KilledOutsideTest : public IntegrationTest {};

// docker kill and docker rm -f, as an operator would: the reason says so and blames nobody's
// code.
TEST_F(KilledOutsideTest, AKillOrRemovalThroughTheEngineIsReportedAsSuch) {
  for (const std::string command : {"docker kill ", "docker rm -f "}) {
    const std::string run_id =
        startRun(sharedServer(), {"import time\ntime.sleep(300)\n", {}, nullptr});
    const std::string id = awaitRunningContainer(sharedServer(), run_id);
    ASSERT_EQ(runCommand(command + id).exit_code, 0) << command;
    const auto report = awaitFinal(sharedServer(), run_id, std::chrono::seconds(60));
    EXPECT_EQ(text(report, "status"), "sandbox_error") << command << describe(report);
    EXPECT_THAT(text(report, "reason"), HasSubstr("Killed from outside the server")) << command;
    EXPECT_TRUE(absentOrNull(report, "signal")) << command << describe(report);
  }
}

}  // namespace
}  // namespace scs::integration
