// Issue 29 end to end over stdio with the fake backend: `packages` offered only where the
// operator set a wheelhouse, a set resolved by the server's pip from wheels this test writes
// (tests/support/make_wheels.py), built once and then cached, and every refusal a tool error
// before any sandbox exists.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/mcp_client.h"
#include "support/wheels.h"

namespace scs::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Object = Poco::JSON::Object;
using Array = Poco::JSON::Array;

const std::string kBinary = SCS_BINARY;

class PackagesE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    wheels_ = std::make_unique<TestWheels>();
    wheelhouse_ = wheels_->path();
  }
  static void TearDownTestSuite() { wheels_.reset(); }

  static McpProcess& serve(std::optional<McpProcess>& process,
                           std::vector<std::string> extra = {}) {
    process.emplace(kBinary, fakeArgs(std::move(extra)));
    process->initialize();
    return *process;
  }

  static Array::Ptr packagesOf(const Object::Ptr& report) {
    const Object::Ptr packages = report->getObject("packages");
    return packages ? packages->getArray("installed") : nullptr;
  }

  static Object::Ptr inputSchemaOf(McpProcess& server, const std::string& tool) {
    const Array::Ptr tools =
        server.request("tools/list", nullptr)->getObject("result")->getArray("tools");
    for (std::size_t i = 0; i < tools->size(); ++i) {
      if (tools->getObject(i)->getValue<std::string>("name") == tool) {
        return tools->getObject(i)->getObject("inputSchema");
      }
    }
    ADD_FAILURE() << "no tool " << tool;
    return new Object;
  }

  static Array::Ptr list(std::initializer_list<std::string> items) {
    Array::Ptr array = new Array;
    for (const std::string& item : items) {
      array->add(item);
    }
    return array;
  }

  static inline std::unique_ptr<TestWheels> wheels_;
  static inline fs::path wheelhouse_;
};

TEST_F(PackagesE2eTest, OnlyAServerWithAWheelhouseOffersPackages) {
  std::optional<McpProcess> plain;
  serve(plain);
  for (const char* tool : {"start_run", "open_session"}) {
    EXPECT_FALSE(inputSchemaOf(*plain, tool)->getObject("properties")->has("packages")) << tool;
  }
  const Object::Ptr refused =
      plain->callTool("start_run", object({{"code", "print(1)"}, {"packages", list({"tqdm"})}}));
  EXPECT_TRUE(refused->optValue<bool>("isError", false));
  EXPECT_THAT(toolText(refused), HasSubstr("This server offers no packages"));

  std::optional<McpProcess> offering;
  serve(offering, {"--wheelhouse", wheelhouse_.string(), "--max-packages", "3"});
  for (const char* tool : {"start_run", "open_session"}) {
    const Object::Ptr packages =
        inputSchemaOf(*offering, tool)->getObject("properties")->getObject("packages");
    ASSERT_FALSE(packages.isNull()) << tool;
    EXPECT_EQ(packages->getValue<int>("maxItems"), 3);
  }
}

TEST_F(PackagesE2eTest, ARunGetsItsSetBuiltOnceThenFromTheCache) {
  std::optional<McpProcess> server;
  serve(server, {"--wheelhouse", wheelhouse_.string()});
  const Object::Ptr arguments =
      object({{"code", "#fake: stdout=ok\n"}, {"packages", list({"needsold"})}});
  const Object::Ptr first = finalReport(
      *server, callOk(*server, "start_run", arguments)->getValue<std::string>("run_id"));
  EXPECT_EQ(first->getValue<std::string>("status"), "succeeded");
  ASSERT_FALSE(packagesOf(first).isNull());
  EXPECT_EQ(packagesOf(first)->size(), 2u);
  EXPECT_EQ(packagesOf(first)->getElement<std::string>(0), "needsold==1.0");
  EXPECT_EQ(packagesOf(first)->getElement<std::string>(1), "purepkg==1.0");
  EXPECT_TRUE(first->getObject("packages")->getValue<bool>("built"));

  const Object::Ptr second = finalReport(
      *server, callOk(*server, "start_run", arguments)->getValue<std::string>("run_id"));
  // A compact report of a cached set says what is installed, and no more.
  EXPECT_EQ(second->getObject("packages")->getArray("installed")->size(), 2u);
  EXPECT_FALSE(second->getObject("packages")->has("built"));
  EXPECT_FALSE(second->getObject("packages")->has("prepare_seconds"));
  // The server's log says which wheel and hash went into the layer.
  EXPECT_THAT(server->stderrText(), HasSubstr("needsold 1.0 from needsold-1.0-py3-none-any.whl "
                                              "sha256 "));
}

TEST_F(PackagesE2eTest, ASetThatCannotBeHadIsAToolErrorAndNoSandboxIsMade) {
  std::optional<McpProcess> server;
  serve(server, {"--wheelhouse", wheelhouse_.string()});
  const auto error = [&](Array::Ptr packages) {
    const Object::Ptr result =
        server->callTool("start_run", object({{"code", "print(1)"}, {"packages", packages}}));
    EXPECT_TRUE(result->optValue<bool>("isError", false)) << toolText(result);
    EXPECT_FALSE(result->has("structuredContent") &&
                 result->getObject("structuredContent")->has("run_id"));
    return toolText(result);
  };
  EXPECT_THAT(error(list({"nosuch"})), HasSubstr("nosuch"));
  EXPECT_THAT(error(list({"winonly"})), HasSubstr("winonly-1.0-cp311-cp311-win_amd64.whl"));
  EXPECT_THAT(error(list({"purepkg==2.0", "needsold"})), HasSubstr("conflict"));
  EXPECT_THAT(error(list({"purepkg @ file:///etc/passwd"})), HasSubstr("URLs are not accepted"));
  Array::Ptr not_strings = new Array;
  not_strings->add(7);
  EXPECT_THAT(error(not_strings), HasSubstr("must be an array of strings"));
}

TEST_F(PackagesE2eTest, ASessionsPackagesAreTheSessionsForAllItsRuns) {
  std::optional<McpProcess> server;
  serve(server, {"--wheelhouse", wheelhouse_.string()});
  const Object::Ptr session =
      callOk(*server, "open_session", object({{"packages", list({"purepkg"})}}));
  ASSERT_FALSE(packagesOf(session).isNull());
  EXPECT_EQ(packagesOf(session)->getElement<std::string>(0), "purepkg==2.0");
  const std::string id = session->getValue<std::string>("session_id");

  const Object::Ptr refused = server->callTool(
      "start_run",
      object({{"code", "print(1)"}, {"session_id", id}, {"packages", list({"needsold"})}}));
  EXPECT_TRUE(refused->optValue<bool>("isError", false));
  EXPECT_THAT(toolText(refused), HasSubstr("A session's packages are the session's"));

  const Object::Ptr run = finalReport(
      *server,
      callOk(*server, "start_run", object({{"code", "#fake: stdout=ok\n"}, {"session_id", id}}))
          ->getValue<std::string>("run_id"));
  EXPECT_EQ(run->getValue<std::string>("status"), "succeeded");
  EXPECT_FALSE(run->has("packages"));  // told once, when the session opened
}

TEST_F(PackagesE2eTest, AnIndexNeedsAnAllowListAndAnAllowListNeedsASource) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--package-index", "http://127.0.0.1:1/simple/"},
        std::vector<std::string>{"--package-index", "ftp://mirror/simple", "--allow-packages",
                                 "any"},
        std::vector<std::string>{"--allow-packages", "tqdm"},
        std::vector<std::string>{"--wheelhouse", "/nonexistent/wheelhouse"}}) {
    McpProcess server(kBinary, fakeArgs(args));
    const std::optional<int> status = server.waitExit(std::chrono::seconds(10));
    ASSERT_TRUE(status.has_value()) << ::testing::PrintToString(args);
    EXPECT_NE(*status, 0) << ::testing::PrintToString(args);
    EXPECT_THAT(server.stderrText(),
                ::testing::AnyOf(HasSubstr("--package-index"), HasSubstr("--allow-packages"),
                                 HasSubstr("--wheelhouse")));
  }
}

}  // namespace
}  // namespace scs::testing
