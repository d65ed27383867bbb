#pragma once

// The first bytes a program sends on an egress stream, read as a proxy request (issue 44):
// HTTP CONNECT, plain HTTP in absolute form, or SOCKS5 (the first byte decides: 0x05 SOCKS5,
// 0x04 SOCKS4, refused, anything else HTTP). Written by hand because no Debian library parses
// SOCKS5 and because the request must be read incrementally from frames; bounded (16 KiB of
// head) and fuzzed (fuzz/fuzz_proxy_handshake.cc). Pure: no I/O, no policy.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace scs::egress {

enum class ProxyProtocol { kConnect, kHttp, kSocks5 };

// Why a request is not carried, as the program is told.
enum class Refusal {
  kNotAllowed,     // HTTP 403 with X-Proxy-Error; SOCKS5 0x02 (not allowed by ruleset)
  kBadRequest,     // HTTP 400; SOCKS5 0x01
  kMisdirected,    // HTTP 421 (Host differs from the absolute URI's authority); SOCKS5 0x02
  kUnreachable,    // HTTP 502; SOCKS5 0x04 (host unreachable): no address, DNS failed
  kConnectFailed,  // HTTP 502; SOCKS5 0x05 (connection refused)
  kTimedOut,       // HTTP 504; SOCKS5 0x06 (TTL expired)
  kLimit,          // HTTP 503; SOCKS5 0x01: a stream or byte cap
  kUnsupported,    // HTTP 501 (an https:// URL not CONNECTed, HTTP/2, a transfer coding);
                   // SOCKS5 0x07 (a command other than CONNECT; 0x08 for an address type)
};

struct ProxyRequest {
  ProxyProtocol protocol = ProxyProtocol::kConnect;
  std::string host;  // as the program wrote it, brackets of an IPv6 literal removed; unchecked
  std::uint16_t port = 0;
  // kHttp: the request head to send upstream first, in origin form ("GET /path HTTP/1.1"),
  // with Proxy-* and hop-by-hop headers removed and "Connection: close" set. Else empty.
  std::string forward;
};

class ProxyHandshake {
 public:
  static constexpr std::size_t kMaxHeadBytes = 16 << 10;

  struct Step {
    enum class Kind {
      kNeedMore,  // nothing to do until more bytes arrive
      kReply,     // send `reply` to the program (SOCKS5's method choice), then call feed()
                  // again, with no bytes if none came: a request already given may be complete
      kRequest,   // `request` is complete; `rest` are bytes after it (the tunnel's first)
      kRefuse,    // send `reply` (the refusal, as refused() makes it) and end the stream
    };
    Kind kind = Kind::kNeedMore;
    std::string reply;
    ProxyRequest request;
    std::string rest;
    std::string reason;  // kRefuse: why, for the log and the report
  };

  // Bytes from the program, in order, as they arrive, split anywhere: the steps that are not
  // kNeedMore are the same for every split. After kRequest or kRefuse, no more (ignored:
  // kNeedMore).
  Step feed(std::string_view bytes);

  // What tells the program its tunnel is open: "HTTP/1.1 200 Connection established\r\n\r\n",
  // SOCKS5's success reply (bound address 0.0.0.0:0); empty for plain HTTP.
  std::string granted() const;
  // The refusal the program sees, in the form the first byte chose. HTTP (also before any
  // byte): a complete response, status by `why`, "X-Proxy-Error: <token>" (blocked-by-allowlist,
  // bad-request, misdirected, unreachable, connect-failed, timeout, limit, unsupported) and
  // `reason` as the body, on one line (control characters become spaces) of at most 512 bytes.
  // SOCKS5 carries only the code; SOCKS4 gets its "rejected" reply (0x5B).
  std::string refused(Refusal why, std::string_view reason) const;

 private:
  enum class State { kFirst, kHttpHead, kSocksGreeting, kSocksRequest, kDone };
  // How replies are spelt: decided by the first byte, so that even a refusal of a request
  // that never parsed reaches the program in a form it reads.
  enum class Wire { kHttp, kSocks4, kSocks5 };
  // Where the scan of the HTTP request line has got to (see scanRequestLine).
  enum class LinePart { kMethod, kTarget, kVersion, kDone };

  Step httpHead();
  Step socksGreeting();
  Step socksRequest();
  Step refuse(Refusal why, std::string reason);
  Step refuseWith(std::string reply, std::string reason);
  // Scans the request line up to `end`: the refusal once it breaks the grammar; otherwise
  // nothing, and line_part_ says whether the line is whole.
  std::optional<Step> scanRequestLine(std::size_t end);

  State state_ = State::kFirst;
  Wire wire_ = Wire::kHttp;
  bool granted_ = false;  // a kRequest was returned: protocol_ is its protocol
  ProxyProtocol protocol_ = ProxyProtocol::kConnect;
  std::string buffer_;  // bytes of the current part not yet consumed
  // HTTP: the request line is scanned byte by byte as it arrives, so that what is not HTTP
  // (a TLS ClientHello sent to the proxy, binary noise) is refused at once rather than at the
  // head's size limit or the relay's timeout; the head's end is looked for once it is whole.
  LinePart line_part_ = LinePart::kMethod;
  std::size_t line_scanned_ = 0;   // bytes of buffer_ the scan has judged
  std::size_t part_bytes_ = 0;     // bytes of the current part (method, target, version) so far
  std::size_t head_searched_ = 0;  // bytes of buffer_ known to hold no "\r\n\r\n"
};

// What the first bytes of a TLS stream say (RFC 8446 ClientHello, possibly across several
// handshake records), read without decrypting anything: bounded to kMaxHelloBytes.
struct ClientHello {
  static constexpr std::size_t kMaxHelloBytes = 16 << 10;
  enum class State { kNeedMore, kHello, kNotTls, kMalformed };
  State state = State::kNeedMore;
  std::string server_name;     // the host_name of server_name (lower case), empty when none
  bool several_names = false;  // more than one host_name entry
  bool encrypted_client_hello = false;  // extension 0xfe0d is present
};
ClientHello readClientHello(std::string_view bytes);

}  // namespace scs::egress
