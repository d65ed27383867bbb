// Statuses, output, files and container lifecycle, end to end: the real server binary with the
// Docker backend, over stdio, against the local engine and the real sandbox image.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "integration/harness.h"
#include "support/base64.h"

namespace scs::integration {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string lowercase(std::string value) {
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return value;
}

Poco::JSON::Object::Ptr runIdArguments(const std::string& run_id) {
  Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
  arguments->set("run_id", run_id);
  return arguments;
}

// Peak resident memory of a process, from /proc/<pid>/status (VmHWM, in bytes).
std::int64_t peakResidentBytes(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      std::int64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  }
  return -1;
}

// Every suite leaves the shared server idle, so queueing cannot hide a slow timer.
class TimeoutTest : public IntegrationTest {};

TEST_F(TimeoutTest, BusyLoopIsTimedOutAndSeenFinalWithinFiveSecondsOfStart) {
  auto& server = sharedServer();
  const auto started = steady_clock::now();
  const std::string run_id =
      startRun(server, {"while True:\n    pass\n", Limits{.timeout_seconds = 2}, nullptr});
  const auto report = awaitFinal(server, run_id, seconds(30));
  const auto elapsed = steady_clock::now() - started;

  EXPECT_EQ(text(report, "status"), "timed_out") << describe(report);
  EXPECT_LT(elapsed, seconds(5)) << "final after " << std::chrono::duration<double>(elapsed).count()
                                 << " s";
  EXPECT_GE(number(report, "duration_seconds"), 1.9);
  EXPECT_FALSE(text(report, "reason").empty());
}

// Every status end to end; the runs of the batch execute in parallel.
class StatusTest : public BatchedIntegrationTest<StatusTest> {
 protected:
  static void SetUpTestSuite() {
    batch_ = std::make_unique<RunBatch>();
    batch_->add("sum", {"print(sum(range(10)))\n", {}, nullptr});
    batch_->add("exit3", {"import sys\nsys.exit(3)\n", {}, nullptr});
    batch_->add("traceback", {"raise ValueError('boom from user code')\n", {}, nullptr});
    batch_->add("sigsegv",
                {"import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", {}, nullptr});
    batch_->add("memory_bomb", {"data = bytearray(2 * 1024 ** 3)\nprint('allocated', len(data))\n",
                                Limits{.memory_gb = 0.25, .timeout_seconds = 60}, nullptr});
    batch_->add("child_oom", {R"PY(import subprocess, sys
child = subprocess.run([sys.executable, "-c", "data = bytearray(2 * 1024 ** 3)"])
print("child", child.returncode, flush=True)
)PY",
                              Limits{.memory_gb = 0.25, .timeout_seconds = 60}, nullptr});
    batch_->add("sigterm_ignored", {R"PY(import signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    pass
)PY",
                                    Limits{.timeout_seconds = 2}, nullptr});
    batch_->startAll(sharedServer());
  }
};

TEST_F(StatusTest, SumSucceedsWithItsExactOutput) {
  const auto report = batch_->report(sharedServer(), "sum");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(integer(report, "exit_code"), 0);
  EXPECT_TRUE(absentOrNull(report, "signal"));
  EXPECT_EQ(stream(report, "stdout"), "45\n");
  EXPECT_GE(number(report, "duration_seconds"), 0.0);
  // The compact report (issue 24): nothing that tells the agent nothing.
  for (const char* absent : {"stderr", "stdout_bytes", "stderr_bytes", "stdout_truncated",
                             "stderr_truncated", "started_at", "finished_at", "limits"}) {
    EXPECT_TRUE(absentOrNull(report, absent)) << absent;
  }
}

TEST_F(StatusTest, ExitThreeFailsWithExitCodeThree) {
  const auto report = batch_->report(sharedServer(), "exit3");
  EXPECT_EQ(text(report, "status"), "failed") << describe(report);
  EXPECT_EQ(integer(report, "exit_code"), 3);
  EXPECT_TRUE(absentOrNull(report, "signal"));
}

TEST_F(StatusTest, UncaughtExceptionFailsWithTheTracebackOnStderr) {
  const auto report = batch_->report(sharedServer(), "traceback");
  EXPECT_EQ(text(report, "status"), "failed") << describe(report);
  EXPECT_EQ(integer(report, "exit_code"), 1);
  EXPECT_THAT(stream(report, "stderr"), HasSubstr("Traceback"));
  EXPECT_THAT(stream(report, "stderr"), HasSubstr("ValueError: boom from user code"));
}

TEST_F(StatusTest, SelfInflictedSigsegvFailsWithTheSignalNamed) {
  const auto report = batch_->report(sharedServer(), "sigsegv");
  EXPECT_EQ(text(report, "status"), "failed") << describe(report);
  EXPECT_EQ(absentOrNull(report, "signal") ? "<none>" : text(report, "signal"), "SIGSEGV")
      << describe(report);
}

TEST_F(StatusTest, TwoGigabyteAllocationUnderQuarterGigabyteIsOutOfMemory) {
  const auto report = batch_->report(sharedServer(), "memory_bomb");
  EXPECT_EQ(text(report, "status"), "out_of_memory") << describe(report);
  EXPECT_THAT(stream(report, "stdout"), Not(HasSubstr("allocated")));
  EXPECT_FALSE(text(report, "reason").empty());
}

TEST_F(StatusTest, ChildKilledForMemoryWhileMainExitsZeroSucceedsWithTheOomInTheReason) {
  const auto report = batch_->report(sharedServer(), "child_oom");
  if (underGvisor()) {
    // gVisor has no OOM killer of its own inside the sandbox: the host cgroup's OOM kill lands
    // on the Sentry, which ends the whole sandbox, main process included.
    EXPECT_EQ(text(report, "status"), "out_of_memory") << describe(report);
    EXPECT_THAT(lowercase(text(report, "reason")), HasSubstr("memory")) << describe(report);
    return;
  }
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(integer(report, "exit_code"), 0);
  EXPECT_EQ(verdict(report, "child"), "-9") << "the child was not SIGKILLed by the OOM killer";
  const std::string reason = lowercase(text(report, "reason"));
  EXPECT_TRUE(reason.find("oom") != std::string::npos ||
              reason.find("out of memory") != std::string::npos ||
              reason.find("memory") != std::string::npos)
      << "reason does not mention the OOM kill: " << text(report, "reason");
}

TEST_F(StatusTest, LoopIgnoringSigtermIsTimedOut) {
  const auto report = batch_->report(sharedServer(), "sigterm_ignored");
  EXPECT_EQ(text(report, "status"), "timed_out") << describe(report);
  EXPECT_LT(number(report, "duration_seconds"), 10.0);
}

TEST_F(StatusTest, StopRunOnRunningSleepIsStoppedAndItsContainerRemoved) {
  auto& server = sharedServer();
  const std::string run_id = startRun(server, {"import time\ntime.sleep(60)\n", {}, nullptr});
  const std::string container = awaitRunningContainer(server, run_id, seconds(120));

  const auto stopped = callToolOk(server, "stop_run", runIdArguments(run_id));
  EXPECT_EQ(text(stopped, "status"), "stopped") << describe(stopped);
  EXPECT_FALSE(containerExists(container)) << "stop_run answered before the container was removed";

  const auto later = snapshot(server, run_id);
  EXPECT_EQ(text(later, "status"), "stopped");
  const auto again = callToolOk(server, "stop_run", runIdArguments(run_id));
  EXPECT_EQ(text(again, "status"), "stopped");
}

class OutputTest : public BatchedIntegrationTest<OutputTest> {
 protected:
  static void SetUpTestSuite() {
    batch_ = std::make_unique<RunBatch>();
    batch_->add("flood", {R"PY(import sys
out = sys.stdout.buffer
block = b"x" * (1 << 20)
for _ in range(1023):
    out.write(block)
marker = b"\nFLOOD-TAIL-MARKER\n"
out.write(b"x" * ((1 << 20) - len(marker)) + marker)
out.flush()
)PY",
                          Limits{.timeout_seconds = 180}, nullptr});
    batch_->add("invalid_utf8", {R"PY(import sys
sys.stdout.buffer.write(b"before \xff\xfe\xc3\x28 \x1b[31m\tafter\n")
sys.stderr.buffer.write(b"err \x80 end\n")
)PY",
                                 {},
                                 nullptr});
    batch_->add("streams", {R"PY(import sys
print("to stdout")
print("to stderr", file=sys.stderr)
)PY",
                            {},
                            nullptr});
    batch_->startAll(sharedServer());
  }
};

TEST_F(OutputTest, OneGigabyteFloodSucceedsCountedAndCappedWithTheTailKept) {
  const auto report = batch_->report(sharedServer(), "flood");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report).substr(0, 600);
  EXPECT_EQ(integer(report, "stdout_bytes"), std::int64_t{1} << 30);
  EXPECT_TRUE(flag(report, "stdout_truncated"));
  const std::string out = stream(report, "stdout");
  // The report's window (30,000 characters by default): the head and the tail around a marker.
  EXPECT_LE(out.size(), 30'000u) << "the report's text exceeds its window";
  EXPECT_THAT(out, StartsWith("xxxxxxxxxxxxxxxx")) << "the head is missing";
  EXPECT_THAT(out.substr(out.size() - std::min<std::size_t>(out.size(), 64)),
              HasSubstr("FLOOD-TAIL-MARKER\n"))
      << "the tail is missing";
  EXPECT_THAT(out, HasSubstr("get_result with stdout_offset="));
  EXPECT_TRUE(absentOrNull(report, "stderr_truncated"));
  // The capture behind it keeps the cap's head and tail: read from offsets, the head runs to
  // half the cap and the tail starts half the cap before the end; between them is dropped.
  const auto from = [&](std::uint64_t offset) {
    Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
    arguments->set("run_id", text(report, "run_id"));
    arguments->set("stdout_offset", offset);
    return callToolOk(sharedServer(), "get_result", arguments);
  };
  const std::uint64_t total = std::uint64_t{1} << 30;
  const auto head_end = from(kOutputCapBytes / 2 - 100);
  EXPECT_EQ(integer(head_end, "stdout_offset"), std::int64_t{kOutputCapBytes / 2 - 100});
  EXPECT_THAT(stream(head_end, "stdout"), HasSubstr("bytes omitted"));
  const auto middle = from(total / 2);
  EXPECT_EQ(integer(middle, "stdout_offset"),
            static_cast<std::int64_t>(total - kOutputCapBytes / 2))
      << "the dropped middle moves a read to the tail's start";

  const std::int64_t peak = peakResidentBytes(sharedServer().pid());
  EXPECT_GT(peak, 0);
  EXPECT_LT(peak, std::int64_t{256} << 20) << "server peak RSS " << peak << " bytes";
}

TEST_F(OutputTest, InvalidUtf8BecomesValidJsonTextWithReplacementCharacters) {
  const auto report = batch_->report(sharedServer(), "invalid_utf8");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  const std::string err = stream(report, "stderr");
  EXPECT_TRUE(isValidUtf8(out));
  EXPECT_TRUE(isValidUtf8(err));
  EXPECT_THAT(out, StartsWith("before "));
  EXPECT_THAT(out, HasSubstr("\xEF\xBF\xBD"));  // U+FFFD
  EXPECT_THAT(out, HasSubstr("( \x1b[31m\tafter\n"));
  EXPECT_EQ(err, "err \xEF\xBF\xBD end\n");
  for (const std::string& line : sharedServer().stdoutLines()) {
    EXPECT_TRUE(isValidUtf8(line)) << "protocol line is not valid UTF-8: " << tail(line, 200);
  }
}

TEST_F(OutputTest, StdoutAndStderrAreSeparated) {
  const auto report = batch_->report(sharedServer(), "streams");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(stream(report, "stdout"), "to stdout\n");
  EXPECT_EQ(stream(report, "stderr"), "to stderr\n");
}

class FilesTest : public IntegrationTest {};

TEST_F(FilesTest, TextAndBase64FilesArriveWithExactBytes) {
  const std::string text_content = "h\xC3\xA9llo\nw\xC3\xB6rld\n";
  std::string binary;
  for (int i = 0; i < 256; ++i) {
    binary.push_back(static_cast<char>(i));
  }
  binary += std::string("\x00\xff\x00\r\n", 5);

  Poco::JSON::Array::Ptr files = new Poco::JSON::Array;
  Poco::JSON::Object::Ptr text_file = new Poco::JSON::Object;
  text_file->set("path", "data/hello.txt");
  text_file->set("content", text_content);
  files->add(text_file);
  Poco::JSON::Object::Ptr binary_file = new Poco::JSON::Object;
  binary_file->set("path", "bin/blob.bin");
  binary_file->set("content", scs::testing::base64Encode(binary));
  binary_file->set("encoding", "base64");
  files->add(binary_file);

  const std::string code = R"PY(import os
for path in ("data/hello.txt", "bin/blob.bin"):
    with open(path, "rb") as f:
        print(path, f.read().hex())
print("cwd", os.getcwd())
)PY";
  auto& server = sharedServer();
  const auto report = awaitFinal(server, startRun(server, {code, {}, files}));
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(verdict(report, "data/hello.txt"), hexOf(text_content));
  EXPECT_EQ(verdict(report, "bin/blob.bin"), hexOf(binary));
  EXPECT_EQ(verdict(report, "cwd"), "/workspace");
}

TEST_F(FilesTest, HostilePathsAreToolErrorsAndStartNothing) {
  auto& server = sharedServer();
  const std::vector<std::string> before = managedContainers();
  for (const std::string path : {"../x", "/etc/x", "a\\b", "main.py", "a/../../x"}) {
    Poco::JSON::Array::Ptr files = new Poco::JSON::Array;
    Poco::JSON::Object::Ptr file = new Poco::JSON::Object;
    file->set("path", path);
    file->set("content", "x");
    files->add(file);
    const auto result =
        server.callTool("start_run", startRunArguments({"print('ran')\n", {}, files}));
    ASSERT_TRUE(result->has("isError")) << "path " << path;
    EXPECT_TRUE(result->getValue<bool>("isError")) << "path " << path << " was accepted";
    const auto content = result->getArray("content");
    ASSERT_TRUE(content && content->size() > 0) << "path " << path;
    EXPECT_FALSE(content->getObject(0)->getValue<std::string>("text").empty());
    const auto structured = result->getObject("structuredContent");
    EXPECT_TRUE(!structured || !structured->has("run_id")) << "a run was created for path " << path;
  }
  // The pool may make prepared sandboxes meanwhile (it follows earlier tests' bursts); no
  // other container may appear.
  for (const std::string& id : managedContainers()) {
    if (std::find(before.begin(), before.end(), id) != before.end()) {
      continue;
    }
    const CommandResult prepared =
        runCommand("docker inspect -f '{{index .Config.Labels \"io.scs.prepared\"}}' " + id);
    if (prepared.exit_code != 0) {
      continue;  // already removed: a prepared sandbox the pool retired meanwhile
    }
    EXPECT_EQ(prepared.output, "true\n")
        << "container " << id << " appeared during the hostile-path calls";
  }
}

// What the engine says the host has, from `docker info`.
std::int64_t engineFigure(const std::string& go_template) {
  const CommandResult result = runCommand("docker info --format '" + go_template + "'");
  if (result.exit_code != 0) {
    throw std::runtime_error("docker info failed: " + result.output);
  }
  return std::stoll(result.output);
}

class HostCapacityTest : public IntegrationTest {};

TEST_F(HostCapacityTest, MoreCpusThanTheHostHasAreRefusedNotClamped) {
  const std::int64_t cores = engineFigure("{{.NCPU}}");
  const std::int64_t maximum = std::min<std::int64_t>(cores, 4);
  const auto result = sharedServer().callTool(
      "start_run", startRunArguments({"print('ran')\n",
                                      Limits{.cpus = static_cast<double>(maximum + 1)}, nullptr}));
  ASSERT_TRUE(result->has("isError") && result->getValue<bool>("isError"))
      << "a request for " << maximum + 1 << " CPUs was accepted";
  const std::string message =
      result->getArray("content")->getObject(0)->getValue<std::string>("text");
  EXPECT_THAT(message, HasSubstr("max is " + std::to_string(maximum))) << message;
  if (cores < 4) {
    EXPECT_THAT(message, HasSubstr("this host has " + std::to_string(cores))) << message;
  }
}

TEST_F(HostCapacityTest, RunWaitsInTheQueueUntilItsMemoryFitsTheHost) {
  // Two runs of 60% of the host's memory each cannot run at once; the limits are reserved,
  // not used, so this costs no real memory.
  const double host_gib = static_cast<double>(engineFigure("{{.MemTotal}}")) / (1 << 30);
  const double memory_gb = std::floor(host_gib * 0.6 * 8) / 8;
  std::ostringstream memory_text;
  memory_text << memory_gb;
  auto server = launchServer({"--max-memory-gb", memory_text.str()});

  const std::string first =
      startRun(*server, {"import time\ntime.sleep(4)\n", Limits{.memory_gb = memory_gb}, nullptr});
  awaitRunningContainer(*server, first);
  const auto started =
      callToolOk(*server, "start_run",
                 startRunArguments({"print('second')\n", Limits{.memory_gb = memory_gb}, nullptr}));
  const std::string second = text(started, "run_id");
  const auto waiting = snapshot(*server, second);
  EXPECT_EQ(text(waiting, "status"), "queued")
      << "two runs of " << memory_gb << " GB run at once on a host of " << host_gib << " GiB";
  EXPECT_EQ(integer(waiting, "queue_position"), 1);

  const auto first_report = awaitFinal(*server, first, seconds(60));
  const auto second_report = awaitFinal(*server, second, seconds(60));
  EXPECT_EQ(text(first_report, "status"), "succeeded") << describe(first_report);
  EXPECT_EQ(text(second_report, "status"), "succeeded") << describe(second_report);
  EXPECT_EQ(stream(second_report, "stdout"), "second\n");
  EXPECT_GE(number(second_report, "queued_seconds"), 2.0);
  server->closeStdin();
  EXPECT_TRUE(server->waitExit(seconds(2)).has_value());
}

class FailurePathTest : public IntegrationTest {};

TEST_F(FailurePathTest, MissingImageIsASandboxErrorAndLeavesNoContainer) {
  auto server = launchServer({"--image", "safe-code-sandbox:no-such-tag-for-tests"});
  const std::string run_id = startRun(*server, {"print('ran')\n", {}, nullptr});
  const auto report = awaitFinal(*server, run_id, seconds(60));
  EXPECT_EQ(text(report, "status"), "sandbox_error") << describe(report);
  EXPECT_FALSE(text(report, "reason").empty());
  EXPECT_THAT(stream(report, "stdout"), Not(HasSubstr("ran")));
  EXPECT_EQ(containersOfRun(*server, run_id), std::vector<std::string>{});
  server->closeStdin();
  EXPECT_TRUE(server->waitExit(seconds(2)).has_value());
}

TEST_F(FailurePathTest, UnreachableEngineStopsTheServerAtStartupWithAClearMessage) {
  testing::McpProcess server(
      SCS_BINARY, {"--backend", "docker", "--engine", "unix:///nonexistent/scs-test-docker.sock"});
  const auto exit_code = server.waitExit(seconds(10));
  ASSERT_TRUE(exit_code.has_value()) << "the server kept running without an engine";
  EXPECT_NE(*exit_code, 0);
  EXPECT_THAT(server.stderrText(), HasSubstr("/nonexistent/scs-test-docker.sock"));
}

class LifecycleTest : public IntegrationTest {};

TEST_F(LifecycleTest, DaemonisedGrandchildIsGoneWithItsContainer) {
  std::random_device random;
  const std::string token = "7001." + std::to_string(100000 + random() % 900000);
  const std::string code = "TOKEN = \"" + token + "\"\n" + R"PY(import os, signal, time
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.execv("/bin/sleep", ["sleep", TOKEN])
    os.write(w, str(grandchild).encode())
    os._exit(0)
os.close(w)
grandchild = int(os.read(r, 32))
os.waitpid(child, 0)
time.sleep(0.5)
with open("/proc/%d/cmdline" % grandchild, "rb") as f:
    print("daemon", f.read().replace(b"\0", b" ").decode().strip(), flush=True)
time.sleep(3)
)PY";
  auto& server = sharedServer();
  const std::string run_id = startRun(server, {code, Limits{.timeout_seconds = 60}, nullptr});
  // Under gVisor sandboxed processes are tasks of the Sentry, not host processes: the host-side
  // trace of the daemon is the gVisor sandbox itself, whose host processes name the container.
  const std::string container = awaitRunningContainer(server, run_id, seconds(120));
  const auto daemonOnHost = [&] {
    return underGvisor() ? hostProcessArgContains(container) : hostProcessWithArgExists(token);
  };
  EXPECT_TRUE(eventually(daemonOnHost, seconds(10)))
      << "the daemon never appeared on the host, so its absence later would prove nothing";

  const auto report = awaitFinal(server, run_id);
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(verdict(report, "daemon"), "sleep " + token);
  EXPECT_LT(number(report, "duration_seconds"), 30.0) << "the run waited for its daemon";
  EXPECT_TRUE(eventually([&] { return !containerExists(container); }, seconds(10)))
      << "the container of run " << run_id << " is still there";
  EXPECT_TRUE(eventually([&] { return !daemonOnHost(); }, seconds(5)))
      << "the daemonised grandchild outlived its run";
}

TEST_F(LifecycleTest, StdinEofWithARunningRunExitsWithinTwoSecondsAndRemovesTheContainer) {
  auto server = launchServer();
  const std::string run_id = startRun(*server, {"import time\ntime.sleep(60)\n", {}, nullptr});
  const std::string container = awaitRunningContainer(*server, run_id);

  server->closeStdin();
  const auto exit_code = server->waitExit(seconds(2));
  ASSERT_TRUE(exit_code.has_value()) << "still running 2 s after stdin EOF\n"
                                     << tail(server->stderrText());
  EXPECT_EQ(*exit_code, 0);
  EXPECT_FALSE(containerExists(container))
      << "the server exited and left the container of run " << run_id;
  EXPECT_EQ(containersOfServer(*server), std::vector<std::string>{})
      << "the server exited and left a sandbox (a prepared one?)";
}

TEST_F(LifecycleTest, SigtermWithARunningRunExitsWithinTwoSecondsAndRemovesTheContainer) {
  auto server = launchServer();
  const std::string run_id = startRun(*server, {"import time\ntime.sleep(60)\n", {}, nullptr});
  const std::string container = awaitRunningContainer(*server, run_id);

  server->signal(SIGTERM);
  const auto exit_code = server->waitExit(seconds(2));
  ASSERT_TRUE(exit_code.has_value()) << "still running 2 s after SIGTERM\n"
                                     << tail(server->stderrText());
  EXPECT_FALSE(containerExists(container))
      << "the server exited and left the container of run " << run_id;
  EXPECT_EQ(containersOfServer(*server), std::vector<std::string>{})
      << "the server exited and left a sandbox (a prepared one?)";
}

TEST_F(LifecycleTest, ContainerLeftBySigkilledServerIsRemovedByTheNextStartupSweep) {
  auto first = launchServer();
  const std::string run_id = startRun(*first, {"import time\ntime.sleep(60)\n", {}, nullptr});
  const std::string container = awaitRunningContainer(*first, run_id);
  // The run's sandbox and an idle prepared one (the pool refills a second into a long run),
  // both started: a prepared sandbox the server was still bringing up when it was killed would
  // stay created, never started, and have no stdin to lose.
  ASSERT_TRUE(eventually(
      [&] {
        const std::vector<std::string> ids = containersOfServer(*first);
        return ids.size() == 2 && std::all_of(ids.begin(), ids.end(), [](const std::string& id) {
                 return containerState(id).rfind("running", 0) == 0;
               });
      },
      seconds(30)))
      << tail(first->stderrText());
  first->signal(SIGKILL);
  ASSERT_TRUE(first->waitExit(seconds(5)).has_value());
  const std::vector<std::string> left = containersOfServer(*first);
  first.reset();
  ASSERT_TRUE(containerExists(container))
      << "the container vanished with the killed server; the sweep has nothing to prove";
  // The idle prepared sandbox loses its stdin with its server: its launcher reads a cut bundle
  // and exits 125 before the sweep comes.
  for (const std::string& id : left) {
    if (id != container) {
      EXPECT_TRUE(eventually([&] { return containerState(id) == "exited 125"; }, seconds(20)))
          << "prepared sandbox " << id << ": " << containerState(id);
    }
  }

  // The run's sandbox, and the prepared one the killed server kept idle, are swept.
  auto second = launchServer();
  for (const std::string& id : left) {
    EXPECT_TRUE(eventually([&] { return !containerExists(id); }, seconds(20)))
        << "the next server instance did not sweep container " << id
        << (id == container ? " of run " + run_id : std::string(" (prepared)")) << "\n"
        << tail(second->stderrText());
  }
  second->closeStdin();
  EXPECT_TRUE(second->waitExit(seconds(2)).has_value());
}

}  // namespace
}  // namespace scs::integration
