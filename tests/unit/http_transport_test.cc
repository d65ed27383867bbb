#include <Poco/JSON/Object.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/SocketStream.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/StreamCopier.h>
#include <Poco/String.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "mcp/http/transport.h"
#include "mocks/core_stack.h"
#include "runs/run_manager.h"
#include "support/errors.h"
#include "support/http_request.h"
#include "support/json.h"
#include "support/temp_file.h"

namespace scs::mcp {
namespace {

using Poco::JSON::Object;
using Poco::Net::HTTPRequest;
using Poco::Net::HTTPResponse;
using scs::testing::kInitialize;
using scs::testing::kPing;
using scs::testing::parseOrdered;
using scs::testing::TempFile;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using namespace std::chrono_literals;

constexpr const char* kAliceToken = "alice-token-0123456789abcdef";
constexpr const char* kBobToken = "bob-token-0123456789abcdef01";

std::string tokenText(const std::string& text) {
  const auto parsed = TokenTable::parse(text);
  return std::holds_alternative<Error>(parsed) ? std::get<Error>(parsed).message : "";
}

TEST(TokenTableTest, NamedAndUnnamedTokensMapToTheirTenants) {
  auto parsed = TokenTable::parse(std::string("# team tokens\n\n  alice:") + kAliceToken +
                                  "  \nalice:second-alice-token-0000\r\n" + kBobToken + "\n");
  ASSERT_TRUE(std::holds_alternative<TokenTable>(parsed)) << std::get<Error>(parsed).message;
  const TokenTable& table = std::get<TokenTable>(parsed);
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(table.tenantOf(kAliceToken), "alice");
  EXPECT_EQ(table.tenantOf("second-alice-token-0000"), "alice");
  const std::optional<std::string> unnamed = table.tenantOf(kBobToken);
  ASSERT_TRUE(unnamed.has_value());
  EXPECT_THAT(*unnamed, MatchesRegex("token-[0-9a-f]{12}"));
  EXPECT_EQ(unnamed->find("bob-token"), std::string::npos);
  EXPECT_FALSE(table.tenantOf("alice").has_value());
  EXPECT_FALSE(table.tenantOf("").has_value());
  EXPECT_FALSE(table.tenantOf(std::string(kAliceToken) + "x").has_value());
}

TEST(TokenTableTest, MalformedFilesAreRefusedWithoutQuotingTokens) {
  EXPECT_THAT(tokenText("short\n"), HasSubstr("line 1: the token is shorter than 16"));
  EXPECT_THAT(tokenText("# only a comment\n\n"), HasSubstr("there is no token"));
  EXPECT_THAT(tokenText(std::string("bad name:") + kAliceToken), HasSubstr("line 1: the tenant"));
  EXPECT_THAT(tokenText(std::string(":") + kAliceToken), HasSubstr("the tenant name"));
  EXPECT_THAT(tokenText("a:has a space in the token 0123"), HasSubstr("without blanks"));
  const std::string duplicate =
      tokenText(std::string("a:") + kAliceToken + "\n\nb:" + kAliceToken + "\n");
  EXPECT_THAT(duplicate, HasSubstr("line 3: the same token as line 1"));
  EXPECT_EQ(duplicate.find(kAliceToken), std::string::npos);
}

TEST(TokenTableTest, AFileOpenToOtherUsersIsRefused) {
  const TempFile open_file(std::string("a:") + kAliceToken + "\n", 0644);
  const auto refused = TokenTable::load(open_file.path());
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_THAT(std::get<Error>(refused).message, HasSubstr("open to other users (mode 0644)"));
  EXPECT_THAT(std::get<Error>(refused).message, HasSubstr("chmod 600 " + open_file.path()));

  for (const mode_t mode : {mode_t{0600}, mode_t{0640}}) {
    const TempFile private_file(std::string("a:") + kAliceToken + "\n", mode);
    const auto loaded = TokenTable::load(private_file.path());
    ASSERT_TRUE(std::holds_alternative<TokenTable>(loaded)) << std::get<Error>(loaded).message;
    EXPECT_EQ(std::get<TokenTable>(loaded).tenantOf(kAliceToken), "a");
  }
  EXPECT_THAT(std::get<Error>(TokenTable::load("/nonexistent/tokens")).message,
              HasSubstr("cannot read /nonexistent/tokens"));
  EXPECT_THAT(std::get<Error>(TokenTable::load("/tmp")).message, HasSubstr("not a regular file"));
}

TEST(ListenAddressTest, TheAddressDefaultsToLoopback) {
  const auto text = [](const std::string& value) {
    const auto parsed = parseListenAddress(value);
    return std::holds_alternative<Error>(parsed)
               ? "error: " + std::get<Error>(parsed).message
               : std::get<Poco::Net::SocketAddress>(parsed).toString();
  };
  EXPECT_EQ(text("8080"), "127.0.0.1:8080");
  EXPECT_EQ(text(":0"), "127.0.0.1:0");
  EXPECT_EQ(text("0.0.0.0:80"), "0.0.0.0:80");
  EXPECT_EQ(text("[::1]:9000"), "[::1]:9000");
  EXPECT_EQ(text("10.1.2.3:443"), "10.1.2.3:443");
  EXPECT_THAT(text("::1:80"), HasSubstr("error: --http: '::1:80' is not ADDR:PORT"));
  EXPECT_THAT(text("127.0.0.1:99999"), HasSubstr("error: --http: '127.0.0.1:99999' has no valid"));
  EXPECT_THAT(text("web"), HasSubstr("has no valid port"));
  EXPECT_THAT(text(""), HasSubstr("has no valid port"));
}

TEST(ResolveHttpSettingsTest, ABindBeyondLoopbackNeedsATokenFile) {
  HttpSettings settings;
  settings.listen = "0.0.0.0:0";
  const auto refused = resolveHttpSettings(settings);
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_THAT(std::get<Error>(refused).message,
              HasSubstr("refusing to serve beyond loopback (0.0.0.0:0) without authentication; "
                        "give --token-file FILE"));

  const TempFile tokens(std::string("a:") + kAliceToken + "\n", 0600);
  settings.token_file = tokens.path();
  const auto resolved = resolveHttpSettings(settings);
  ASSERT_TRUE(std::holds_alternative<HttpEndpoint>(resolved)) << std::get<Error>(resolved).message;
  EXPECT_TRUE(std::get<HttpEndpoint>(resolved).tokens.has_value());

  settings.listen = "[::1]:0";
  settings.token_file.clear();
  EXPECT_TRUE(std::holds_alternative<HttpEndpoint>(resolveHttpSettings(settings)));
}

TEST(SplitListTest, TrimsAndDropsEmptyItems) {
  EXPECT_EQ(splitList(" a.example:1 ,,b , "), (std::vector<std::string>{"a.example:1", "b"}));
  EXPECT_TRUE(splitList(" , ").empty());
}

struct Answer {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-case
  std::string body;

  std::string header(const std::string& name) const {
    const auto found = headers.find(name);
    return found == headers.end() ? "" : found->second;
  }
  Object::Ptr json() const { return parseOrdered(body); }
};

Answer answerOf(HTTPResponse& response, std::istream& body) {
  Answer answer;
  answer.status = static_cast<int>(response.getStatus());
  for (const auto& [name, value] : response) {
    std::string key = name;
    for (char& c : key) {
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    answer.headers[key] = value;
  }
  Poco::StreamCopier::copyToString(body, answer.body);
  return answer;
}

class HttpTransportTest : public ::testing::Test {
 protected:
  HttpTransportTest() : server_(core_.runs, core_.limits, policy::FileSettings{}, serverInfo()) {}

  ~HttpTransportTest() override {
    if (transport_) {
      transport_->stop();
      core_.runs.shutdown();
      transport_->finish();
    }
  }

  static ServerInfo serverInfo() {
    ServerInfo info{"scs", "Scs", "1.2.3"};
    info.progress_interval = 50ms;
    return info;
  }

  void serve(bool with_tokens = false, HttpEndpoint endpoint = {}) {
    endpoint.address = Poco::Net::SocketAddress("127.0.0.1", 0);
    if (with_tokens) {
      auto tokens = TokenTable::parse(std::string("alice:") + kAliceToken + "\nbob:" + kBobToken);
      endpoint.tokens = std::get<TokenTable>(tokens);
    }
    endpoint.max_body_bytes = 4096;
    transport_ = std::make_unique<HttpTransport>(server_, std::move(endpoint));
    ASSERT_EQ(scs::testing::errorOf(transport_->start()), std::nullopt);
    port_ = transport_->address().port();
    ASSERT_NE(port_, 0);
    EXPECT_EQ(transport_->url(), "http://127.0.0.1:" + std::to_string(port_) + "/mcp");
  }

  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }

  // One request on a fresh connection. `headers` replace the defaults of a well-formed POST.
  Answer send(const std::string& method, const std::string& body,
              std::map<std::string, std::string> headers = {}, const std::string& path = "/mcp") {
    Poco::Net::HTTPClientSession session("127.0.0.1", port_);
    session.setTimeout(Poco::Timespan(30, 0));
    return send(session, method, body, std::move(headers), path);
  }

  Answer send(Poco::Net::HTTPClientSession& session, const std::string& method,
              const std::string& body, std::map<std::string, std::string> headers = {},
              const std::string& path = "/mcp") {
    HTTPRequest request(method, path, HTTPRequest::HTTP_1_1);
    scs::testing::setMcpHeaders(request, headers);
    if (method != HTTPRequest::HTTP_GET || !body.empty()) {
      request.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    session.sendRequest(request) << body;
    HTTPResponse response;
    std::istream& in = session.receiveResponse(response);
    return answerOf(response, in);
  }

  // initialize, then notifications/initialized; returns the session id.
  // Starts a run that hangs until stopped; its run id.
  std::string startHangingRun(const std::map<std::string, std::string>& headers) {
    const Answer started = send("POST", toolCall("start_run", R"({"code":"#fake:hang"})"), headers);
    EXPECT_EQ(started.status, 200) << started.body;
    return started.json()
        ->getObject("result")
        ->getObject("structuredContent")
        ->getValue<std::string>("run_id");
  }

  std::string openSession(const std::string& token = "") {
    std::map<std::string, std::string> headers;
    if (!token.empty()) {
      headers["Authorization"] = "Bearer " + token;
    }
    const Answer initialized = send("POST", kInitialize, headers);
    EXPECT_EQ(initialized.status, 200) << initialized.body;
    const std::string session = initialized.header("mcp-session-id");
    EXPECT_THAT(session, MatchesRegex("[0-9a-f]{32}"));
    headers["Mcp-Session-Id"] = session;
    const Answer notified =
        send("POST", R"({"jsonrpc":"2.0","method":"notifications/initialized"})", headers);
    EXPECT_EQ(notified.status, 202);
    EXPECT_EQ(notified.body, "");
    return session;
  }

  std::map<std::string, std::string> as(const std::string& session, const std::string& token = "") {
    std::map<std::string, std::string> headers = {{"Mcp-Session-Id", session},
                                                  {"MCP-Protocol-Version", "2025-11-25"}};
    if (!token.empty()) {
      headers["Authorization"] = "Bearer " + token;
    }
    return headers;
  }

  static std::string toolCall(const std::string& tool, const std::string& arguments,
                              const std::string& extra = "") {
    return R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":")" + tool +
           R"(","arguments":)" + arguments + extra + "}}";
  }

  // `id`: the id the error must answer, when the request's id could be read (-1: null).
  void expectRefused(const Answer& answer, int status, const std::string& text, int id = -1) {
    EXPECT_EQ(answer.status, status) << answer.body;
    EXPECT_EQ(answer.header("content-type"), "application/json");
    const Object::Ptr error = answer.json()->getObject("error");
    ASSERT_FALSE(error.isNull()) << answer.body;
    EXPECT_THAT(error->getValue<std::string>("message"), HasSubstr(text));
    if (id >= 0) {
      EXPECT_EQ(answer.json()->getValue<int>("id"), id) << answer.body;
    } else {
      EXPECT_TRUE(answer.json()->isNull("id")) << answer.body;
    }
  }

  void expectServing() {
    const std::string session = openSession();
    const Answer pong = send("POST", kPing, as(session));
    EXPECT_EQ(pong.status, 200);
    EXPECT_EQ(pong.body, R"({"jsonrpc":"2.0","id":1,"result":{}})");
  }

  mocks::CoreStack core_;
  Server server_;
  std::unique_ptr<HttpTransport> transport_;
  std::uint16_t port_ = 0;
};

TEST_F(HttpTransportTest, InitializeOpensASessionThatEveryLaterMessageNeeds) {
  serve();
  const Answer initialized = send("POST", kInitialize);
  EXPECT_EQ(initialized.status, 200);
  EXPECT_EQ(initialized.header("content-type"), "application/json");
  EXPECT_EQ(initialized.json()->getObject("result")->getValue<std::string>("protocolVersion"),
            "2025-11-25");
  const std::string session = initialized.header("mcp-session-id");
  EXPECT_THAT(session, MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(openSession(), session);

  // A request whose id could be read gets its refusal answered to that id.
  expectRefused(send("POST", kPing), 400, "Mcp-Session-Id header is missing", 1);
  expectRefused(send("POST", kPing, {{"Mcp-Session-Id", std::string(32, 'a')}}), 404,
                "unknown or expired session", 1);
  const Answer pong = send("POST", kPing, {{"Mcp-Session-Id", session}});
  EXPECT_EQ(pong.status, 200);
  EXPECT_EQ(pong.header("mcp-session-id"), "");
  EXPECT_EQ(pong.body, R"({"jsonrpc":"2.0","id":1,"result":{}})");
  const Answer response = send("POST", R"({"jsonrpc":"2.0","id":9,"result":{}})", as(session));
  EXPECT_EQ(response.status, 202);
  EXPECT_EQ(response.body, "");
}

TEST_F(HttpTransportTest, DeleteEndsASession) {
  serve();
  const std::string session = openSession();
  const Answer ended = send("DELETE", "", {{"Mcp-Session-Id", session}});
  EXPECT_EQ(ended.status, 204);
  EXPECT_EQ(ended.header("content-length"), "");
  expectRefused(send("POST", kPing, as(session)), 404, "unknown or expired session", 1);
  expectRefused(send("DELETE", "", {{"Mcp-Session-Id", session}}), 404, "unknown or expired");
  expectRefused(send("DELETE", "", {}), 400, "Mcp-Session-Id header is missing");
}

TEST_F(HttpTransportTest, TheProtocolVersionHeaderIsChecked) {
  serve();
  const std::string session = openSession();
  for (const char* version : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
    EXPECT_EQ(send("POST", kPing, {{"Mcp-Session-Id", session}, {"MCP-Protocol-Version", version}})
                  .status,
              200)
        << version;
  }
  expectRefused(
      send("POST", kPing, {{"Mcp-Session-Id", session}, {"MCP-Protocol-Version", "2099-01-01"}}),
      400, "unsupported MCP-Protocol-Version '2099-01-01'; supported: 2025-11-25, 2025-06-18", 1);
}

TEST_F(HttpTransportTest, WithTokensEveryRequestNeedsAValidBearerToken) {
  serve(true);
  const Answer missing = send("POST", kInitialize);
  expectRefused(missing, 401, "needs 'Authorization: Bearer <token>'");
  EXPECT_EQ(missing.header("www-authenticate"), R"(Bearer realm="safe-code-sandbox")");
  const Answer wrong =
      send("POST", kInitialize, {{"Authorization", std::string("Bearer ") + kAliceToken + "x"}});
  expectRefused(wrong, 401, "not valid");
  EXPECT_EQ(wrong.header("www-authenticate"),
            R"(Bearer realm="safe-code-sandbox", error="invalid_token")");
  expectRefused(send("POST", kInitialize, {{"Authorization", std::string("Basic ") + kAliceToken}}),
                401, "not valid");
  EXPECT_EQ(
      send("POST", kInitialize, {{"Authorization", std::string("bearer ") + kAliceToken}}).status,
      200);

  const std::string session = openSession(kAliceToken);
  expectRefused(send("POST", kPing, {{"Mcp-Session-Id", session}}), 401, "Bearer");
  EXPECT_EQ(send("POST", kPing, as(session, kAliceToken)).status, 200);
  // A session belongs to the tenant that opened it.
  expectRefused(send("POST", kPing, as(session, kBobToken)), 404, "unknown or expired session", 1);
}

TEST_F(HttpTransportTest, ARunIsUnknownToAnotherTenant) {
  serve(true);
  const std::string alice = openSession(kAliceToken);
  const std::string bob = openSession(kBobToken);
  const std::string run_id = startHangingRun(as(alice, kAliceToken));
  for (const char* tool : {"get_result", "stop_run"}) {
    const Answer stranger =
        send("POST", toolCall(tool, R"({"run_id":")" + run_id + R"("})"), as(bob, kBobToken));
    EXPECT_EQ(stranger.status, 200);
    const Object::Ptr result = stranger.json()->getObject("result");
    EXPECT_TRUE(result->getValue<bool>("isError")) << tool;
    EXPECT_THAT(stranger.body, HasSubstr("Unknown or expired run_id"));
  }
  const Answer owner = send("POST", toolCall("stop_run", R"({"run_id":")" + run_id + R"("})"),
                            as(alice, kAliceToken));
  EXPECT_THAT(owner.body, HasSubstr(R"("status":"stopped")"));
}

TEST_F(HttpTransportTest, OneTenantsSessionsPushOutOnlyItsOwnAndAtTheTotalTheHeaviestGivesWay) {
  HttpEndpoint endpoint;
  endpoint.max_sessions = 6;
  endpoint.max_sessions_per_tenant = 4;
  serve(true, endpoint);
  const auto live = [&](const std::string& session, const char* token) {
    return send("POST", kPing, as(session, token)).status == 200;
  };
  const std::string bob = openSession(kBobToken);
  std::vector<std::string> alice;
  for (int i = 0; i < 12; ++i) {
    alice.push_back(openSession(kAliceToken));
  }
  // Alice's own limit: each new session past four closed her least recently used one.
  EXPECT_TRUE(live(bob, kBobToken));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(live(alice[i], kAliceToken), i >= 8) << i;
  }
  // Four of Alice's and three of Bob's would pass the total of six: Alice holds the most, so
  // her least recently used session goes, not Bob's.
  const std::string bob2 = openSession(kBobToken);
  const std::string bob3 = openSession(kBobToken);
  EXPECT_TRUE(live(bob, kBobToken));
  EXPECT_TRUE(live(bob2, kBobToken));
  EXPECT_TRUE(live(bob3, kBobToken));
  EXPECT_FALSE(live(alice[8], kAliceToken));
  for (int i = 9; i < 12; ++i) {
    EXPECT_TRUE(live(alice[i], kAliceToken)) << i;
  }
  // Now even: Bob's next one, past the total, closes his own least recently used.
  openSession(kBobToken);
  EXPECT_FALSE(live(bob, kBobToken));
  for (int i = 9; i < 12; ++i) {
    EXPECT_TRUE(live(alice[i], kAliceToken)) << i;
  }
}

TEST_F(HttpTransportTest, HostAndOriginAreCheckedAgainstTheAllowLists) {
  serve();
  const Answer evil = send("POST", kInitialize,
                           {{"Host", "evil.example.com"}, {"Origin", "http://evil.example.com"}});
  expectRefused(evil, 421, "Host 'evil.example.com'");
  expectRefused(send("POST", kInitialize, {{"Origin", "http://evil.example.com"}}), 403,
                "Origin 'http://evil.example.com'");
  expectRefused(send("POST", kInitialize, {{"Origin", "null"}}), 403, "Origin 'null'");
  expectRefused(send("POST", kInitialize, {{"Host", "127.0.0.1:1"}}), 421, "Host");
  for (const std::string allowed : {"localhost", "127.0.0.1", "[::1]", "LOCALHOST"}) {
    const std::string with_port = allowed + ":" + std::to_string(port_);
    const Answer fine =
        send("POST", kInitialize, {{"Host", with_port}, {"Origin", "http://" + with_port}});
    EXPECT_EQ(fine.status, 200) << allowed << ": " << fine.body;
  }
  expectServing();
}

TEST_F(HttpTransportTest, ExplicitAllowListsReplaceTheDefaults) {
  HttpEndpoint endpoint;
  endpoint.allowed_hosts = {"sandbox.example.com"};
  endpoint.allowed_origins = {"https://app.example.com"};
  serve(false, std::move(endpoint));
  EXPECT_EQ(send("POST", kInitialize,
                 {{"Host", "sandbox.example.com:8443"}, {"Origin", "https://app.example.com"}})
                .status,
            200);
  expectRefused(send("POST", kInitialize), 421, "Host");
  expectRefused(send("POST", kInitialize,
                     {{"Host", "sandbox.example.com"}, {"Origin", "http://app.example.com"}}),
                403, "Origin");
}

TEST_F(HttpTransportTest, ARequestForwardedByAProxyIsRefusedWithoutTokens) {
  serve();
  expectRefused(send("POST", kInitialize, {{"X-Forwarded-For", "203.0.113.9"}}), 403,
                "--token-file");
  expectRefused(send("POST", kInitialize, {{"Forwarded", "for=203.0.113.9"}}), 403, "proxy");
}

TEST_F(HttpTransportTest, MalformedRequestsGetA4xxAndTheServerGoesOn) {
  serve();
  const std::string session = openSession();
  const auto headers = [&](std::map<std::string, std::string> extra) {
    std::map<std::string, std::string> all = as(session);
    for (auto& [name, value] : extra) {
      all[name] = value;
    }
    return all;
  };
  const Answer bad_json = send("POST", "{not json", as(session));
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(bad_json.json()->getObject("error")->getValue<int>("code"), -32700);
  const Answer batch = send("POST", std::string("[") + kPing + "]", as(session));
  EXPECT_EQ(batch.status, 400);
  EXPECT_EQ(batch.json()->getObject("error")->getValue<int>("code"), -32600);
  expectRefused(send("POST", kPing, headers({{"Accept", ""}})), 406, "Accept");
  expectRefused(send("POST", kPing, headers({{"Accept", "application/json"}})), 406, "Accept");
  expectRefused(send("POST", kPing, headers({{"Accept", "text/event-stream"}})), 406, "Accept");
  EXPECT_EQ(send("POST", kPing, headers({{"Accept", "*/*"}})).status, 200);
  expectRefused(send("POST", kPing, headers({{"Content-Type", "text/plain"}})), 415,
                "application/json");
  expectRefused(send("POST", kPing, headers({{"Content-Type", ""}})), 415, "application/json");
  EXPECT_EQ(
      send("POST", kPing, headers({{"Content-Type", "application/json; charset=utf-8"}})).status,
      200);
  const Answer huge = send("POST",
                           R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":")" +
                               std::string(5000, 'x') + R"("}})",
                           as(session));
  EXPECT_EQ(huge.status, 413);
  EXPECT_THAT(huge.body, HasSubstr("4096 bytes"));
  EXPECT_EQ(huge.json()->getValue<int>("id"), 1);
  // The id is read wherever it stands, as the official SDK writes it last.
  const Answer id_last = send("POST",
                              R"({"method":"ping","params":{"pad":")" + std::string(9000, 'x') +
                                  R"("},"jsonrpc":"2.0","id":"late"})",
                              as(session));
  EXPECT_EQ(id_last.status, 413);
  EXPECT_EQ(id_last.json()->getValue<std::string>("id"), "late");
  expectRefused(send("POST", kPing, as(session), "/other"), 404, "/mcp");
  const Answer get = send("GET", "", as(session));
  expectRefused(get, 405, "no GET stream");
  EXPECT_EQ(get.header("allow"), "POST, DELETE");
  expectRefused(send("PUT", kPing, as(session)), 405, "use POST");
  expectServing();
}

// Sends raw bytes on one connection and reads one whole answer at a time.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port)
      : socket_(Poco::Net::SocketAddress("127.0.0.1", port)), stream_(socket_) {
    socket_.setReceiveTimeout(Poco::Timespan(10, 0));
  }

  Answer exchange(const std::string& bytes) {
    stream_ << bytes << std::flush;
    HTTPResponse response;
    response.read(stream_);
    Answer answer;
    answer.status = static_cast<int>(response.getStatus());
    answer.headers["connection"] = response.get("Connection", "");
    std::string body(static_cast<std::size_t>(std::max<std::streamsize>(
                         0, static_cast<std::streamsize>(response.getContentLength()))),
                     '\0');
    stream_.read(body.data(), static_cast<std::streamsize>(body.size()));
    answer.body = body;
    return answer;
  }

  // True when the server closed the connection (EOF within the receive timeout).
  bool closedByServer() {
    char byte = 0;
    try {
      return socket_.receiveBytes(&byte, 1) == 0;
    } catch (const Poco::Exception&) {
      return false;
    }
  }

 private:
  Poco::Net::StreamSocket socket_;
  Poco::Net::SocketStream stream_;
};

std::string rawPost(std::uint16_t port, const std::string& headers, const std::string& body) {
  return "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Each connection serves one request (net/http_gate.h): a body left unread after an early answer
// is never taken as the next request, and the next request on a new connection is served.
TEST_F(HttpTransportTest, AnEarlyAnswerNeverTakesTheUnreadBodyForTheNextRequest) {
  serve(true);
  RawConnection connection(port_);
  // A body that is a valid request: were it read as one, it would be answered too.
  const std::string body = std::string(kPing) + "\r\n\r\n";
  const Answer refused = connection.exchange(
      rawPost(port_,
              std::string("Authorization: Bearer ") + kAliceToken +
                  "\r\nContent-Type: text/plain\r\nAccept: application/json, text/event-stream\r\n",
              body));
  EXPECT_EQ(refused.status, 415);
  EXPECT_TRUE(Poco::icompare(refused.header("connection"), "close") == 0);
  EXPECT_TRUE(connection.closedByServer());
  RawConnection second(port_);
  const Answer unauthorised = second.exchange(rawPost(
      port_, "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
      kInitialize));
  EXPECT_EQ(unauthorised.status, 401);
  EXPECT_TRUE(second.closedByServer());
  RawConnection third(port_);
  const Answer initialized =
      third.exchange(rawPost(port_,
                             std::string("Authorization: Bearer ") + kAliceToken +
                                 "\r\nContent-Type: application/json\r\nAccept: application/json, "
                                 "text/event-stream\r\n",
                             kInitialize));
  EXPECT_EQ(initialized.status, 200);
  EXPECT_THAT(initialized.body, HasSubstr(R"("protocolVersion":"2025-11-25")"));
}

TEST_F(HttpTransportTest, AHugeDeclaredBodyIsRefusedUnreadAndTheConnectionClosed) {
  serve();
  RawConnection connection(port_);
  const Answer refused = connection.exchange(
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
      "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
      "Content-Length: 100000000000\r\n\r\n{\"jsonrpc\":");
  EXPECT_EQ(refused.status, 413);
  EXPECT_TRUE(Poco::icompare(refused.header("connection"), "close") == 0);
  EXPECT_TRUE(connection.closedByServer());

  RawConnection no_length(port_);
  const Answer unsized = no_length.exchange(
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
      "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\r\n");
  EXPECT_EQ(unsized.status, 411);
  expectServing();
}

TEST_F(HttpTransportTest, AWaitingGetResultStreamsProgressAndThenTheAnswer) {
  serve();
  const std::string session = openSession();
  const std::string run_id = startHangingRun(as(session));
  const Answer streamed = core_.whileTimePasses([&] {
    return send("POST",
                toolCall("get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":0.3})",
                         R"(,"_meta":{"progressToken":"p1"})"),
                as(session));
  });
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.header("content-type"), "text/event-stream");
  EXPECT_EQ(streamed.header("cache-control"), "no-cache, no-transform");
  std::vector<Object::Ptr> events;
  std::istringstream lines(streamed.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: ", 0) == 0) {
      events.push_back(parseOrdered(line.substr(6)));
    }
  }
  ASSERT_GE(events.size(), 3u) << streamed.body;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]->getValue<std::string>("method"), "notifications/progress");
    EXPECT_EQ(events[i]->getObject("params")->getValue<std::string>("progressToken"), "p1");
  }
  EXPECT_EQ(events.back()->getValue<int>("id"), 5);
  EXPECT_THAT(streamed.body, HasSubstr(R"(\"status\":\"running\")"));

  // Without a progress token the stream carries only keep-alive comments before the answer.
  const Answer quiet = core_.whileTimePasses([&] {
    return send("POST",
                toolCall("get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":0.2})"),
                as(session));
  });
  EXPECT_EQ(quiet.header("content-type"), "text/event-stream");
  EXPECT_THAT(quiet.body, ::testing::StartsWith(": waiting\n\n"));
  EXPECT_EQ(quiet.body.find("notifications/progress"), std::string::npos);

  // A call that answers at once is plain JSON.
  const Answer at_once =
      send("POST", toolCall("get_result", R"({"run_id":")" + run_id + R"("})"), as(session));
  EXPECT_EQ(at_once.header("content-type"), "application/json");
  send("POST", toolCall("stop_run", R"({"run_id":")" + run_id + R"("})"), as(session));
}

TEST_F(HttpTransportTest, StoppingEndsALongPollInFlightPromptly) {
  serve();
  const std::string session = openSession();
  const std::string run_id = startHangingRun(as(session));
  auto poll = std::async(std::launch::async, [&] {
    try {
      return send("POST",
                  toolCall("get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":60})"),
                  as(session))
          .status;
    } catch (const Poco::Exception&) {
      return -1;  // the connection was shut down under the answer
    }
  });
  ASSERT_TRUE(core_.awaitARunning());
  const auto began = std::chrono::steady_clock::now();
  transport_->stop();
  core_.runs.shutdown();
  transport_->finish();
  EXPECT_LT(std::chrono::steady_clock::now() - began, 2s);
  EXPECT_EQ(poll.wait_for(5s), std::future_status::ready);
  transport_.reset();
}

}  // namespace

// Issue 15: a load balancer's probes, answered without a token or a Host the server knows.
TEST_F(HttpTransportTest, HealthAndReadinessAnswerAnyoneWithAShortJsonBody) {
  std::atomic<bool> pool_ready{false};
  HttpEndpoint endpoint;
  endpoint.readiness = [&] {
    return std::vector<ReadinessCheck>{{"engine", ""},
                                       {"prepared_sandbox", pool_ready ? "" : "none ready"}};
  };
  serve(true, std::move(endpoint));
  const std::map<std::string, std::string> stranger = {{"Host", "10.0.0.7:8080"},
                                                       {"Origin", "https://evil.example"}};
  const Answer health = send("GET", "", stranger, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok"})");
  const Answer waiting = send("GET", "", stranger, "/readyz");
  EXPECT_EQ(waiting.status, 503);
  EXPECT_EQ(waiting.body,
            R"({"status":"not_ready","checks":{"engine":"ok","prepared_sandbox":"none ready"}})");
  pool_ready = true;
  const Answer ready = send("GET", "", stranger, "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, R"({"status":"ready","checks":{"engine":"ok","prepared_sandbox":"ok"}})");
  expectRefused(send("POST", kPing, {}, "/healthz"), 405, "GET only");
  // The MCP endpoint itself still wants its token.
  EXPECT_EQ(send("POST", kPing, {}).status, 401);
}

TEST_F(HttpTransportTest, WithoutReadinessChecksTheServerIsReadyWhileItServes) {
  serve();
  const Answer ready = send("GET", "", {}, "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, R"({"status":"ready","checks":{}})");
}

}  // namespace scs::mcp
