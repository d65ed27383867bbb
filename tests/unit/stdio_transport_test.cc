#include "mcp/stdio_transport.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "mocks/core_stack.h"

namespace scs::mcp {
namespace {

using namespace std::chrono_literals;
using Poco::JSON::Object;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kPatience = 10s;

Object::Ptr parse(const std::string& json) {
  Poco::JSON::Parser parser;
  return parser.parse(json).extract<Object::Ptr>();
}

std::string ping(const std::string& id) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":"ping"})";
}

std::string pong(const std::string& id) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":{}})";
}

// An output stream whose complete lines a test can wait for while writers still write.
class LineSink : public std::streambuf {
 public:
  // Waits until at least `count` lines are complete; returns them (fewer on timeout).
  std::vector<std::string> waitForLines(std::size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, kPatience, [&] { return lines_.size() >= count; });
    return lines_;
  }

  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      const char ch = traits_type::to_char_type(c);
      xsputn(&ch, 1);
    }
    return traits_type::not_eof(c);
  }

  std::streamsize xsputn(const char* data, std::streamsize size) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::streamsize i = 0; i < size; ++i) {
      if (data[i] == '\n') {
        lines_.push_back(partial_);
        partial_.clear();
        changed_.notify_all();
      } else {
        partial_ += data[i];
      }
    }
    return size;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string partial_;
  std::vector<std::string> lines_;
};

class StdioTransportTest : public ::testing::Test {
 protected:
  StdioTransportTest()
      : server_(core_.runs, core_.limits, policy::FileSettings{}, ServerInfo{"scs", "Scs", "1"}) {}

  // Serves `input` to the end with one request in flight at a time (so answers to
  // requests keep their order; refusals of oversized lines are written at once by the
  // reader) and returns every line written.
  std::vector<std::string> serveInOrder(const std::string& input, std::size_t max_bytes = 4096) {
    std::istringstream in(input);
    std::ostringstream out;
    {
      StdioTransport transport(server_, max_bytes, 1);
      transport.serve(in, out);
      transport.finish();
    }
    std::vector<std::string> lines;
    std::istringstream written(out.str());
    for (std::string line; std::getline(written, line);) {
      lines.push_back(line);
    }
    EXPECT_TRUE(out.str().empty() || out.str().back() == '\n');
    return lines;
  }

  mocks::CoreStack core_;
  Server server_;
};

TEST_F(StdioTransportTest, AnswersOneLinePerRequestAndSkipsBlankLinesAndNotifications) {
  const std::string input = ping("1") + "\n\n   \n" + ping("\"two\"") + "\r\n" +
                            R"({"jsonrpc":"2.0","method":"notifications/initialized"})" + "\n" +
                            ping("3");  // no newline before end of file
  EXPECT_THAT(serveInOrder(input), ElementsAre(pong("1"), pong("\"two\""), pong("3")));
}

TEST_F(StdioTransportTest, EndOfFileWithNoInputReturnsWithNoOutput) {
  EXPECT_THAT(serveInOrder(""), ::testing::IsEmpty());
}

TEST_F(StdioTransportTest, AMalformedLineIsAnsweredAndServingGoesOn) {
  const std::vector<std::string> lines = serveInOrder("{oops\n" + ping("2") + "\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(parse(lines[0])->getObject("error")->getValue<int>("code"), -32700);
  EXPECT_EQ(lines[1], pong("2"));
}

TEST_F(StdioTransportTest, AnOversizedLineIsRefusedAndTheNextLineIsServed) {
  constexpr std::size_t kCap = 1000;
  // Longer than the reader's chunk as well as the cap, to cross several reads.
  const std::string huge(200 * 1024, 'x');
  const std::vector<std::string> lines =
      serveInOrder(huge + "\n" + ping("2") + "\n" + huge + "\r\n" + ping("3") + "\n", kCap);
  const std::string refusal = Server::oversizedMessageError(kCap);
  EXPECT_THAT(lines, ::testing::UnorderedElementsAre(refusal, pong("2"), refusal, pong("3")));
  EXPECT_EQ(parse(refusal)->getObject("error")->getValue<int>("code"), -32600);
  EXPECT_THAT(refusal, HasSubstr("1000"));
}

TEST_F(StdioTransportTest, AnOversizedRequestIsAnsweredToItsIdWhereverTheIdStands) {
  constexpr std::size_t kCap = 1000;
  const std::string pad(200 * 1024, 'x');
  // The official SDK writes the id last, after the params.
  const std::string id_last =
      R"({"method":"tools/call","params":{"code":")" + pad + R"("},"jsonrpc":"2.0","id":17})";
  const std::string id_first =
      R"({"jsonrpc":"2.0","id":"first","params":{"code":")" + pad + R"("},"method":"tools/call"})";
  const std::string notification =
      R"({"jsonrpc":"2.0","method":"x","params":{"p":")" + pad + R"("}})";
  const std::vector<std::string> lines = serveInOrder(
      id_last + "\n" + id_first + "\r\n" + notification + "\n" + ping("2") + "\n", kCap);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], Server::oversizedMessageError(kCap, Poco::Dynamic::Var(17)));
  EXPECT_EQ(parse(lines[0])->getValue<int>("id"), 17);
  EXPECT_EQ(parse(lines[1])->getValue<std::string>("id"), "first");
  EXPECT_TRUE(parse(lines[2])->isNull("id"));
  EXPECT_EQ(lines[3], pong("2"));
}

TEST_F(StdioTransportTest, AMessageOfExactlyTheCapIsServed) {
  const std::string message = ping("7");
  const std::size_t cap = message.size() + 10;
  const std::string padded = message + std::string(10, ' ');
  EXPECT_THAT(serveInOrder(padded + "\r\n" + padded + " \n", cap),
              ::testing::UnorderedElementsAre(
                  pong("7"), Server::oversizedMessageError(cap, Poco::Dynamic::Var(7))));
}

TEST_F(StdioTransportTest, ALongPollDoesNotBlockAPing) {
  const std::optional<std::string> started = server_.handle(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"start_run",)"
      R"("arguments":{"code":"#fake:hang"}}})");
  ASSERT_TRUE(started);
  const std::string run_id = parse(*started)
                                 ->getObject("result")
                                 ->getObject("structuredContent")
                                 ->getValue<std::string>("run_id");

  const std::string long_poll =
      R"({"jsonrpc":"2.0","id":"poll","method":"tools/call","params":{"name":"get_result",)"
      R"("arguments":{"run_id":")" +
      run_id + R"(","wait_seconds":60}}})";
  std::istringstream in(long_poll + "\n" + ping("2") + "\n");
  LineSink sink;
  std::ostream out(&sink);
  StdioTransport transport(server_, 1 << 20);
  transport.serve(in, out);  // returns at end of file; the long poll is still waiting

  EXPECT_THAT(sink.waitForLines(1), ElementsAre(pong("2")));

  // Ending the run ends the long poll, which then answers with the final report.
  ASSERT_TRUE(
      server_.handle(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stop_run",)"
                     R"("arguments":{"run_id":")" +
                     run_id + R"("}}})"));
  transport.finish();
  const std::vector<std::string> lines = sink.lines();
  ASSERT_EQ(lines.size(), 2u);
  const Object::Ptr report = parse(lines[1]);
  EXPECT_EQ(report->getValue<std::string>("id"), "poll");
  EXPECT_EQ(
      report->getObject("result")->getObject("structuredContent")->getValue<std::string>("status"),
      "stopped");
}

TEST_F(StdioTransportTest, ManyConcurrentRequestsAllGetTheirAnswer) {
  std::string input;
  for (int i = 0; i < 200; ++i) {
    input += ping(std::to_string(i)) + "\n";
  }
  std::istringstream in(input);
  LineSink sink;
  std::ostream out(&sink);
  {
    StdioTransport transport(server_, 4096, 4);
    transport.serve(in, out);
    transport.finish();
  }
  std::vector<std::string> lines = sink.lines();
  std::vector<std::string> expected;
  for (int i = 0; i < 200; ++i) {
    expected.push_back(pong(std::to_string(i)));
  }
  std::sort(lines.begin(), lines.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(lines, expected);
}

}  // namespace
}  // namespace scs::mcp
