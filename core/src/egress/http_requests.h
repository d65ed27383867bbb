#pragma once

// The HTTP/1.1 requests a program sends a brokered host (issue 48), read from the plaintext the
// server holds once it has ended the program's TLS, and rewritten on their way upstream: the
// operator's headers set, this host's placeholders replaced by their secrets in the one header
// each belongs to, and a request that carries a placeholder anywhere else refused. The secret is
// only ever written toward the host, and only where the operator chose.
//
// Pure (no I/O) and incremental: feed() takes the program's bytes as they arrive and gives the
// same output and the same refusal for every split of the same stream. Held to a strict subset
// of RFC 9112, because the credential is added to what this parser calls a request head: were
// the host to frame a request differently (two lengths, a transfer coding read one way here and
// another there, a body the host ignores), the head that carries the secret could become the
// body of a request the program chose, stored or echoed back to it. Whatever could be read two
// ways is refused, never repaired. Beyond framing:
//  - each request must name the host the stream was opened to (Host, origin-form target): a
//    shared front end routes by Host, and must not take the credential to a host the program
//    names (421);
//  - a placeholder is replaced only in its own header: a host that echoes a header or stores a
//    body would hand the secret back to the program (403);
//  - only the common methods are carried (TRACE echoes the head, CONNECT opens a tunnel; 405);
//  - a request with a body is the stream's last: it is sent with "Connection: close" and
//    nothing after it is carried, so that a host that leaves a body unread cannot take what
//    follows for the next request, nor the program's bytes for a request with the credential.
// Bounded: a head is at most kMaxHeadBytes as read, and at most kMaxHeadBytes, the set headers
// and kMaxHeadGrowthBytes rewritten, with kMaxSubstitutions; a chunk-size or trailer line is at
// most kMaxChunkLineBytes; bodies pass through as they come. Fuzzed by
// fuzz/fuzz_http_requests.cc.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scs::egress {

// Set on every request; the program's own headers of this name (ASCII case-insensitive, and "_"
// taken for "-") are removed first. `name` is a token and not one this parser frames or routes
// requests by (Content-Length, Transfer-Encoding, Upgrade, Host, Connection); `value` holds no
// control character but HTAB.
struct HeaderRule {
  std::string name;
  std::string value;
};

// Every occurrence of `placeholder` (not empty) in the value of the header named `header` is
// replaced by `value` (no control character but HTAB). Anywhere else in a request (another
// header, the request line, a body, a trailer) the placeholder is refused, as a foreign one is:
// the program must not choose where the secret lands (a header the host echoes). `header` is
// compared as HeaderRule's name is, and is a token that HeaderRule's name may be; `placeholder`
// holds no control character and neither starts nor ends with a blank (so that whether it lies
// in a value is known at its last byte).
struct Substitution {
  std::string placeholder;
  std::string value;
  std::string header = "Authorization";
};

struct RequestRules {
  std::vector<HeaderRule> set;
  std::vector<Substitution> substitute;
  // Placeholders of other hosts (not empty): a stream in which one occurs anywhere (request
  // line, header, body, chunk framing, trailer, or across the end of one request and the start
  // of the next) is refused there.
  std::vector<std::string> foreign;
  // The host the stream was opened to (empty: not checked). Each request must name it: exactly
  // one Host header equal to `host:port`, or to `host` alone when `port` is 443 (ASCII
  // case-insensitive), on HTTP/1.0 too,
  // and an origin-form target ("/..."; "*" only with OPTIONS); else 421 misdirected, so that a
  // shared front end never routes the credential by a name the program chose.
  std::string host;
  std::uint16_t port = 443;
};

class RequestRewriter {
 public:
  static constexpr std::size_t kMaxHeadBytes = 64 << 10;      // a request head (line + headers)
  static constexpr std::size_t kMaxChunkLineBytes = 4 << 10;  // a chunk-size or trailer line
  // A rewritten head: at most kMaxHeadBytes, the set headers (name, value, 4 bytes each) and
  // this many bytes more, after at most kMaxSubstitutions placeholders replaced; else 431.
  static constexpr std::size_t kMaxHeadGrowthBytes = 8 << 10;
  static constexpr std::size_t kMaxSubstitutions = 16;

  // Rules that break what HeaderRule and Substitution ask make every feed() refuse (500,
  // "misconfigured"): the credential store checks them first, so this only fails closed.
  explicit RequestRewriter(RequestRules rules);
  // Wipes its copies of the secrets.
  ~RequestRewriter();
  RequestRewriter(const RequestRewriter&) = delete;
  RequestRewriter& operator=(const RequestRewriter&) = delete;

  // Why the stream ends, as the program is told (refusalResponse) and the log says. `reason`
  // names what was wrong and never holds a secret. status/token: 400 bad-request, 403
  // placeholder, 405 method, 421 misdirected, 431 head-too-large, 500 misconfigured, 501
  // unsupported, 505 http-version.
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
  // nothing. Once the body of a request that has one has ended, every byte after it is dropped
  // unread, never refused: the host's answer to that request is on its way to the program, and
  // a refusal would be mixed into it. Output and refusal are the same for every split.
  std::optional<Refused> feed(std::string_view bytes, std::string& out);

  // Request heads accepted and emitted so far.
  std::uint64_t requests() const { return requests_; }
  // Of those, the ones the rules added a credential to (a set header, or a placeholder
  // replaced): what the report counts.
  std::uint64_t credentialed() const { return credentialed_; }
  // True when no request is partly read and nothing was refused: the program closing here ends
  // the stream cleanly. True, too, once a request with a body has ended.
  bool betweenRequests() const;
  // True from the moment the head of a request with a body was emitted (with "Connection:
  // close"), and from then on: nothing after that body is carried, so the caller may stop
  // reading the program once betweenRequests() is true too.
  bool closing() const { return closing_; }

 private:
  enum class State {
    kHead,         // a request head, into head_
    kBody,         // remaining_ bytes of a Content-Length body
    kChunkSize,    // a chunk-size line, into line_
    kChunkData,    // remaining_ bytes of a chunk's data
    kChunkDataCr,  // the CRLF after a chunk's data
    kChunkDataLf,
    kTrailer,  // a trailer line (or the empty line ending the message), into line_
    kClosed,   // after the body of a request that had one: every byte dropped
    kRefused,
  };
  // Where the byte-by-byte check of a head has got to.
  enum class HeadPart { kMethod, kTarget, kVersion, kLineStart, kLine, kLineLf, kEndLf };
  // Where the check of a chunk-size line has got to.
  enum class ChunkPart { kSize, kBlank, kExtension, kLf };

  enum class HeadByte { kMore, kEnd, kRefused };

  // Reads bytes in which no placeholder ends (but the last byte of one may be next).
  void read(std::string_view bytes, std::string& out);
  std::size_t readHead(std::string_view bytes, std::string& out);
  HeadByte checkHeadByte(unsigned char c, std::size_t at);
  void acceptHead(std::string& out);
  // Writes the accepted head to `out` (or, null, only measures it); returns its size and
  // counts the placeholders replaced.
  struct Field;
  std::size_t writeHead(std::string_view line, const std::vector<Field>& fields,
                        std::string_view length_text, std::size_t length_values, bool body,
                        std::size_t& substitutions, std::string* out) const;
  std::size_t readBody(std::string_view bytes, std::string& out);
  std::size_t readChunkSize(std::string_view bytes, std::string& out);
  std::size_t readChunkData(std::string_view bytes, std::string& out);
  std::size_t readChunkDataEnd(std::string_view bytes, std::string& out);
  std::size_t readTrailer(std::string_view bytes, std::string& out);
  void endRequest();
  // Whether the placeholder of substitute[k], whose last byte is the next one to be read, lies
  // wholly in the value of a `header` line of the head being read.
  bool inOwnValue(std::size_t k) const;
  std::size_t rewriteValue(std::string_view name, std::string_view value,
                           std::size_t& substitutions, std::string* out) const;
  void refuse(int status, std::string token, std::string reason);

  RequestRules rules_;
  std::optional<Refused> refused_;
  State state_ = State::kHead;
  std::uint64_t requests_ = 0;
  std::uint64_t credentialed_ = 0;
  bool closing_ = false;

  std::string head_;  // the head read so far, as the program sent it
  HeadPart head_part_ = HeadPart::kMethod;
  std::size_t part_bytes_ = 0;             // bytes of the request line's current part
  std::size_t line_begin_ = 0;             // where the header line being read starts in head_
  std::size_t colon_ = std::string::npos;  // where its first colon is in head_ (npos: none)

  std::uint64_t remaining_ = 0;  // of a Content-Length body or a chunk's data
  std::string line_;             // a chunk-size or trailer line, CRLF included once whole
  ChunkPart chunk_part_ = ChunkPart::kSize;
  std::uint64_t chunk_size_ = 0;
  std::size_t size_digits_ = 0;

  // Every placeholder, looked for in the raw stream: the foreign ones and substitute[k]
  // (`substitution` k; SIZE_MAX for a foreign one).
  struct Pattern {
    std::string_view text;
    std::size_t substitution;
  };
  std::vector<Pattern> patterns_;
  std::size_t longest_ = 0;
  std::string carry_;  // the stream's last (longest_ - 1) bytes, already read
};

// A complete HTTP/1.1 response for a refusal, as the broker sends it to the program before it
// closes: the status line by `refused.status`, "Content-Type: text/plain; charset=utf-8",
// "X-Proxy-Error: <token>", Content-Length, "Connection: close", and the reason as the body on
// one line (control characters become spaces) of at most 512 bytes, then LF.
std::string refusalResponse(const RequestRewriter::Refused& refused);

}  // namespace scs::egress
