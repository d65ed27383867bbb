#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Stringifier.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <scs/backend/backend.h>
#include <signal.h>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/mcp_client.h"

namespace scs::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Object = Poco::JSON::Object;
using namespace std::chrono_literals;

const std::string kBinary = SCS_BINARY;
const std::string kBadAbiPlugin = std::string(SCS_TEST_PLUGIN_DIR) + "/libscs_backend_badabi.so";

// A server with the fake backend, initialised.
class Session {
 public:
  explicit Session(std::vector<std::string> extra = {}) : process_(kBinary, fakeArgs(extra)) {
    process_.initialize();
  }

  McpProcess& process() { return process_; }

  // Closes stdin, expects a clean exit, and returns everything the server logged.
  std::string finish() {
    process_.closeStdin();
    EXPECT_EQ(process_.waitExit(5s), 0);
    return process_.stderrText();
  }

  Object::Ptr call(const std::string& tool, Object::Ptr arguments) {
    return callOk(process_, tool, arguments);
  }

  Object::Ptr start(const std::string& code, Object::Ptr limits = nullptr) {
    Object::Ptr arguments = object({{"code", code}});
    if (limits) {
      arguments->set("limits", limits);
    }
    return call("start_run", arguments);
  }

  Object::Ptr get(const std::string& run_id, int wait_seconds = 0) {
    return call("get_result", object({{"run_id", run_id}, {"wait_seconds", wait_seconds}}));
  }

  // The report with every field (get_result's verbose).
  Object::Ptr verbose(const std::string& run_id) {
    return call("get_result", object({{"run_id", run_id}, {"verbose", true}}));
  }

  Object::Ptr stop(const std::string& run_id) {
    return call("stop_run", object({{"run_id", run_id}}));
  }

  Object::Ptr finalReport(const std::string& run_id) {
    return testing::finalReport(process_, run_id);
  }

  Object::Ptr runToEnd(const std::string& code, Object::Ptr limits = nullptr) {
    Object::Ptr started = start(code, limits);
    return finalReport(started->getValue<std::string>("run_id"));
  }

 private:
  McpProcess process_;
};

// Polls stderr until it holds `text` (the fake logs each backend call) or 10 s pass.
bool waitForStderr(McpProcess& process, const std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (process.stderrText().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// Every line the server wrote to stdout after stdin closed, until it exited.
std::vector<std::string> drainStdout(McpProcess& process) {
  process.closeStdin();
  while (process.readLine(10s)) {
  }
  return process.stdoutLines();
}

TEST(StdioE2eTest, InitializesAndListsTheFiveTools) {
  McpProcess process(kBinary, fakeArgs());
  Object::Ptr init = process.initialize();
  EXPECT_EQ(init->getValue<std::string>("protocolVersion"), "2025-11-25");
  EXPECT_EQ(init->getObject("serverInfo")->getValue<std::string>("name"), "safe-code-sandbox");
  EXPECT_TRUE(init->getObject("capabilities")->has("tools"));

  Object::Ptr listed = process.request("tools/list", nullptr);
  ASSERT_TRUE(listed->has("result"));
  Poco::JSON::Array::Ptr tools = listed->getObject("result")->getArray("tools");
  std::vector<std::string> names;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    Object::Ptr tool = tools->getObject(i);
    names.push_back(tool->getValue<std::string>("name"));
    EXPECT_EQ(tool->getObject("inputSchema")->getValue<std::string>("type"), "object");
    EXPECT_EQ(tool->getObject("outputSchema")->getValue<std::string>("type"), "object");
    EXPECT_FALSE(tool->getValue<std::string>("description").empty());
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("start_run", "get_result", "stop_run",
                                                     "open_session", "close_session"));
  EXPECT_EQ(process.request("ping", nullptr)->getObject("result")->size(), 0u);
}

TEST(StdioE2eTest, StartsPollsAndStopsARun) {
  Session session;
  Object::Ptr started = session.start("#fake: stdout=partial hang\n");
  const std::string run_id = started->getValue<std::string>("run_id");
  EXPECT_EQ(started->getValue<std::string>("status"), "running");
  EXPECT_FALSE(started->has("limits"));  // the defaults, which the tools list already says
  Object::Ptr verbose = session.verbose(run_id);
  EXPECT_EQ(verbose->getObject("limits")->getValue<int>("processes"), 256);
  EXPECT_EQ(verbose->getObject("limits")->getValue<double>("memory_gb"), 5);

  EXPECT_EQ(session.get(run_id)->getValue<std::string>("status"), "running");
  Object::Ptr stopped = session.stop(run_id);
  EXPECT_EQ(stopped->getValue<std::string>("status"), "stopped");
  Object::Ptr report = session.get(run_id);
  EXPECT_EQ(report->getValue<std::string>("status"), "stopped");
  EXPECT_THAT(report->getValue<std::string>("reason"), HasSubstr("stop_run"));
  // Stopping again changes nothing.
  EXPECT_EQ(session.stop(run_id)->getValue<std::string>("status"), "stopped");
}

TEST(StdioE2eTest, StoppingAFinishedRunReportsItUnchanged) {
  Session session;
  Object::Ptr report = session.runToEnd("#fake: stdout=done\n");
  ASSERT_EQ(report->getValue<std::string>("status"), "succeeded");
  Object::Ptr stopped = session.stop(report->getValue<std::string>("run_id"));
  EXPECT_EQ(stopped->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(stopped->getValue<std::string>("stdout"), "done");
  EXPECT_EQ(stopped->getValue<double>("duration_seconds"),
            report->getValue<double>("duration_seconds"));
  const Object::Ptr full = session.verbose(report->getValue<std::string>("run_id"));
  EXPECT_FALSE(full->getValue<std::string>("finished_at").empty());
}

struct StatusCase {
  const char* name;
  const char* code;
  double timeout_seconds;  // 0: the default
  const char* status;
  std::optional<int> exit_code;
  const char* signal;       // nullptr: none
  const char* reason_part;  // a phrase the reason must hold
  bool user_code_started;   // whether the fake logged "fake: started"
};

void PrintTo(const StatusCase& c, std::ostream* out) { *out << c.name; }

class StatusE2eTest : public ::testing::TestWithParam<StatusCase> {};

TEST_P(StatusE2eTest, ReportsTheStatusFromTheEvidence) {
  const StatusCase& c = GetParam();
  // Without prepared sandboxes the backend sees create, inspect, deliver, start in that order,
  // so a scripted start failure or delay applies to the run itself.
  Session session({"--prepared", "0"});
  Object::Ptr limits;
  if (c.timeout_seconds > 0) {
    limits = object({{"timeout_seconds", c.timeout_seconds}});
  }
  Object::Ptr report = session.runToEnd(c.code, limits);
  EXPECT_EQ(report->getValue<std::string>("status"), c.status);
  if (c.exit_code) {
    EXPECT_EQ(report->getValue<int>("exit_code"), *c.exit_code);
  } else {
    EXPECT_TRUE(report->isNull("exit_code"));
  }
  if (c.signal != nullptr) {
    EXPECT_EQ(report->getValue<std::string>("signal"), c.signal);
  } else {
    EXPECT_FALSE(report->has("signal") && !report->isNull("signal"));
  }
  EXPECT_THAT(report->getValue<std::string>("reason"), HasSubstr(c.reason_part));
  // The compact report leaves out what tells nothing (empty streams, false flags, default
  // limits, timestamps); the verbose one has every field.
  EXPECT_TRUE(report->has("duration_seconds"));
  EXPECT_FALSE(report->has("stdout_truncated"));
  EXPECT_FALSE(report->has("started_at"));
  EXPECT_EQ(report->has("limits"), c.timeout_seconds > 0);
  const Object::Ptr full = session.verbose(report->getValue<std::string>("run_id"));
  for (const char* field :
       {"started_at", "finished_at", "duration_seconds", "queued_seconds", "stdout", "stderr",
        "stdout_bytes", "stderr_bytes", "stdout_truncated", "stderr_truncated", "limits"}) {
    EXPECT_TRUE(full->has(field)) << field;
  }
  const std::string log = session.finish();
  if (c.user_code_started) {
    EXPECT_THAT(log, HasSubstr("fake: started"));
  } else {
    EXPECT_THAT(log, Not(HasSubstr("fake: started")));
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryStatus, StatusE2eTest,
    ::testing::Values(
        StatusCase{"succeeded", "#fake: stdout=hello\\n\nprint('hello')\n", 0, "succeeded", 0,
                   nullptr, "Exited with code 0", true},
        StatusCase{"failed", "#fake: exit=3 stderr=boom\n", 0, "failed", 3, nullptr,
                   "Exited with code 3", true},
        StatusCase{"segfault", "#fake: signal=11\n", 0, "failed", 139, "SIGSEGV", "SIGSEGV", true},
        StatusCase{"timed_out", "#fake: hang\n", 1, "timed_out", 137, "SIGKILL", "1-second", true},
        StatusCase{"oom", "#fake: oom\n", 0, "out_of_memory", 137, "SIGKILL", "Out of memory",
                   true},
        StatusCase{"child_oom", "#fake: child_oom\n", 0, "succeeded", 0, nullptr, "OOM killer",
                   true},
        StatusCase{"fail_deliver", "#fake: fail=deliver\n", 0, "sandbox_error", std::nullopt,
                   nullptr, "deliver", false},
        StatusCase{"fail_start", "#fake: fail=start\n", 0, "sandbox_error", std::nullopt, nullptr,
                   "start failed", false},
        // The engine lost while the program runs: nothing tells how it ended.
        StatusCase{"fail_wait", "#fake: fail=wait hang\n", 0, "sandbox_error", std::nullopt,
                   nullptr, "wait failed", true},
        StatusCase{"engine_error", "#fake: engine_error=runtime\\sbroke\n", 0, "sandbox_error",
                   std::nullopt, nullptr, "runtime broke", true},
        StatusCase{"slow_start", "#fake: start_delay_ms=300 sleep_ms=200 stdout=late\n", 0,
                   "succeeded", 0, nullptr, "Exited with code 0", true}),
    [](const ::testing::TestParamInfo<StatusCase>& info) { return std::string(info.param.name); });

TEST(StdioE2eTest, ReportsTheScriptedOutput) {
  Session session;
  Object::Ptr report = session.runToEnd("#fake: stdout=hello\\n stderr=warn\\sme exit=3\n");
  EXPECT_EQ(report->getValue<std::string>("stdout"), "hello\n");
  EXPECT_EQ(report->getValue<std::string>("stderr"), "warn me");
  // Whole streams: their counts and flags would say nothing the text does not.
  EXPECT_FALSE(report->has("stdout_bytes"));
  EXPECT_FALSE(report->has("stdout_truncated"));
  const Object::Ptr full = session.verbose(report->getValue<std::string>("run_id"));
  EXPECT_EQ(full->getValue<int>("stdout_bytes"), 6);
  EXPECT_EQ(full->getValue<int>("stderr_bytes"), 7);
  EXPECT_FALSE(full->getValue<bool>("stdout_truncated"));
}

TEST(StdioE2eTest, KeepsTheOutputOfARunKilledByItsTimeout) {
  Session session;
  Object::Ptr report =
      session.runToEnd("#fake: stdout=partial\\n hang\n", object({{"timeout_seconds", 1}}));
  EXPECT_EQ(report->getValue<std::string>("status"), "timed_out");
  EXPECT_EQ(report->getValue<std::string>("stdout"), "partial\n");
  EXPECT_GE(report->getValue<double>("duration_seconds"), 1.0);
}

TEST(StdioE2eTest, TruncatesAFloodAndCountsEveryByte) {
  Session session;
  Object::Ptr report = session.runToEnd("#fake: flood=5000000\n");
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  EXPECT_TRUE(report->getValue<bool>("stdout_truncated"));
  EXPECT_EQ(report->getValue<std::int64_t>("stdout_bytes"), 5000000);
  EXPECT_LT(report->getValue<std::string>("stdout").size(), 1100000u);
  EXPECT_FALSE(report->has("stderr_truncated"));
}

TEST(StdioE2eTest, QueuesRunsBeyondTheConcurrencyCap) {
  Session session({"--max-concurrent", "1"});
  const std::string a = session.start("#fake: hang\n")->getValue<std::string>("run_id");
  Object::Ptr b = session.start("#fake: hang\n");
  Object::Ptr c = session.start("#fake: hang\n");
  EXPECT_EQ(b->getValue<std::string>("status"), "queued");
  EXPECT_EQ(b->getValue<int>("queue_position"), 1);
  EXPECT_EQ(c->getValue<int>("queue_position"), 2);
  const std::string b_id = b->getValue<std::string>("run_id");
  const std::string c_id = c->getValue<std::string>("run_id");

  EXPECT_EQ(session.stop(b_id)->getValue<std::string>("status"), "stopped");
  EXPECT_EQ(session.get(c_id)->getValue<int>("queue_position"), 1);
  EXPECT_EQ(session.stop(a)->getValue<std::string>("status"), "stopped");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::string status = "queued";
  while (status == "queued" && std::chrono::steady_clock::now() < deadline) {
    status = session.get(c_id, 1)->getValue<std::string>("status");
  }
  EXPECT_EQ(status, "running");
  EXPECT_EQ(session.stop(c_id)->getValue<std::string>("status"), "stopped");
}

TEST(StdioE2eTest, ARunWithTheDefaultLimitsTakesAPreparedSandboxAndOthersTheNormalPath) {
  Session session;                                             // --prepared 1 is the default
  ASSERT_TRUE(waitForStderr(session.process(), " is ready"));  // the pool's first sandbox
  const std::string first =
      session.start("#fake: stdout=one\\n\n")->getValue<std::string>("run_id");
  EXPECT_EQ(session.finalReport(first)->getValue<std::string>("stdout"), "one\n");
  const std::string other = session.start("#fake: stdout=two\\n\n", object({{"memory_gb", 1}}))
                                ->getValue<std::string>("run_id");
  EXPECT_EQ(session.finalReport(other)->getValue<std::string>("stdout"), "two\n");
  const std::string log = session.finish();
  EXPECT_THAT(log, HasSubstr("run " + first + " of tenant local started after"));
  EXPECT_THAT(log, ::testing::ContainsRegex("run " + first + " [^\n]* in prepared sandbox "));
  EXPECT_THAT(log, ::testing::ContainsRegex("run " + other + " [^\n]* s in the queue\n"));
  // Every sandbox, the prepared ones included, was removed before the server exited.
  std::size_t created = 0;
  std::size_t removed = 0;
  for (std::size_t at = 0; (at = log.find("fake: created ", at)) != std::string::npos; ++at) {
    ++created;
  }
  for (std::size_t at = 0; (at = log.find("fake: removed ", at)) != std::string::npos; ++at) {
    ++removed;
  }
  EXPECT_GE(created, 3u);  // the first run's, its replacement, and the other run's
  EXPECT_EQ(removed, created);
}

class PostureFaultE2eTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PostureFaultE2eTest, FailsTheRunBeforeUserCodeStarts) {
  Session session({"--backend-option", std::string("posture=") + GetParam()});
  Object::Ptr report = session.runToEnd("#fake: stdout=escaped\n");
  EXPECT_EQ(report->getValue<std::string>("status"), "sandbox_error");
  EXPECT_THAT(report->getValue<std::string>("reason"), HasSubstr("posture"));
  EXPECT_FALSE(report->has("stdout"));
  const std::string log = session.finish();
  EXPECT_THAT(log, HasSubstr("fake: created"));
  EXPECT_THAT(log, HasSubstr("fake: removed"));
  EXPECT_THAT(log, Not(HasSubstr("fake: started")));
}

INSTANTIATE_TEST_SUITE_P(SomeFields, PostureFaultE2eTest,
                         ::testing::Values("read_only_root", "memory_bytes", "user",
                                           "seccomp_enabled", "host_mounts", "shm_bytes"));

TEST(StdioE2eTest, ACreateFailureIsASandboxError) {
  Session session({"--backend-option", "fail=create"});
  Object::Ptr report = session.runToEnd("#fake: stdout=x\n");
  EXPECT_EQ(report->getValue<std::string>("status"), "sandbox_error");
  EXPECT_THAT(report->getValue<std::string>("reason"), HasSubstr("create failed"));
  EXPECT_THAT(session.finish(), Not(HasSubstr("fake: started")));
}

// Without a prepared sandbox any create would be this run's.
TEST(StdioE2eTest, RefusesMoreCpusThanTheHostHas) {
  Session session({"--backend-option", "cores=2", "--prepared", "0"});
  Object::Ptr result = session.process().callTool(
      "start_run", object({{"code", "#fake: stdout=x\n"}, {"limits", object({{"cpus", 3}})}}));
  EXPECT_TRUE(result->getValue<bool>("isError"));
  EXPECT_THAT(toolText(result), HasSubstr("Requested 3 CPUs"));
  EXPECT_THAT(toolText(result), HasSubstr("this host has 2 cores"));
  EXPECT_THAT(session.finish(), Not(HasSubstr("fake: created")));
}

TEST(StdioE2eTest, RefusesMemoryAboveTheMaximumWithTheExactMessage) {
  Session session;
  Object::Ptr result = session.process().callTool(
      "start_run",
      object({{"code", "#fake: stdout=x\n"}, {"limits", object({{"memory_gb", 32}})}}));
  EXPECT_TRUE(result->getValue<bool>("isError"));
  EXPECT_THAT(toolText(result), HasSubstr("Requested 32 GB of memory, max is 16 GB"));
}

TEST(StdioE2eTest, AnUnknownRunIdIsAToolError) {
  Session session;
  for (const char* tool : {"get_result", "stop_run"}) {
    Object::Ptr result = session.process().callTool(tool, object({{"run_id", "0123456789abcdef"}}));
    EXPECT_TRUE(result->getValue<bool>("isError")) << tool;
    EXPECT_THAT(toolText(result), HasSubstr("0123456789abcdef")) << tool;
  }
}

TEST(StdioE2eTest, AnswersMalformedJsonRpcAndKeepsServing) {
  McpProcess process(kBinary, fakeArgs());
  process.initialize();
  struct Case {
    std::string line;
    int code;
    std::string id;  // the id as JSON text
  };
  for (const Case& c : std::vector<Case>{
           {"not json", -32700, "null"},
           {R"({"jsonrpc":"2.0","id":1,"method":)", -32700, "null"},
           {R"({"jsonrpc":"2.0","id":7})", -32600, "7"},
           {R"({"jsonrpc":"1.0","id":8,"method":"ping"})", -32600, "8"},
           {R"([])", -32600, "null"},
           {R"("a string")", -32600, "null"},
           {R"({"jsonrpc":"2.0","id":9,"method":"no/such/method"})", -32601, "9"},
           {R"({"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"nope"}})",
            -32602, "\"s-1\""},
           {R"({"jsonrpc":"2.0","id":10,"method":"tools/call","params":[]})", -32602, "10"},
       }) {
    process.sendLine(c.line);
    auto answer = process.readLine(10s);
    ASSERT_TRUE(answer) << c.line;
    Object::Ptr response = parseObject(*answer);
    ASSERT_TRUE(response->has("error")) << *answer;
    EXPECT_EQ(response->getObject("error")->getValue<int>("code"), c.code) << c.line;
    std::ostringstream id;
    Poco::JSON::Stringifier::stringify(response->get("id"), id);
    EXPECT_EQ(id.str(), c.id) << c.line;
  }
  Object::Ptr pong = process.request("ping", nullptr);
  EXPECT_TRUE(pong->has("result"));
}

TEST(StdioE2eTest, RefusesAnOversizedLineAndKeepsServing) {
  McpProcess process(kBinary, fakeArgs({"--max-message-bytes", "4096", "--prepared", "0"}));
  process.initialize();
  const std::string big = R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":)"
                          R"("start_run","arguments":{"code":")" +
                          std::string(10000, 'x') + R"("}}})";
  process.sendLine(big);
  auto answer = process.readLine(10s);
  ASSERT_TRUE(answer);
  Object::Ptr response = parseObject(*answer);
  ASSERT_TRUE(response->has("error"));
  EXPECT_EQ(response->getObject("error")->getValue<int>("code"), -32600);
  EXPECT_EQ(response->getValue<int>("id"), 5);  // read as the line streamed past
  EXPECT_TRUE(process.request("ping", nullptr)->has("result"));
  process.closeStdin();
  EXPECT_EQ(process.waitExit(5s), 0);
  EXPECT_THAT(process.stderrText(), Not(HasSubstr("fake: created")));
}

TEST(StdioE2eTest, EveryStdoutLineOfASessionIsJsonRpc) {
  Session session({"--max-concurrent", "1"});
  McpProcess& process = session.process();
  process.request("tools/list", nullptr);
  const std::string hanging = session.start("#fake: hang\n")->getValue<std::string>("run_id");
  const std::string queued =
      session.start("#fake: stdout=was\\squeued\n")->getValue<std::string>("run_id");
  session.stop(hanging);
  session.finalReport(queued);
  session.runToEnd("#fake: flood=300000 stderr=line\\none\\n");
  process.sendLine("garbage");
  process.sendLine(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{}})");
  process.sendLine(R"({"jsonrpc":"2.0","id":"x","method":"ping"})");
  process.callTool("start_run", object({{"code", "x"}, {"limits", object({{"cpus", 99}})}}));
  session.start("#fake: hang\n");
  const std::vector<std::string> lines = drainStdout(process);
  ASSERT_EQ(process.waitExit(5s), 0);
  ASSERT_GE(lines.size(), 8u);
  for (const std::string& line : lines) {
    Object::Ptr message;
    ASSERT_NO_THROW(message = parseObject(line)) << line;
    EXPECT_EQ(message->getValue<std::string>("jsonrpc"), "2.0") << line;
    EXPECT_TRUE(message->has("id")) << line;
    EXPECT_NE(message->has("result"), message->has("error")) << line;
  }
  EXPECT_THAT(process.stderrText(), HasSubstr("scs.main: "));
}

TEST(StdioE2eTest, ExitsWithinTwoSecondsOfStdinClosingWhileARunHangs) {
  Session session;
  session.start("#fake: hang\n");
  ASSERT_TRUE(waitForStderr(session.process(), "fake: running"));
  const auto closed = std::chrono::steady_clock::now();
  session.process().closeStdin();
  EXPECT_EQ(session.process().waitExit(2s), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - closed, 2s);
  EXPECT_THAT(session.process().stderrText(), HasSubstr("fake: removed"));
}

// The engine takes a minute to remove each sandbox: the server starts every removal at once,
// waits for them until its deadline, and exits, naming what it left to the next start's sweep.
TEST(StdioE2eTest, ExitsWithoutWaitingForAnEngineSlowToRemoveAndNamesWhatItLeft) {
  Session session({"--prepared", "3", "--backend-option", "remove_ms=60000"});
  for (const char* id : {"fake-1", "fake-2", "fake-3"}) {
    ASSERT_TRUE(
        waitForStderr(session.process(), std::string("prepared sandbox ") + id + " is ready"));
  }
  const auto closed = std::chrono::steady_clock::now();
  session.process().closeStdin();
  EXPECT_EQ(session.process().waitExit(30s), 0);
  // SPEC §5's 2 s with room for a busy machine; one removal alone would take 60 s.
  EXPECT_LT(std::chrono::steady_clock::now() - closed, 5s) << "it waited for a removal";
  const std::string log = session.process().stderrText();
  for (const char* id : {"fake-1", "fake-2", "fake-3"}) {
    EXPECT_THAT(log, HasSubstr(std::string("sandbox ") + id +
                               " of prepared sandbox is not removed by the shutdown's deadline"));
  }
  EXPECT_THAT(log, Not(HasSubstr("fake: removed")));
}

TEST(StdioE2eTest, ALongPollInFlightIsAnsweredBeforeExitOnStdinClose) {
  Session session;
  const std::string run_id = session.start("#fake: hang\n")->getValue<std::string>("run_id");
  session.process().sendLine(
      R"({"jsonrpc":"2.0","id":"poll","method":"tools/call","params":{"name":"get_result",)"
      R"("arguments":{"run_id":")" +
      run_id + R"(","wait_seconds":30}}})");
  session.process().closeStdin();
  EXPECT_EQ(session.process().waitExit(2s), 0);
  bool answered = false;
  while (auto line = session.process().readLine(1s)) {
    Object::Ptr message = parseObject(*line);
    if (message->get("id").toString() == "poll") {
      answered = true;
    }
  }
  EXPECT_TRUE(answered);
}

class ShutdownSignalE2eTest : public ::testing::TestWithParam<int> {};

TEST_P(ShutdownSignalE2eTest, ExitsWithinTwoSecondsOfTheSignal) {
  Session session;
  session.start("#fake: hang\n");
  ASSERT_TRUE(waitForStderr(session.process(), "fake: running"));
  const auto sent = std::chrono::steady_clock::now();
  session.process().signal(GetParam());
  EXPECT_EQ(session.process().waitExit(2s), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - sent, 2s);
  EXPECT_THAT(session.process().stderrText(), HasSubstr("fake: removed"));
}

INSTANTIATE_TEST_SUITE_P(TermAndInt, ShutdownSignalE2eTest, ::testing::Values(SIGTERM, SIGINT));

TEST(StartupE2eTest, RefusesAPluginWithTheWrongAbiWithoutRunningIt) {
  McpProcess process(kBinary, {"--backend-path", kBadAbiPlugin});
  // Its factory aborts: a clean exit code 1 (not 128 + SIGABRT) proves it was never called.
  EXPECT_EQ(process.waitExit(10s), 1);
  const std::string err = process.stderrText();
  EXPECT_THAT(err, HasSubstr("ABI version " + std::to_string(backend::kAbiVersion + 1000)));
  EXPECT_THAT(err, HasSubstr("needs ABI version " + std::to_string(backend::kAbiVersion)));
  EXPECT_THAT(err, HasSubstr(kBadAbiPlugin));
  EXPECT_EQ(process.readLine(1s), std::nullopt);
}

TEST(StartupE2eTest, RefusesAMissingPlugin) {
  McpProcess process(kBinary, {"--backend", "nosuch"});
  EXPECT_EQ(process.waitExit(10s), 1);
  EXPECT_THAT(process.stderrText(), HasSubstr("libscs_backend_nosuch.so does not exist"));
  EXPECT_THAT(process.stderrText(), Not(HasSubstr("serving")));
}

TEST(StartupE2eTest, RefusesARelativeBackendPath) {
  McpProcess process(kBinary, {"--backend-path", "plugins/libscs_backend_fake.so"});
  EXPECT_EQ(process.waitExit(10s), 1);
  EXPECT_THAT(process.stderrText(), HasSubstr("is relative; give an absolute path"));
}

TEST(StartupE2eTest, StopsWhenTheBackendCannotReportCapacity) {
  McpProcess process(kBinary, fakeArgs({"--backend-option", "fail=capacity"}));
  EXPECT_EQ(process.waitExit(10s), 1);
  EXPECT_THAT(process.stderrText(), HasSubstr("capacity"));
}

TEST(StartupE2eTest, StopsWhenTheBackendCannotCarryEveryControl) {
  McpProcess process(kBinary, fakeArgs({"--backend-option", "fail=supports"}));
  EXPECT_EQ(process.waitExit(10s), 1);
  EXPECT_THAT(process.stderrText(),
              HasSubstr("cannot start: the backend cannot give sandboxes every control they "
                        "need: fake: every control of the posture, as scripted"));
}

TEST(StartupE2eTest, StopsWhenTheBackendRefusesItsOptions) {
  McpProcess process(kBinary, fakeArgs({"--backend-option", "colour=blue"}));
  EXPECT_EQ(process.waitExit(10s), 1);
  EXPECT_THAT(process.stderrText(), HasSubstr("unknown fake backend option 'colour'"));
}

TEST(StartupE2eTest, ExitsWithCodeTwoOnABadFlag) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--max-memory-gb", "lots"},
           {"--transport", "http"},
           {"--no-such-flag"},
           {"--backend", "fake", "--seccomp-profile", "/nonexistent/seccomp.json"}}) {
    McpProcess process(kBinary, args);
    EXPECT_EQ(process.waitExit(10s), 2) << args[0];
    EXPECT_THAT(process.stderrText(), HasSubstr("safe-code-sandbox: ")) << args[0];
    EXPECT_EQ(process.readLine(1s), std::nullopt) << args[0];
  }
}

TEST(StartupE2eTest, PrintsHelpAndVersion) {
  McpProcess help(kBinary, {"--help"});
  EXPECT_EQ(help.waitExit(10s), 0);
  std::string text;
  while (auto line = help.readLine(2s)) {
    text += *line + "\n";
  }
  EXPECT_THAT(text, HasSubstr("--max-memory-gb GB"));
  EXPECT_THAT(text, HasSubstr("--backend-option KEY=VALUE"));

  McpProcess version(kBinary, {"--version"});
  EXPECT_EQ(version.waitExit(10s), 0);
  auto line = version.readLine(2s);
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, ::testing::StartsWith("safe-code-sandbox "));
}

TEST(StartupE2eTest, LogsHostAdjustmentsOfTheMaxima) {
  McpProcess process(kBinary,
                     fakeArgs({"--backend-option", "cores=2", "--backend-option", "memory_gb=8"}));
  process.initialize();
  process.closeStdin();
  EXPECT_EQ(process.waitExit(5s), 0);
  EXPECT_THAT(process.stderrText(), HasSubstr("this host has 2 cores"));
}

}  // namespace
}  // namespace scs::testing
