// Faults around the server: the engine socket missing at startup, the server killed with
// SIGKILL mid-run, and the engine restarted mid-run. EngineRestartTest stops and starts the
// local dockerd; ctest runs it in its own entry, after every other integration test.

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "integration/harness.h"

namespace scs::integration {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Clock = std::chrono::steady_clock;

// Where scripts/setup.sh sends the log of a dockerd it starts.
constexpr const char* kDockerdLog = "/var/log/scs-dockerd.log";
// The server's in-sandbox watchdog fires this long after a run's timeout
// (policy::SandboxSettings::deadline_grace_seconds).
constexpr int kDeadlineGraceSeconds = 10;

struct ContainerEvent {
  std::string action;
  double seconds = 0;  // unix time
  std::string exit_code;
};

// The engine's events for container `id` from unix time `since` until now, oldest first.
std::vector<ContainerEvent> containerEvents(const std::string& id, const std::string& since) {
  const std::string until = std::to_string(
      std::chrono::duration_cast<seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count() +
      1);
  const CommandResult result = runCommand(
      "docker events --since " + since + " --until " + until + " --filter container=" + id +
      " --format '{{.Action}} {{.TimeNano}} {{index .Actor.Attributes \"exitCode\"}}'");
  if (result.exit_code != 0) {
    throw std::runtime_error("docker events failed: " + result.output);
  }
  std::vector<ContainerEvent> events;
  std::istringstream lines(result.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    ContainerEvent event;
    long long nanos = 0;
    if (words >> event.action >> nanos) {
      words >> event.exit_code;
      event.seconds = static_cast<double>(nanos) / 1e9;
      events.push_back(event);
    }
  }
  return events;
}

TEST(FaultTest, MissingEngineSocketStopsTheServerAtStartupWithAClearMessage) {
  const std::string socket =
      "/tmp/scs-fault-missing-" + std::to_string(::getpid()) + "/docker.sock";
  ASSERT_FALSE(std::filesystem::exists(socket));
  const auto started = Clock::now();
  testing::McpProcess server(SCS_BINARY, {"--backend", "docker", "--runtime", testRuntime(),
                                          "--engine", "unix://" + socket});
  const auto exit_code = server.waitExit(seconds(30));
  ASSERT_TRUE(exit_code.has_value()) << "the server kept running without an engine";
  EXPECT_EQ(*exit_code, 1);
  EXPECT_LT(Clock::now() - started, seconds(15)) << "giving up took too long";
  const std::string log = server.stderrText();
  EXPECT_THAT(log, HasSubstr("cannot start"));
  EXPECT_THAT(log, HasSubstr("cannot reach the Docker engine at unix://" + socket));
  EXPECT_FALSE(server.readLine(std::chrono::milliseconds(200)).has_value())
      << "a server that cannot start must not write to stdout";
}

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Sleeps once main.py runs; `attack` comes first.
std::string orphanProgram(const std::string& attack) {
  return attack + "import time\nopen('/tmp/scs-ready', 'w').close()\ntime.sleep(3600)\n";
}

// Stops, then tries to trace, every process main.py can see: PID 1 holds the deadline.
constexpr const char* kStopAndTraceEverything = R"PY(import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        libc.kill(int(name), signal.SIGSTOP)
        libc.ptrace(0x4206, int(name), 0, 0)  # PTRACE_SEIZE
)PY";

// An orphan whose server was SIGKILLed ends by its in-sandbox watchdog, `timeout + grace`
// after its code arrived, and the next server's startup sweep removes what is left. With
// --prepared 0 the run gets a fresh sandbox whose launcher's --deadline fires; in a prepared
// sandbox (started before the run, its --deadline allowing for the idle time) the deadline
// the launcher set when the code arrived fires instead. Either is kept by PID 1.
void expectOrphanEndsByItsWatchdogAndIsSwept(bool prepared, const std::string& attack = "") {
  ASSERT_THAT(engineProblem(), IsEmpty());
  // Long enough for a fresh sandbox to come up and reach the program before the server's own
  // timer (which counts from before the bring-up) ends it: under runsc a bring-up alone takes
  // 2.4 s at the 95th percentile, and with 2 s the test sometimes saw no program run at all.
  constexpr int kTimeoutSeconds = 5;
  const std::string since = std::to_string(static_cast<long long>(unixNow()) - 5);
  auto first = launchServer({"--prepared", prepared ? "1" : "0"});
  if (prepared) {
    // The pool prepares its sandbox as the server starts; the run must find it ready.
    const auto idle = [&] {
      const std::vector<std::string> ids = containersOfServer(*first);
      return ids.size() == 1 && containerState(ids[0]).rfind("running ", 0) == 0;
    };
    ASSERT_TRUE(eventually(idle, seconds(60)));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const std::string run_id = startRun(
      *first, {orphanProgram(attack), Limits{.timeout_seconds = kTimeoutSeconds}, nullptr});
  // Killed only once the user code runs: a server killed while the launcher still reads the
  // bundle from stdin ends the sandbox at once (the launcher refuses a cut bundle).
  const std::string id = awaitRunningContainer(*first, run_id);
  ASSERT_EQ(first->stderrText().find("in prepared sandbox " + id) != std::string::npos, prepared)
      << tail(first->stderrText());
  // As root: a check run as the sandbox's uid can itself be stopped by the attack, which stops
  // every process it sees, and would then never return.
  ASSERT_TRUE(eventually(
      [&] {
        return runCommand("docker exec -u 0 " + id + " test -e /tmp/scs-ready").exit_code == 0;
      },
      seconds(30), std::chrono::milliseconds(100)))
      << "main.py never ran in " << id;
  const double code_seen = unixNow();
  first->signal(SIGKILL);
  ASSERT_TRUE(first->waitExit(seconds(5)).has_value());
  first.reset();

  // The engine's own event log tells how the orphan ended, whoever removes it later: when it
  // started, whether anyone killed it through the engine, when it died and with what code.
  const auto budget = seconds(kTimeoutSeconds + kDeadlineGraceSeconds + 10);
  std::vector<ContainerEvent> events;
  const auto died = [&] {
    events = containerEvents(id, since);
    return std::any_of(events.begin(), events.end(),
                       [](const ContainerEvent& e) { return e.action == "die"; });
  };
  ASSERT_TRUE(eventually(died, budget, std::chrono::milliseconds(250)))
      << "the orphan still runs " << budget.count()
      << " s after its server died: " << containerState(id);
  const auto event = [&](const std::string& action) {
    return *std::find_if(events.begin(), events.end(),
                         [&](const ContainerEvent& e) { return e.action == action; });
  };
  const ContainerEvent die = event("die");
  std::string actions;
  for (const ContainerEvent& e : events) {
    actions += e.action + " ";
  }
  EXPECT_THAT(actions, ::testing::Not(HasSubstr("kill")))
      << "something killed the orphan through the engine, so its watchdog did not end it (a "
         "server started beside this test sweeps orphans too: run the integration tier alone)";
  // PID 1 kills every process at its deadline and exits 128 + 9.
  EXPECT_EQ(die.exit_code, "137") << "the orphan did not end by its watchdog";
  const double deadline = kTimeoutSeconds + kDeadlineGraceSeconds;
  if (prepared) {
    // The code arrived before the test saw it run (a docker exec poll away).
    const double after_code = die.seconds - code_seen;
    EXPECT_GE(after_code, deadline - 3) << "the orphan ended before its watchdog's deadline";
    EXPECT_LE(after_code, deadline + 5) << "the watchdog fired late";
  } else {
    const double lifetime = die.seconds - event("start").seconds;
    EXPECT_GE(lifetime, deadline - 0.5) << "the orphan ended before its watchdog's deadline";
    EXPECT_LE(lifetime, deadline + 5) << "the watchdog fired late";
  }
  ASSERT_TRUE(containerExists(id))
      << "the ended orphan was removed before the next start of this server could sweep it "
         "(another server's sweep? events: "
      << actions << ")";

  auto second = launchServer({"--prepared", "0"});
  EXPECT_FALSE(containerExists(id))
      << "the next server instance did not sweep the container of run " << run_id << "\n"
      << tail(second->stderrText());
  second->closeStdin();
  EXPECT_EQ(second->waitExit(seconds(5)).value_or(-1), 0);
  // Read once the server has exited: its stderr is then drained.
  EXPECT_THAT(second->stderrText(), HasSubstr("sandboxes left by earlier instances"));
}

TEST(FaultTest, SigkilledServerOrphanEndsByItsDeadlineAndIsSwept) {
  expectOrphanEndsByItsWatchdogAndIsSwept(false);
}

TEST(FaultTest, SigkilledServerOrphanInAPreparedSandboxEndsByItsDeadlineAndIsSwept) {
  expectOrphanEndsByItsWatchdogAndIsSwept(true);
}

// The program cannot switch the backstop off: it stops and traces every process it can see
// before its server is killed, and the sandbox still ends at its deadline.
TEST(FaultTest, AnOrphanThatStopsAndTracesEveryProcessStillEndsAtItsDeadline) {
  expectOrphanEndsByItsWatchdogAndIsSwept(false, kStopAndTraceEverything);
}

TEST(FaultTest, AnOrphanInAPreparedSandboxThatStopsAndTracesEveryProcessStillEndsAtItsDeadline) {
  expectOrphanEndsByItsWatchdogAndIsSwept(true, kStopAndTraceEverything);
}

// dockerd processes on the host: pid and argv.
std::vector<std::pair<int, std::vector<std::string>>> dockerdProcesses() {
  std::vector<std::pair<int, std::vector<std::string>>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream cmdline(entry.path() / "cmdline", std::ios::binary);
    std::vector<std::string> argv;
    std::string argument;
    while (std::getline(cmdline, argument, '\0')) {
      argv.push_back(argument);
    }
    if (!argv.empty() && std::filesystem::path(argv[0]).filename() == "dockerd") {
      found.emplace_back(std::stoi(name), argv);
    }
  }
  return found;
}

bool processExists(int pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

bool engineAnswers() { return runCommand("docker info --format '{{.ID}}'").exit_code == 0; }

// Starts dockerd as scripts/setup.sh does (`setsid nohup dockerd </dev/null >>LOG 2>&1 &`),
// detached from this process: a double fork, so it is never this process's child, and no
// descriptor of the test (the pipes to its servers) is inherited.
void startDockerdLikeSetup() {
  const pid_t child = ::fork();
  if (child < 0) {
    throw std::runtime_error("fork failed");
  }
  if (child == 0) {
    if (::fork() != 0) {
      ::_exit(0);
    }
    ::setsid();
    ::signal(SIGHUP, SIG_IGN);
    const int in = ::open("/dev/null", O_RDONLY);
    const int log = ::open(kDockerdLog, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || log < 0) {
      ::_exit(127);
    }
    ::dup2(in, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::close_range(3, ~0U, 0);
    ::execlp("dockerd", "dockerd", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
}

// Leaves a working engine behind whatever the test did: on scope exit, when no engine
// answers, starts dockerd and waits for it.
class EngineGuard {
 public:
  ~EngineGuard() {
    if (engineAnswers()) {
      return;
    }
    if (dockerdProcesses().empty()) {
      startDockerdLikeSetup();
    }
    if (!eventually(engineAnswers, seconds(60), std::chrono::milliseconds(200))) {
      ADD_FAILURE() << "the Docker engine did not come back; see " << kDockerdLog;
    }
  }
};

class EngineRestartTest : public ::testing::Test {};

TEST_F(EngineRestartTest, RunEndsAsSandboxErrorServerKeepsServingAndRecovers) {
  ASSERT_THAT(engineProblem(), IsEmpty());
  const auto daemons = dockerdProcesses();
  ASSERT_EQ(daemons.size(), 1u) << "expected exactly one dockerd";
  const auto& [dockerd_pid, dockerd_argv] = daemons.front();
  // Restarting must give the same engine back: only a plain `dockerd` (as scripts/setup.sh
  // starts it, configured by /etc/docker/daemon.json) can be restarted that way.
  ASSERT_EQ(dockerd_argv.size(), 1u)
      << "dockerd runs with arguments; it was not started by scripts/setup.sh, so this test "
         "cannot restart it as it was";
  // Stopping the engine ends every container on it: wait until no other server's sandbox
  // runs (other integration tests run before this one, never beside it).
  ASSERT_TRUE(eventually([] { return managedContainers().empty(); }, seconds(120)))
      << "other sandboxes are still on the engine; refusing to restart it under them";

  EngineGuard guard;
  auto server = launchServer();
  const std::string victim =
      startRun(*server, {"import time\nprint('started', flush=True)\ntime.sleep(600)\n",
                         Limits{.timeout_seconds = 300}, nullptr});
  const std::string victim_container = awaitRunningContainer(*server, victim);

  ASSERT_EQ(::kill(dockerd_pid, SIGTERM), 0);
  ASSERT_TRUE(eventually([pid = dockerd_pid] { return !processExists(pid); }, seconds(60)))
      << "dockerd did not stop within 60 s of SIGTERM";

  const auto report = awaitFinal(*server, victim, seconds(60));
  EXPECT_EQ(text(report, "status"), "sandbox_error") << describe(report);
  EXPECT_THAT(text(report, "reason"), HasSubstr("engine")) << describe(report);

  // The server keeps serving while the engine is away: a new run is accepted and fails
  // cleanly, and the protocol answers.
  const std::string during = startRun(*server, {"print('during')\n", {}, nullptr});
  const auto during_report = awaitFinal(*server, during, seconds(90));
  EXPECT_EQ(text(during_report, "status"), "sandbox_error") << describe(during_report);
  EXPECT_THAT(stream(during_report, "stdout"), ::testing::Not(HasSubstr("during")));
  const auto listed = server->request("tools/list", new Poco::JSON::Object, seconds(10));
  EXPECT_TRUE(listed->has("result"));

  startDockerdLikeSetup();
  ASSERT_TRUE(eventually(engineAnswers, seconds(60), std::chrono::milliseconds(200)))
      << "the restarted engine did not answer within 60 s";

  const std::string after = startRun(*server, {"print('back', flush=True)\n", {}, nullptr});
  const auto after_report = awaitFinal(*server, after, seconds(120));
  EXPECT_EQ(text(after_report, "status"), "succeeded") << describe(after_report) << "\n"
                                                       << tail(server->stderrText());
  EXPECT_EQ(stream(after_report, "stdout"), "back\n");

  server->closeStdin();
  EXPECT_EQ(server->waitExit(seconds(5)).value_or(-1), 0);
  for (const std::string& run_id : {during, after}) {
    EXPECT_THAT(containersOfRun(*server, run_id), IsEmpty())
        << "run " << run_id << " left a container";
  }
  // Removing the victim's sandbox failed while the engine was away; the server retried until
  // the engine was back (at the latest, at its shutdown).
  EXPECT_FALSE(containerExists(victim_container)) << "the victim's sandbox was never removed\n"
                                                  << tail(server->stderrText());
}

}  // namespace
}  // namespace scs::integration
