#pragma once

// The HTTP/1.1 requests a program sends a brokered host (issue 48), read from the plaintext the
// server holds once it has ended the program's TLS, and rewritten on their way upstream: the
// operator's headers set, this host's placeholders replaced by their secrets, and a request that
// carries another host's placeholder refused. The secret is only ever written toward the host.
//
// Pure (no I/O) and incremental: feed() takes the program's bytes as they arrive and gives the
// same output and the same refusal for every split of the same stream. Held to a strict subset
// of RFC 9112, because the credential is added to what this parser calls a request head: were
// the host to frame a request differently (two lengths, a transfer coding read one way here and
// another there, a body the host ignores), the head that carries the secret could become the
// body of a request the program chose, stored or echoed back to it. Whatever could be read two
// ways is refused, never repaired. Bounded: a head is at most kMaxHeadBytes, a chunk-size or
// trailer line kMaxChunkLineBytes; bodies pass through as they come. Fuzzed by
// fuzz/fuzz_http_requests.cc.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scs::egress {

// Set on every request; the program's own headers of this name (ASCII case-insensitive, and "_"
// taken for "-") are removed first. `name` is a token and not one this parser frames requests by
// (Content-Length, Transfer-Encoding, Upgrade); `value` holds no control character but HTAB.
struct HeaderRule {
  std::string name;
  std::string value;
};

// Every occurrence of `placeholder` (not empty) in a header value is replaced by `value` (no
// control character but HTAB).
struct Substitution {
  std::string placeholder;
  std::string value;
};

struct RequestRules {
  std::vector<HeaderRule> set;
  std::vector<Substitution> substitute;
  // Placeholders of other hosts (not empty): a stream in which one occurs anywhere (request
  // line, header, body, chunk framing, trailer, or across the end of one request and the start
  // of the next) is refused there.
  std::vector<std::string> foreign;
};

class RequestRewriter {
 public:
  static constexpr std::size_t kMaxHeadBytes = 64 << 10;      // a request head (line + headers)
  static constexpr std::size_t kMaxChunkLineBytes = 4 << 10;  // a chunk-size or trailer line

  // Rules that break what HeaderRule and Substitution ask make every feed() refuse (500,
  // "misconfigured"): the credential store checks them first, so this only fails closed.
  explicit RequestRewriter(RequestRules rules);
  // Wipes its copies of the secrets.
  ~RequestRewriter();
  RequestRewriter(const RequestRewriter&) = delete;
  RequestRewriter& operator=(const RequestRewriter&) = delete;

  // Why the stream ends, as the program is told (refusalResponse) and the log says. `reason`
  // names what was wrong and never holds a secret. status/token: 400 bad-request, 403
  // placeholder, 431 head-too-large, 500 misconfigured, 501 unsupported, 505 http-version.
  struct Refused {
    int status = 400;
    std::string token;
    std::string reason;
  };

  // Bytes from the program, in order, split anywhere. Appends to `out` what to send upstream:
  // each head once it is whole and accepted (rewritten), body bytes and chunk framing as they
  // pass (unchanged). Returns the refusal once the stream must end; the bytes from the one that
  // decided it on are not carried (no part of a refused head ever is; of a body, the bytes
  // before the refusing one are), and every later call returns the same refusal and appends
  // nothing. Output and refusal are the same for every split of the same bytes.
  std::optional<Refused> feed(std::string_view bytes, std::string& out);

  // Request heads accepted and emitted so far.
  std::uint64_t requests() const { return requests_; }
  // True when no request is partly read and nothing was refused: the program closing here ends
  // the stream cleanly.
  bool betweenRequests() const;

 private:
  enum class State {
    kHead,         // a request head, into head_
    kBody,         // remaining_ bytes of a Content-Length body
    kChunkSize,    // a chunk-size line, into line_
    kChunkData,    // remaining_ bytes of a chunk's data
    kChunkDataCr,  // the CRLF after a chunk's data
    kChunkDataLf,
    kTrailer,  // a trailer line (or the empty line ending the message), into line_
    kRefused,
  };
  // Where the byte-by-byte check of a head has got to.
  enum class HeadPart { kMethod, kTarget, kVersion, kLineStart, kLine, kLineLf, kEndLf };
  // Where the check of a chunk-size line has got to.
  enum class ChunkPart { kSize, kBlank, kExtension, kLf };

  enum class HeadByte { kMore, kEnd, kRefused };

  std::size_t readHead(std::string_view bytes, std::string& out);
  HeadByte checkHeadByte(unsigned char c);
  void acceptHead(std::string& out);
  std::size_t readBody(std::string_view bytes, std::string& out);
  std::size_t readChunkSize(std::string_view bytes, std::string& out);
  std::size_t readChunkData(std::string_view bytes, std::string& out);
  std::size_t readChunkDataEnd(std::string_view bytes, std::string& out);
  std::size_t readTrailer(std::string_view bytes, std::string& out);
  void endRequest();
  // How many leading bytes of `bytes` precede the last byte of the first foreign placeholder
  // to end in them, the stream before them counted (bytes.size() when none does); remembers
  // the stream's tail for the next call.
  std::size_t beforeForeign(std::string_view bytes);
  void appendRewrittenValue(std::string_view value, std::string& out) const;
  void refuse(int status, std::string token, std::string reason);

  RequestRules rules_;
  std::optional<Refused> refused_;
  State state_ = State::kHead;
  std::uint64_t requests_ = 0;

  std::string head_;  // the head read so far, as the program sent it
  HeadPart head_part_ = HeadPart::kMethod;
  std::size_t part_bytes_ = 0;  // bytes of the request line's current part

  std::uint64_t remaining_ = 0;  // of a Content-Length body or a chunk's data
  std::string line_;             // a chunk-size or trailer line, CRLF included once whole
  ChunkPart chunk_part_ = ChunkPart::kSize;
  std::uint64_t chunk_size_ = 0;
  std::size_t size_digits_ = 0;

  std::size_t longest_foreign_ = 0;
  std::string carry_;  // the stream's last (longest_foreign_ - 1) bytes, already scanned
};

// A complete HTTP/1.1 response for a refusal, as the broker sends it to the program before it
// closes: the status line by `refused.status`, "Content-Type: text/plain; charset=utf-8",
// "X-Proxy-Error: <token>", Content-Length, "Connection: close", and the reason as the body on
// one line (control characters become spaces) of at most 512 bytes, then LF.
std::string refusalResponse(const RequestRewriter::Refused& refused);

}  // namespace scs::egress
