#include "mcp/message_id.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace scs::mcp {
namespace {

// The id as JSON text ("5", "\"a\""), or "none".
std::string idOf(const std::string& message, std::size_t chunk) {
  MessageScanner scanner;
  for (std::size_t at = 0; at < message.size(); at += chunk) {
    scanner.feed(std::string_view(message).substr(at, chunk));
  }
  const auto id = scanner.id();
  if (!id) {
    return "none";
  }
  return id->isString() ? "\"" + id->convert<std::string>() + "\"" : id->convert<std::string>();
}

TEST(MessageScannerTest, FindsTheTopLevelIdWhereverItStandsInAnyChunking) {
  const std::string pad(3000, 'x');
  struct Case {
    std::string message;
    std::string id;
  };
  const std::vector<Case> cases{
      {R"({"jsonrpc":"2.0","id":7,"method":"ping"})", "7"},
      // where the official SDK puts it: last, after params
      {R"({"method":"tools/call","params":{"code":")" + pad + R"("},"jsonrpc":"2.0","id":42})",
       "42"},
      {R"({"id" : "req-1" , "method":"x"})", "\"req-1\""},
      {"{\n \"id\":\t-3\n}", "-3"},
      // names and values that only look like the id
      {R"({"params":{"id":5},"method":"x"})", "none"},
      {R"({"method":"id","params":["id",{"id":1}]})", "none"},
      {R"({"params":{"s":"\"id\":9"},"id":"q\"uote"})", "\"q\"uote\""},
      {R"({"x":"\\","id":11})", "11"},
      {R"({"idx":1,"xid":2})", "none"},
      // ids JSON-RPC does not allow, or that are too long to keep
      {R"({"id":null})", "none"},
      {R"({"id":1.5})", "none"},
      {R"({"id":{"a":1}})", "none"},
      {R"({"id":[1]})", "none"},
      {R"({"id":")" + pad + R"("})", "none"},
      // the last of two, as a parser keeps it
      {R"({"id":1,"method":"x","id":2})", "2"},
      // not an object, or cut before the id ends
      {R"([{"id":1}])", "none"},
      {R"({"method":"x","params":{"code":"unterminated)", "none"},
  };
  for (const Case& c : cases) {
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, c.message.size()}) {
      EXPECT_EQ(idOf(c.message, chunk), c.id) << c.message.substr(0, 80) << " chunk " << chunk;
    }
  }
}

// The shape a tree would have: its values counted from above (containers and separators, and
// the message) and its depth, whatever the strings hold.
TEST(MessageScannerTest, CountsValuesAndDepthOutsideStringsOnly) {
  struct Case {
    std::string message;
    std::size_t values;
    int deepest;
  };
  const std::vector<Case> cases{
      {R"({"id":1})", 2, 1},
      {R"({"id":1,"method":"x","params":{"a":[1,2,3]}})", 8, 3},
      {R"({"s":"{[,,,]}","t":"\"{,"})", 3, 1},
      {R"([{},{},{}])", 7, 2},
      {std::string(100, '[') + std::string(100, ']'), 101, 100},
  };
  for (const Case& c : cases) {
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{3}, c.message.size()}) {
      MessageScanner scanner;
      for (std::size_t at = 0; at < c.message.size(); at += chunk) {
        scanner.feed(std::string_view(c.message).substr(at, chunk));
      }
      EXPECT_EQ(scanner.values(), c.values) << c.message.substr(0, 60) << " chunk " << chunk;
      EXPECT_EQ(scanner.deepest(), c.deepest) << c.message.substr(0, 60);
    }
  }
}

}  // namespace
}  // namespace scs::mcp
