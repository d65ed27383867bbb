#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
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
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;

  // Sends `call` on a fresh connection and reads the whole reply within call.timeout.
  virtual HttpReply call(const HttpCall& call) = 0;

  // Sends `call` on a fresh connection and reads the status line and headers within
  // call.timeout. On 101 or 200 the connection is handed over: reads then return the raw
  // hijacked stream (101, or 200 without framing) or the decoded response body (chunked or
  // with a length), with no deadline. Any other status: reply.body holds the error body.
  virtual OpenReply open(const HttpCall& call) = 0;
};
using HttpTransportPtr = std::unique_ptr<HttpTransport>;

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
HttpTransportPtr makeSocketTransport(const EngineAddress& address);

struct ResponseHead {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; values trimmed
};

// Parses a status line and header lines (Poco's HTTPResponse::read). nullopt when it is not an
// HTTP response head.
std::optional<ResponseHead> parseResponseHead(std::string_view head);

// Decodes a chunked body read from `inner`: read() yields payload bytes and 0 after the last
// chunk. A malformed chunk header reads as -1. Ours because a streamed body (wait, events)
// must be readable while another thread aborts it; Poco's chunked stream reads through an
// HTTPClientSession's buffer, which cannot be interrupted.
class ChunkedConnection : public Connection {
 public:
  explicit ChunkedConnection(ConnectionPtr inner);
  bool write(std::string_view bytes) override;
  bool shutdownWrite() override;
  std::ptrdiff_t read(char* buffer, std::size_t size) override;
  void abort() override;

 private:
  bool readLine(std::string* line);
  bool readExact(std::size_t count);

  ConnectionPtr inner_;
  std::uint64_t left_in_chunk_ = 0;
  bool finished_ = false;
  bool broken_ = false;
};

// Yields at most `length` bytes of `inner`, then end of stream.
class LengthConnection : public Connection {
 public:
  LengthConnection(ConnectionPtr inner, std::uint64_t length);
  bool write(std::string_view bytes) override;
  bool shutdownWrite() override;
  std::ptrdiff_t read(char* buffer, std::size_t size) override;
  void abort() override;

 private:
  ConnectionPtr inner_;
  std::uint64_t left_;
};

}  // namespace scs::docker
