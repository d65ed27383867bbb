// The real server binary over Streamable HTTP (--http 127.0.0.1:0) with the fake backend:
// authentication, tenancy, DNS-rebinding checks, malformed HTTP and shutdown.
#include <Poco/JSON/Object.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/StreamCopier.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.h"
#include "support/http_request.h"
#include "support/mcp_client.h"
#include "support/temp_file.h"

namespace scs::testing {
namespace {

using Poco::JSON::Object;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

const std::string kBinary = SCS_BINARY;
constexpr const char* kAliceToken = "alice-0123456789abcdef0123456789";
constexpr const char* kBobToken = "bob-0123456789abcdef0123456789ab";

// A token file for alice and bob, removed at the end of the test.
class TokenFile : public scs::testing::TempFile {
 public:
  explicit TokenFile(mode_t mode = 0600)
      : TempFile(std::string("# e2e tenants\nalice:") + kAliceToken + "\nbob:" + kBobToken + "\n",
                 mode) {}
};

struct Answer {
  int status = 0;
  std::string body;
  Poco::Net::HTTPResponse response;

  Object::Ptr json() const { return parseObject(body); }
};

// The server as a child process serving HTTP; the port is read from its log.
class HttpServer {
 public:
  explicit HttpServer(std::vector<std::string> extra = {})
      : process_(kBinary, arguments(std::move(extra))) {}

  // Waits for "listening on http://HOST:PORT/mcp"; false if the server exits or is silent.
  bool waitListening() {
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+)/mcp)");
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch match;
      const std::string log = process_.stderrText();
      if (std::regex_search(log, match, listening)) {
        port_ = static_cast<std::uint16_t>(std::stoi(match[1]));
        return true;
      }
      if (process_.waitExit(10ms)) {
        return false;
      }
    }
    return false;
  }

  Answer post(const std::string& body, std::map<std::string, std::string> headers = {}) {
    return send("POST", body, std::move(headers));
  }

  Answer send(const std::string& method, const std::string& body,
              std::map<std::string, std::string> headers, const std::string& path = "/mcp") {
    Poco::Net::HTTPClientSession session("127.0.0.1", port_);
    session.setTimeout(Poco::Timespan(90, 0));
    Poco::Net::HTTPRequest request(method, path, Poco::Net::HTTPRequest::HTTP_1_1);
    setMcpHeaders(request, headers);
    request.setContentLength(static_cast<std::streamsize>(body.size()));
    session.sendRequest(request) << body;
    Answer answer;
    std::istream& in = session.receiveResponse(answer.response);
    answer.status = static_cast<int>(answer.response.getStatus());
    Poco::StreamCopier::copyToString(in, answer.body);
    return answer;
  }

  // initialize + notifications/initialized with `token`; the session's headers.
  std::map<std::string, std::string> open(const std::string& token = "") {
    std::map<std::string, std::string> headers;
    if (!token.empty()) {
      headers["Authorization"] = "Bearer " + token;
    }
    const Answer initialized = post(kInitialize, headers);
    EXPECT_EQ(initialized.status, 200) << initialized.body;
    headers["Mcp-Session-Id"] = initialized.response.get("Mcp-Session-Id", "");
    headers["MCP-Protocol-Version"] = "2025-11-25";
    EXPECT_EQ(post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", headers).status,
              202);
    return headers;
  }

  // tools/call; the CallToolResult.
  Object::Ptr call(const std::map<std::string, std::string>& session, const std::string& tool,
                   const std::string& arguments) {
    const Answer answer =
        post(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":")" + tool +
                 R"(","arguments":)" + arguments + "}}",
             session);
    EXPECT_EQ(answer.status, 200) << answer.body;
    return answer.json()->getObject("result");
  }

  McpProcess& process() { return process_; }
  std::uint16_t port() const { return port_; }

 private:
  static std::vector<std::string> arguments(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--backend", "fake", "--http", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  McpProcess process_;
  std::uint16_t port_ = 0;
};

std::string runId(const Object::Ptr& result) {
  return result->getObject("structuredContent")->getValue<std::string>("run_id");
}

TEST(HttpE2eTest, ARunThroughHttpWithTheRightTokenAndNoneForAnyOtherCaller) {
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path()});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();

  EXPECT_EQ(server.post(kInitialize).status, 401);
  EXPECT_EQ(server.post(kInitialize, {{"Authorization", "Bearer not-a-valid-token-at-all"}}).status,
            401);
  const auto alice = server.open(kAliceToken);
  const Object::Ptr started =
      server.call(alice, "start_run", R"({"code":"#fake: stdout=hi\\sthere\\n\n"})");
  ASSERT_FALSE(started->getValue<bool>("isError")) << toolText(started);
  const std::string run_id = runId(started);
  const Object::Ptr report =
      server.call(alice, "get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":20})");
  const Object::Ptr structured = report->getObject("structuredContent");
  EXPECT_EQ(structured->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(structured->getValue<std::string>("stdout"), "hi there\n");

  // Another tenant gets exactly what an unknown id gets.
  const auto bob = server.open(kBobToken);
  const Object::Ptr stranger = server.call(bob, "get_result", R"({"run_id":")" + run_id + R"("})");
  EXPECT_TRUE(stranger->getValue<bool>("isError"));
  const Object::Ptr unknown =
      server.call(bob, "get_result", R"({"run_id":"00000000000000000000000000000000"})");
  EXPECT_EQ(toolText(stranger), std::regex_replace(toolText(unknown), std::regex("0{32}"), run_id));
  EXPECT_TRUE(
      server.call(bob, "stop_run", R"({"run_id":")" + run_id + R"("})")->getValue<bool>("isError"));

  const std::string log = server.process().stderrText();
  EXPECT_THAT(log, Not(HasSubstr(kAliceToken)));
  EXPECT_THAT(log, Not(HasSubstr(kBobToken)));
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
}

// Issue 44: egress is each tenant's own. alice may reach allowed.test (a listener of the test's
// on loopback) and her tools/list and instructions say so; bob has no policy: his runs get no
// relay (the fake, as PID 1, finds no egress in their control file) and his list names no host.
TEST(HttpE2eTest, EgressIsTheTenantsOwnAndToolsListSaysWhichHosts) {
  Poco::Net::ServerSocket upstream(Poco::Net::SocketAddress("127.0.0.1", 0));
  const std::string port = std::to_string(upstream.address().port());
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path(), "--egress-allow", "alice=allowed.test:" + port,
                     "--egress-resolve", "allowed.test=127.0.0.1", "--prepared", "0"});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const auto alice = server.open(kAliceToken);
  const auto bob = server.open(kBobToken);

  const std::string listed_alice =
      server.post(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})", alice).body;
  const std::string listed_bob =
      server.post(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})", bob).body;
  EXPECT_THAT(listed_alice, HasSubstr("Network: only allowed.test:" + port));
  EXPECT_THAT(listed_bob, Not(HasSubstr("allowed.test")));

  const std::string code =
      "#fake: connect=allowed.test:" + port + " connect=elsewhere.test:443\\n";  // JSON's newline
  const auto run = [&](const std::map<std::string, std::string>& session) {
    const Object::Ptr started =
        server.call(session, "start_run", R"({"code":")" + code + R"(","wait_seconds":20})");
    return started->getObject("structuredContent");
  };
  const Object::Ptr mine = run(alice);
  EXPECT_EQ(mine->getValue<std::string>("stdout"),
            "egress allowed.test:" + port +
                ": HTTP/1.1 200 Connection established\n"
                "egress elsewhere.test:443: HTTP/1.1 403 Forbidden\n");
  ASSERT_TRUE(mine->has("network"));
  const Object::Ptr refused = mine->getObject("network")->getArray("refused")->getObject(0);
  EXPECT_EQ(refused->getValue<std::string>("host"), "elsewhere.test:443");
  EXPECT_THAT(refused->getValue<std::string>("reason"),
              HasSubstr("not on this server's allow-list"));

  const Object::Ptr theirs = run(bob);
  EXPECT_EQ(theirs->getValue<std::string>("stdout"),
            "egress allowed.test:" + port + ": no relay\negress elsewhere.test:443: no relay\n");
  EXPECT_FALSE(theirs->has("network"));
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(10s), 0);
}

// Issue 27: a 2026-07-28 request is served on its own: no initialize, no Mcp-Session-Id; its
// routing headers must repeat the body; the legacy sessions keep working beside it.
std::string modernBody(int id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":{)" + params + (params.empty() ? "" : ",") +
         R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
         R"("io.modelcontextprotocol/clientCapabilities":{}}}})";
}

std::map<std::string, std::string> modernHeaders(const std::string& token,
                                                 const std::string& method,
                                                 const std::string& name = "") {
  std::map<std::string, std::string> headers = {{"Authorization", "Bearer " + token},
                                                {"MCP-Protocol-Version", "2026-07-28"},
                                                {"Mcp-Method", method}};
  if (!name.empty()) {
    headers["Mcp-Name"] = name;
  }
  return headers;
}

TEST(HttpE2eTest, AModernRequestNeedsNoSessionAndItsHeadersMustRepeatTheBody) {
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path()});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();

  const Answer discover = server.post(modernBody(1, "server/discover", ""),
                                      modernHeaders(kAliceToken, "server/discover"));
  ASSERT_EQ(discover.status, 200) << discover.body;
  EXPECT_FALSE(discover.response.has("Mcp-Session-Id"));
  EXPECT_EQ(discover.json()
                ->getObject("result")
                ->getArray("supportedVersions")
                ->getElement<std::string>(0),
            "2026-07-28");
  // Unauthenticated, it is refused as every request is.
  EXPECT_EQ(server
                .post(modernBody(2, "server/discover", ""),
                      {{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "server/discover"}})
                .status,
            401);

  const Answer started = server.post(
      modernBody(
          3, "tools/call",
          R"("name":"start_run","arguments":{"code":"#fake: stdout=hi\\n\n","wait_seconds":20})"),
      modernHeaders(kAliceToken, "tools/call", "start_run"));
  ASSERT_EQ(started.status, 200) << started.body;
  const Object::Ptr result = started.json()->getObject("result");
  EXPECT_EQ(result->getValue<std::string>("resultType"), "complete");
  EXPECT_EQ(result->getObject("structuredContent")->getValue<std::string>("stdout"), "hi\n");
  const std::string run_id = runId(result);

  // The run is alice's whatever era asks: a legacy session of hers sees it, bob's does not.
  const auto alice = server.open(kAliceToken);
  EXPECT_FALSE(server.call(alice, "get_result", R"({"run_id":")" + run_id + R"("})")
                   ->getValue<bool>("isError"));
  const Answer stranger =
      server.post(modernBody(4, "tools/call",
                             R"("name":"get_result","arguments":{"run_id":")" + run_id + R"("})"),
                  modernHeaders(kBobToken, "tools/call", "get_result"));
  EXPECT_TRUE(stranger.json()->getObject("result")->getValue<bool>("isError")) << stranger.body;

  // Routing headers that say something else than the body: 400, HeaderMismatch, nothing run.
  for (const auto& headers : {modernHeaders(kAliceToken, "tools/call", "stop_run"),
                              modernHeaders(kAliceToken, "tools/list", "start_run"),
                              modernHeaders(kAliceToken, "tools/call")}) {
    const Answer refused = server.post(
        modernBody(5, "tools/call", R"js("name":"start_run","arguments":{"code":"print(1)"})js"),
        headers);
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_EQ(refused.json()->getObject("error")->getValue<int>("code"), -32020) << refused.body;
    EXPECT_EQ(refused.json()->getValue<int>("id"), 5);
  }
  // Headers naming a version the body does not: 400, HeaderMismatch; an unknown version both
  // say: 400, UnsupportedProtocolVersion.
  auto other = modernHeaders(kAliceToken, "server/discover");
  other["MCP-Protocol-Version"] = "2025-11-25";
  EXPECT_EQ(server.post(modernBody(6, "server/discover", ""), other)
                .json()
                ->getObject("error")
                ->getValue<int>("code"),
            -32020);
  auto unknown = modernHeaders(kAliceToken, "server/discover");
  unknown["MCP-Protocol-Version"] = "v999";
  std::string v999 = modernBody(7, "server/discover", "");
  v999.replace(v999.find("2026-07-28"), 10, "v999");
  const Answer unsupported = server.post(v999, unknown);
  EXPECT_EQ(unsupported.status, 400);
  EXPECT_EQ(unsupported.json()->getObject("error")->getValue<int>("code"), -32022);
  // A modern header on a body without the envelope: 400, invalid params.
  const Answer bare = server.post(R"({"jsonrpc":"2.0","id":8,"method":"tools/list"})",
                                  modernHeaders(kAliceToken, "tools/list"));
  EXPECT_EQ(bare.status, 400);
  EXPECT_EQ(bare.json()->getObject("error")->getValue<int>("code"), -32602);
  // Methods the revision removed, or that never were: 404, method not found.
  for (const std::string method : {"initialize", "ping", "prompts/list"}) {
    const Answer missing =
        server.post(modernBody(9, method, ""), modernHeaders(kAliceToken, method));
    EXPECT_EQ(missing.status, 404) << method;
    EXPECT_EQ(missing.json()->getObject("error")->getValue<int>("code"), -32601) << method;
  }
  // Mcp-Name as the transport encodes it, and as Poco's parser alone would decode it: compared
  // as sent, so what a proxy routed by is what was checked.
  const std::string get_call = modernBody(
      10, "tools/call", R"("name":"get_result","arguments":{"run_id":")" + run_id + R"("})");
  EXPECT_EQ(
      server.post(get_call, modernHeaders(kAliceToken, "tools/call", "=?base64?Z2V0X3Jlc3VsdA==?="))
          .status,
      200);
  const Answer encoded_word = server.post(
      get_call, modernHeaders(kAliceToken, "tools/call", "=?UTF-8?B?Z2V0X3Jlc3VsdA==?="));
  EXPECT_EQ(encoded_word.status, 400) << encoded_word.body;
  EXPECT_EQ(encoded_word.json()->getObject("error")->getValue<int>("code"), -32020);

  // A notification is accepted as in every revision.
  EXPECT_EQ(
      server
          .post(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})",
                modernHeaders(kAliceToken, "notifications/cancelled"))
          .status,
      202);
  // No sessions to end in this revision, even when a legacy one's id comes along.
  auto ending = modernHeaders(kAliceToken, "");
  ending["Mcp-Session-Id"] = alice.at("Mcp-Session-Id");
  EXPECT_EQ(server.send("DELETE", "", ending).status, 405);
  EXPECT_FALSE(server.call(alice, "get_result", R"({"run_id":")" + run_id + R"("})")
                   ->getValue<bool>("isError"));
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
}

// The tasks extension over HTTP: a run that outlasts its wait is a task of its tenant only,
// routed by its taskId in Mcp-Name; a client that did not declare the extension gets 400, -32021.
TEST(HttpE2eTest, ARunIsATaskOfItsTenantForAClientOfTheTasksExtension) {
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path()});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const auto tasks = [](int id, const std::string& method, const std::string& params) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
           R"(","params":{)" + params +
           R"(,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
           R"("io.modelcontextprotocol/clientCapabilities":{"extensions":{)"
           R"("io.modelcontextprotocol/tasks":{}}}}}})";
  };
  const Answer created =
      server.post(tasks(1, "tools/call",
                        R"("name":"start_run","arguments":{"code":"#fake: sleep_ms=20000\n"})"),
                  modernHeaders(kAliceToken, "tools/call", "start_run"));
  ASSERT_EQ(created.status, 200) << created.body;
  const Object::Ptr task = created.json()->getObject("result");
  ASSERT_EQ(task->getValue<std::string>("resultType"), "task") << created.body;
  const std::string id = task->getValue<std::string>("taskId");

  const std::string get = tasks(2, "tasks/get", R"("taskId":")" + id + R"(")");
  const Answer got = server.post(get, modernHeaders(kAliceToken, "tasks/get", id));
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json()->getObject("result")->getValue<std::string>("status"), "working");
  EXPECT_EQ(server.post(get, modernHeaders(kAliceToken, "tasks/get", "another-task")).status, 400);
  const Answer stranger = server.post(get, modernHeaders(kBobToken, "tasks/get", id));
  EXPECT_EQ(stranger.status, 400);
  EXPECT_EQ(stranger.json()->getObject("error")->getValue<int>("code"), -32602);
  const Answer undeclared = server.post(modernBody(3, "tasks/get", R"("taskId":")" + id + R"(")"),
                                        modernHeaders(kAliceToken, "tasks/get", id));
  EXPECT_EQ(undeclared.status, 400);
  EXPECT_EQ(undeclared.json()->getObject("error")->getValue<int>("code"), -32021);

  const Answer cancelled = server.post(tasks(4, "tasks/cancel", R"("taskId":")" + id + R"(")"),
                                       modernHeaders(kAliceToken, "tasks/cancel", id));
  EXPECT_EQ(cancelled.status, 200) << cancelled.body;
  // tasks/cancel stops the run and answers once it has ended: the next read says so.
  EXPECT_EQ(server.post(get, modernHeaders(kAliceToken, "tasks/get", id))
                .json()
                ->getObject("result")
                ->getValue<std::string>("status"),
            "cancelled");
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
}

// Issue 15: the server's own readiness checks, probed without a token.
TEST(HttpE2eTest, ReadyOnceThePreparedSandboxIsAndHealthyWithoutAToken) {
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path()});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const Answer health = server.send("GET", "", {}, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok"})");
  Answer ready;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while ((ready = server.send("GET", "", {}, "/readyz")).status != 200 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);  // the pool makes its sandbox after the server listens
  }
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(ready.body, R"({"status":"ready","checks":{"engine":"ok","prepared_sandbox":"ok"}})");
  EXPECT_EQ(server.post(kInitialize).status, 401);  // the MCP endpoint still wants its token

  HttpServer unprepared({"--prepared", "0"});
  ASSERT_TRUE(unprepared.waitListening()) << unprepared.process().stderrText();
  const Answer engine_only = unprepared.send("GET", "", {}, "/readyz");
  EXPECT_EQ(engine_only.status, 200);
  EXPECT_EQ(engine_only.body, R"({"status":"ready","checks":{"engine":"ok"}})");
}

// The port of a server's --metrics 127.0.0.1:0 listener, from its log; 0 when it logged none.
std::uint16_t metricsPortOf(HttpServer& server) {
  std::smatch match;
  const std::string log = server.process().stderrText();
  return std::regex_search(log, match,
                           std::regex(R"(serving metrics at http://127\.0\.0\.1:(\d+)/metrics)"))
             ? static_cast<std::uint16_t>(std::stoi(match[1]))
             : 0;
}

// Issue 15: GET /metrics on its own address, without a token; the MCP port does not serve it.
TEST(HttpE2eTest, MetricsCountEachTenantsRunsOnTheirOwnAddress) {
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path(), "--metrics", "127.0.0.1:0"});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const std::uint16_t metricsPort = metricsPortOf(server);
  ASSERT_NE(metricsPort, 0) << server.process().stderrText();
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (server.send("GET", "", {}, "/readyz").status != 200 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);  // so that the run takes the prepared sandbox
  }

  const auto alice = server.open(kAliceToken);
  const Object::Ptr started = server.call(alice, "start_run", R"({"code":"#fake:exit=0"})");
  const std::string run_id =
      started->getObject("structuredContent")->getValue<std::string>("run_id");
  const Object::Ptr result =
      server.call(alice, "get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":20})");
  EXPECT_EQ(result->getObject("structuredContent")->getValue<std::string>("status"), "succeeded");
  const auto bob = server.open(kBobToken);
  EXPECT_TRUE(server.call(bob, "start_run", R"({"code":"x","limits":{"memory_gb":100000}})")
                  ->getValue<bool>("isError"));

  Poco::Net::HTTPClientSession session("127.0.0.1", metricsPort);
  Poco::Net::HTTPRequest request("GET", "/metrics", Poco::Net::HTTPRequest::HTTP_1_1);
  session.sendRequest(request);
  Poco::Net::HTTPResponse response;
  std::string text;
  Poco::StreamCopier::copyToString(session.receiveResponse(response), text);
  EXPECT_EQ(response.getStatus(), Poco::Net::HTTPResponse::HTTP_OK);
  EXPECT_THAT(text, HasSubstr("scs_runs_started_total{tenant=\"alice\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("scs_runs_finished_total{status=\"succeeded\",tenant=\"alice\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("scs_runs_refused_total{reason=\"limits\",tenant=\"bob\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("scs_prepared_pool_takes_total{result=\"hit\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("scs_run_latency_seconds_count 1\n"));
  EXPECT_THAT(text, Not(HasSubstr(run_id)));
  EXPECT_THAT(text, Not(HasSubstr(kAliceToken)));
  // Tenants reach only the MCP port, and it has no /metrics, with or without a token.
  EXPECT_EQ(server.send("GET", "", alice, "/metrics").status, 404);
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
}

TEST(HttpE2eTest, AnEvilOriginOrHostIsRefused) {
  HttpServer server;
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  EXPECT_EQ(server.post(kInitialize, {{"Origin", "http://evil.example.com"}}).status, 403);
  EXPECT_EQ(server.post(kInitialize, {{"Host", "evil.example.com"}}).status, 421);
  EXPECT_EQ(server.post(kInitialize).status, 200);
}

TEST(HttpE2eTest, StdinIsNotServedWhenHttpIs) {
  HttpServer server;
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  server.process().sendLine(kPing);
  EXPECT_EQ(server.post(kInitialize).status, 200);  // the server is up and answering
  EXPECT_EQ(server.process().readLine(200ms), std::nullopt);
  server.process().closeStdin();
  EXPECT_EQ(server.post(kInitialize).status, 200);  // stdin EOF does not stop it
}

TEST(HttpE2eTest, ABindBeyondLoopbackWithoutATokenFileIsRefusedAtStartup) {
  McpProcess process(kBinary, {"--backend", "fake", "--http", "0.0.0.0:0"});
  EXPECT_EQ(process.waitExit(10s), 2);
  EXPECT_THAT(process.stderrText(),
              HasSubstr("refusing to serve beyond loopback (0.0.0.0:0) without authentication"));
  EXPECT_THAT(process.stderrText(), Not(HasSubstr("listening on")));
}

TEST(HttpE2eTest, HttpFlagsAreCheckedBeforeAnythingStarts) {
  McpProcess without_http(kBinary, {"--backend", "fake", "--token-file", "/etc/hostname"});
  EXPECT_EQ(without_http.waitExit(10s), 2);
  EXPECT_THAT(without_http.stderrText(), HasSubstr("--token-file applies to HTTP only"));
  McpProcess bad_port(kBinary, {"--backend", "fake", "--http", "127.0.0.1:http"});
  EXPECT_EQ(bad_port.waitExit(10s), 2);
  EXPECT_THAT(bad_port.stderrText(), HasSubstr("has no valid port"));
}

TEST(HttpE2eTest, ATokenFileOpenToOtherUsersIsRefusedAtStartup) {
  const TokenFile tokens(0644);
  McpProcess process(kBinary,
                     {"--backend", "fake", "--http", "127.0.0.1:0", "--token-file", tokens.path()});
  EXPECT_EQ(process.waitExit(10s), 2);
  EXPECT_THAT(process.stderrText(), HasSubstr("chmod 600 " + tokens.path()));
}

TEST(HttpE2eTest, MalformedHttpGetsA4xxAndTheServerKeepsServing) {
  HttpServer server({"--max-http-body-bytes", "2048"});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const auto session = server.open();
  const auto with = [&](std::map<std::string, std::string> extra) {
    auto headers = session;
    for (auto& [name, value] : extra) {
      headers[name] = value;
    }
    return headers;
  };
  EXPECT_EQ(server.post("{\"jsonrpc\":", session).status, 400);
  EXPECT_EQ(server.post(std::string(4096, ' ') + kPing, session).status, 413);
  EXPECT_EQ(server.post(kPing, with({{"Content-Type", "text/plain"}})).status, 415);
  EXPECT_EQ(server.post(kPing, with({{"Accept", ""}})).status, 406);
  EXPECT_EQ(
      server.post(kPing, with({{"Mcp-Session-Id", "0123456789abcdef0123456789abcdef"}})).status,
      404);
  EXPECT_EQ(server.post(kPing, with({{"Mcp-Session-Id", ""}})).status, 400);
  EXPECT_EQ(server.send("GET", "", session).status, 405);
  const Answer pong = server.post(kPing, session);
  EXPECT_EQ(pong.status, 200);
  EXPECT_EQ(pong.body, R"({"jsonrpc":"2.0","id":1,"result":{}})");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t found = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++found;
  }
  return found;
}

TEST(HttpE2eTest, SigtermEndsALongPollAndEveryRunWithinTwoSeconds) {
  HttpServer server({"--log-level", "debug"});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const auto session = server.open();
  const std::string run_id = runId(server.call(session, "start_run", R"({"code":"#fake: hang"})"));
  auto poll = std::async(std::launch::async, [&] {
    try {
      return server
          .post(R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_result",)"
                R"("arguments":{"run_id":")" +
                    run_id + R"(","wait_seconds":60}}})",
                session)
          .status;
    } catch (const Poco::Exception&) {
      return -1;  // the connection was shut down under the answer
    }
  });
  // The second tools/call the server logs is the poll: it is now waiting.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (count(server.process().stderrText(), "request tools/call") < 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(count(server.process().stderrText(), "request tools/call"), 2u);
  const auto began = std::chrono::steady_clock::now();
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - began, 2s);
  EXPECT_EQ(poll.wait_for(5s), std::future_status::ready);
  const std::string log = server.process().stderrText();
  EXPECT_THAT(log, HasSubstr("run " + run_id + " finished: stopped"));
  EXPECT_THAT(log, HasSubstr("every run stopped; exiting"));
}

// Issue 23: one tenant's long-polls neither starve another tenant nor hold every worker. Alice
// sends 70 get_result calls that wait at once on a run that never ends: 16 wait (the
// --max-waiting-per-tenant default), the rest are answered at once (a tool error, or 429 past
// her 32 requests in flight); meanwhile Bob opens a session and a run of his ends, and the
// probes answer.
TEST(HttpE2eTest, OneTenantsLongPollsNeitherStarveAnotherNorHoldEveryWorker) {
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path(), "--log-level", "debug"});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const auto alice = server.open(kAliceToken);
  const std::string run_id = runId(server.call(alice, "start_run", R"({"code":"#fake: hang"})"));
  const std::string poll = R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":)"
                           R"({"name":"get_result","arguments":{"run_id":")" +
                           run_id + R"(","wait_seconds":30}}})";
  std::vector<std::future<Answer>> polls;
  for (int i = 0; i < 70; ++i) {
    polls.push_back(std::async(std::launch::async, [&] { return server.post(poll, alice); }));
  }
  // Every poll has arrived: each reached the dispatcher (a "request tools/call" line besides the
  // start_run's) or was refused at the gate past Alice's requests in flight (a warning). And the
  // client holds every answer the server has logged: those refusals and the calls it answered
  // ("POST /mcp -> 200 tenant alice", besides her initialize and start_run).
  const auto ready = [&] {
    std::size_t n = 0;
    for (const auto& answer : polls) {
      n += answer.wait_for(0s) == std::future_status::ready ? 1 : 0;
    }
    return n;
  };
  ASSERT_TRUE(eventually(
      [&] {
        const std::string log = server.process().stderrText();
        const std::size_t refused = count(log, "requests in flight; refused another");
        return count(log, "request tools/call") + refused == 1 + 70 &&
               ready() + 2 >= refused + count(log, "POST /mcp -> 200 tenant alice ");
      },
      20s))
      << server.process().stderrText();

  const auto began = std::chrono::steady_clock::now();
  const Answer health = server.send("GET", "", {}, "/healthz");
  EXPECT_EQ(health.status, 200);
  const auto bob = server.open(kBobToken);
  const Object::Ptr bobs =
      server.call(bob, "start_run", R"({"code":"#fake: exit=0","wait_seconds":10})");
  EXPECT_EQ(bobs->getObject("structuredContent")->getValue<std::string>("status"), "succeeded");
  EXPECT_LT(std::chrono::steady_clock::now() - began, 3s) << "Bob waited behind Alice";

  int answered_at_once = 0;
  int refused_in_flight = 0;
  int waiting = 0;
  for (auto& answer : polls) {
    if (answer.wait_for(0s) != std::future_status::ready) {
      ++waiting;
      continue;
    }
    const Answer got = answer.get();
    refused_in_flight += got.status == 429 ? 1 : 0;
    if (got.status == 200) {
      const Object::Ptr result = got.json()->getObject("result");
      EXPECT_TRUE(result->getValue<bool>("isError")) << got.body;
      EXPECT_THAT(toolText(result), HasSubstr("calls waiting at once"));
      ++answered_at_once;
    }
  }
  EXPECT_EQ(waiting, 16);
  EXPECT_EQ(answered_at_once + refused_in_flight, 70 - 16);
  EXPECT_TRUE(server.call(alice, "stop_run", R"({"run_id":")" + run_id + R"("})"));
  for (auto& answer : polls) {
    if (answer.valid()) {
      EXPECT_EQ(answer.wait_for(10s), std::future_status::ready);
    }
  }
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
}

// The server's peak resident memory so far (VmHWM), in bytes.
std::uint64_t peakMemory(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stoull(line.substr(6)) * 1024;
    }
  }
  return 0;
}

// Issue 45: a request's cost is bounded before a tree is built. Eight bodies of 4.4 MB at
// once, each a files array of 400,000 empty objects (the class of CVE-2026-111768: validation
// after an unbounded parse), raised the server's memory by 2.7 GB; now the tenant's bodies in
// flight are capped in bytes and a message's values are counted as it is scanned, so each
// gets a clear refusal and the server's peak rises by at most 64 MiB.
TEST(HttpE2eTest, EightHostileBodiesAtOnceCostLittleMemoryAndEachIsRefusedClearly) {
  const TokenFile tokens;
  HttpServer server({"--token-file", tokens.path()});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const auto alice = server.open(kAliceToken);
  std::string files;
  files.reserve(400'000 * 11);
  for (int i = 0; i < 400'000; ++i) {
    files += i == 0 ? "{}         " : ",{}        ";
  }
  const std::string body =
      R"({"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"start_run",)"
      R"x("arguments":{"code":"print(1)","files":[)x" +
      files + "]}}}";
  ASSERT_GT(body.size(), 4'400'000u);
  const std::uint64_t before = peakMemory(server.process().pid());
  ASSERT_GT(before, 0u);

  std::vector<std::future<Answer>> answers;
  for (int i = 0; i < 8; ++i) {
    answers.push_back(std::async(std::launch::async, [&] { return server.post(body, alice); }));
  }
  int too_many_values = 0;
  int over_the_bytes_in_flight = 0;
  for (auto& future : answers) {
    const Answer answer = future.get();
    if (answer.status == 400) {
      EXPECT_THAT(answer.body, HasSubstr("JSON values")) << answer.body;
      EXPECT_EQ(answer.json()->getValue<int>("id"), 41) << answer.body;
      ++too_many_values;
    } else {
      EXPECT_EQ(answer.status, 429) << answer.body.substr(0, 300);
      EXPECT_THAT(answer.body, HasSubstr("bytes of bodies")) << answer.body;
      ++over_the_bytes_in_flight;
    }
  }
  const std::uint64_t after = peakMemory(server.process().pid());
  std::cout << "eight 4.4 MB bodies: " << too_many_values << " refused for their values, "
            << over_the_bytes_in_flight << " for the bytes in flight; peak memory "
            << before / 1024 / 1024 << " MiB before, " << after / 1024 / 1024 << " MiB after\n";
  EXPECT_GE(too_many_values, 1);
  EXPECT_LE(after - before, std::uint64_t{64} << 20);

  // The tenant's budget is given back: an ordinary request goes on.
  const Object::Ptr ran =
      server.call(alice, "start_run", R"({"code":"#fake: exit=0","wait_seconds":10})");
  EXPECT_EQ(ran->getObject("structuredContent")->getValue<std::string>("status"), "succeeded");
}

// Issue 23: connections that send part of a request head, or nothing, hold neither the MCP
// port, nor the probes, nor the metrics listener; each is answered 408 once its head is late.
TEST(HttpE2eTest, IdleAndSlowConnectionsHoldNeitherThePortNorTheProbesNorTheMetrics) {
  const TokenFile tokens;
  HttpServer server(
      {"--token-file", tokens.path(), "--metrics", "127.0.0.1:0", "--log-level", "debug"});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  const std::uint16_t metrics_port = metricsPortOf(server);
  ASSERT_NE(metrics_port, 0) << server.process().stderrText();
  const std::string port = std::to_string(server.port());
  std::vector<Poco::Net::StreamSocket> idle;
  for (int i = 0; i < 300; ++i) {
    idle.emplace_back(Poco::Net::SocketAddress("127.0.0.1", server.port()));
    if (i % 2 == 0) {
      const std::string partial = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n";
      idle.back().sendBytes(partial.data(), static_cast<int>(partial.size()));
    }
  }
  for (int i = 0; i < 50; ++i) {
    idle.emplace_back(Poco::Net::SocketAddress("127.0.0.1", metrics_port));
  }
  // The gate has accepted all 300: past the 256 connections it lets wait for a head
  // (GateSettings::max_pending), each one it accepts closes the oldest and logs it. The metrics
  // listener logs nothing of its 50, but its gate accepts in the order the listener queued
  // them, so the scrape below is accepted only after them.
  ASSERT_TRUE(eventually([&] {
    return count(server.process().stderrText(), "closed the oldest") >= 300 - 256;
  })) << server.process().stderrText();

  const auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(server.send("GET", "", {}, "/healthz").status, 200);
  const auto bob = server.open(kBobToken);
  const Object::Ptr run =
      server.call(bob, "start_run", R"({"code":"#fake: exit=0","wait_seconds":10})");
  EXPECT_EQ(run->getObject("structuredContent")->getValue<std::string>("status"), "succeeded");
  Poco::Net::HTTPClientSession scrape("127.0.0.1", metrics_port);
  scrape.setTimeout(Poco::Timespan(5, 0));
  Poco::Net::HTTPRequest request("GET", "/metrics", Poco::Net::HTTPRequest::HTTP_1_1);
  scrape.sendRequest(request);
  Poco::Net::HTTPResponse response;
  std::string text;
  Poco::StreamCopier::copyToString(scrape.receiveResponse(response), text);
  EXPECT_EQ(response.getStatus(), Poco::Net::HTTPResponse::HTTP_OK);
  EXPECT_LT(std::chrono::steady_clock::now() - began, 2s);

  // The newest idle connections are still waiting for their heads; past the deadline the gate
  // answers them.
  Poco::Net::StreamSocket& late = idle[298];
  late.setReceiveTimeout(Poco::Timespan(15, 0));
  char buffer[512] = {};
  const int got = late.receiveBytes(buffer, sizeof(buffer) - 1);
  EXPECT_THAT(std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0),
              HasSubstr("408 Request Timeout"));
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
}

// 2026-07-28: a client that closes its request's stream cancels the request. Its wait ends (the
// tenant's one waiting slot is free again at once) and a start_run's run is stopped, since its
// client never got the run_id; a 2025-11-25 client's disconnect cancels nothing.
TEST(HttpE2eTest, AModernClientThatHangsUpCancelsItsRequestAndALegacyOneDoesNot) {
  HttpServer server({"--max-waiting-per-tenant", "1"});
  ASSERT_TRUE(server.waitListening()) << server.process().stderrText();
  // Sends a tools/call start_run that waits, and hangs up before the answer; the run's id.
  const auto hangUp = [&](const std::string& body, std::map<std::string, std::string> headers) {
    const std::size_t runs_before =
        count(server.process().stderrText(), " of tenant local started");
    {
      Poco::Net::HTTPClientSession session("127.0.0.1", server.port());
      Poco::Net::HTTPRequest request("POST", "/mcp", Poco::Net::HTTPRequest::HTTP_1_1);
      setMcpHeaders(request, headers);
      request.setContentLength(static_cast<std::streamsize>(body.size()));
      session.sendRequest(request) << body << std::flush;
      EXPECT_TRUE(eventually(
          [&] {
            return count(server.process().stderrText(), " of tenant local started") > runs_before;
          },
          10s));
    }  // closed
    const std::string log = server.process().stderrText();
    const auto at = log.rfind(" of tenant local started");
    return log.substr(log.rfind("run ", at) + 4, 32);
  };
  const std::string arguments =
      R"("name":"start_run","arguments":{"code":"#fake: sleep_ms=20000\n","wait_seconds":30})";
  const std::string modern_id =
      hangUp(modernBody(1, "tools/call", arguments), {{"MCP-Protocol-Version", "2026-07-28"},
                                                      {"Mcp-Method", "tools/call"},
                                                      {"Mcp-Name", "start_run"}});
  const auto legacy = server.open();
  const auto statusOf = [&](const std::string& id) {
    return server.call(legacy, "get_result", R"({"run_id":")" + id + R"("})")
        ->getObject("structuredContent")
        ->getValue<std::string>("status");
  };
  // The tenant's one waiting slot is free (once every call that waited has returned) when a
  // wait on `id` is served.
  const auto aWaitIsServed = [&](const std::string& id) {
    return !server.call(legacy, "get_result", R"({"run_id":")" + id + R"(","wait_seconds":1})")
                ->getValue<bool>("isError");
  };
  EXPECT_TRUE(eventually([&] { return statusOf(modern_id) == "stopped"; }, 5s))
      << statusOf(modern_id);
  EXPECT_TRUE(eventually([&] { return aWaitIsServed(modern_id); }, 3s));

  // The server never looks for a legacy call's client, so nothing is logged of its hang-up; the
  // evidence is the call's return, before which a modern call's run was stopped. This one waits
  // 3 s of its run's 20; once it has returned, the one waiting slot is free again.
  const std::string legacy_arguments =
      R"("name":"start_run","arguments":{"code":"#fake: sleep_ms=20000\n","wait_seconds":3})";
  const std::string legacy_id = hangUp(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{)" + legacy_arguments + "}}",
      legacy);
  EXPECT_TRUE(eventually([&] { return aWaitIsServed(legacy_id); }, 10s));
  EXPECT_EQ(statusOf(legacy_id), "running");
  server.call(legacy, "stop_run", R"({"run_id":")" + legacy_id + R"("})");
  server.process().signal(SIGTERM);
  EXPECT_EQ(server.process().waitExit(5s), 0);
}

}  // namespace
}  // namespace scs::testing
