#pragma once

// A Pod's stdin, stdout and stderr over the API server's attach (issue 16), on the
// v5.channel.k8s.io WebSocket protocol: every binary message starts with its channel's byte
// (0 stdin, 1 stdout, 2 stderr, 3 the server's closing Status, 4 resize), and v5 adds 255, the
// word to close one channel, which lets the client end stdin and still read the output. An
// older protocol cannot end stdin without ending the connection, so only v5 is accepted.

#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/Net/WebSocket.h>
#include <scs/backend/backend.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "kube_client.h"

namespace scs::kubernetes {

inline constexpr const char* kChannelProtocol = "v5.channel.k8s.io";

enum class Channel : std::uint8_t {
  kStdin = 0,
  kStdout = 1,
  kStderr = 2,
  kError = 3,
  kResize = 4,
  kClose = 255,
};

// One message of the protocol: the channel's byte, then the payload.
std::string channelMessage(Channel channel, std::string_view payload);

struct AttachEnd {
  bool broke = false;      // the connection failed, or was aborted, before the server closed it
  bool silent = false;     // broke because nothing came, not even a pong, within read_deadline
  std::string status;      // what the server wrote on the error channel (a Status, as JSON)
  bool malformed = false;  // a message without a channel byte, or on a channel never sent
  std::uint64_t output_bytes = 0;  // of stdout and stderr, as they reached the sink
};

// The failure the server reported on the error channel: the Status's message when it is a
// Failure, empty for Success or none. Since Kubernetes 1.30 the API server upgrades the
// connection before it reaches the kubelet, so what fails there (the container is not running,
// the kubelet cannot be reached) comes as this Status, not as a refused upgrade.
std::string attachFailure(const AttachEnd& end);

// How the client keeps a quiet connection alive and finds a dead one, as client-go's WebSocket
// executor does (remotecommand: a ping every 5 s, a read that fails after 61 s without any
// frame): an intermediary's idle timeout would otherwise cut an idle session or prepared
// sandbox, and a half-open connection would be read forever.
struct Heartbeat {
  std::chrono::milliseconds ping_interval{5000};
  std::chrono::milliseconds read_deadline{61000};
};

class AttachStream {
 public:
  // Opens the WebSocket to `path` (".../pods/{name}/attach?..."); null with `*error` set when
  // the server refuses the upgrade or does not choose v5.channel.k8s.io. The heartbeat keeps the
  // client's clock (KubeClient::clock()), which must outlive the stream.
  static std::unique_ptr<AttachStream> open(const KubeClient& client, const std::string& path,
                                            const Heartbeat& heartbeat, std::string* error);

  // Writes `bytes` to the container's stdin in messages of at most 64 KiB; false once the
  // connection has failed. A send blocks while the peer reads no stdin (up to the client's
  // timeout), and holds the lock meanwhile, so the output waits too: a session's program that
  // stops reading stdin while it floods stdout stalls both until then, and the stream is then
  // broken. One I/O thread for both directions would remove that (to do with the backend).
  bool write(std::string_view bytes);
  // Ends the container's stdin (the v5 close of channel 0); the output goes on.
  bool closeStdin();

  // Reads until the server closes the connection (answering its close), abort(), or silence for
  // the heartbeat's read_deadline, each stdout and stderr payload to `sink`, with a ping every
  // ping_interval. Another thread may write() meanwhile: OpenSSL allows one connection's reads and
  // writes only one at a time, so both take one lock, and the reader holds it only once data is
  // waiting.
  AttachEnd pump(backend::OutputSink& sink);

  // From any thread: pump() returns (broke) within its poll interval, and write() fails.
  void abort();

 private:
  AttachStream(std::unique_ptr<Poco::Net::HTTPSClientSession> session,
               std::unique_ptr<Poco::Net::WebSocket> socket, const Heartbeat& heartbeat,
               const Clock& clock);
  bool send(const std::string& message);

  std::unique_ptr<Poco::Net::HTTPSClientSession> session_;
  std::unique_ptr<Poco::Net::WebSocket> socket_;
  const Heartbeat heartbeat_;
  const Clock& clock_;
  const Clock::TimePoint opened_;  // where the heartbeat starts, however late pump() is called
  std::mutex io_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> broken_{false};  // a send failed: the stream may be out of step
};

}  // namespace scs::kubernetes
