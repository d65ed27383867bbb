#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine_socket.h"
#include "http_framing.h"
#include "mocks/mock_engine_socket.h"
#include "stream_demux.h"

namespace scs::docker {
namespace {

using testing::ScriptedConnection;

std::string frame(FrameType type, std::string_view payload) {
  std::string out(8, '\0');
  out[0] = static_cast<char>(type);
  const auto size = static_cast<std::uint32_t>(payload.size());
  out[4] = static_cast<char>((size >> 24) & 0xff);
  out[5] = static_cast<char>((size >> 16) & 0xff);
  out[6] = static_cast<char>((size >> 8) & 0xff);
  out[7] = static_cast<char>(size & 0xff);
  out.append(payload);
  return out;
}

struct Collected {
  std::string out;
  std::string err;
  std::string system;
  std::size_t stdin_bytes = 0;
  std::size_t largest_piece = 0;
};

StreamDemux::Handler collectInto(Collected* c) {
  return [c](FrameType type, std::string_view payload) {
    c->largest_piece = std::max(c->largest_piece, payload.size());
    switch (type) {
      case FrameType::kStdout:
        c->out.append(payload);
        break;
      case FrameType::kStderr:
        c->err.append(payload);
        break;
      case FrameType::kSystemErr:
        c->system.append(payload);
        break;
      case FrameType::kStdin:
        c->stdin_bytes += payload.size();
        break;
    }
  };
}

// Binary payloads on purpose: NUL, a header-like byte run and a cut UTF-8 character.
const std::string kStream =
    frame(FrameType::kStdout, "hello\n") +
    frame(FrameType::kStderr, std::string("e\0rr\x01\x00\x00", 7)) + frame(FrameType::kStdout, "") +
    frame(FrameType::kStdin, "ignored") + frame(FrameType::kStdout, "caf\xc3") +
    frame(FrameType::kStdout, "\xa9 world") + frame(FrameType::kSystemErr, "cannot attach: boom");

void expectWhole(const Collected& c) {
  EXPECT_EQ(c.out, "hello\ncaf\xc3\xa9 world");
  EXPECT_EQ(c.err, std::string("e\0rr\x01\x00\x00", 7));
  EXPECT_EQ(c.system, "cannot attach: boom");
  EXPECT_EQ(c.stdin_bytes, 7u);
}

TEST(StreamDemuxTest, WholeStreamInOneRead) {
  Collected c;
  StreamDemux demux(collectInto(&c));
  EXPECT_TRUE(demux.feed(kStream));
  expectWhole(c);
  EXPECT_FALSE(demux.midFrame());
}

TEST(StreamDemuxTest, SplitIntoTwoAtEveryOffset) {
  for (std::size_t cut = 0; cut <= kStream.size(); ++cut) {
    Collected c;
    StreamDemux demux(collectInto(&c));
    EXPECT_TRUE(demux.feed(std::string_view(kStream).substr(0, cut)));
    EXPECT_TRUE(demux.feed(std::string_view(kStream).substr(cut)));
    SCOPED_TRACE("cut at " + std::to_string(cut));
    expectWhole(c);
    EXPECT_FALSE(demux.midFrame());
  }
}

TEST(StreamDemuxTest, SplitIntoThreeAtEveryPairOfOffsets) {
  const std::string_view all = kStream;
  for (std::size_t a = 0; a <= all.size(); ++a) {
    for (std::size_t b = a; b <= all.size(); ++b) {
      Collected c;
      StreamDemux demux(collectInto(&c));
      demux.feed(all.substr(0, a));
      demux.feed(all.substr(a, b - a));
      demux.feed(all.substr(b));
      ASSERT_EQ(c.out, "hello\ncaf\xc3\xa9 world") << a << "," << b;
      ASSERT_EQ(c.err.size(), 7u) << a << "," << b;
      ASSERT_EQ(c.system, "cannot attach: boom") << a << "," << b;
    }
  }
}

TEST(StreamDemuxTest, ByteByByte) {
  Collected c;
  StreamDemux demux(collectInto(&c));
  for (const char byte : kStream) {
    demux.feed(std::string_view(&byte, 1));
  }
  expectWhole(c);
  EXPECT_EQ(c.largest_piece, 1u);
}

TEST(StreamDemuxTest, HugeFrameIsStreamedNotBuffered) {
  constexpr std::uint64_t kPayload = 3u << 30;  // a 3 GiB frame, declared in the header
  std::string header = frame(FrameType::kStdout, "");
  header[4] = static_cast<char>((kPayload >> 24) & 0xff);
  header[5] = static_cast<char>((kPayload >> 16) & 0xff);
  header[6] = static_cast<char>((kPayload >> 8) & 0xff);
  header[7] = static_cast<char>(kPayload & 0xff);
  std::uint64_t seen = 0;
  std::size_t largest = 0;
  StreamDemux demux([&](FrameType type, std::string_view payload) {
    EXPECT_EQ(type, FrameType::kStdout);
    seen += payload.size();
    largest = std::max(largest, payload.size());
  });
  demux.feed(header);
  const std::string piece(1u << 20, 'x');
  for (std::uint64_t fed = 0; fed < kPayload; fed += piece.size()) {
    demux.feed(piece);
  }
  EXPECT_EQ(seen, kPayload);
  EXPECT_EQ(largest, piece.size());
  EXPECT_FALSE(demux.midFrame());
  Collected c;
  StreamDemux next(collectInto(&c));
  next.feed(frame(FrameType::kStderr, "after"));
  EXPECT_EQ(c.err, "after");
}

TEST(StreamDemuxTest, TruncatedStreamIsMidFrame) {
  Collected c;
  StreamDemux demux(collectInto(&c));
  const std::string one = frame(FrameType::kStdout, "abcdef");
  demux.feed(std::string_view(one).substr(0, 10));
  EXPECT_TRUE(demux.midFrame());
  EXPECT_EQ(c.out, "ab");
  StreamDemux header_only(collectInto(&c));
  header_only.feed(std::string_view(one).substr(0, 3));
  EXPECT_TRUE(header_only.midFrame());
}

TEST(StreamDemuxTest, UnknownStreamTypeIsMalformedAndStopsParsing) {
  Collected c;
  StreamDemux demux(collectInto(&c));
  std::string bad = frame(FrameType::kStdout, "ok");
  std::string unknown = frame(FrameType::kStdout, "no");
  unknown[0] = 7;
  EXPECT_FALSE(demux.feed(bad + unknown + frame(FrameType::kStdout, "never")));
  EXPECT_TRUE(demux.malformed());
  EXPECT_EQ(c.out, "ok");
  EXPECT_FALSE(demux.feed(frame(FrameType::kStdout, "still never")));
  EXPECT_EQ(c.out, "ok");
}

// Everything `connection` yields, read `chunk` bytes at a time; `last` is the read that ended it.
std::string readAll(Connection& connection, std::ptrdiff_t* last, std::size_t chunk = 3) {
  std::string out;
  std::vector<char> buffer(chunk);
  while ((*last = connection.read(buffer.data(), buffer.size())) > 0) {
    out.append(buffer.data(), static_cast<std::size_t>(*last));
  }
  return out;
}

TEST(ChunkedConnectionTest, DecodesAtEverySplit) {
  const std::string body =
      "5;ext=1\r\nhello\r\n1A\r\n abcdefghijklmnopqrstuvwxy\r\n0\r\nTrailer: x\r\n\r\n";
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    ChunkedConnection chunked(ScriptedConnection::finished(
        {body.substr(0, cut), body.substr(cut), "next response bytes"}));
    std::ptrdiff_t last = 0;
    EXPECT_EQ(readAll(chunked, &last), "hello abcdefghijklmnopqrstuvwxy") << cut;
    EXPECT_EQ(last, 0) << cut;
  }
}

TEST(ChunkedConnectionTest, BrokenFramingReadsAsError) {
  std::ptrdiff_t last = 0;
  ChunkedConnection bad_size(ScriptedConnection::finished({"zz\r\nhello\r\n0\r\n\r\n"}));
  EXPECT_EQ(readAll(bad_size, &last), "");
  EXPECT_EQ(last, -1);
  ChunkedConnection cut_short(ScriptedConnection::finished({"10\r\nhello"}));
  EXPECT_EQ(readAll(cut_short, &last), "hello");
  EXPECT_EQ(last, -1);
}

TEST(LengthConnectionTest, StopsAtTheLengthAndFlagsAShortBody) {
  std::ptrdiff_t last = 0;
  LengthConnection exact(ScriptedConnection::finished({"{\"a\":1}trailing"}), 7);
  EXPECT_EQ(readAll(exact, &last), "{\"a\":1}");
  EXPECT_EQ(last, 0);
  LengthConnection short_body(ScriptedConnection::finished({"abc"}), 10);
  EXPECT_EQ(readAll(short_body, &last), "abc");
  EXPECT_EQ(last, -1);
}

TEST(ResponseHeadTest, ParsesUpgradeReply) {
  const auto head = parseResponseHead(
      "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
      "Connection: Upgrade\r\nUpgrade:  tcp \r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 101);
  EXPECT_EQ(head->headers.at("content-type"), "application/vnd.docker.raw-stream");
  EXPECT_EQ(head->headers.at("upgrade"), "tcp");
}

TEST(ResponseHeadTest, RejectsWhatIsNotHttp) {
  EXPECT_FALSE(parseResponseHead("SSH-2.0-OpenSSH\r\n\r\n"));
  EXPECT_FALSE(parseResponseHead("HTTP/1.1 abc OK\r\n\r\n"));
  EXPECT_FALSE(parseResponseHead("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"));
  EXPECT_FALSE(parseResponseHead("HTTP/1.1 200 OK\r\nA: b\r\n"));  // no blank line
}

// A scripted engine on a Unix socket in a temporary directory: accepts one connection and
// runs `script` on it.
class FakeEngine {
 public:
  explicit FakeEngine(std::function<void(int fd)> script) {
    char pattern[] = "/tmp/scs-engine-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    path_ = dir_ + "/engine.sock";
    listener_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path_.copy(address.sun_path, sizeof address.sun_path - 1);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listener_, 4), 0);
    thread_ = std::thread([this, script] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd >= 0) {
        script(fd);
        ::close(fd);
      }
    });
  }
  ~FakeEngine() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    std::filesystem::remove_all(dir_);
  }
  EngineSocketPtr transport() const {
    std::string error;
    return makeEngineSocket(*parseEngineAddress("unix://" + path_, &error));
  }

 private:
  std::string dir_;
  std::string path_;
  int listener_ = -1;
  std::thread thread_;
};

// Reads the request head (up to the blank line) and `body_bytes` more.
std::string readRequest(int fd, std::size_t body_bytes = 0) {
  std::string request;
  char byte = 0;
  while (request.find("\r\n\r\n") == std::string::npos && ::read(fd, &byte, 1) == 1) {
    request.push_back(byte);
  }
  while (body_bytes-- > 0 && ::read(fd, &byte, 1) == 1) {
    request.push_back(byte);
  }
  return request;
}

// Holds the connection open until the client closes it or gives up.
void holdOpen(int fd) {
  char byte = 0;
  ::read(fd, &byte, 1);
}

void send(int fd, std::string_view bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

HttpCall get(const char* path, int timeout_ms = 5000) {
  HttpCall call;
  call.method = "GET";
  call.path = path;
  call.timeout = std::chrono::milliseconds(timeout_ms);
  return call;
}

TEST(SocketTransportTest, OneCallOneConnectionWithHostAndBody) {
  std::string request;
  {
    FakeEngine engine([&](int fd) {
      request = readRequest(fd, 7);
      send(fd,
           "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
           "{\"Id\":\"ab\"}");
    });
    HttpCall call;
    call.method = "POST";
    call.path = "/v1.41/containers/create?name=scs-r";
    call.body = "{\"a\":1}";
    call.content_type = "application/json";
    const HttpReply reply = engine.transport()->call(call);
    EXPECT_EQ(reply.error, TransportError::kNone) << reply.error_message;
    EXPECT_EQ(reply.status, 201);
    EXPECT_EQ(reply.body, "{\"Id\":\"ab\"}");
    EXPECT_EQ(reply.content_type, "application/json");
  }
  EXPECT_EQ(request.rfind("POST /v1.41/containers/create?name=scs-r HTTP/1.1\r\n", 0), 0u);
  EXPECT_NE(request.find("Host: docker\r\n"), std::string::npos);
  EXPECT_NE(request.find("Content-Length: 7\r\n"), std::string::npos);
  EXPECT_EQ(request.substr(request.size() - 7), "{\"a\":1}");
}

TEST(SocketTransportTest, ASilentEngineTimesOutAtTheDeadline) {
  FakeEngine engine([](int fd) {
    readRequest(fd);
    holdOpen(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  const HttpReply reply = engine.transport()->call(get("/v1.41/info", 200));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(reply.error, TransportError::kTimeout);
  EXPECT_GE(elapsed, std::chrono::milliseconds(150));
  EXPECT_LT(elapsed, std::chrono::seconds(3));
}

TEST(SocketTransportTest, ABodyThatNeverEndsTimesOutToo) {
  FakeEngine engine([](int fd) {
    readRequest(fd);
    send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial\":");
    holdOpen(fd);
  });
  const HttpReply reply = engine.transport()->call(get("/v1.41/info", 300));
  EXPECT_EQ(reply.error, TransportError::kTimeout);
}

TEST(SocketTransportTest, HijackedAttachCarriesBothDirectionsAndHalfCloses) {
  std::string request;
  FakeEngine engine([&](int fd) {
    request = readRequest(fd);
    send(fd,
         "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
         "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\nearly");
    std::string stdin_bytes;
    char buffer[256];
    ssize_t got = 0;
    while ((got = ::read(fd, buffer, sizeof buffer)) > 0) {
      stdin_bytes.append(buffer, static_cast<std::size_t>(got));
    }
    send(fd, "|got:" + stdin_bytes);  // only after the client's half-close
  });
  HttpCall call;
  call.method = "POST";
  call.path = "/v1.41/containers/c/attach?stream=1&stdin=1&stdout=1&stderr=1";
  call.upgrade = true;
  OpenReply opened = engine.transport()->open(call);
  ASSERT_EQ(opened.reply.error, TransportError::kNone) << opened.reply.error_message;
  EXPECT_EQ(opened.reply.status, 101);
  ASSERT_TRUE(opened.connection);
  EXPECT_TRUE(opened.connection->write("tar bytes"));
  EXPECT_TRUE(opened.connection->shutdownWrite());
  std::ptrdiff_t last = 1;
  EXPECT_EQ(readAll(*opened.connection, &last, 4), "early|got:tar bytes");
  EXPECT_EQ(last, 0);
  EXPECT_NE(request.find("Upgrade: tcp\r\n"), std::string::npos);
  EXPECT_NE(request.find("Connection: Upgrade\r\n"), std::string::npos);
}

TEST(SocketTransportTest, StreamedChunkedBodyIsDecoded) {
  FakeEngine engine([](int fd) {
    readRequest(fd);
    send(fd,
         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    send(fd, "1d\r\n{\"Error\":null,\"StatusCode\":3}\r\n0\r\n\r\n");
  });
  OpenReply opened = engine.transport()->open(get("/v1.41/containers/c/wait?condition=next-exit"));
  ASSERT_TRUE(opened.connection) << opened.reply.error_message;
  std::ptrdiff_t last = 1;
  EXPECT_EQ(readAll(*opened.connection, &last, 7), "{\"Error\":null,\"StatusCode\":3}");
  EXPECT_EQ(last, 0);
}

TEST(SocketTransportTest, AnErrorStatusCarriesItsBodyAndNoConnection) {
  FakeEngine engine([](int fd) {
    readRequest(fd);
    send(fd,
         "HTTP/1.1 404 Not Found\r\nContent-Length: 37\r\n\r\n"
         "{\"message\":\"No such container: nope\"}");
    holdOpen(fd);  // the length, not the close, ends the body
  });
  OpenReply opened = engine.transport()->open(get("/v1.41/containers/nope/attach"));
  EXPECT_FALSE(opened.connection);
  EXPECT_EQ(opened.reply.status, 404);
  EXPECT_EQ(opened.reply.body, "{\"message\":\"No such container: nope\"}");
}

TEST(SocketTransportTest, AbortUnblocksAReaderInAnotherThread) {
  FakeEngine engine([](int fd) {
    readRequest(fd);
    send(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    holdOpen(fd);
  });
  OpenReply opened = engine.transport()->open(get("/v1.41/events"));
  ASSERT_TRUE(opened.connection);
  std::ptrdiff_t got = 1;
  std::thread reader([&] {
    char buffer[16];
    got = opened.connection->read(buffer, sizeof buffer);
  });
  opened.connection->abort();
  reader.join();
  EXPECT_EQ(got, -1);
}

TEST(SocketTransportTest, AMissingSocketIsAConnectFailure) {
  std::string error;
  const auto address = parseEngineAddress("unix:///nonexistent-dir/docker.sock", &error);
  const HttpReply reply = makeEngineSocket(*address)->call(get("/version"));
  EXPECT_EQ(reply.error, TransportError::kConnect);
  EXPECT_FALSE(reply.error_message.empty());
  EXPECT_EQ(makeEngineSocket(*address)->open(get("/events")).reply.error, TransportError::kConnect);
}

}  // namespace
}  // namespace scs::docker
