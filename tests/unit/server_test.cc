#include "mcp/server.h"

#include <Poco/AutoPtr.h>
#include <Poco/Channel.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/ParseHandler.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Logger.h>
#include <Poco/Message.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "mcp/tools.h"
#include "mocks/core_stack.h"
#include "mocks/test_logs.h"
#include "support/json.h"
#include "support/json_schema.h"

namespace scs::mcp {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;
using scs::testing::compact;
using scs::testing::parseOrdered;
using scs::testing::stringsOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ServerTest : public ::testing::Test {
 protected:
  ServerTest() : ServerTest(mocks::kTestHost) {}

  explicit ServerTest(policy::HostCapacity host)
      : core_(runSettings(), host),
        server_(core_.runs, core_.limits, policy::FileSettings{},
                ServerInfo{"scs", "Scs", "1.2.3"}) {}

  static runs::RunSettings runSettings() {
    runs::RunSettings settings;
    settings.max_concurrent = 1;
    settings.max_queue = 1;
    return settings;
  }

  // The response to `message`, parsed; fails the test when there is none.
  Object::Ptr call(const std::string& message) {
    std::optional<std::string> answer = server_.handle(message);
    if (!answer) {
      ADD_FAILURE() << "no answer to " << message;
      return new Object;
    }
    EXPECT_EQ(answer->find('\n'), std::string::npos) << *answer;
    EXPECT_EQ(common::toValidUtf8(*answer), *answer);
    return parseOrdered(*answer);
  }

  Object::Ptr request(const std::string& method, const std::string& params_json) {
    return call(R"({"jsonrpc":"2.0","id":1,"method":")" + method + R"(","params":)" + params_json +
                "}");
  }

  // The CallToolResult of tools/call.
  Object::Ptr callTool(const std::string& name, const std::string& arguments_json) {
    Object::Ptr response =
        request("tools/call", R"({"name":")" + name + R"(","arguments":)" + arguments_json + "}");
    EXPECT_TRUE(response->has("result")) << compact(response);
    return response->has("result") ? response->getObject("result") : Object::Ptr(new Object);
  }

  // A successful tool result's structuredContent, checked against the tool's outputSchema
  // and against its text block.
  Object::Ptr structured(const std::string& name, const Object::Ptr& result) {
    EXPECT_FALSE(result->getValue<bool>("isError")) << compact(result);
    if (!result->has("structuredContent")) {
      ADD_FAILURE() << "no structuredContent: " << compact(result);
      return new Object;
    }
    const Object::Ptr content = result->getObject("structuredContent");
    const Array::Ptr blocks = result->getArray("content");
    EXPECT_EQ(blocks->size(), 1u);
    EXPECT_EQ(blocks->getObject(0)->getValue<std::string>("type"), "text");
    EXPECT_EQ(compact(parseOrdered(blocks->getObject(0)->getValue<std::string>("text"))),
              compact(content));

    EXPECT_THAT(scs::testing::schemaViolations(content, outputSchema(name), "structuredContent"),
                ::testing::IsEmpty())
        << compact(content);
    return content;
  }

  // An isError result's text (and no structuredContent).
  std::string toolError(const Object::Ptr& result) {
    EXPECT_TRUE(result->getValue<bool>("isError")) << compact(result);
    EXPECT_FALSE(result->has("structuredContent"));
    const Array::Ptr blocks = result->getArray("content");
    EXPECT_EQ(blocks->size(), 1u);
    return blocks->getObject(0)->getValue<std::string>("text");
  }

  Object::Ptr tool(const std::string& name) {
    const Array::Ptr tools = request("tools/list", "{}")->getObject("result")->getArray("tools");
    for (std::size_t i = 0; i < tools->size(); ++i) {
      if (tools->getObject(i)->getValue<std::string>("name") == name) {
        return tools->getObject(i);
      }
    }
    ADD_FAILURE() << "no tool " << name;
    return new Object;
  }

  Object::Ptr outputSchema(const std::string& name) {
    return tool(name)->getObject("outputSchema");
  }

  std::string startRun(const std::string& code) {
    const Object::Ptr content =
        structured("start_run", callTool("start_run", R"({"code":")" + code + R"("})"));
    return content->getValue<std::string>("run_id");
  }

  mocks::CoreStack core_;
  Server server_;
};

void expectError(const Object::Ptr& response, int code, const std::string& id_json) {
  ASSERT_TRUE(response->has("error")) << compact(response);
  EXPECT_FALSE(response->has("result"));
  EXPECT_EQ(response->getObject("error")->getValue<int>("code"), code) << compact(response);
  EXPECT_FALSE(response->getObject("error")->getValue<std::string>("message").empty());
  EXPECT_THAT(compact(response), HasSubstr(R"("id":)" + id_json + ","));
}

TEST_F(ServerTest, InitializeEchoesEachSupportedVersion) {
  for (const std::string version : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
    const Object::Ptr response = request(
        "initialize", R"({"protocolVersion":")" + version +
                          R"(","capabilities":{},"clientInfo":{"name":"t","version":"1"}})");
    EXPECT_EQ(response->getObject("result")->getValue<std::string>("protocolVersion"), version);
  }
}

TEST_F(ServerTest, InitializeAnswersAnUnknownVersionWithTheLatest) {
  const Object::Ptr response = request("initialize", R"({"protocolVersion":"2099-01-01"})");
  const Object::Ptr result = response->getObject("result");
  EXPECT_EQ(result->getValue<std::string>("protocolVersion"), "2025-11-25");
  EXPECT_EQ(compact(result->getObject("capabilities")),
            R"({"tools":{"listChanged":false},"logging":{}})");
  const Object::Ptr info = result->getObject("serverInfo");
  EXPECT_EQ(info->getValue<std::string>("name"), "scs");
  EXPECT_EQ(info->getValue<std::string>("title"), "Scs");
  EXPECT_EQ(info->getValue<std::string>("version"), "1.2.3");
  const std::string instructions = result->getValue<std::string>("instructions");
  EXPECT_THAT(instructions, HasSubstr("start_run"));
  EXPECT_THAT(instructions, HasSubstr("get_result"));
  EXPECT_THAT(instructions, HasSubstr("stop_run"));
}

TEST_F(ServerTest, InitializeWithoutAStringVersionIsInvalidParams) {
  expectError(request("initialize", R"({"capabilities":{}})"), -32602, "1");
  expectError(request("initialize", R"({"protocolVersion":20251125})"), -32602, "1");
  expectError(call(R"({"jsonrpc":"2.0","id":4,"method":"initialize"})"), -32602, "4");
}

TEST_F(ServerTest, PingAnswersAnEmptyResult) {
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":"p1","method":"ping"})"),
            R"({"jsonrpc":"2.0","id":"p1","result":{}})");
}

TEST_F(ServerTest, IdsAreEchoedWithTheirTypeAndValue) {
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":0,"method":"ping"})"),
            R"({"jsonrpc":"2.0","id":0,"result":{}})");
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":"abc","method":"ping"})"),
            R"({"jsonrpc":"2.0","id":"abc","result":{}})");
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":12345678901234,"method":"ping"})"),
            R"({"jsonrpc":"2.0","id":12345678901234,"result":{}})");
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":-7,"method":"ping"})"),
            R"({"jsonrpc":"2.0","id":-7,"result":{}})");
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"})"),
            R"({"jsonrpc":"2.0","id":18446744073709551615,"result":{}})");
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":"12","method":"ping"})"),
            R"({"jsonrpc":"2.0","id":"12","result":{}})");
  // Poco would wrap 2^64 to 0; it must not come back as a different, valid id.
  expectError(call(R"({"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"})"), -32600,
              "null");
}

TEST_F(ServerTest, MalformedJsonIsAParseErrorWithNullId) {
  for (const std::string bad : {"{", R"({"jsonrpc":"2.0","id":1,"method":"ping"} x)", "nope", "",
                                R"({"jsonrpc":"2.0","id":1,)", "1 2"}) {
    SCOPED_TRACE(bad);
    expectError(call(bad), -32700, "null");
  }
  // Nesting deeper than the parser allows is refused, not a stack overflow.
  expectError(call(std::string(100000, '[') + std::string(100000, ']')), -32700, "null");
}

TEST_F(ServerTest, ValidJsonThatIsNotARequestIsInvalidRequest) {
  expectError(call(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])"), -32600, "null");
  expectError(call("[]"), -32600, "null");
  expectError(call("5"), -32600, "null");
  expectError(call(R"("ping")"), -32600, "null");
  expectError(call("null"), -32600, "null");
  expectError(call(R"({"jsonrpc":"1.0","id":7,"method":"ping"})"), -32600, "7");
  expectError(call(R"({"id":7,"method":"ping"})"), -32600, "7");
  expectError(call(R"({"jsonrpc":"2.0","id":"x","method":5})"), -32600, R"("x")");
  expectError(call(R"({"jsonrpc":"2.0","id":8})"), -32600, "8");
  for (const std::string id : {"{}", "[1]", "true", "1.5", "null"}) {
    SCOPED_TRACE(id);
    expectError(call(R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":"ping"})"), -32600, "null");
  }
}

TEST_F(ServerTest, NonObjectParamsAreInvalidParams) {
  expectError(call(R"({"jsonrpc":"2.0","id":2,"method":"ping","params":[1]})"), -32602, "2");
  expectError(call(R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":"x"})"), -32602, "2");
}

TEST_F(ServerTest, UnknownMethodsAreMethodNotFound) {
  const Object::Ptr response = call(R"({"jsonrpc":"2.0","id":3,"method":"foo/bar"})");
  expectError(response, -32601, "3");
  EXPECT_EQ(response->getObject("error")->getValue<std::string>("message"),
            "Method not found: foo/bar");
  // The tasks methods exist in the modern revision only.
  expectError(call(R"({"jsonrpc":"2.0","id":"d","method":"tasks/get","params":{"taskId":"x"}})"),
              -32601, R"("d")");
}

TEST_F(ServerTest, NotificationsAndResponsesGetNoAnswer) {
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"),
            std::nullopt);
  EXPECT_EQ(server_.handle(
                R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})"),
            std::nullopt);
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","method":"notifications/whatever"})"), std::nullopt);
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","method":"ping"})"), std::nullopt);
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":5,"result":{}})"), std::nullopt);
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"x"}})"),
            std::nullopt);
}

// Types as [X, "null"] do not port to every schema dialect a client uses (the Inspector warns);
// anyOf does. None may remain anywhere in a definition.
void expectNoTypeArrays(const Poco::Dynamic::Var& node, const std::string& where) {
  if (node.type() == typeid(Object::Ptr)) {
    for (const auto& [key, value] : *node.extract<Object::Ptr>()) {
      EXPECT_FALSE(key == "type" && value.type() == typeid(Array::Ptr)) << where;
      expectNoTypeArrays(value, where + "." + key);
    }
  } else if (node.type() == typeid(Array::Ptr)) {
    for (const auto& value : *node.extract<Array::Ptr>()) {
      expectNoTypeArrays(value, where + "[]");
    }
  }
}

TEST_F(ServerTest, ToolsListDescribesFiveToolsForAModel) {
  const Object::Ptr result = request("tools/list", "{}")->getObject("result");
  EXPECT_FALSE(result->has("nextCursor"));
  const Array::Ptr tools = result->getArray("tools");
  ASSERT_EQ(tools->size(), 5u);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const Object::Ptr tool = tools->getObject(i);
    names.push_back(tool->getValue<std::string>("name"));
    SCOPED_TRACE(names.back());
    EXPECT_FALSE(tool->getValue<std::string>("title").empty());
    // What the tool is for and the workflow, in a few short lines: details are in the
    // parameters, so that a form (the Inspector) stays in view.
    const std::string description = tool->getValue<std::string>("description");
    EXPECT_GT(description.size(), 70u);
    EXPECT_LE(description.size(), 500u);
    const Object::Ptr input = tool->getObject("inputSchema");
    EXPECT_EQ(input->getValue<std::string>("type"), "object");
    EXPECT_FALSE(input->getValue<bool>("additionalProperties"));
    const Object::Ptr output = tool->getObject("outputSchema");
    EXPECT_EQ(output->getValue<std::string>("type"), "object");
    expectNoTypeArrays(Poco::Dynamic::Var(tool), names.back());
    EXPECT_FALSE(tool->getObject("annotations")->getValue<bool>("openWorldHint"));
    if (i >= 3) {
      EXPECT_THAT(stringsOf(output->get("required")), ::testing::Contains("session_id"));
      continue;
    }
    EXPECT_THAT(stringsOf(output->get("required")), ElementsAre("run_id", "status"));
    const Object::Ptr properties = output->getObject("properties");
    const auto anyOf = [&](const char* key) {
      std::ostringstream text;
      properties->getObject(key)->getArray("anyOf")->stringify(text);
      return text.str();
    };
    EXPECT_EQ(anyOf("exit_code"), R"([{"type":"integer"},{"type":"null"}])");
    EXPECT_EQ(anyOf("started_at"), R"([{"type":"string"},{"type":"null"}])");
    EXPECT_THAT(stringsOf(properties->getObject("status")->get("enum")),
                ElementsAre("queued", "running", "succeeded", "failed", "timed_out",
                            "out_of_memory", "stopped", "sandbox_error"));
  }
  EXPECT_THAT(names,
              ElementsAre("start_run", "get_result", "stop_run", "open_session", "close_session"));

  // Only the hints that differ from the specification's defaults (readOnlyHint false,
  // destructiveHint true, idempotentHint false, openWorldHint true).
  EXPECT_EQ(compact(tools->getObject(0)->getObject("annotations")),
            R"({"destructiveHint":false,"openWorldHint":false})");
  EXPECT_EQ(compact(tools->getObject(1)->getObject("annotations")),
            R"({"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false})");
  EXPECT_EQ(compact(tools->getObject(2)->getObject("annotations")),
            R"({"idempotentHint":true,"openWorldHint":false})");

  const Object::Ptr start_input = tools->getObject(0)->getObject("inputSchema");
  EXPECT_THAT(stringsOf(start_input->get("required")), ElementsAre("code"));
  const Object::Ptr limit_properties =
      start_input->getObject("properties")->getObject("limits")->getObject("properties");
  EXPECT_EQ(limit_properties->getObject("memory_gb")->getValue<double>("maximum"), 16);
  EXPECT_EQ(limit_properties->getObject("memory_gb")->getValue<double>("default"), 5);
  EXPECT_EQ(limit_properties->getObject("timeout_seconds")->getValue<double>("maximum"), 3600);
  EXPECT_EQ(limit_properties->getObject("cpus")->getValue<double>("maximum"), 4);
  EXPECT_FALSE(limit_properties->has("processes"));
  const Object::Ptr get_input = tools->getObject(1)->getObject("inputSchema");
  EXPECT_THAT(stringsOf(get_input->get("required")), ElementsAre("run_id"));
  EXPECT_EQ(
      get_input->getObject("properties")->getObject("wait_seconds")->getValue<double>("maximum"),
      60);

  // The facts a model needs, in the tool's description or its parameters' and report's.
  const std::string start = compact(tools->getObject(0));
  for (const std::string fact :
       {"without network", "pip", "standard library", "/workspace", "(default 5, max 16)",
        "(default 600, max 3600)", "(default 2, max 4)", "256", "get_result", "stop_run",
        "wait_seconds"}) {
    EXPECT_THAT(start, HasSubstr(fact));
  }
  const std::string get = compact(tools->getObject(1));
  for (const std::string fact : {"succeeded", "failed", "timed_out", "out_of_memory", "stopped",
                                 "sandbox_error", "head and tail", "1 hour"}) {
    EXPECT_THAT(get, HasSubstr(fact));
  }
}

// What a model is handed before it calls anything: the whole tools/list, compact, within
// 14 KiB (issue 24 set 12 KiB; issue 46, sessions that hibernate, 14), and instructions that
// name only tools the server lists, and all of them.
TEST_F(ServerTest, ToolsListAndInstructionsAreSmallAndTrue) {
  const Object::Ptr listed = request("tools/list", "{}")->getObject("result");
  EXPECT_LE(compact(listed).size(), 14u * 1024) << compact(listed).size();
  std::set<std::string> listed_names;
  const Array::Ptr tools = listed->getArray("tools");
  for (std::size_t i = 0; i < tools->size(); ++i) {
    listed_names.insert(tools->getObject(i)->getValue<std::string>("name"));
  }
  const std::string instructions =
      request("initialize", R"({"protocolVersion":"2025-11-25","capabilities":{},)"
                            R"("clientInfo":{"name":"t","version":"1"}})")
          ->getObject("result")
          ->getValue<std::string>("instructions");
  std::set<std::string> named;
  const std::regex tool_name(R"(\b([a-z]+_[a-z_]+)\b)");
  for (auto it = std::sregex_iterator(instructions.begin(), instructions.end(), tool_name);
       it != std::sregex_iterator(); ++it) {
    const std::string word = (*it)[1];
    if (word != "wait_seconds" && word != "run_id" && word != "session_id" && word != "timed_out" &&
        word != "out_of_memory" && word != "sandbox_error") {
      named.insert(word);
    }
  }
  EXPECT_EQ(named, listed_names) << instructions;
  for (const char* stale : {"standard library only", "returns a run_id at once"}) {
    EXPECT_THAT(instructions, Not(HasSubstr(stale)));
  }
  for (const char* fact : {"wait_seconds", "open_session", "/workspace/out", "without network"}) {
    EXPECT_THAT(instructions, HasSubstr(fact));
  }
}

class SmallHostServerTest : public ServerTest {
 protected:
  SmallHostServerTest() : ServerTest(policy::HostCapacity{2, std::int64_t{64} << 30}) {}
};

TEST_F(SmallHostServerTest, SchemasAndDescriptionsQuoteTheEffectiveMaxima) {
  const Object::Ptr start = tool("start_run");
  EXPECT_EQ(start->getObject("inputSchema")
                ->getObject("properties")
                ->getObject("limits")
                ->getObject("properties")
                ->getObject("cpus")
                ->getValue<double>("maximum"),
            2);
  EXPECT_THAT(start->getObject("inputSchema")
                  ->getObject("properties")
                  ->getObject("limits")
                  ->getObject("properties")
                  ->getObject("cpus")
                  ->getValue<std::string>("description"),
              HasSubstr("(default 2, max 2)"));
}

TEST_F(ServerTest, StartPollAndStopARun) {
  const Object::Ptr started = structured(
      "start_run",
      callTool("start_run", R"({"code":"#fake:stdout=hi\\n\n#fake:peak_memory=1048576"})"));
  const std::string run_id = started->getValue<std::string>("run_id");
  EXPECT_FALSE(run_id.empty());
  EXPECT_THAT(started->getValue<std::string>("status"), ::testing::AnyOf("queued", "running"));
  EXPECT_FALSE(started->has("limits"));  // the defaults

  const Object::Ptr final_result =
      callTool("get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":20})");
  const Object::Ptr report = structured("get_result", final_result);
  EXPECT_EQ(report->getValue<std::string>("run_id"), run_id);
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(report->getValue<int>("exit_code"), 0);
  EXPECT_FALSE(report->has("signal"));
  EXPECT_FALSE(report->getValue<std::string>("reason").empty());
  EXPECT_EQ(report->getValue<std::string>("stdout"), "hi\n");
  EXPECT_GE(report->getValue<double>("duration_seconds"), 0);
  EXPECT_EQ(report->getValue<std::int64_t>("peak_memory_bytes"), 1 << 20);
  EXPECT_FALSE(report->has("queue_position"));
  // What tells nothing is left out of the compact report: an empty stream, whole streams'
  // counts and false flags, the default limits and the timestamps.
  for (const char* absent : {"stderr", "stdout_bytes", "stderr_bytes", "stdout_truncated",
                             "stderr_truncated", "limits", "started_at", "finished_at"}) {
    EXPECT_FALSE(report->has(absent)) << absent;
  }
  // A trivial report in few characters (issue 24: at most 250).
  EXPECT_LE(final_result->getArray("content")->getObject(0)->getValue<std::string>("text").size(),
            250u);

  // verbose: every field.
  const Object::Ptr full = structured(
      "get_result", callTool("get_result", R"({"run_id":")" + run_id + R"(","verbose":true})"));
  EXPECT_EQ(full->getValue<std::string>("stderr"), "");
  EXPECT_EQ(full->getValue<int>("stdout_bytes"), 3);
  EXPECT_EQ(full->getValue<int>("stderr_bytes"), 0);
  EXPECT_FALSE(full->getValue<bool>("stdout_truncated"));
  EXPECT_FALSE(full->getValue<bool>("stderr_truncated"));
  EXPECT_GE(full->getValue<double>("queued_seconds"), 0);
  EXPECT_EQ(compact(full->getObject("limits")),
            R"({"memory_gb":5,"timeout_seconds":600,"cpus":2,"processes":256})");
  const std::regex rfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  EXPECT_TRUE(std::regex_match(full->getValue<std::string>("started_at"), rfc3339));
  EXPECT_TRUE(std::regex_match(full->getValue<std::string>("finished_at"), rfc3339));
  EXPECT_THAT(toolError(callTool("get_result", R"({"run_id":")" + run_id + R"(","verbose":1})")),
              HasSubstr("verbose"));

  // Stopping a finished run changes nothing.
  const Object::Ptr stopped =
      structured("stop_run", callTool("stop_run", R"({"run_id":")" + run_id + R"("})"));
  EXPECT_EQ(stopped->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(stopped->getValue<std::string>("stdout"), "hi\n");
}

TEST_F(ServerTest, StoppingARunningRunReportsStopped) {
  const std::string run_id = startRun("#fake:hang");
  const Object::Ptr polled =
      structured("get_result", callTool("get_result", R"({"run_id":")" + run_id + R"("})"));
  EXPECT_THAT(polled->getValue<std::string>("status"), ::testing::AnyOf("queued", "running"));
  // A running run shows its output so far (issue 7), here none yet, and its byte counts, the
  // offsets to ask from next; a queued one has neither.
  EXPECT_EQ(polled->has("stdout_bytes"), polled->getValue<std::string>("status") == "running");

  const Object::Ptr stopped =
      structured("stop_run", callTool("stop_run", R"({"run_id":")" + run_id + R"("})"));
  EXPECT_EQ(stopped->getValue<std::string>("status"), "stopped");
  const Object::Ptr again = structured(
      "get_result", callTool("get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":0})"));
  EXPECT_EQ(again->getValue<std::string>("status"), "stopped");
}

TEST_F(ServerTest, QueuedRunsReportTheirPositionAndAFullQueueIsAToolError) {
  const std::string running = startRun("#fake:hang");
  const Object::Ptr queued =
      structured("start_run", callTool("start_run", R"({"code":"#fake:hang"})"));
  EXPECT_EQ(queued->getValue<std::string>("status"), "queued");
  EXPECT_EQ(queued->getValue<int>("queue_position"), 1);

  EXPECT_FALSE(toolError(callTool("start_run", R"({"code":"#fake:hang"})")).empty());

  const Object::Ptr stopped = structured(
      "stop_run",
      callTool("stop_run", R"({"run_id":")" + queued->getValue<std::string>("run_id") + R"("})"));
  EXPECT_EQ(stopped->getValue<std::string>("status"), "stopped");
  EXPECT_TRUE(stopped->isNull("started_at"));
  EXPECT_TRUE(stopped->isNull("exit_code"));
  structured("stop_run", callTool("stop_run", R"({"run_id":")" + running + R"("})"));
}

TEST_F(ServerTest, OutputIsValidUtf8) {
  const std::string run_id = startRun(R"(#fake:stdout=a\\xffb\\xc3)");
  const Object::Ptr report = structured(
      "get_result", callTool("get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":20})"));
  EXPECT_EQ(report->getValue<std::string>("stdout"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST_F(ServerTest, LimitsOverTheMaximumAreAToolErrorWithTheExactMessage) {
  EXPECT_EQ(toolError(callTool("start_run", R"({"code":"pass","limits":{"memory_gb":32}})")),
            "Requested 32 GB of memory, max is 16 GB");
}

TEST_F(ServerTest, ProcessesAndUnknownArgumentsAreRejectedByName) {
  EXPECT_THAT(toolError(callTool("start_run", R"({"code":"x","limits":{"processes":10}})")),
              HasSubstr("processes"));
  EXPECT_THAT(toolError(callTool("start_run", R"({"code":"x","image":"python"})")),
              HasSubstr("\"image\""));
  EXPECT_THAT(toolError(callTool("get_result", R"({"run_id":"x","wait":1})")),
              HasSubstr("\"wait\""));
  EXPECT_THAT(toolError(callTool("stop_run", R"({"run_id":"x","force":true})")),
              HasSubstr("\"force\""));
}

// Issue 47: the arguments each tool accepts (tools.cc's lists, which its refusal of an unknown
// one names) are exactly the properties its inputSchema in tools.json declares.
TEST_F(ServerTest, EachToolAcceptsExactlyTheArgumentsItsSchemaDeclares) {
  const Array::Ptr tools = request("tools/list", "{}")->getObject("result")->getArray("tools");
  ASSERT_TRUE(tools);
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const Object::Ptr definition = tools->getObject(i);
    const std::string name = definition->getValue<std::string>("name");
    std::set<std::string> declared;
    for (const auto& [property, schema] :
         *definition->getObject("inputSchema")->getObject("properties")) {
      declared.insert(property);
    }
    const std::string refusal = toolError(callTool(name, R"({"zz_not_an_argument":1})"));
    const std::string list = "Allowed arguments: ";
    const std::size_t at = refusal.find(list);
    ASSERT_NE(at, std::string::npos) << name << ": " << refusal;
    std::set<std::string> accepted;
    std::istringstream names(refusal.substr(at + list.size()));
    for (std::string item; std::getline(names, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      if (!item.empty() && item.back() == '.') {
        item.pop_back();
      }
      accepted.insert(item);
    }
    // A server that offers no packages leaves them out of the schema but still takes the
    // argument, to refuse it saying why (no wheelhouse or index), not as unknown.
    if (declared.count("packages") == 0 && accepted.erase("packages") == 1) {
      const std::string code = declared.count("code") ? R"("code":"1",)" : "";
      EXPECT_THAT(toolError(callTool(name, "{" + code + R"("packages":["x"]})")),
                  HasSubstr("offers no packages"))
          << name;
    }
    EXPECT_EQ(accepted, declared) << name;
  }
}

TEST_F(ServerTest, AHugeIntegerLimitIsNotMistakenForASmallOne) {
  EXPECT_THAT(toolError(callTool("start_run",
                                 R"({"code":"x","limits":{"memory_gb":18446744073709551617}})")),
              HasSubstr("memory"));
}

TEST_F(ServerTest, BadCodeArgumentIsAToolError) {
  EXPECT_THAT(toolError(callTool("start_run", "{}")), HasSubstr("\"code\""));
  EXPECT_THAT(toolError(callTool("start_run", R"({"code":42})")), HasSubstr("\"code\""));
  EXPECT_THAT(toolError(request("tools/call", R"({"name":"start_run"})")->getObject("result")),
              HasSubstr("\"code\""));
}

TEST_F(ServerTest, BadFilesAreAToolError) {
  EXPECT_THAT(toolError(callTool(
                  "start_run", R"({"code":"x","files":[{"path":"../etc/passwd","content":"x"}]})")),
              HasSubstr(".."));
  EXPECT_FALSE(toolError(callTool("start_run", R"({"code":"x","files":"nope"})")).empty());
}

TEST_F(ServerTest, FilesAreAccepted) {
  structured("start_run",
             callTool("start_run", R"({"code":"x","files":[{"path":"data/a.txt","content":"aGk=",)"
                                   R"("encoding":"base64"}]})"));
}

TEST_F(ServerTest, UnknownRunIdIsAToolError) {
  const std::string expected =
      "Unknown or expired run_id \"nope\". Reports are kept for a limited time after a run "
      "ends; start a new run.";
  EXPECT_EQ(toolError(callTool("get_result", R"({"run_id":"nope"})")), expected);
  EXPECT_EQ(toolError(callTool("stop_run", R"({"run_id":"nope"})")), expected);
}

TEST_F(ServerTest, BadRunIdOrWaitIsAToolError) {
  EXPECT_THAT(toolError(callTool("get_result", "{}")), HasSubstr("run_id"));
  EXPECT_THAT(toolError(callTool("stop_run", R"({"run_id":5})")), HasSubstr("run_id"));
  for (const std::string wait : {"61", "-1", "\"5\"", "true", "null", "1e400"}) {
    SCOPED_TRACE(wait);
    const Object::Ptr response =
        call(R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_result",)"
             R"("arguments":{"run_id":"nope","wait_seconds":)" +
             wait + "}}}");
    if (wait == "1e400") {
      expectError(response, -32700, "null");  // not representable as a double
    } else if (wait == "null") {
      EXPECT_THAT(toolError(response->getObject("result")), HasSubstr("Unknown or expired"));
    } else {
      EXPECT_THAT(toolError(response->getObject("result")), HasSubstr("wait_seconds"));
    }
  }
}

TEST_F(ServerTest, ToolsCallProtocolErrors) {
  const Object::Ptr unknown = request("tools/call", R"({"name":"nope","arguments":{}})");
  expectError(unknown, -32602, "1");
  EXPECT_EQ(unknown->getObject("error")->getValue<std::string>("message"), "Unknown tool: nope");
  expectError(request("tools/call", R"({"arguments":{}})"), -32602, "1");
  expectError(request("tools/call", R"({"name":7})"), -32602, "1");
  expectError(request("tools/call", R"({"name":"start_run","arguments":[1]})"), -32602, "1");
  expectError(call(R"({"jsonrpc":"2.0","id":1,"method":"tools/call"})"), -32602, "1");
}

TEST_F(ServerTest, AnUnexpectedExceptionIsAnInternalErrorAndIsLogged) {
  const std::string run_id = startRun("#fake:hang");
  ASSERT_TRUE(core_.awaitARunning());
  Poco::AutoPtr<mocks::LogCapture> capture(new mocks::LogCapture("scs.mcp"));
  core_.backend.throwOnNextKill();
  const Object::Ptr response =
      call(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"stop_run",)"
           R"("arguments":{"run_id":")" +
           run_id + R"("}}})");
  expectError(response, -32603, "9");
  EXPECT_EQ(response->getObject("error")->getValue<std::string>("message"), "Internal error");
  const std::vector<Poco::Message> logged = capture->messages();
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_EQ(logged[0].getPriority(), Poco::Message::PRIO_ERROR);
  EXPECT_THAT(logged[0].getText(), HasSubstr("fake kill exploded"));
  core_.killAll();  // ends the run the failed stop left behind
  EXPECT_EQ(server_.handle(R"({"jsonrpc":"2.0","id":10,"method":"ping"})"),
            R"({"jsonrpc":"2.0","id":10,"result":{}})");
}

TEST_F(ServerTest, LoggingSetLevelAcceptsTheEightLevelsOnly) {
  for (const std::string level :
       {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}) {
    SCOPED_TRACE(level);
    EXPECT_EQ(
        compact(
            request("logging/setLevel", R"({"level":")" + level + R"("})")->getObject("result")),
        "{}");
  }
  expectError(request("logging/setLevel", R"({"level":"verbose"})"), -32602, "1");
  expectError(request("logging/setLevel", "{}"), -32602, "1");
}

TEST_F(ServerTest, ParseClassifiesEachMessageOnce) {
  EXPECT_EQ(Server::parse(R"({"jsonrpc":"2.0","id":0,"method":"initialize"})").kind(),
            Message::Kind::kRequest);
  EXPECT_EQ(Server::parse(R"({"jsonrpc":"2.0","id":0,"method":"initialize"})").method(),
            "initialize");
  EXPECT_EQ(Server::parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").kind(),
            Message::Kind::kNotification);
  EXPECT_EQ(Server::parse(R"({"jsonrpc":"2.0","id":4,"result":{}})").kind(),
            Message::Kind::kResponse);
  // A request with bad params is still a request: it is answered with its id.
  EXPECT_EQ(Server::parse(R"({"jsonrpc":"2.0","id":2,"method":"ping","params":[1]})").kind(),
            Message::Kind::kRequest);
  for (const std::string bad : {"{", "[]", "5", R"({"jsonrpc":"1.0","id":7,"method":"ping"})",
                                R"({"jsonrpc":"2.0","id":null,"method":"ping"})"}) {
    SCOPED_TRACE(bad);
    const Message message = Server::parse(bad);
    EXPECT_EQ(message.kind(), Message::Kind::kInvalid);
    EXPECT_TRUE(message.method().empty());
    EXPECT_TRUE(server_.handle(message).has_value());
  }
  EXPECT_EQ(server_.handle(Message()), R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,)"
                                       R"("message":"Invalid Request"}})");
}

TEST_F(ServerTest, ARunIsUnknownToEveryTenantButItsOwner) {
  RequestContext alice;
  alice.tenant = "alice";
  RequestContext bob;
  bob.tenant = "bob";
  const std::optional<std::string> started = server_.handle(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"start_run",)"
      R"("arguments":{"code":"#fake:hang"}}})",
      alice);
  ASSERT_TRUE(started.has_value());
  const std::string run_id = parseOrdered(*started)
                                 ->getObject("result")
                                 ->getObject("structuredContent")
                                 ->getValue<std::string>("run_id");
  const auto callAs = [&](const RequestContext& context, const std::string& tool) {
    const std::optional<std::string> answer =
        server_.handle(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":")" +
                           tool + R"(","arguments":{"run_id":")" + run_id + R"("}}})",
                       context);
    return answer ? parseOrdered(*answer)->getObject("result") : Object::Ptr(new Object);
  };
  const std::string unknown = "Unknown or expired run_id \"" + run_id + "\"";
  EXPECT_THAT(toolError(callAs(bob, "get_result")), HasSubstr(unknown));
  EXPECT_THAT(toolError(callAs(bob, "stop_run")), HasSubstr(unknown));
  EXPECT_THAT(toolError(callTool("get_result", R"({"run_id":")" + run_id + R"("})")),
              HasSubstr(unknown));  // the local tenant of stdio is a tenant like any other
  EXPECT_EQ(structured("get_result", callAs(alice, "get_result"))->getValue<std::string>("status"),
            "running");
  EXPECT_EQ(structured("stop_run", callAs(alice, "stop_run"))->getValue<std::string>("status"),
            "stopped");
}

TEST_F(ServerTest, AWaitingGetResultReportsProgressOnlyWhenTheTransportCanSendIt) {
  ServerInfo info{"scs", "Scs", "1.2.3"};
  info.progress_interval = std::chrono::milliseconds(20);
  Server server(core_.runs, core_.limits, policy::FileSettings{}, info);
  const std::string run_id = startRun("#fake:hang");

  std::vector<std::string> sent;
  RequestContext context;
  context.on_progress = [&](const std::string& notification) { sent.push_back(notification); };
  const std::string get = R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{)"
                          R"("name":"get_result","arguments":{"run_id":")" +
                          run_id + R"(","wait_seconds":0.2})";
  const std::optional<std::string> answer = core_.whileTimePasses(
      [&] { return server.handle(get + R"(,"_meta":{"progressToken":"tok"}}})", context); });
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(structured("get_result", parseOrdered(*answer)->getObject("result"))
                ->getValue<std::string>("status"),
            "running");
  ASSERT_GE(sent.size(), 2u);
  double last = 0;
  for (const std::string& line : sent) {
    const Object::Ptr notification = parseOrdered(line);
    EXPECT_EQ(notification->getValue<std::string>("method"), "notifications/progress");
    EXPECT_FALSE(notification->has("id"));
    const Object::Ptr params = notification->getObject("params");
    EXPECT_EQ(params->getValue<std::string>("progressToken"), "tok");
    EXPECT_GT(params->getValue<double>("progress"), last);
    last = params->getValue<double>("progress");
    EXPECT_DOUBLE_EQ(params->getValue<double>("total"), 0.2);
    EXPECT_THAT(params->getValue<std::string>("message"), HasSubstr("still running"));
  }
  EXPECT_LT(last, 0.2);

  sent.clear();
  ASSERT_TRUE(core_.whileTimePasses([&] { return server.handle(get + "}}", context); }));
  ASSERT_GE(sent.size(), 2u);
  EXPECT_THAT(sent, ::testing::Each(std::string()));  // alive, but no token to report to

  sent.clear();
  ASSERT_TRUE(core_.whileTimePasses(
      [&] { return server.handle(get + R"(,"_meta":{"progressToken":7}}})"); }));
  EXPECT_TRUE(sent.empty());
  structured("stop_run", callTool("stop_run", R"({"run_id":")" + run_id + R"("})"));
}

TEST_F(ServerTest, OversizedMessageErrorNamesTheCap) {
  const Object::Ptr response = parseOrdered(Server::oversizedMessageError(1024));
  expectError(response, -32600, "null");
  EXPECT_THAT(response->getObject("error")->getValue<std::string>("message"), HasSubstr("1024"));
}

// Issue 45: a message is measured before its tree is built; one deeper or with more values
// than a start_run with the most files needs is refused, to its id, and nothing runs.
TEST_F(ServerTest, AMessageTooIntricateToParseIsRefusedToItsIdBeforeItIsParsed) {
  std::string files;
  for (std::size_t i = 0; i < Server::kMaxMessageValues + 4 * 100; ++i) {
    files += i == 0 ? "{}" : ",{}";
  }
  const Object::Ptr many =
      call(R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"start_run","arguments":)"
           R"({"code":"1","files":[)" +
           files + R"(]}},"id":"many"})");
  expectError(many, -32600, "\"many\"");
  EXPECT_THAT(many->getObject("error")->getValue<std::string>("message"), HasSubstr("JSON values"));
  const std::string deep =
      std::string(Server::kMaxMessageDepth, '[') + "1" + std::string(Server::kMaxMessageDepth, ']');
  const Object::Ptr nested =
      call(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"start_run",)"
           R"("arguments":{"code":"1","x":)" +
           deep + "}}}");
  expectError(nested, -32700, "null");
  EXPECT_THAT(nested->getObject("error")->getValue<std::string>("message"),
              HasSubstr("deeper than 64"));
  EXPECT_TRUE(core_.backend.sandboxes().empty());
}

TEST_F(ServerTest, RefusalIsAnInvalidRequestWithoutAnId) {
  const Object::Ptr response = parseOrdered(Server::refusal("missing Mcp-Session-Id header."));
  expectError(response, -32600, "null");
  EXPECT_EQ(response->getObject("error")->getValue<std::string>("message"),
            "Invalid Request: missing Mcp-Session-Id header.");
}

// The modern revision (2026-07-28): no handshake, the version and capabilities in each
// request's _meta.
constexpr const char* kModernMeta =
    R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
    R"("io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},)"
    R"("io.modelcontextprotocol/clientCapabilities":{}})";

std::string modern(const std::string& method, const std::string& params = "") {
  return R"({"jsonrpc":"2.0","id":"m1","method":")" + method + R"(","params":{)" + params +
         (params.empty() ? "" : ",") + kModernMeta + "}}";
}

TEST_F(ServerTest, DiscoverNamesTheModernRevisionToolsAndServerWithoutAHandshake) {
  const Object::Ptr result = call(modern("server/discover"))->getObject("result");
  ASSERT_TRUE(result) << "no result";
  EXPECT_EQ(result->getValue<std::string>("resultType"), "complete");
  EXPECT_THAT(stringsOf(result->getArray("supportedVersions")), ElementsAre("2026-07-28"));
  EXPECT_EQ(compact(result->getObject("capabilities")),
            R"({"tools":{"listChanged":false},"extensions":{"io.modelcontextprotocol/tasks":{}}})");
  EXPECT_GT(result->getValue<int>("ttlMs"), 0);
  EXPECT_EQ(result->getValue<std::string>("cacheScope"), "public");
  EXPECT_THAT(result->getValue<std::string>("instructions"), HasSubstr("start_run"));
  EXPECT_EQ(
      compact(result->getObject("_meta")),
      R"({"io.modelcontextprotocol/serverInfo":{"name":"scs","title":"Scs","version":"1.2.3"}})");
}

TEST_F(ServerTest, ModernResultsSayTheirTypeAndListsHowLongTheyKeep) {
  const Object::Ptr list = call(modern("tools/list"))->getObject("result");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->getArray("tools")->size(), 5u);
  EXPECT_EQ(list->getValue<std::string>("resultType"), "complete");
  EXPECT_EQ(list->getValue<int>("ttlMs"),
            call(modern("server/discover"))->getObject("result")->getValue<int>("ttlMs"));
  EXPECT_EQ(list->getValue<std::string>("cacheScope"), "public");

  const Object::Ptr run =
      call(modern("tools/call",
                  R"js("name":"start_run","arguments":{"code":"print(1)","wait_seconds":5})js"))
          ->getObject("result");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->getValue<std::string>("resultType"), "complete");
  EXPECT_FALSE(run->getValue<bool>("isError"));
  EXPECT_EQ(run->getObject("structuredContent")->getValue<std::string>("status"), "succeeded");
  EXPECT_TRUE(run->getObject("_meta")->has("io.modelcontextprotocol/serverInfo"));

  // The same call in the legacy era is answered as before: no resultType, no _meta.
  const Object::Ptr legacy =
      callTool("get_result",
               R"({"run_id":")" +
                   run->getObject("structuredContent")->getValue<std::string>("run_id") + R"("})");
  EXPECT_FALSE(legacy->has("resultType"));
  EXPECT_FALSE(legacy->has("_meta"));
}

TEST_F(ServerTest, AModernRequestWithoutItsEnvelopeIsInvalidParams) {
  expectError(call(R"({"jsonrpc":"2.0","id":101,"method":"server/discover","params":{}})"), -32602,
              "101");
  expectError(call(R"({"jsonrpc":"2.0","id":102,"method":"server/discover"})"), -32602, "102");
  expectError(call(R"({"jsonrpc":"2.0","id":104,"method":"tools/list","params":{"_meta":{)"
                   R"("io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})"),
              -32602, "104");
  expectError(call(R"({"jsonrpc":"2.0","id":105,"method":"tools/list","params":{"_meta":{)"
                   R"("io.modelcontextprotocol/protocolVersion":7,)"
                   R"("io.modelcontextprotocol/clientCapabilities":{}}}})"),
              -32602, "105");
  // A transport that saw a modern header refuses a body without the envelope, whatever it is.
  RequestContext context;
  context.modern = true;
  const std::optional<Server::Answer> answer =
      server_.respond(Server::parse(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})"), context);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->error_code, -32602);
  // clientInfo is optional.
  const Object::Ptr discover =
      call(R"({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{)"
           R"("io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
           R"("io.modelcontextprotocol/clientCapabilities":{}}}})");
  EXPECT_TRUE(discover->has("result")) << compact(discover);
}

TEST_F(ServerTest, AnUnsupportedModernVersionIsAnsweredWithTheSupportedOnes) {
  const std::optional<Server::Answer> answer = server_.respond(
      Server::parse(R"({"jsonrpc":"2.0","id":301,"method":"server/discover","params":{"_meta":{)"
                    R"("io.modelcontextprotocol/protocolVersion":"v999.0.0",)"
                    R"("io.modelcontextprotocol/clientCapabilities":{}}}})"));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->error_code, -32022);
  const Object::Ptr response = parseOrdered(answer->text);
  expectError(response, -32022, "301");
  EXPECT_EQ(compact(response->getObject("error")->getObject("data")),
            R"({"supported":["2026-07-28"],"requested":"v999.0.0"})");
}

TEST_F(ServerTest, TheLegacyOnlyMethodsAreNotFoundInTheModernRevision) {
  for (const std::string method : {"initialize", "ping", "logging/setLevel", "resources/subscribe",
                                   "prompts/list", "unknown/method"}) {
    const std::optional<Server::Answer> answer = server_.respond(Server::parse(modern(method)));
    ASSERT_TRUE(answer) << method;
    EXPECT_EQ(answer->error_code, -32601) << method;
    expectError(parseOrdered(answer->text), -32601, "\"m1\"");
  }
  // The same server still answers a legacy client's handshake and ping.
  EXPECT_TRUE(request("initialize", R"({"protocolVersion":"2025-11-25","capabilities":{}})")
                  ->has("result"));
  EXPECT_TRUE(call(R"({"jsonrpc":"2.0","id":2,"method":"ping"})")->has("result"));
}

TEST_F(ServerTest, ParseReadsWhatAnHttpTransportChecksItsHeadersAgainst) {
  const Message call_message =
      Server::parse(modern("tools/call", R"("name":"start_run","arguments":{})"));
  EXPECT_TRUE(call_message.modern());
  EXPECT_EQ(call_message.metaVersion(), "2026-07-28");
  EXPECT_EQ(call_message.routingName(), "start_run");
  const Message legacy = Server::parse(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"start_run"}})");
  EXPECT_FALSE(legacy.modern());
  EXPECT_EQ(legacy.metaVersion(), "");
  EXPECT_EQ(legacy.routingName(), "start_run");
  EXPECT_TRUE(Server::parse(R"({"jsonrpc":"2.0","id":1,"method":"server/discover"})").modern());
  const Object::Ptr mismatch =
      parseOrdered(Server::headerMismatch("Mcp-Name header value 'a' ...", call_message));
  expectError(mismatch, -32020, "\"m1\"");
}

// The tasks extension: a client that declares it gets a run that outlasts start_run's wait
// as a task, and follows it with tasks/get and tasks/cancel.
std::string withTasks(int id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":{)" + params +
         R"(,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
         R"("io.modelcontextprotocol/clientCapabilities":{"extensions":{)"
         R"("io.modelcontextprotocol/tasks":{}}}}}})";
}

TEST_F(ServerTest, ARunThatOutlastsItsWaitIsATaskForAClientThatDeclaresTheExtension) {
  EXPECT_TRUE(call(modern("server/discover"))
                  ->getObject("result")
                  ->getObject("capabilities")
                  ->getObject("extensions")
                  ->has("io.modelcontextprotocol/tasks"));

  const Object::Ptr created =
      call(withTasks(1, "tools/call",
                     R"("name":"start_run","arguments":{"code":"#fake: sleep_ms=20000\n"})"))
          ->getObject("result");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->getValue<std::string>("resultType"), "task");
  EXPECT_EQ(created->getValue<std::string>("status"), "working");
  EXPECT_TRUE(std::regex_match(created->getValue<std::string>("createdAt"),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_TRUE(created->isNull("ttlMs"));  // not known until the run ends
  EXPECT_EQ(created->getValue<int>("pollIntervalMs"), 1000);
  EXPECT_FALSE(created->has("content"));
  const std::string task_id = created->getValue<std::string>("taskId");

  // The task is the run: get_result knows it by the same id.
  EXPECT_THAT(structured("get_result", callTool("get_result", R"({"run_id":")" + task_id + R"("})"))
                  ->getValue<std::string>("status"),
              ::testing::AnyOf("queued", "running"));
  const Object::Ptr working =
      call(withTasks(2, "tasks/get", R"("taskId":")" + task_id + R"(")"))->getObject("result");
  EXPECT_EQ(working->getValue<std::string>("resultType"), "complete");
  EXPECT_EQ(working->getValue<std::string>("status"), "working");
  EXPECT_FALSE(working->has("result"));

  // Another tenant cannot see or cancel it.
  RequestContext stranger;
  stranger.tenant = "someone-else";
  for (const std::string method : {"tasks/get", "tasks/cancel"}) {
    const std::optional<Server::Answer> answer = server_.respond(
        Server::parse(withTasks(3, method, R"("taskId":")" + task_id + R"(")")), stranger);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->error_code, -32602) << method;
  }

  const Object::Ptr ack =
      call(withTasks(4, "tasks/cancel", R"("taskId":")" + task_id + R"(")"))->getObject("result");
  EXPECT_EQ(ack->getValue<std::string>("resultType"), "complete");
  EXPECT_FALSE(ack->has("status"));
  // tasks/cancel is stop_run, which returns once the run is settled: no wait.
  const Object::Ptr ended =
      call(withTasks(5, "tasks/get", R"("taskId":")" + task_id + R"(")"))->getObject("result");
  EXPECT_EQ(ended->getValue<std::string>("status"), "cancelled");
  EXPECT_FALSE(ended->has("result"));  // a cancelled task has none; get_result has the report
  EXPECT_GE(ended->getValue<Poco::Int64>("ttlMs"), 3600 * 1000);
  // Cancelling what has ended is acknowledged again.
  EXPECT_TRUE(
      call(withTasks(6, "tasks/cancel", R"("taskId":")" + task_id + R"(")"))->has("result"));

  // A run that ends within its wait is answered as it is for any client.
  const Object::Ptr quick =
      call(withTasks(
               7, "tools/call",
               R"("name":"start_run","arguments":{"code":"#fake: stdout=x\n","wait_seconds":10})"))
          ->getObject("result");
  EXPECT_EQ(quick->getValue<std::string>("resultType"), "complete");
  EXPECT_EQ(quick->getObject("structuredContent")->getValue<std::string>("stdout"), "x");
}

TEST_F(ServerTest, TaskMethodsNeedTheExtensionAndAKnownTask) {
  const std::optional<Server::Answer> undeclared =
      server_.respond(Server::parse(modern("tasks/get", R"("taskId":"x")")));
  ASSERT_TRUE(undeclared);
  EXPECT_EQ(undeclared->error_code, -32021);
  EXPECT_EQ(compact(parseOrdered(undeclared->text)->getObject("error")->getObject("data")),
            R"({"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}})");
  expectError(call(withTasks(8, "tasks/get", R"("taskId":"00000000000000000000000000000000")")),
              -32602, "8");
  expectError(call(withTasks(9, "tasks/get", R"("taskId":7)")), -32602, "9");
  // Removed by the extension's current revision, and never part of this server.
  expectError(call(withTasks(10, "tasks/result", R"("taskId":"x")")), -32601, "10");
  expectError(call(withTasks(11, "tasks/list", R"("cursor":"x")")), -32601, "11");
  // Without the extension a long run is a run: its report, with its run_id.
  const Object::Ptr plain =
      call(modern("tools/call",
                  R"("name":"start_run","arguments":{"code":"#fake: sleep_ms=20000\n"})"))
          ->getObject("result");
  EXPECT_EQ(plain->getValue<std::string>("resultType"), "complete");
  const std::string run_id = plain->getObject("structuredContent")->getValue<std::string>("run_id");
  // A run asks for no input: an update is acknowledged and ignored.
  const Object::Ptr update =
      call(withTasks(12, "tasks/update", R"("taskId":")" + run_id + R"(","inputResponses":{})"));
  ASSERT_TRUE(update->has("result")) << compact(update);
  EXPECT_EQ(update->getObject("result")->getValue<std::string>("resultType"), "complete");
  structured("stop_run", callTool("stop_run", R"({"run_id":")" + run_id + R"("})"));
}

TEST(FormatTimestampTest, IsRfc3339UtcWithMilliseconds) {
  using namespace std::chrono;
  EXPECT_EQ(formatTimestamp(system_clock::time_point(milliseconds(1234))),
            "1970-01-01T00:00:01.234Z");
  EXPECT_EQ(formatTimestamp(system_clock::time_point(seconds(1'700'000'000) + microseconds(5999))),
            "2023-11-14T22:13:20.005Z");
}

}  // namespace
}  // namespace scs::mcp
