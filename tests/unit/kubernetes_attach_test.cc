#include <Poco/Buffer.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/WebSocket.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "attach_stream.h"
#include "mocks/recording_sink.h"
#include "support/eventually.h"
#include "support/tls_server.h"

namespace scs::kubernetes {
namespace {

using Poco::Net::WebSocket;
using scs::testing::Certificates;
using ::testing::HasSubstr;

constexpr const char* kSuccess = R"({"metadata":{},"status":"Success"})";

void sendMessage(WebSocket& ws, Channel channel, const std::string& payload) {
  const std::string message = channelMessage(channel, payload);
  ws.sendFrame(message.data(), static_cast<int>(message.size()), WebSocket::FRAME_BINARY);
}

// Receives one message; its channel and payload. Channel kClose with an empty payload when the
// connection closed.
std::pair<Channel, std::string> receiveMessage(WebSocket& ws) {
  Poco::Buffer<char> buffer(0);
  int flags = 0;
  const int got = ws.receiveFrame(buffer, flags);
  if (got <= 0 || (flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) {
    return {Channel::kClose, ""};
  }
  return {static_cast<Channel>(static_cast<std::uint8_t>(buffer[0])),
          std::string(buffer.begin() + 1, static_cast<std::size_t>(got) - 1)};
}

// Reads stdin messages until the client closes stdin (v5: channel 255, payload 0), calling
// `each` with each payload.
template <typename Each>
void readStdin(WebSocket& ws, Each each) {
  for (;;) {
    const auto [channel, payload] = receiveMessage(ws);
    if (channel == Channel::kClose && payload == std::string(1, '\0')) {
      return;
    }
    if (channel == Channel::kClose) {
      return;  // the connection ended
    }
    if (channel == Channel::kStdin) {
      each(payload);
    }
  }
}

// Plays the API server's side of attach for a container, by path:
//   /count      reads stdin to its close, then writes "got N bytes", a warning and Success
//   /echo       writes back each stdin message as it comes, then "done" as /count does
//   /drop       writes "partial" and drops the connection without a close
//   /ping       pings, and writes whether the pong came
//   /v4         chooses v4.channel.k8s.io
//   /forbidden  answers 403
class AttachHandler : public Poco::Net::HTTPRequestHandler {
 public:
  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    const std::string path = request.getURI();
    if (path == "/forbidden") {
      response.setStatusAndReason(Poco::Net::HTTPResponse::HTTP_FORBIDDEN);
      response.send() << R"({"kind":"Status","message":"pods/attach is forbidden"})";
      return;
    }
    const bool v5 =
        request.get("Sec-WebSocket-Protocol", "").find(kChannelProtocol) != std::string::npos;
    response.set("Sec-WebSocket-Protocol",
                 path == "/v4" || !v5 ? "v4.channel.k8s.io" : kChannelProtocol);
    WebSocket ws(request, response);
    sendMessage(ws, Channel::kStdout, "");  // the API server's first, empty, message
    if (path == "/count" || path == "/echo") {
      std::size_t bytes = 0;
      readStdin(ws, [&](const std::string& payload) {
        bytes += payload.size();
        if (path == "/echo") {
          sendMessage(ws, Channel::kStdout, payload);
        }
      });
      sendMessage(ws, Channel::kStdout, path == "/echo" ? "done" : "got " + std::to_string(bytes));
      sendMessage(ws, Channel::kStdout, " bytes");
      sendMessage(ws, Channel::kStderr, "warn");
      sendMessage(ws, Channel::kError, kSuccess);
      ws.shutdown();
    } else if (path == "/drop") {
      sendMessage(ws, Channel::kStdout, "partial");
      ws.close();
    } else if (path == "/ping") {
      ws.sendFrame(
          "x", 1,
          static_cast<int>(WebSocket::FRAME_OP_PING) | static_cast<int>(WebSocket::FRAME_FLAG_FIN));
      Poco::Buffer<char> buffer(0);
      int flags = 0;
      ws.receiveFrame(buffer, flags);
      const bool pong = (flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_PONG;
      sendMessage(ws, Channel::kStdout, pong ? "pong seen" : "no pong");
      ws.shutdown();
    }
  }
};

class AttachFactory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new AttachHandler;
  }
};

class AttachTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Certificates::get().ok()); }

  KubeClient client() const {
    ClusterAccess access;
    access.server = server_.url();
    access.ca_pem = Certificates::get().pem("ca.crt");
    access.token = "t0ken";
    return KubeClient(access, std::chrono::milliseconds(3000));
  }

  std::unique_ptr<AttachStream> open(const std::string& path) {
    std::string error;
    auto stream = AttachStream::open(client_, path, Heartbeat{}, &error);
    EXPECT_TRUE(stream) << error;
    return stream;
  }

  scs::testing::TlsServer server_{new AttachFactory};
  KubeClient client_ = client();
  mocks::RecordingSink sink_;
};

TEST_F(AttachTest, StdinInSeveralMessagesThenItsEndThenTheOutput) {
  auto stream = open("/count");
  ASSERT_TRUE(stream);
  ASSERT_TRUE(stream->write(std::string(200 << 10, 'x')));  // four messages of 64 KiB at most
  ASSERT_TRUE(stream->closeStdin());
  const AttachEnd end = stream->pump(sink_);
  EXPECT_FALSE(end.broke);
  EXPECT_FALSE(end.malformed);
  EXPECT_EQ(sink_.out(), "got 204800 bytes");
  EXPECT_EQ(sink_.err(), "warn");
  EXPECT_EQ(end.status, kSuccess);
}

// A session's sandbox: deliveries come while the output is read, from another thread.
TEST_F(AttachTest, WritesWhileThePumpReadsAsASessionDoes) {
  auto stream = open("/echo");
  ASSERT_TRUE(stream);
  auto pumped = std::async(std::launch::async, [&] { return stream->pump(sink_); });
  ASSERT_TRUE(stream->write("first;"));
  EXPECT_TRUE(scs::testing::eventually([&] { return sink_.out() == "first;"; }));
  ASSERT_TRUE(stream->write("second;"));
  EXPECT_TRUE(scs::testing::eventually([&] { return sink_.out() == "first;second;"; }));
  ASSERT_TRUE(stream->closeStdin());
  const AttachEnd end = pumped.get();
  EXPECT_FALSE(end.broke);
  EXPECT_EQ(sink_.out(), "first;second;done bytes");
}

TEST_F(AttachTest, AConnectionDroppedWithoutACloseIsBroken) {
  auto stream = open("/drop");
  ASSERT_TRUE(stream);
  const AttachEnd end = stream->pump(sink_);
  EXPECT_TRUE(end.broke);
  EXPECT_FALSE(end.malformed) << "a connection that ends is not a malformed message";
  EXPECT_EQ(sink_.out(), "partial");
}

// The error channel's Status: a Failure is the attach's failure, with its message; Success,
// nothing, or what is not a Status at all, none.
TEST(AttachFailureTest, AFailureStatusAndNothingElse) {
  AttachEnd end;
  EXPECT_EQ(attachFailure(end), "");
  end.status = R"({"metadata":{},"status":"Success"})";
  EXPECT_EQ(attachFailure(end), "");
  end.status = "not json";
  EXPECT_EQ(attachFailure(end), "");
  end.status = R"({"status":"Failure","message":"container sandbox is not running"})";
  EXPECT_EQ(attachFailure(end), "container sandbox is not running");
  end.status = R"({"status":"Failure"})";
  EXPECT_EQ(attachFailure(end), "the server ended the attach with a Failure Status");
}

TEST_F(AttachTest, APingIsAnswered) {
  auto stream = open("/ping");
  ASSERT_TRUE(stream);
  stream->pump(sink_);
  EXPECT_EQ(sink_.out(), "pong seen");
}

TEST_F(AttachTest, AbortEndsThePump) {
  auto stream = open("/echo");
  ASSERT_TRUE(stream);
  auto pumped = std::async(std::launch::async, [&] { return stream->pump(sink_); });
  stream->abort();
  ASSERT_EQ(pumped.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_TRUE(pumped.get().broke);
  EXPECT_FALSE(stream->write("late"));
}

TEST_F(AttachTest, OnlyTheV5ProtocolIsAccepted) {
  std::string error;
  EXPECT_FALSE(AttachStream::open(client_, "/v4", Heartbeat{}, &error));
  EXPECT_THAT(error, HasSubstr("v4.channel.k8s.io"));
  EXPECT_THAT(error, HasSubstr("end stdin"));
}

TEST_F(AttachTest, ARefusedUpgradeSaysWhy) {
  std::string error;
  EXPECT_FALSE(AttachStream::open(client_, "/forbidden", Heartbeat{}, &error));
  EXPECT_THAT(error, HasSubstr("403"));
}

}  // namespace
}  // namespace scs::kubernetes
