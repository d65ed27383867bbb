// Sessions in real containers (issue 13), under the runtime of SCS_TEST_RUNTIME: state carries
// between runs, a timeout interrupts the code and the session lives on, code that ignores
// KeyboardInterrupt ends its session, an OOM of the interpreter ends it and one of a child does
// not (under gVisor it does: the cap is the whole sandbox's), closing removes the container, and a
// session outliving a SIGKILLed server ends at its deadline; one opened from the prepared pool
// keeps all of that. Where sessions hibernate (runsc), an idle one sleeps and wakes as it was,
// and one kept in --state-dir outlives a restart.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>

#include "integration/harness.h"

namespace scs::integration {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class SessionIntegrationTest : public OwnServerTest<> {
 protected:
  std::string open(double memory_gb = 1) { return openSession(server(), memory_gb); }

  Poco::JSON::Object::Ptr close(const std::string& session_id) {
    return closeSession(server(), session_id);
  }

  // A run in the session, waited for.
  Poco::JSON::Object::Ptr run(const std::string& session_id, const std::string& code,
                              double timeout_seconds = 60) {
    Poco::JSON::Object::Ptr arguments = startRunArguments({code, {}, nullptr});
    Poco::JSON::Object::Ptr limits = new Poco::JSON::Object;
    limits->set("timeout_seconds", timeout_seconds);
    arguments->set("limits", limits);
    arguments->set("session_id", session_id);
    arguments->set("wait_seconds", 30);
    return runToFinal(server(), arguments);
  }

  static std::string userOf(const std::string& container) {
    const std::string user = runCommand("docker inspect -f '{{.Config.User}}' " + container).output;
    return user.substr(0, user.find('\n'));  // "uid:gid"
  }

  static std::vector<std::string> sandboxOf(const std::string& session_id) {
    return containersWithLabel("io.scs.run-id=session-" + session_id);
  }
};

TEST_F(SessionIntegrationTest, StateCarriesBetweenRunsAndTheLastExpressionComesBack) {
  const std::string session = open();
  const auto first = run(session,
                         "x = 41\n"
                         "open('/workspace/notes.txt', 'w').write('kept')\n"
                         "open('/workspace/out/first.txt', 'w').write('1')\n"
                         "print('set')\n");
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);
  EXPECT_EQ(stream(first, "stdout"), "set\n");
  EXPECT_TRUE(absentOrNull(first, "result"));
  EXPECT_TRUE(flag(first, "session_alive"));

  const auto second = run(session,
                          "import sys\n"
                          "print(open('/workspace/notes.txt').read())\n"
                          "{'x': x + 1}\n");
  ASSERT_EQ(text(second, "status"), "succeeded") << describe(second);
  EXPECT_EQ(text(second, "result"), "{'x': 42}");
  EXPECT_EQ(stream(second, "stdout"), "kept\n");
  // Only what a run wrote under /workspace/out comes back with it.
  ASSERT_TRUE(first->getArray("files"));
  EXPECT_EQ(first->getArray("files")->size(), 1u);
  EXPECT_TRUE(!second->getArray("files") || second->getArray("files")->size() == 0u);
  EXPECT_EQ(sandboxOf(session).size(), 1u);

  const auto failed = run(session, "raise ValueError('no')\n");
  EXPECT_EQ(text(failed, "status"), "failed");
  EXPECT_EQ(failed->getObject("exception")->getValue<std::string>("type"), "ValueError");
  EXPECT_TRUE(flag(failed, "session_alive"));
  EXPECT_EQ(text(run(session, "x\n"), "result"), "41");
  close(session);
}

TEST_F(SessionIntegrationTest, AnInterpreterThatExitsEndsTheSessionWithThatRun) {
  const std::string session = open();
  const auto ended = run(session, "import os\nos._exit(3)\n");
  EXPECT_EQ(text(ended, "status"), "failed") << describe(ended);
  EXPECT_EQ(integer(ended, "exit_code"), 3);
  EXPECT_FALSE(flag(ended, "session_alive"));
  EXPECT_TRUE(eventually([&] { return sandboxOf(session).empty(); }, seconds(30)));
}

TEST_F(SessionIntegrationTest, ATimeoutInterruptsTheCodeAndTheSessionLivesOn) {
  const std::string session = open();
  ASSERT_EQ(text(run(session, "x = 'still here'\n"), "status"), "succeeded");
  const auto timed_out = run(session, "import time\nwhile True:\n    time.sleep(0.05)\n", 2);
  EXPECT_EQ(text(timed_out, "status"), "timed_out") << describe(timed_out);
  EXPECT_THAT(text(timed_out, "reason"), HasSubstr("interrupted (KeyboardInterrupt)"));
  EXPECT_THAT(stream(timed_out, "stderr"), HasSubstr("KeyboardInterrupt"));
  EXPECT_TRUE(flag(timed_out, "session_alive"));
  EXPECT_EQ(text(run(session, "x\n"), "result"), "'still here'");
  close(session);
}

// A stop that arrives while the run's bundle is still being unpacked waits for the code to
// start, and then interrupts it: the session lives on.
TEST_F(SessionIntegrationTest, AStopRightAfterTheStartInterruptsTheCodeAndTheSessionLivesOn) {
  const std::string session = open();
  Poco::JSON::Object::Ptr arguments =
      startRunArguments({"import time\nwhile True:\n    time.sleep(0.05)\n", {}, nullptr});
  arguments->set("session_id", session);
  const std::string run_id = text(callToolOk(server(), "start_run", arguments), "run_id");
  Poco::JSON::Object::Ptr stop = new Poco::JSON::Object;
  stop->set("run_id", run_id);
  const auto stopped = callToolOk(server(), "stop_run", stop);
  EXPECT_EQ(text(stopped, "status"), "stopped") << describe(stopped);
  EXPECT_TRUE(flag(stopped, "session_alive")) << describe(stopped);
  EXPECT_EQ(text(run(session, "'alive'\n"), "result"), "'alive'");
  close(session);
}

TEST_F(SessionIntegrationTest, CodeThatIgnoresKeyboardInterruptEndsItsSession) {
  const std::string session = open();
  const auto ended = run(session,
                         "import time\n"
                         "while True:\n"
                         "    try:\n"
                         "        time.sleep(0.05)\n"
                         "    except KeyboardInterrupt:\n"
                         "        pass\n",
                         2);
  EXPECT_EQ(text(ended, "status"), "timed_out") << describe(ended);
  EXPECT_FALSE(flag(ended, "session_alive"));
  EXPECT_THAT(text(ended, "reason"), HasSubstr("did not stop within 3 s of KeyboardInterrupt"));
  EXPECT_TRUE(eventually([&] { return sandboxOf(session).empty(); }, seconds(30)));
  Poco::JSON::Object::Ptr arguments = startRunArguments({"x = 1\n", {}, nullptr});
  arguments->set("session_id", session);
  const Poco::JSON::Object::Ptr refused = server().callTool("start_run", arguments);
  EXPECT_TRUE(refused->getValue<bool>("isError"));
  EXPECT_EQ(text(close(session), "status"), "ended");
}

TEST_F(SessionIntegrationTest, AnOomOfTheInterpreterEndsTheSessionOneOfAChildDoesNot) {
  const std::string session = open(0.25);
  const auto child = run(session,
                         "import subprocess, sys\n"
                         "done = subprocess.run([sys.executable, '-c', "
                         "\"b = b'x' * (1 << 30)\"])\n"
                         "done.returncode\n");
  if (underGvisor()) {
    // gVisor's memory cap is the whole sandbox's: the host ends the sandbox, not the child.
    EXPECT_EQ(text(child, "status"), "out_of_memory") << describe(child);
    EXPECT_FALSE(flag(child, "session_alive"));
    EXPECT_TRUE(eventually([&] { return sandboxOf(session).empty(); }, seconds(30)));
    return;
  }
  ASSERT_EQ(text(child, "status"), "succeeded") << describe(child);
  EXPECT_EQ(text(child, "result"), "-9");
  EXPECT_TRUE(flag(child, "session_alive"));

  const auto killed = run(session, "b = b'x' * (1 << 30)\n");
  EXPECT_EQ(text(killed, "status"), "out_of_memory") << describe(killed);
  EXPECT_FALSE(flag(killed, "session_alive"));
  EXPECT_TRUE(eventually([&] { return sandboxOf(session).empty(); }, seconds(30)));
}

TEST_F(SessionIntegrationTest, ClosingRemovesTheContainerBeforeItAnswers) {
  const std::string session = open();
  ASSERT_EQ(text(run(session, "1 + 1\n"), "result"), "2");
  ASSERT_EQ(sandboxOf(session).size(), 1u);
  const auto closed = close(session);
  EXPECT_EQ(text(closed, "status"), "ended");
  EXPECT_EQ(text(closed, "reason"), "it was closed by close_session");
  EXPECT_THAT(sandboxOf(session), IsEmpty());
  EXPECT_EQ(text(close(session), "status"), "ended");  // idempotent
}

// A server SIGKILLed cannot close its sessions, but its sandboxes do not outlive it: the engine
// ends their stdin with the server's attach connection, and the launcher ends a session whose
// stdin ended (the session's --deadline is the backstop for a server that hangs instead).
TEST_F(SessionIntegrationTest, ASessionEndsWithItsSigkilledServer) {
  auto doomed = launchServer({"--prepared", "0"});
  const std::string session = openSession(*doomed);
  const std::vector<std::string> ids = sandboxOf(session);
  ASSERT_EQ(ids.size(), 1u);
  doomed->signal(SIGKILL);
  ASSERT_TRUE(doomed->waitExit(seconds(5)).has_value());
  EXPECT_TRUE(eventually([&] { return containerState(ids[0]) == "exited 0"; }, seconds(10)))
      << containerState(ids[0]);
  runCommand("docker rm -f " + ids[0]);
}

// A session whose server hangs (SIGSTOP) ends at its deadline: --session-max-seconds and the
// grace, kept by PID 1 (and, where sessions hibernate, --session-hibernate-seconds: 1 here).
TEST_F(SessionIntegrationTest, ASessionOfAHungServerEndsAtItsDeadline) {
  constexpr int kLifetimeSeconds = 3;
  constexpr int kGraceSeconds = 11;
  auto hung = launchServer({"--prepared", "0", "--session-max-seconds",
                            std::to_string(kLifetimeSeconds), "--session-hibernate-seconds", "1"});
  const std::string session = openSession(*hung);
  const std::vector<std::string> ids = sandboxOf(session);
  ASSERT_EQ(ids.size(), 1u);
  const auto stopped_at = std::chrono::steady_clock::now();
  hung->signal(SIGSTOP);
  EXPECT_TRUE(eventually([&] { return containerState(ids[0]) == "exited 137"; },
                         seconds(kLifetimeSeconds + kGraceSeconds + 15)))
      << containerState(ids[0]);
  EXPECT_GE(std::chrono::steady_clock::now() - stopped_at, seconds(kLifetimeSeconds));
  hung->signal(SIGKILL);
  runCommand("docker rm -f " + ids[0]);
}

// A session opened while a sandbox is prepared begins in it (issue 25) and keeps every guarantee
// of a session: its code runs under that sandbox's uid, which no other sandbox has (not the one
// the pool makes next), its state carries between runs, and its deadline is the session's, not
// the prepared sandbox's (which allows for 300 s idle): with its server hung, it ends at the
// session's.
TEST_F(SessionIntegrationTest, ASessionOpensInAPreparedSandboxAndKeepsItsUidStateAndDeadline) {
  constexpr int kLifetimeSeconds = 3;
  constexpr int kGraceSeconds = 11;  // and --session-hibernate-seconds where sessions hibernate
  auto pooled =
      launchServer({"--prepared", "1", "--session-max-seconds", std::to_string(kLifetimeSeconds),
                    "--session-hibernate-seconds", "1", "--log-level", "debug"});
  ASSERT_TRUE(eventually(
      [&] { return pooled->stderrText().find(" is ready") != std::string::npos; }, seconds(60)))
      << tail(pooled->stderrText());
  const std::vector<std::string> prepared = containersOfServer(*pooled);
  ASSERT_EQ(prepared.size(), 1u);
  const std::string user = userOf(prepared[0]);

  const std::string session = openSession(*pooled);
  // Logged before the answer, but read from the server's stderr pipe on a thread of its own.
  ASSERT_TRUE(eventually(
      [&] {
        return pooled->stderrText().find("opened in prepared sandbox " + prepared[0]) !=
               std::string::npos;
      },
      seconds(10)))
      << tail(pooled->stderrText());
  const auto inSession = [&](const std::string& code) {
    Poco::JSON::Object::Ptr arguments = startRunArguments({code, {}, nullptr});
    arguments->set("session_id", session);
    arguments->set("wait_seconds", 30);
    return runToFinal(*pooled, arguments);
  };
  const auto first = inSession("import os\nuid = os.getuid()\nf'{uid}:{os.getgid()}'\n");
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);
  EXPECT_EQ(text(first, "result"), "'" + user + "'");
  EXPECT_EQ(text(inSession("uid\n"), "result"), user.substr(0, user.find(':')));

  // The pool makes another, in another uid.
  std::vector<std::string> others;
  ASSERT_TRUE(eventually(
      [&] {
        others = containersOfServer(*pooled);
        others.erase(std::remove(others.begin(), others.end(), prepared[0]), others.end());
        return !others.empty();
      },
      seconds(60)));
  EXPECT_NE(userOf(others[0]), user);

  pooled->signal(SIGSTOP);
  EXPECT_TRUE(eventually([&] { return containerState(prepared[0]) == "exited 137"; },
                         seconds(kLifetimeSeconds + kGraceSeconds + 15)))
      << containerState(prepared[0]);
  pooled->signal(SIGKILL);
  for (const std::string& id : containersOfServer(*pooled)) {
    runCommand("docker rm -f " + id);
  }
  runCommand("docker rm -f " + prepared[0]);
}

// An idle session hibernates where the runtime can snapshot it (gVisor, through the engine's
// checkpoints): its container stops with its memory and files saved, and its next run starts it
// again from there, as it was: names, a loaded module's state, files, and the same container.
// Under runc an idle session ends as before, and the server says why at startup.
TEST_F(SessionIntegrationTest, AnIdleSessionHibernatesAndItsNextRunWakesItAsItWas) {
  auto resting = launchServer({"--prepared", "0", "--session-idle-seconds", "2"});
  const std::string session = openSession(*resting);
  const std::vector<std::string> ids = sandboxOf(session);
  ASSERT_EQ(ids.size(), 1u);
  const auto inSession = [&](const std::string& code) {
    Poco::JSON::Object::Ptr arguments = startRunArguments({code, {}, nullptr});
    arguments->set("session_id", session);
    arguments->set("wait_seconds", 30);
    return runToFinal(*resting, arguments);
  };
  const auto first = inSession(
      "import random, numpy\n"
      "x = 41\n"
      "big = numpy.arange(1_000_000)\n"
      "open('/workspace/notes.txt', 'w').write('kept')\n"
      "random.seed(7)\n");
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);

  if (!underGvisor()) {
    EXPECT_THAT(resting->stderrText(),
                HasSubstr("idle sessions end: runtime runc keeps no snapshots"));
    EXPECT_TRUE(eventually([&] { return sandboxOf(session).empty(); }, seconds(30)));
    const Poco::JSON::Object::Ptr refused = resting->callTool("start_run", [&] {
      Poco::JSON::Object::Ptr arguments = startRunArguments({"x\n", {}, nullptr});
      arguments->set("session_id", session);
      return arguments;
    }());
    EXPECT_TRUE(refused->getValue<bool>("isError"));
    std::ostringstream said;
    refused->stringify(said);
    EXPECT_THAT(said.str(), HasSubstr("it was idle for 2 s"));
    return;
  }
  EXPECT_THAT(resting->stderrText(), HasSubstr("idle sessions hibernate"));
  const auto hibernations = [&] {
    const std::string log = resting->stderrText();
    std::size_t count = 0;
    for (std::size_t at = log.find(" hibernated after "); at != std::string::npos;
         at = log.find(" hibernated after ", at + 1)) {
      ++count;
    }
    return count;
  };
  // Each nap saves the sandbox into a fresh container (Debian's runsc restores a container
  // once), which its wake starts: one container of the session at any time, stopped while it
  // sleeps.
  for (int nap = 1; nap <= 2; ++nap) {
    ASSERT_TRUE(
        eventually([&] { return hibernations() == static_cast<std::size_t>(nap); }, seconds(60)))
        << tail(resting->stderrText());
    const std::vector<std::string> sleeping = sandboxOf(session);
    ASSERT_EQ(sleeping.size(), 1u);
    EXPECT_EQ(containerState(sleeping[0]).rfind("created", 0), 0u) << containerState(sleeping[0]);

    const auto woke = inSession(
        "print(open('/workspace/notes.txt').read())\n"
        "(x + 1, int(big.sum()), random.random())\n");
    ASSERT_EQ(text(woke, "status"), "succeeded") << describe(woke);
    EXPECT_EQ(stream(woke, "stdout"), "kept\n");
    // The first random.random() after seed(7), then the second: the generator's state came
    // back with everything else.
    EXPECT_EQ(text(woke, "result"), nap == 1 ? "(42, 499999500000, 0.32383276483316237)"
                                             : "(42, 499999500000, 0.15084917392450192)");
    EXPECT_GT(number(woke, "session_woke_seconds"), 0.0) << describe(woke);
    const std::vector<std::string> awake = sandboxOf(session);
    ASSERT_EQ(awake.size(), 1u);
    EXPECT_EQ(containerState(awake[0]).rfind("running", 0), 0u) << containerState(awake[0]);
  }
  EXPECT_EQ(text(closeSession(*resting, session), "status"), "ended");
  EXPECT_THAT(sandboxOf(session), IsEmpty());
}

// --state-dir: SIGTERM hibernates the open session (its run in progress is interrupted) and
// leaves its sandbox to the engine; the next server with the same directory takes it back, and
// its next run wakes it as it was; after a SIGKILL, the sessions hibernated at the time are
// taken back. Under runc, which keeps no snapshots here, the server refuses the flag and says
// why.
TEST_F(SessionIntegrationTest, ASessionKeptInAStateDirOutlivesARestart) {
  char pattern[] = "/tmp/scs-state-XXXXXX";
  const std::string directory = ::mkdtemp(pattern);
  const std::vector<std::string> args{
      "--prepared", "0", "--state-dir", directory, "--session-idle-seconds", "2"};
  if (!underGvisor()) {
    const CommandResult refused =
        runCommand(std::string(SCS_BINARY) + " --backend docker --runtime " + testRuntime() +
                   " --state-dir " + directory + " </dev/null 2>&1");
    EXPECT_EQ(refused.exit_code, 1) << refused.output;
    EXPECT_THAT(refused.output, HasSubstr("cannot start: --state-dir keeps sessions across "
                                          "restarts by hibernating them"));
    EXPECT_THAT(refused.output, HasSubstr("keeps no snapshots"));
    std::filesystem::remove_all(directory);
    return;
  }
  std::string session;
  {
    auto before = launchServer(args);
    session = openSession(*before);
    Poco::JSON::Object::Ptr arguments =
        startRunArguments({"import random, numpy\n"
                           "x = 41\n"
                           "big = numpy.arange(1_000_000)\n"
                           "open('/workspace/notes.txt', 'w').write('kept')\n"
                           "random.seed(7)\n",
                           {},
                           nullptr});
    arguments->set("session_id", session);
    arguments->set("wait_seconds", 30);
    const auto first = runToFinal(*before, arguments);
    ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);
    // A run in progress when the server is told to stop: interrupted, and the session kept.
    Poco::JSON::Object::Ptr busy =
        startRunArguments({"import time\nwhile True:\n    time.sleep(0.1)\n", {}, nullptr});
    busy->set("session_id", session);
    busy->set("wait_seconds", 0);
    const auto started = before->callTool("start_run", busy);
    ASSERT_FALSE(started->optValue<bool>("isError", false)) << testing::toolText(started);
    before->signal(SIGTERM);
    const std::optional<int> exited = before->waitExit(seconds(120));
    ASSERT_TRUE(exited) << tail(before->stderrText());
    EXPECT_EQ(*exited, 0) << tail(before->stderrText());
    EXPECT_TRUE(eventually(
        [&] {
          return before->stderrText().find("session " + session +
                                           " of tenant local is kept for the next server") !=
                 std::string::npos;
        },
        seconds(10)))
        << tail(before->stderrText());
  }
  const std::vector<std::string> sleeping = sandboxOf(session);
  ASSERT_EQ(sleeping.size(), 1u);
  EXPECT_EQ(containerState(sleeping[0]).rfind("running", 0), std::string::npos)
      << containerState(sleeping[0]);
  struct stat status {};
  ASSERT_EQ(::stat((directory + "/sessions/" + session + ".json").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);

  auto after = launchServer(args);
  // Stderr is read on a thread of its own: the line may trail the answer to initialize.
  EXPECT_TRUE(eventually(
      [&] {
        return after->stderrText().find("took back 1 of 1 kept sessions") != std::string::npos;
      },
      seconds(10)))
      << tail(after->stderrText());
  Poco::JSON::Object::Ptr arguments =
      startRunArguments({"print(open('/workspace/notes.txt').read())\n"
                         "(x + 1, int(big.sum()), random.random())\n",
                         {},
                         nullptr});
  arguments->set("session_id", session);
  arguments->set("wait_seconds", 30);
  const auto woke = runToFinal(*after, arguments);
  ASSERT_EQ(text(woke, "status"), "succeeded") << describe(woke) << tail(after->stderrText());
  EXPECT_EQ(stream(woke, "stdout"), "kept\n");
  EXPECT_EQ(text(woke, "result"), "(42, 499999500000, 0.32383276483316237)");
  EXPECT_GT(number(woke, "session_woke_seconds"), 0.0) << describe(woke);
  EXPECT_NE(::access((directory + "/sessions/" + session + ".json").c_str(), F_OK), 0);
  EXPECT_EQ(text(closeSession(*after, session), "status"), "ended");
  EXPECT_THAT(sandboxOf(session), IsEmpty());

  // A server killed outright (SIGKILL: no shutdown) leaves the sessions that were hibernated at
  // the time recorded, and the next server takes them back; one awake at the kill is a leftover.
  const auto set = [&](testing::McpProcess& server, const std::string& id,
                       const std::string& code) {
    Poco::JSON::Object::Ptr run = startRunArguments({code, {}, nullptr});
    run->set("session_id", id);
    run->set("wait_seconds", 30);
    return runToFinal(server, run);
  };
  const std::string sleeper = openSession(*after);
  ASSERT_EQ(text(set(*after, sleeper, "x = 'slept'\n"), "status"), "succeeded");
  ASSERT_TRUE(eventually(
      [&] { return ::access((directory + "/sessions/" + sleeper + ".json").c_str(), F_OK) == 0; },
      seconds(60)))
      << tail(after->stderrText());
  const std::string awake = openSession(*after);
  ASSERT_EQ(text(set(*after, awake, "y = 1\n"), "status"), "succeeded");
  after->signal(SIGKILL);
  ASSERT_TRUE(after->waitExit(seconds(30)));
  auto third = launchServer(args);
  EXPECT_TRUE(eventually(
      [&] {
        return third->stderrText().find("took back 1 of 1 kept sessions") != std::string::npos;
      },
      seconds(10)))
      << tail(third->stderrText());
  const auto slept = set(*third, sleeper, "x\n");
  ASSERT_EQ(text(slept, "status"), "succeeded") << describe(slept) << tail(third->stderrText());
  EXPECT_EQ(text(slept, "result"), "'slept'");
  EXPECT_THAT(sandboxOf(awake), IsEmpty());  // the startup sweep's: its owner is gone
  EXPECT_EQ(text(closeSession(*third, sleeper), "status"), "ended");
  EXPECT_THAT(sandboxOf(sleeper), IsEmpty());
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace scs::integration
