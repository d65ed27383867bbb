// The server's side of egress (issue 44) without a sandbox: PID 1's frames fed to a channel as
// the backend's output thread would, what the channel delivers to the sandbox's stdin read back,
// and a real TCP server on loopback as the host a pinned name resolves to.

#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "egress/frames.h"
#include "egress/host_policy.h"
#include "egress/relay.h"

namespace scs::egress {
namespace {

using namespace std::chrono_literals;

// One HTTP answer to each connection: the request's first line echoed in the body.
class Upstream {
 public:
  Upstream() : socket_(Poco::Net::SocketAddress("127.0.0.1", 0)) {
    thread_ = std::thread([this] {
      while (true) {
        Poco::Net::StreamSocket peer;
        try {
          peer = socket_.acceptConnection();
        } catch (...) {
          return;
        }
        if (stopping_) {
          return;
        }
        ++accepted_;
        try {  // the relay may reset a connection it cut (a wrong TLS name)
          std::string request;
          char buffer[4096];
          while (request.find("\r\n\r\n") == std::string::npos) {
            const int n = peer.receiveBytes(buffer, sizeof buffer);
            if (n <= 0) {
              break;
            }
            request.append(buffer, static_cast<std::size_t>(n));
          }
          const std::string line = request.substr(0, request.find("\r\n"));
          const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: " +
                                     std::to_string(line.size()) +
                                     "\r\nConnection: close\r\n\r\n" + line;
          peer.sendBytes(answer.data(), static_cast<int>(answer.size()));
          peer.shutdownSend();
          ++served_;
        } catch (...) {
        }
      }
    });
  }
  ~Upstream() {
    stopping_ = true;
    try {
      Poco::Net::StreamSocket wake(socket_.address());
    } catch (...) {
    }
    thread_.join();
  }
  std::uint16_t port() const { return socket_.address().port(); }
  int accepted() const { return accepted_; }

 private:
  Poco::Net::ServerSocket socket_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> served_{0};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// What the channel delivered to the sandbox's stdin, parsed back into frames.
class Stdin {
 public:
  bool deliver(const std::string& bytes) {
    std::lock_guard lock(mutex_);
    buffer_ += bytes;
    while (true) {
      const auto end = buffer_.find('\n');
      if (end == std::string::npos) {
        break;
      }
      char type = 0;
      unsigned stream = 0;
      unsigned long value = 0;
      const std::string header = buffer_.substr(0, end);
      EXPECT_EQ(std::sscanf(header.c_str(), "SCS-NET %c %u %lu", &type, &stream, &value), 3)
          << header;
      const std::size_t size = type == 'D' ? value : 0;
      if (buffer_.size() < end + 1 + size) {
        break;
      }
      frames_.push_back({static_cast<FrameType>(type), stream, static_cast<std::uint32_t>(value),
                         buffer_.substr(end + 1, size)});
      buffer_.erase(0, end + 1 + size);
    }
    changed_.notify_all();
    return true;
  }

  // The data sent on `stream` until it ends (FIN or RESET) or 10 s pass; `how` says which.
  std::string dataOf(std::uint32_t stream, FrameType* how = nullptr) {
    std::unique_lock lock(mutex_);
    std::string data;
    changed_.wait_for(lock, 10s, [&] {
      for (const Frame& frame : frames_) {
        if (frame.stream == stream &&
            (frame.type == FrameType::kFin || frame.type == FrameType::kReset)) {
          return true;
        }
      }
      return false;
    });
    for (const Frame& frame : frames_) {
      if (frame.stream != stream) {
        continue;
      }
      if (frame.type == FrameType::kData) {
        data += frame.payload;
      } else if (how != nullptr && (frame.type == FrameType::kFin || frame.type == FrameType::kReset)) {
        *how = frame.type;
      }
    }
    return data;
  }

  // Waits until `stream` has been sent data containing `text`.
  bool awaitData(std::uint32_t stream, const std::string& text) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] {
      std::string data;
      for (const Frame& frame : frames_) {
        if (frame.stream == stream && frame.type == FrameType::kData) {
          data += frame.payload;
        }
      }
      return data.find(text) != std::string::npos;
    });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string buffer_;
  std::vector<Frame> frames_;
};

class EgressRelayTest : public ::testing::Test {
 protected:
  EgressRelayTest() {
    EXPECT_FALSE(std::holds_alternative<Error>(policy_.pin("allowed.test=127.0.0.1")));
    EXPECT_FALSE(std::holds_alternative<Error>(
        policy_.allow("local=allowed.test:" + std::to_string(upstream_.port()))));
    service_.emplace(policy_, EgressLimits{});
    channel_ = service_->open("local", "test");
    channel_->attach([this](const std::string& bytes) { return stdin_.deliver(bytes); });
  }
  ~EgressRelayTest() override {
    channel_->close();
    channel_.reset();
    service_.reset();
  }

  // PID 1's frames for `stream` as they would reach the sink, between the program's bytes.
  std::string out(const Frame& frame) { return encodeStdoutFrame(channel_->nonce(), frame); }
  std::string feed(const std::string& bytes) {
    std::string output;
    channel_->onStdout(bytes, output);
    return output;
  }

  Upstream upstream_;
  EgressPolicy policy_{nullptr};
  std::optional<EgressService> service_;
  std::shared_ptr<EgressChannel> channel_;
  Stdin stdin_;
};

TEST_F(EgressRelayTest, ConnectToAnAllowedHostCarriesTheBytesBothWays) {
  const std::string port = std::to_string(upstream_.port());
  const std::string output =
      feed("before " + out({FrameType::kOpen, 1, 0, {}}) + "between " +
           out({FrameType::kData, 1, 0,
                "CONNECT allowed.test:" + port + " HTTP/1.1\r\nHost: allowed.test:" + port +
                    "\r\n\r\n"}) +
           "after");
  EXPECT_EQ(output, "before between after");  // the program's bytes, and none of the frames'
  ASSERT_TRUE(stdin_.awaitData(1, "HTTP/1.1 200 Connection established\r\n\r\n"));
  feed(out({FrameType::kData, 1, 0, "GET /x HTTP/1.1\r\nHost: allowed.test\r\n\r\n"}));
  feed(out({FrameType::kFin, 1, 0, {}}));
  FrameType how = FrameType::kData;
  const std::string data = stdin_.dataOf(1, &how);
  EXPECT_NE(data.find("HTTP/1.1 200 OK"), std::string::npos) << data;
  EXPECT_NE(data.find("GET /x HTTP/1.1"), std::string::npos) << data;
  EXPECT_EQ(how, FrameType::kFin);
  const NetworkReport report = channel_->takeReport();
  ASSERT_EQ(report.reached.size(), 1u);
  EXPECT_EQ(report.reached[0].target, "allowed.test:" + port);
  EXPECT_EQ(report.reached[0].streams, 1u);
  EXPECT_GT(report.reached[0].bytes_up, 0u);
  EXPECT_GT(report.reached[0].bytes_down, 0u);
  EXPECT_TRUE(report.refused.empty());
}

TEST_F(EgressRelayTest, AbsoluteFormHttpIsSentUpstreamInOriginForm) {
  const std::string port = std::to_string(upstream_.port());
  feed(out({FrameType::kOpen, 1, 0, {}}));
  feed(out({FrameType::kData, 1, 0,
            "GET http://allowed.test:" + port + "/data.csv?x=1 HTTP/1.1\r\nHost: allowed.test:" +
                port + "\r\nProxy-Connection: keep-alive\r\n\r\n"}));
  const std::string data = stdin_.dataOf(1);
  EXPECT_NE(data.find("HTTP/1.1 200 OK"), std::string::npos) << data;
  EXPECT_NE(data.find("GET /data.csv?x=1 HTTP/1.1"), std::string::npos) << data;
}

TEST_F(EgressRelayTest, AHostOffTheListIsRefusedWithTheReasonAndNeverDialed) {
  feed(out({FrameType::kOpen, 1, 0, {}}));
  feed(out({FrameType::kData, 1, 0, "CONNECT example.com:443 HTTP/1.1\r\n\r\n"}));
  FrameType how = FrameType::kData;
  const std::string data = stdin_.dataOf(1, &how);
  EXPECT_EQ(data.rfind("HTTP/1.1 403", 0), 0u) << data;
  EXPECT_NE(data.find("example.com:443"), std::string::npos) << data;
  EXPECT_EQ(how, FrameType::kFin);
  const NetworkReport report = channel_->takeReport();
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_EQ(report.refused[0].target, "example.com:443");
  EXPECT_TRUE(report.reached.empty());
}

TEST_F(EgressRelayTest, AnAllowedHostOnAnotherPortIsRefused) {
  feed(out({FrameType::kOpen, 1, 0, {}}));
  feed(out({FrameType::kData, 1, 0, "CONNECT allowed.test:1 HTTP/1.1\r\n\r\n"}));
  EXPECT_EQ(stdin_.dataOf(1).rfind("HTTP/1.1 403", 0), 0u);
}

TEST_F(EgressRelayTest, Socks5ReachesTheAllowedHost) {
  const std::uint16_t port = upstream_.port();
  feed(out({FrameType::kOpen, 3, 0, {}}));
  feed(out({FrameType::kData, 3, 0, std::string("\x05\x01\x00", 3)}));
  ASSERT_TRUE(stdin_.awaitData(3, std::string("\x05\x00", 2)));
  std::string request("\x05\x01\x00\x03", 4);
  request.push_back(static_cast<char>(std::string("allowed.test").size()));
  request += "allowed.test";
  request.push_back(static_cast<char>(port >> 8));
  request.push_back(static_cast<char>(port & 0xff));
  feed(out({FrameType::kData, 3, 0, request}));
  ASSERT_TRUE(stdin_.awaitData(3, std::string("\x05\x00\x00\x01", 4)));
  feed(out({FrameType::kData, 3, 0, "GET /s HTTP/1.1\r\n\r\n"}));
  EXPECT_NE(stdin_.dataOf(3).find("GET /s"), std::string::npos);
}

// A TLS 1.2-style ClientHello naming `name` (server_name only), in one record.
std::string clientHello(const std::string& name) {
  const auto u16 = [](std::size_t n) {
    return std::string{static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
  };
  const std::string list = std::string(1, '\0') + u16(name.size()) + name;
  const std::string sni = u16(0) + u16(list.size() + 2) + u16(list.size()) + list;
  const std::string body = std::string("\x03\x03", 2) + std::string(32, 'r') +
                           std::string(1, '\0') + u16(2) + std::string("\x13\x01", 2) +
                           std::string("\x01\x00", 2) + u16(sni.size()) + sni;
  const std::string handshake = std::string(1, '\x01') + std::string(1, '\0') +
                                u16(body.size()) + body;
  return std::string("\x16\x03\x01", 3) + u16(handshake.size()) + handshake;
}

TEST_F(EgressRelayTest, ATlsServerNameOtherThanTheHostIsCut) {
  const std::string port = std::to_string(upstream_.port());
  feed(out({FrameType::kOpen, 1, 0, {}}));
  feed(out({FrameType::kData, 1, 0, "CONNECT allowed.test:" + port + " HTTP/1.1\r\n\r\n"}));
  ASSERT_TRUE(stdin_.awaitData(1, "200 Connection established"));
  feed(out({FrameType::kData, 1, 0, clientHello("elsewhere.example")}));
  FrameType how = FrameType::kData;
  stdin_.dataOf(1, &how);
  EXPECT_EQ(how, FrameType::kReset);
  const NetworkReport report = channel_->takeReport();
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_NE(report.refused[0].reason.find("elsewhere.example"), std::string::npos);
  EXPECT_TRUE(report.reached.empty());  // nothing was carried to the host
}

TEST_F(EgressRelayTest, ATlsServerNameEqualToTheHostPasses) {
  const std::string port = std::to_string(upstream_.port());
  feed(out({FrameType::kOpen, 1, 0, {}}));
  feed(out({FrameType::kData, 1, 0, "CONNECT allowed.test:" + port + " HTTP/1.1\r\n\r\n"}));
  ASSERT_TRUE(stdin_.awaitData(1, "200 Connection established"));
  feed(out({FrameType::kData, 1, 0, clientHello("allowed.test") + "\r\n\r\n"}));
  // The upstream is no TLS server: it answers the bytes it got, which shows they were carried.
  EXPECT_TRUE(stdin_.awaitData(1, "HTTP/1.1 200 OK"));
  EXPECT_EQ(channel_->takeReport().reached.size(), 1u);
}

TEST_F(EgressRelayTest, AnIpLiteralMatchesOnlyAnAddressEntry) {
  feed(out({FrameType::kOpen, 1, 0, {}}));
  feed(out({FrameType::kData, 1, 0, "CONNECT 127.0.0.1:" + std::to_string(upstream_.port()) +
                                        " HTTP/1.1\r\n\r\n"}));
  EXPECT_EQ(stdin_.dataOf(1).rfind("HTTP/1.1 403", 0), 0u);
  EXPECT_EQ(upstream_.accepted(), 0);  // refused by the policy: never dialled
}

TEST_F(EgressRelayTest, StreamsPastTheCapAreResetAndCounted) {
  EgressLimits limits;
  limits.streams_per_sandbox = 2;
  EgressService service(policy_, limits);
  auto channel = service.open("local", "capped");
  Stdin in;
  channel->attach([&](const std::string& bytes) { return in.deliver(bytes); });
  std::string output;
  for (std::uint32_t id = 1; id <= 5; id += 2) {
    channel->onStdout(encodeStdoutFrame(channel->nonce(), {FrameType::kOpen, id, 0, {}}), output);
  }
  FrameType how = FrameType::kData;
  in.dataOf(5, &how);
  EXPECT_EQ(how, FrameType::kReset);
  const NetworkReport report = channel->takeReport();
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_NE(report.refused[0].reason.find("more than 2 connections"), std::string::npos);
  channel->close();
}

TEST_F(EgressRelayTest, TheReportKeepsAtMostItsCapOfRefusalsAndCountsTheRest) {
  for (std::uint32_t id = 1; id <= 2 * 80; id += 2) {
    feed(out({FrameType::kOpen, id, 0, {}}));
    feed(out({FrameType::kData, id, 0,
              "CONNECT host" + std::to_string(id) + ".test:443 HTTP/1.1\r\n\r\n"}));
    stdin_.dataOf(id);  // refused, one at a time (16 at once is the cap)
  }
  const NetworkReport report = channel_->takeReport();
  EXPECT_EQ(report.refused.size(), NetworkReport::kMaxEntries);
  EXPECT_EQ(report.more_refused, 80 - NetworkReport::kMaxEntries);
}

TEST_F(EgressRelayTest, DataPastTheCreditResetsTheStream) {
  feed(out({FrameType::kOpen, 1, 0, {}}));
  const std::string chunk(3000, 'x');
  // 256 KiB of credit, then more without any credit given back: the thread takes what it can,
  // so send far more than the window in one go of frames.
  std::string burst;
  for (int i = 0; i < 200; ++i) {
    burst += out({FrameType::kData, 1, 0, chunk});
  }
  feed(burst);
  FrameType how = FrameType::kData;
  stdin_.dataOf(1, &how);
  // Either the handshake refused the garbage (FIN after a 400) or the credit check reset it:
  // never more than the window is held.
  EXPECT_TRUE(how == FrameType::kFin || how == FrameType::kReset);
}

TEST(EgressFramesTest, ProgramOutputAndFramesNeverMixAcrossAnySplit) {
  const std::string nonce = "0123456789abcdef0123456789abcdef";
  const std::string marker = stdoutMarker(nonce);
  const std::string stream = std::string("a\0SCS-NET-", 10) + "x" +
                             encodeStdoutFrame(nonce, {FrameType::kData, 7, 0, "payload"}) +
                             marker.substr(0, 12) + "tail" +
                             encodeStdoutFrame(nonce, {FrameType::kFin, 7, 0, {}});
  const std::string expected_output = std::string("a\0SCS-NET-", 10) + "x" + marker.substr(0, 12) +
                                      "tail";
  for (std::size_t split = 0; split <= stream.size(); ++split) {
    StdoutFrames frames(nonce);
    std::string output;
    std::vector<Frame> got;
    frames.feed(std::string_view(stream).substr(0, split), output, got);
    frames.feed(std::string_view(stream).substr(split), output, got);
    frames.finish(output);
    EXPECT_EQ(output, expected_output) << split;
    ASSERT_EQ(got.size(), 2u) << split;
    EXPECT_EQ(got[0].payload, "payload");
    EXPECT_EQ(got[1].type, FrameType::kFin);
    EXPECT_TRUE(frames.violation().empty());
  }
}

TEST(EgressFramesTest, AnInvalidHeaderStopsFramesAndKeepsTheRestAsOutput) {
  const std::string nonce = "0123456789abcdef0123456789abcdef";
  StdoutFrames frames(nonce);
  std::string output;
  std::vector<Frame> got;
  frames.feed(stdoutMarker(nonce) + "Z" + std::string(8, '\0') + "rest", output, got);
  EXPECT_FALSE(frames.violation().empty());
  EXPECT_EQ(output, "rest");
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace scs::egress
