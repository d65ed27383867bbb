// The global environment of integration_docker_test: one server shared by every test in the
// binary. Other integration binaries (audit, faults) start their own servers and do not link
// this file.

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "integration/harness.h"

namespace scs::integration {
namespace {

std::unique_ptr<testing::McpProcess> g_shared_server;

// The whole binary shares one server; its end is part of the test: stdin EOF must stop it
// within 2 s, and afterwards no sandbox container may be left but one it named as left to the
// next start's sweep (an engine too slow to remove it by the shutdown's deadline).
class DockerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string problem = engineProblem();
    ASSERT_TRUE(problem.empty()) << problem;
    // A canary in the server's own environment; the sandbox must never see it.
    ::setenv("SCS_INTEGRATION_CANARY", "scs-canary-7f3e", 1);
    g_shared_server = launchServer();
  }

  void TearDown() override {
    if (!g_shared_server) {
      return;
    }
    testing::McpProcess& server = *g_shared_server;
    for (const std::string& line : server.stdoutLines()) {
      EXPECT_TRUE(isValidUtf8(line)) << "a protocol line is not valid UTF-8";
      EXPECT_NO_THROW(testing::parseObject(line)) << "not a JSON object: " << tail(line, 300);
    }
    server.closeStdin();
    const auto exit_code = server.waitExit(std::chrono::seconds(2));
    EXPECT_TRUE(exit_code.has_value()) << "the shared server did not exit within 2 s of EOF";
    EXPECT_EQ(exit_code.value_or(-1), 0);
    if (!exit_code.has_value()) {
      std::cerr << "server log tail:\n" << tail(server.stderrText()) << "\n";
    }
    const std::string log = server.stderrText();
    g_shared_server.reset();
    // Every sandbox is removed, or the server named it as left to the next start's sweep: an
    // engine that had not answered by the shutdown's deadline. Those this test removes, as
    // that sweep would.
    const auto named = [&log](const std::string& id) {
      std::istringstream lines(log);
      for (std::string line; std::getline(lines, line);) {
        if (line.find("sandbox " + id + " of ") != std::string::npos &&
            line.find(" is not removed by the shutdown's deadline") != std::string::npos) {
          return true;
        }
      }
      return false;
    };
    for (const std::string& id : managedContainers()) {
      EXPECT_TRUE(named(id)) << "sandbox container " << id
                             << " is left behind, and the server did not say so";
      runCommand("docker rm -f " + id);
    }
  }
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new DockerEnvironment);

}  // namespace

testing::McpProcess& sharedServer() {
  if (!g_shared_server) {
    throw std::runtime_error("the shared server is not running (global set-up failed)");
  }
  return *g_shared_server;
}

void IntegrationTest::TearDown() {
  if (HasFailure() && g_shared_server) {
    std::cerr << "shared server log tail:\n" << tail(g_shared_server->stderrText()) << "\n";
  }
}

}  // namespace scs::integration
