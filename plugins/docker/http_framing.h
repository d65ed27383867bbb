// An HTTP/1.1 response read off a raw engine socket: its head parsed, and its body decoded by
// its framing (chunked, or cut at its Content-Length) as a Connection another thread can abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "engine_socket.h"

namespace scs::docker {

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

// The body that follows `head` on `raw`: decoded chunks when the reply is chunked, at most its
// Content-Length bytes when it has one, else (and always for a 101) the raw stream. nullptr
// when the Content-Length is not a number.
ConnectionPtr framedBody(const ResponseHead& head, ConnectionPtr raw);

}  // namespace scs::docker
