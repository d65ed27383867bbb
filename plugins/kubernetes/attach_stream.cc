// AttachStream: the v5.channel.k8s.io WebSocket opened on a Pod's attach, stdin written in
// capped messages and closed by channel, and output pumped to the sink under one I/O lock.

#include "attach_stream.h"

#include <Poco/Buffer.h>
#include <Poco/Exception.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>

#include <algorithm>
#include <chrono>

#include "json_access.h"

namespace scs::kubernetes {
namespace {

constexpr std::size_t kMaxStdinMessage = 64u << 10;
constexpr std::size_t kMaxStatus = 4096;
constexpr int kMaxMessage = 1 << 20;  // the API server sends at most 32 KiB of output at once
constexpr auto kPollInterval = std::chrono::milliseconds(20);

}  // namespace

std::string attachFailure(const AttachEnd& end) {
  const json::ObjectPtr status = end.status.empty() ? nullptr : json::parseObject(end.status);
  if (!status || json::string(status, "status") != std::string("Failure")) {
    return {};
  }
  const std::string message = json::string(status, "message").value_or("");
  return message.empty() ? "the server ended the attach with a Failure Status" : message;
}

std::string channelMessage(Channel channel, std::string_view payload) {
  std::string message(1, static_cast<char>(channel));
  message.append(payload);
  return message;
}

AttachStream::AttachStream(std::unique_ptr<Poco::Net::HTTPSClientSession> session,
                           std::unique_ptr<Poco::Net::WebSocket> socket, const Heartbeat& heartbeat,
                           const Clock& clock)
    : session_(std::move(session)),
      socket_(std::move(socket)),
      heartbeat_(heartbeat),
      clock_(clock),
      opened_(clock.now()) {
  socket_->setMaxPayloadSize(kMaxMessage);
}

std::unique_ptr<AttachStream> AttachStream::open(const KubeClient& client, const std::string& path,
                                                 const Heartbeat& heartbeat, std::string* error) {
  std::unique_ptr<Poco::Net::HTTPSClientSession> session = client.session();
  if (!session) {
    *error = "kubernetes: " + client.error();
    return nullptr;
  }
  Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, path,
                                 Poco::Net::HTTPMessage::HTTP_1_1);
  request.set("Sec-WebSocket-Protocol", kChannelProtocol);
  client.authorize(request);
  Poco::Net::HTTPResponse response;
  try {
    auto socket = std::make_unique<Poco::Net::WebSocket>(*session, request, response);
    const std::string chosen = response.get("Sec-WebSocket-Protocol", "");
    if (chosen != kChannelProtocol) {
      *error = "kubernetes: the API server attached with protocol '" + chosen + "', not " +
               kChannelProtocol + " (Kubernetes 1.30 or later), which alone can end stdin";
      socket->shutdown();
      return nullptr;
    }
    return std::unique_ptr<AttachStream>(
        new AttachStream(std::move(session), std::move(socket), heartbeat, client.clock()));
  } catch (const Poco::Net::WebSocketException& failure) {
    *error = "kubernetes: the API server refused to attach (" +
             std::to_string(static_cast<int>(response.getStatus())) + " " + response.getReason() +
             "): " + failure.displayText();
  } catch (const Poco::Exception& failure) {
    *error = "kubernetes: attaching failed: " + failure.displayText();
  }
  return nullptr;
}

bool AttachStream::send(const std::string& message) {
  if (aborted_ || broken_) {
    return false;
  }
  std::lock_guard lock(io_);
  try {
    const int flags = Poco::Net::WebSocket::FRAME_BINARY;
    if (socket_->sendFrame(message.data(), static_cast<int>(message.size()), flags) ==
        static_cast<int>(message.size())) {
      return true;
    }
  } catch (const Poco::Exception&) {
  }
  broken_ = true;  // a message may be half sent: nothing after it could be read right
  return false;
}

bool AttachStream::write(std::string_view bytes) {
  for (std::size_t at = 0; at < bytes.size(); at += kMaxStdinMessage) {
    if (!send(channelMessage(Channel::kStdin, bytes.substr(at, kMaxStdinMessage)))) {
      return false;
    }
  }
  return true;
}

bool AttachStream::closeStdin() {
  return send(channelMessage(Channel::kClose, std::string(1, static_cast<char>(Channel::kStdin))));
}

AttachEnd AttachStream::pump(backend::OutputSink& sink) {
  using Poco::Net::WebSocket;
  AttachEnd end;
  Poco::Buffer<char> buffer(0);
  const Poco::Timespan poll_interval(
      std::chrono::duration_cast<std::chrono::microseconds>(kPollInterval).count());
  Clock::TimePoint heard = opened_;  // the last frame of any kind, a pong included
  Clock::TimePoint pinged = heard;
  while (!aborted_ && !broken_) {
    int got = 0;
    int flags = 0;
    try {
      const Clock::TimePoint now = clock_.now();
      if (now - heard > heartbeat_.read_deadline) {
        end.silent = true;  // half-open, or a server that stopped: the socket would never say
        end.broke = true;
        return end;
      }
      if (now - pinged >= heartbeat_.ping_interval) {
        pinged = now;
        std::lock_guard lock(io_);
        socket_->sendFrame("", 0,
                           static_cast<int>(WebSocket::FRAME_FLAG_FIN) |
                               static_cast<int>(WebSocket::FRAME_OP_PING));
      }
      // Wait outside the lock, so a writer is never kept out while no data comes; data that
      // TLS has already decrypted shows in available(), not in poll().
      bool ready = false;
      {
        std::lock_guard lock(io_);
        ready = socket_->available() > 0;
      }
      if (!ready && !socket_->poll(poll_interval, Poco::Net::Socket::SELECT_READ |
                                                      Poco::Net::Socket::SELECT_ERROR)) {
        continue;
      }
      std::lock_guard lock(io_);
      buffer.resize(0);
      got = socket_->receiveFrame(buffer, flags);
      if (got == 0 && flags == 0) {
        end.broke = true;  // the connection ended without a close
        return end;
      }
      heard = clock_.now();
      const int opcode = flags & WebSocket::FRAME_OP_BITMASK;
      if (opcode == WebSocket::FRAME_OP_PING) {
        socket_->sendFrame(buffer.begin(), got,
                           static_cast<int>(WebSocket::FRAME_FLAG_FIN) |
                               static_cast<int>(WebSocket::FRAME_OP_PONG));
        continue;
      }
      if (opcode == WebSocket::FRAME_OP_PONG) {
        continue;
      }
      if (opcode == WebSocket::FRAME_OP_CLOSE) {
        // RFC 6455 5.5.1: the close is answered, with the status code it carried, so no side
        // waits out a timeout. A server that closed the connection at once makes the answer
        // fail (an RST, were a ping still unread): the output ended cleanly all the same.
        broken_ = true;  // nothing more may be sent after a close
        try {
          socket_->sendFrame(buffer.begin(), std::min(got, 2),
                             static_cast<int>(WebSocket::FRAME_FLAG_FIN) |
                                 static_cast<int>(WebSocket::FRAME_OP_CLOSE));
        } catch (const Poco::Exception&) {
        }
        return end;
      }
      if (opcode != WebSocket::FRAME_OP_BINARY || (flags & WebSocket::FRAME_FLAG_FIN) == 0) {
        // The API server sends whole binary messages; a text or fragmented one is not its.
        end.malformed = true;
        end.broke = true;
        return end;
      }
    } catch (const Poco::Exception&) {
      // A timeout too: a frame may have been read in part, and the rest would be taken for
      // frame headers that the program's own output could forge. A ping that failed to go
      // leaves the stream as out of step as a write that did.
      broken_ = true;
      end.broke = true;
      return end;
    }
    if (got == 0) {
      end.malformed = true;
      continue;
    }
    const auto channel = static_cast<Channel>(static_cast<std::uint8_t>(buffer[0]));
    const std::string_view payload(buffer.begin() + 1, static_cast<std::size_t>(got) - 1);
    switch (channel) {
      case Channel::kStdout:
      case Channel::kStderr:
        end.output_bytes += payload.size();
        sink.write(
            channel == Channel::kStdout ? backend::Stream::kStdout : backend::Stream::kStderr,
            payload);
        break;
      case Channel::kError:
        end.status.append(payload.substr(0, kMaxStatus - std::min(kMaxStatus, end.status.size())));
        break;
      default:
        end.malformed = true;
        break;
    }
  }
  end.broke = true;
  return end;
}

void AttachStream::abort() {
  // Only the flag: pump() sees it within one poll interval, and shutting the socket down from
  // here could meet a TLS call of another thread.
  aborted_ = true;
}

}  // namespace scs::kubernetes
