// How the plugin reaches the engine: one HTTP call, or one opened stream (a hijacked attach, a
// streamed body), over a fresh Unix or TCP socket each time; and the engine address parsed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace scs::docker {

// One Engine API request. `path` is the full request target, already versioned and escaped.
struct HttpCall {
  std::string method;
  std::string path;
  std::string body;
  std::string content_type;                  // empty: the request has no body
  std::chrono::milliseconds timeout{30000};  // deadline for connect, send and the whole reply
  bool upgrade = false;  // open() only: ask to hijack the connection (`Upgrade: tcp`)
};

enum class TransportError {
  kNone,
  kConnect,  // the engine could not be reached at all
  kTimeout,  // the deadline passed
  kIo,       // the connection broke, or the reply was not HTTP we understand
};

struct HttpReply {
  int status = 0;  // HTTP status; 0 when no reply arrived (see error)
  std::string body;
  std::string content_type;
  TransportError error = TransportError::kNone;
  std::string error_message;  // why the transport failed; empty when error is kNone
};

// A byte stream to the engine that outlives its request: a hijacked attach, or a
// streamed response body (wait, events). Thread-safety: one thread may read while another
// writes; abort() may be called from any thread at any time.
class Connection {
 public:
  virtual ~Connection() = default;

  // Writes all of `bytes`. False when the peer is gone or the send deadline passed.
  virtual bool write(std::string_view bytes) = 0;

  // Half-closes: the peer reads end-of-file on its side; reading here goes on.
  virtual bool shutdownWrite() = 0;

  // Blocks until bytes arrive. Returns how many were stored in `buffer` (at most `size`),
  // 0 at end of stream, -1 when the connection broke or was aborted.
  virtual std::ptrdiff_t read(char* buffer, std::size_t size) = 0;

  // Makes a blocked or later read() or write() return at once. Idempotent.
  virtual void abort() = 0;
};
using ConnectionPtr = std::unique_ptr<Connection>;

struct OpenReply {
  HttpReply reply;           // status and headers; body holds an error body (no connection)
  ConnectionPtr connection;  // set for 101 and 200: the stream after the headers
};

// How the plugin reaches the engine. Thread-safe; every call uses its own socket.
class EngineSocket {
 public:
  virtual ~EngineSocket() = default;

  // Sends `call` on a fresh connection and reads the whole reply within call.timeout.
  virtual HttpReply call(const HttpCall& call) = 0;

  // Sends `call` on a fresh connection and reads the status line and headers within
  // call.timeout. On 101 or 200 the connection is handed over: reads then return the raw
  // hijacked stream (101, or 200 without framing) or the decoded response body (chunked or
  // with a length), with no deadline. Any other status: reply.body holds the error body.
  virtual OpenReply open(const HttpCall& call) = 0;
};
using EngineSocketPtr = std::unique_ptr<EngineSocket>;

struct EngineAddress {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string path;  // kUnix
  std::string host;  // kTcp
  std::uint16_t port = 0;
};

// Parses "unix:///path/to.sock" or "tcp://host:port". nullopt (with *error set) otherwise.
std::optional<EngineAddress> parseEngineAddress(std::string_view text, std::string* error);

// The real transport: one socket and one Poco HTTPClientSession per call.
EngineSocketPtr makeEngineSocket(const EngineAddress& address);

}  // namespace scs::docker
