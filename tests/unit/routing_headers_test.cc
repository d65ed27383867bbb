#include "mcp/http/routing_headers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mcp/server.h"

namespace scs::mcp {
namespace {

using ::testing::HasSubstr;

Message toolsCall(const std::string& name) {
  return Server::parse(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":")" + name +
      R"(","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
      R"("io.modelcontextprotocol/clientCapabilities":{}}}})");
}

// A request head as a client sends it, with `entries` as its header lines.
std::string headers(std::initializer_list<std::pair<std::string, std::string>> entries) {
  std::string head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\n";
  for (const auto& [name, value] : entries) {
    head += (name.empty() ? value : name + ": " + value) + "\r\n";  // no name: a folded line
  }
  return head + "\r\n";
}

TEST(RoutingHeadersTest, HeadersThatRepeatTheBodyPassInAnyCaseOfTheirNames) {
  EXPECT_EQ(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                          {"Mcp-Method", "tools/call"},
                                          {"Mcp-Name", "start_run"}}),
                                 toolsCall("start_run")),
            "");
  EXPECT_EQ(routingHeaderProblem(headers({{"mcp-protocol-version", "2026-07-28"},
                                          {"MCP-METHOD", "tools/call"},
                                          {"mcp-name", "  start_run  "}}),
                                 toolsCall("start_run")),
            "");
  // The name may come as the transport's Base64 sentinel.
  EXPECT_EQ(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                          {"Mcp-Method", "tools/call"},
                                          {"Mcp-Name", "=?base64?c3RhcnRfcnVu?="}}),
                                 toolsCall("start_run")),
            "");
}

TEST(RoutingHeadersTest, AMissingOrDifferentHeaderIsNamed) {
  const Message message = toolsCall("start_run");
  EXPECT_THAT(routingHeaderProblem(
                  headers({{"Mcp-Method", "tools/call"}, {"Mcp-Name", "start_run"}}), message),
              HasSubstr("MCP-Protocol-Version header is missing"));
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2025-11-25"},
                                            {"Mcp-Method", "tools/call"},
                                            {"Mcp-Name", "start_run"}}),
                                   message),
              HasSubstr("does not match _meta's protocol version '2026-07-28'"));
  EXPECT_THAT(routingHeaderProblem(
                  headers({{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Name", "x"}}), message),
              HasSubstr("Mcp-Method header is missing"));
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"Mcp-Method", "TOOLS/CALL"},
                                            {"Mcp-Name", "start_run"}}),
                                   message),
              HasSubstr("Mcp-Method header value 'TOOLS/CALL' does not match the method"));
  EXPECT_THAT(
      routingHeaderProblem(
          headers({{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}}), message),
      HasSubstr("Mcp-Name header is missing"));
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"Mcp-Method", "tools/call"},
                                            {"Mcp-Name", "stop_run"}}),
                                   message),
              HasSubstr("'stop_run' does not match params.name 'start_run'"));
  // A Base64 method is not the method: only Mcp-Name may be encoded.
  EXPECT_NE(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                          {"Mcp-Method", "=?base64?dG9vbHMvY2FsbA==?="},
                                          {"Mcp-Name", "start_run"}}),
                                 message),
            "");
}

// What a proxy reads must be what the server checked: a value is compared as sent (Poco's
// parser would decode an RFC 2047 word such as =?UTF-8?B?...?=, which a proxy does not), a
// header sent twice is refused (proxies differ on which one counts), and so is a folded one.
TEST(RoutingHeadersTest, TheHeadIsReadAsSentAndEachHeaderOnce) {
  const Message message = toolsCall("start_run");
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"Mcp-Method", "tools/call"},
                                            {"Mcp-Name", "=?UTF-8?B?c3RhcnRfcnVu?="}}),
                                   message),
              HasSubstr("'=?UTF-8?B?c3RhcnRfcnVu?=' does not match params.name"));
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"Mcp-Method", "=?x?Q?tools/call?="},
                                            {"Mcp-Name", "start_run"}}),
                                   message),
              HasSubstr("does not match the method"));
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"Mcp-Method", "tools/call"},
                                            {"Mcp-Name", "get_result"},
                                            {"mcp-name", "start_run"}}),
                                   message),
              HasSubstr("Mcp-Name header appears 2 times"));
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"Mcp-Method", "tools/call"},
                                            {"Mcp-Name", "start"},
                                            {"", " _run"}}),
                                   message),
              HasSubstr("folds a header line"));
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"MCP-Protocol-Version", "2026-07-28"},
                                            {"Mcp-Method", "tools/call"},
                                            {"Mcp-Name", "start_run"}}),
                                   message),
              HasSubstr("appears 2 times"));
  // Only the headers count: a body-like line after the head's end is not a header.
  EXPECT_THAT(routingHeaderProblem(
                  headers({{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}}) +
                      "Mcp-Name: start_run\r\n",
                  message),
              HasSubstr("Mcp-Name header is missing"));
}

// What chooses the era is read as sent too: a version sent twice, or a head that parsers could
// read in two ways, is taken for the modern revision, whose checks then refuse it.
TEST(RoutingHeadersTest, TheEraIsChosenFromTheHeadAsSent) {
  EXPECT_TRUE(namesModernRevision(headers({{"MCP-Protocol-Version", " 2026-07-28 "}})));
  EXPECT_FALSE(namesModernRevision(headers({{"MCP-Protocol-Version", "2025-11-25"}})));
  EXPECT_FALSE(namesModernRevision(headers({{"Mcp-Method", "tools/call"}})));
  EXPECT_FALSE(namesModernRevision(headers({{"MCP-Protocol-Version", "=?x?Q?2026-07-28?="}})));
  EXPECT_TRUE(namesModernRevision(
      headers({{"MCP-Protocol-Version", "2025-11-25"}, {"MCP-Protocol-Version", "2026-07-28"}})));
  EXPECT_TRUE(namesModernRevision(headers({{"X-A", "b"}, {"", " MCP-Protocol-Version: x"}})));
  EXPECT_TRUE(
      namesModernRevision("POST /mcp HTTP/1.1\r\nMCP-Protocol-Version : 2026-07-28\r\n\r\n"));

  const Message message = toolsCall("start_run");
  EXPECT_THAT(routingHeaderProblem(headers({{"MCP-Protocol-Version", "2026-07-28"},
                                            {"X-A", "b"},
                                            {"", " Mcp-Name: start_run"},
                                            {"Mcp-Method", "tools/call"},
                                            {"Mcp-Name", "start_run"}}),
                                   message),
              HasSubstr("folds a header line"));
  EXPECT_THAT(routingHeaderProblem("POST /mcp HTTP/1.1\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                                   "Mcp-Method: tools/call\r\nMcp-Name : start_run\r\n\r\n",
                                   message),
              HasSubstr("blanks before its colon"));
  // Poco ends the head at a line that starts with CR; so does the check.
  EXPECT_THAT(routingHeaderProblem("POST /mcp HTTP/1.1\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                                   "\r\r\nMcp-Method: tools/call\r\nMcp-Name: start_run\r\n\r\n",
                                   message),
              HasSubstr("Mcp-Method header is missing"));
}

TEST(RoutingHeadersTest, ABodyWithoutAVersionLeavesItToTheServer) {
  const Message message = Server::parse(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  EXPECT_EQ(
      routingHeaderProblem(
          headers({{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/list"}}), message),
      "");
}

TEST(RoutingHeadersTest, DecodesTheBase64SentinelAndRefusesWhatIsNotAHeaderValue) {
  EXPECT_EQ(decodeHeaderValue("=?base64?SGVsbG8sIOS4lueVjA==?="),
            "Hello, \xe4\xb8\x96\xe7\x95\x8c");
  EXPECT_EQ(decodeHeaderValue(" us-west1 "), "us-west1");
  EXPECT_EQ(decodeHeaderValue("SGVsbG8="), "SGVsbG8=");                    // no sentinel: as sent
  EXPECT_EQ(decodeHeaderValue("=?base64?SGVsbG8="), "=?base64?SGVsbG8=");  // no suffix
  EXPECT_EQ(decodeHeaderValue("=?base64?SGVsbG8?="), std::nullopt);        // bad padding
  EXPECT_EQ(decodeHeaderValue("=?base64?SGVs!!!bG8=?="), std::nullopt);    // bad characters
  EXPECT_EQ(decodeHeaderValue("=?base64?SGV===?="), std::nullopt);
  EXPECT_EQ(decodeHeaderValue("a\x01z"), std::nullopt);
  EXPECT_EQ(decodeHeaderValue("caf\xc3\xa9"), std::nullopt);
}

}  // namespace
}  // namespace scs::mcp
