#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/mcp_client.h"

// Drives the real server binary with the Docker backend against the local engine. Every
// helper throws std::runtime_error on a protocol or engine surprise, which gtest reports as a
// test failure with the message.
namespace scs::integration {

inline constexpr const char* kImage = "safe-code-sandbox:latest";
inline constexpr std::uint64_t kOutputCapBytes = 1u << 20;  // the server's default per stream

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// The container runtime every test server uses: $SCS_TEST_RUNTIME, runc when unset.
std::string testRuntime();

// True under gVisor (runsc), where some answers legitimately differ: the call is handled by
// gVisor's own kernel (the Sentry) instead of being refused by the host kernel.
bool underGvisor();

// Empty when the engine answers, knows testRuntime() and has the sandbox image; otherwise
// what is missing and how to set it up.
std::string engineProblem();

// Runs `command` through /bin/sh.
CommandResult runCommand(const std::string& command);

// IDs of containers (running or not) carrying the label `key=value`, or `key` alone.
std::vector<std::string> containersWithLabel(const std::string& label);
// By the run-id label alone: the sandboxes created for the run.
std::vector<std::string> containersOfRun(const std::string& run_id);
// Those, and the prepared sandbox the server's log says the run took (a prepared sandbox is
// labelled before its run exists). Works on a server that has exited, too.
std::vector<std::string> containersOfRun(const testing::McpProcess& server,
                                         const std::string& run_id);
// Containers the server process started (label io.scs.owner-pid), prepared ones included.
std::vector<std::string> containersOfServer(const testing::McpProcess& server);
std::vector<std::string> managedContainers();
bool containerExists(const std::string& id);
// "<status> <exit code>" from the engine's record, e.g. "exited 137", or "gone".
std::string containerState(const std::string& id);

// True when some host process has `token` as one of its argv words.
bool hostProcessWithArgExists(const std::string& token);

// True when one of some host process's argv words contains `fragment`.
bool hostProcessArgContains(const std::string& fragment);

// Polls `condition` until it holds or `budget` passes; returns the last value.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds budget,
                std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    if (condition()) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(step);
  }
}

// A server process speaking MCP over stdio, already initialised; `extra_args` are appended
// to the flags every test server gets (the Docker backend and --runtime testRuntime()).
// `ready` bounds the wait for the answer to initialize (a --self-test server audits first).
std::unique_ptr<testing::McpProcess> launchServer(
    const std::vector<std::string>& extra_args = {},
    std::chrono::milliseconds ready = std::chrono::seconds(30));

// The server shared by every test in integration_docker_test (owned by the global environment
// in environment.cc, which only that binary links).
testing::McpProcess& sharedServer();

// The limits object for start_run; absent members are left to the server's defaults.
struct Limits {
  std::optional<double> memory_gb = std::nullopt;
  std::optional<double> timeout_seconds = std::nullopt;
  std::optional<double> cpus = std::nullopt;
};

struct RunRequest {
  std::string code;
  Limits limits;
  Poco::JSON::Array::Ptr files;  // may be null
};

Poco::JSON::Object::Ptr startRunArguments(const RunRequest& request);

// The CallToolResult of tools/call; throws if it is an error result.
Poco::JSON::Object::Ptr callToolOk(testing::McpProcess& server, const std::string& tool,
                                   Poco::JSON::Object::Ptr arguments);

// start_run; returns the run id.
std::string startRun(testing::McpProcess& server, const RunRequest& request);

// start_run with `arguments` (wait_seconds 60 unless they say), then get_result until the
// status is final: the report.
Poco::JSON::Object::Ptr runToFinal(testing::McpProcess& server, Poco::JSON::Object::Ptr arguments);

// open_session in `language` with `memory_gb` (the default when none); its session_id.
std::string openSession(testing::McpProcess& server, std::optional<double> memory_gb = std::nullopt,
                        const std::string& language = "python");

// close_session; its structuredContent.
Poco::JSON::Object::Ptr closeSession(testing::McpProcess& server, const std::string& session_id);

// get_result with wait_seconds up to 60, repeated until the status is final or `budget`
// passes (then throws).
Poco::JSON::Object::Ptr awaitFinal(testing::McpProcess& server, const std::string& run_id,
                                   std::chrono::seconds budget = std::chrono::seconds(300));

// get_result without waiting.
Poco::JSON::Object::Ptr snapshot(testing::McpProcess& server, const std::string& run_id);

// Polls until the run reports `running` and its container exists, and returns the
// container's id; throws after `budget`.
std::string awaitRunningContainer(testing::McpProcess& server, const std::string& run_id,
                                  std::chrono::seconds budget = std::chrono::seconds(60));

bool isFinalStatus(const std::string& status);

// Report field access.
std::string text(const Poco::JSON::Object::Ptr& report, const std::string& key);
std::int64_t integer(const Poco::JSON::Object::Ptr& report, const std::string& key);
double number(const Poco::JSON::Object::Ptr& report, const std::string& key);
bool flag(const Poco::JSON::Object::Ptr& report, const std::string& key);
bool absentOrNull(const Poco::JSON::Object::Ptr& report, const std::string& key);

// The verdict a probe printed: the rest of the stdout line that starts with `label` and a
// space, or a description of what was printed when no such line exists.
std::string verdict(const Poco::JSON::Object::Ptr& report, const std::string& label);

// stdout or stderr of a report; "" when the report leaves the stream out, as a compact report
// does with an empty one.
std::string stream(const Poco::JSON::Object::Ptr& report, const std::string& name);

// The bytes of a returned file, from the CallToolResult's content blocks (support/mcp_client.h).
using scs::testing::fileContent;

// One line with status, exit code, signal, reason, and the heads of stdout and stderr.
std::string describe(const Poco::JSON::Object::Ptr& report);

bool isValidUtf8(const std::string& bytes);

std::string hexOf(const std::string& bytes);

// The last `bytes` of the text, for failure messages.
std::string tail(const std::string& text, std::size_t bytes = 4000);

// Named runs started together so that they execute in parallel; tests then collect the
// reports one by one. Not thread-safe.
class RunBatch {
 public:
  void add(const std::string& name, RunRequest request);

  // Starts every run; a refused start is remembered and reported by report().
  void startAll(testing::McpProcess& server);

  // The run's final report, waiting up to `budget` for it.
  Poco::JSON::Object::Ptr report(testing::McpProcess& server, const std::string& name,
                                 std::chrono::seconds budget = std::chrono::seconds(420));

  std::string runId(const std::string& name) const;

  // Stops every run whose final report was not collected, so that the next suite starts
  // with an idle server.
  void stopUnfinished(testing::McpProcess& server);

 private:
  struct Entry {
    RunRequest request;
    std::string run_id;
    std::string start_error;
    Poco::JSON::Object::Ptr final_report;
  };
  std::vector<std::pair<std::string, Entry>> entries_;

  Entry& find(const std::string& name);
};

// Base fixture: on failure, prints the tail of the shared server's log.
class IntegrationTest : public ::testing::Test {
 protected:
  void TearDown() override;
};

// A suite whose runs all start in its SetUpTestSuite (which creates batch_ and fills it) and
// are stopped, if still unfinished, when the suite ends. One batch per suite type.
template <class Suite>
class BatchedIntegrationTest : public IntegrationTest {
 protected:
  static void TearDownTestSuite() {
    if (batch_) {
      batch_->stopUnfinished(sharedServer());
      batch_.reset();
    }
  }

  static inline std::unique_ptr<RunBatch> batch_;
};

// A suite with a server of its own, started at its first use with `--prepared 0` (its runs and
// sessions each take a fresh sandbox), after checking that the engine answers. `Base` is
// ::testing::Test or a TestWithParam.
template <class Base = ::testing::Test>
class OwnServerTest : public Base {
 protected:
  void SetUp() override { ASSERT_EQ(engineProblem(), ""); }

  static testing::McpProcess& server() {
    static std::unique_ptr<testing::McpProcess> shared = launchServer({"--prepared", "0"});
    return *shared;
  }
};

}  // namespace scs::integration
