// The real EngineSocket: a fresh Unix or TCP socket per call, a whole reply read with Poco's
// HTTPClientSession, or an opened stream handed over after its head; and engine addresses parsed.
#include "engine_socket.h"

#include <Poco/Exception.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Timespan.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <istream>
#include <ostream>
#include <sstream>

#include "http_framing.h"

namespace scs::docker {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Go's HTTP server insists on a Host header; the engine ignores its value.
constexpr const char* kHostHeader = "docker";
constexpr std::size_t kMaxReplyBytes = 64u << 20;
constexpr std::size_t kMaxErrorBodyBytes = 64u << 10;
constexpr std::size_t kMaxHeadBytes = 64u << 10;

std::chrono::milliseconds remaining(SteadyClock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
}

// Poco treats a zero timeout as "none", so a passed deadline must become an error here.
Poco::Timespan remainingSpan(SteadyClock::time_point deadline) {
  const auto left = remaining(deadline);
  if (left.count() <= 0) {
    throw Poco::TimeoutException("the call's deadline passed");
  }
  return Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(left.count()) * 1000);
}

HttpReply failure(TransportError error, std::string message) {
  HttpReply reply;
  reply.error = error;
  reply.error_message = std::move(message);
  return reply;
}

Poco::Net::HTTPRequest requestOf(const HttpCall& call) {
  Poco::Net::HTTPRequest request(call.method, call.path, Poco::Net::HTTPMessage::HTTP_1_1);
  request.setHost(kHostHeader);
  request.set("User-Agent", "scs-docker");
  if (call.upgrade) {
    request.set("Connection", "Upgrade");
    request.set("Upgrade", "tcp");
  } else {
    request.setKeepAlive(false);
  }
  if (!call.content_type.empty()) {
    request.setContentType(call.content_type);
  }
  if (!call.body.empty() || call.method != Poco::Net::HTTPRequest::HTTP_GET) {
    request.setContentLength64(static_cast<Poco::Int64>(call.body.size()));
  }
  return request;
}

// Waits for `events` on `fd` until the deadline. False when it passed first.
bool pollUntil(int fd, short events, SteadyClock::time_point deadline) {
  while (true) {
    const auto left = remaining(deadline);
    if (left.count() <= 0) {
      return false;
    }
    pollfd entry{fd, events, 0};
    const int rc = ::poll(&entry, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (rc > 0) {
      return true;
    }
    if (rc < 0 && errno != EINTR) {
      return true;  // let the following send or recv report the error
    }
  }
}

class SocketConnection : public Connection {
 public:
  explicit SocketConnection(Poco::Net::StreamSocket socket)
      : socket_(std::move(socket)), fd_(socket_.impl()->sockfd()) {}

  bool write(std::string_view bytes) override {
    while (!bytes.empty()) {
      if (aborted_.load()) {
        return false;
      }
      const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) {
          continue;
        }
        return false;
      }
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
  }

  bool shutdownWrite() override { return !aborted_.load() && ::shutdown(fd_, SHUT_WR) == 0; }

  std::ptrdiff_t read(char* buffer, std::size_t size) override {
    while (true) {
      if (aborted_.load()) {
        return -1;
      }
      const ssize_t got = ::recv(fd_, buffer, size, 0);
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got < 0) {
        return -1;
      }
      // abort() shuts the socket down, which a blocked recv sees as end of stream.
      return got == 0 && aborted_.load() ? -1 : got;
    }
  }

  void abort() override {
    aborted_.store(true);
    ::shutdown(fd_, SHUT_RDWR);
  }

 private:
  Poco::Net::StreamSocket socket_;
  int fd_;
  std::atomic<bool> aborted_{false};
};

class SocketTransport : public EngineSocket {
 public:
  explicit SocketTransport(EngineAddress address) : address_(std::move(address)) {}

  HttpReply call(const HttpCall& call) override {
    const auto deadline = SteadyClock::now() + call.timeout;
    Poco::Net::StreamSocket socket;
    HttpReply reply;
    if (!connect(deadline, &socket, &reply)) {
      return reply;
    }
    try {
      socket.setSendTimeout(remainingSpan(deadline));
      socket.setReceiveTimeout(remainingSpan(deadline));
      Poco::Net::HTTPClientSession session(socket);
      Poco::Net::HTTPRequest request = requestOf(call);
      std::ostream& out = session.sendRequest(request);
      out.exceptions(std::ios::badbit);
      out.write(call.body.data(), static_cast<std::streamsize>(call.body.size()));
      Poco::Net::HTTPResponse response;
      std::istream& in = session.receiveResponse(response);
      in.exceptions(std::ios::badbit);
      reply.status = static_cast<int>(response.getStatus());
      reply.content_type = response.getContentType();
      char buffer[16384];
      while (in) {
        socket.setReceiveTimeout(remainingSpan(deadline));
        in.read(buffer, sizeof buffer);
        reply.body.append(buffer, static_cast<std::size_t>(in.gcount()));
        if (reply.body.size() > kMaxReplyBytes) {
          return failure(TransportError::kIo, "the engine's reply exceeds 64 MiB");
        }
      }
      return reply;
    } catch (const Poco::TimeoutException&) {
      return failure(TransportError::kTimeout,
                     "no reply within " + std::to_string(call.timeout.count()) + " ms");
    } catch (const Poco::Exception& e) {
      return failure(TransportError::kIo, e.displayText());
    } catch (const std::exception& e) {
      return failure(TransportError::kIo, e.what());
    }
  }

  OpenReply open(const HttpCall& call) override {
    const auto deadline = SteadyClock::now() + call.timeout;
    OpenReply result;
    Poco::Net::StreamSocket socket;
    if (!connect(deadline, &socket, &result.reply)) {
      return result;
    }
    auto connection = std::make_unique<SocketConnection>(socket);
    const int fd = socket.impl()->sockfd();

    std::ostringstream request_bytes;
    requestOf(call).write(request_bytes);
    request_bytes.write(call.body.data(), static_cast<std::streamsize>(call.body.size()));
    const std::string request = request_bytes.str();
    std::string_view pending = request;
    while (!pending.empty()) {
      if (!pollUntil(fd, POLLOUT, deadline)) {
        result.reply = failure(TransportError::kTimeout, "could not send within the deadline");
        return result;
      }
      const ssize_t sent = ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;
      }
      if (sent < 0) {
        result.reply = failure(TransportError::kIo, std::string("send: ") + std::strerror(errno));
        return result;
      }
      pending.remove_prefix(static_cast<std::size_t>(sent));
    }

    // Byte by byte, so nothing after the headers is consumed: it belongs to the stream.
    std::string head;
    while (head.size() < 4 || head.compare(head.size() - 4, 4, "\r\n\r\n") != 0) {
      if (head.size() > kMaxHeadBytes) {
        result.reply = failure(TransportError::kIo, "the engine's reply headers are too long");
        return result;
      }
      if (!pollUntil(fd, POLLIN, deadline)) {
        result.reply = failure(TransportError::kTimeout,
                               "no reply within " + std::to_string(call.timeout.count()) + " ms");
        return result;
      }
      char byte = 0;
      const ssize_t got = ::recv(fd, &byte, 1, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;
      }
      if (got <= 0) {
        result.reply =
            failure(TransportError::kIo, got == 0 ? std::string("the engine closed the connection")
                                                  : std::string("recv: ") + std::strerror(errno));
        return result;
      }
      head.push_back(byte);
    }
    const auto parsed = parseResponseHead(head);
    if (!parsed) {
      result.reply = failure(TransportError::kIo, "the engine's reply is not HTTP");
      return result;
    }
    result.reply.status = parsed->status;
    if (const auto it = parsed->headers.find("content-type"); it != parsed->headers.end()) {
      result.reply.content_type = it->second;
    }

    ConnectionPtr body = framedBody(*parsed, std::move(connection));
    if (!body) {
      result.reply = failure(TransportError::kIo, "the engine sent a bad Content-Length");
      return result;
    }
    if (parsed->status == 101 || parsed->status == 200) {
      result.connection = std::move(body);
      return result;
    }

    // An error reply: its body carries the engine's message.
    try {
      socket.setReceiveTimeout(remainingSpan(deadline));
    } catch (const Poco::Exception&) {
      return result;  // the deadline passed: report the status without its message
    }
    char buffer[4096];
    while (result.reply.body.size() < kMaxErrorBodyBytes) {
      const std::ptrdiff_t got = body->read(buffer, sizeof buffer);
      if (got <= 0) {
        break;
      }
      result.reply.body.append(buffer, static_cast<std::size_t>(got));
    }
    return result;
  }

 private:
  bool connect(SteadyClock::time_point deadline, Poco::Net::StreamSocket* socket,
               HttpReply* reply) const {
    try {
      if (address_.kind == EngineAddress::Kind::kUnix) {
        const Poco::Net::SocketAddress target(Poco::Net::SocketAddress::UNIX_LOCAL, address_.path);
        *socket = Poco::Net::StreamSocket(Poco::Net::SocketAddress::UNIX_LOCAL);
        socket->connect(target, remainingSpan(deadline));
      } else {
        const Poco::Net::SocketAddress target(address_.host, address_.port);
        *socket = Poco::Net::StreamSocket(target.family());
        socket->connect(target, remainingSpan(deadline));
        socket->setNoDelay(true);
      }
      // connect(timeout) leaves the socket blocking; the per-call deadline is applied later.
      return true;
    } catch (const Poco::TimeoutException&) {
      *reply = failure(TransportError::kTimeout, "connecting timed out");
    } catch (const Poco::Exception& e) {
      *reply = failure(TransportError::kConnect, e.displayText());
    } catch (const std::exception& e) {
      *reply = failure(TransportError::kConnect, e.what());
    }
    return false;
  }

  EngineAddress address_;
};

}  // namespace

std::optional<EngineAddress> parseEngineAddress(std::string_view text, std::string* error) {
  constexpr std::string_view kUnix = "unix://";
  constexpr std::string_view kTcp = "tcp://";
  EngineAddress address;
  if (text.substr(0, kUnix.size()) == kUnix) {
    address.kind = EngineAddress::Kind::kUnix;
    address.path = std::string(text.substr(kUnix.size()));
    if (address.path.empty() || address.path.front() != '/') {
      *error = "the engine address '" + std::string(text) + "' needs an absolute socket path";
      return std::nullopt;
    }
    return address;
  }
  if (text.substr(0, kTcp.size()) == kTcp) {
    address.kind = EngineAddress::Kind::kTcp;
    std::string_view rest = text.substr(kTcp.size());
    while (!rest.empty() && rest.back() == '/') {
      rest.remove_suffix(1);
    }
    std::size_t colon = std::string_view::npos;
    if (!rest.empty() && rest.front() == '[') {
      const std::size_t close = rest.find(']');
      if (close != std::string_view::npos && close + 1 < rest.size() && rest[close + 1] == ':') {
        address.host = std::string(rest.substr(1, close - 1));
        colon = close + 1;
      }
    } else {
      colon = rest.rfind(':');
      if (colon != std::string_view::npos) {
        address.host = std::string(rest.substr(0, colon));
      }
    }
    unsigned port = 0;
    if (colon != std::string_view::npos && !address.host.empty()) {
      const std::string_view digits = rest.substr(colon + 1);
      const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), port);
      if (parsed.ec == std::errc() && parsed.ptr == digits.data() + digits.size() && port > 0 &&
          port <= 65535 && !digits.empty()) {
        address.port = static_cast<std::uint16_t>(port);
        return address;
      }
    }
    *error = "the engine address '" + std::string(text) + "' needs the form tcp://host:port";
    return std::nullopt;
  }
  *error = "unsupported engine address '" + std::string(text) +
           "': use unix:///path/to/docker.sock or tcp://host:port";
  return std::nullopt;
}

EngineSocketPtr makeEngineSocket(const EngineAddress& address) {
  return std::make_unique<SocketTransport>(address);
}

}  // namespace scs::docker
