// The proxy request a program's egress stream begins with, read by hand (see the header for
// why). HTTP is held to a strict subset of RFC 9112: whatever a proxy and an origin server
// could read differently (folded lines, bare CR or LF, two framings, two Hosts) is refused
// rather than repaired, because the body passes through unparsed after the head we vetted.

#include "egress/proxy_handshake.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "egress/http_requests.h"

namespace scs::egress {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr std::string_view kHeadEnd = "\r\n\r\n";
constexpr std::uint16_t kHttpPort = 80;

constexpr std::uint8_t kSocks5 = 0x05;
constexpr std::uint8_t kSocks4 = 0x04;
constexpr std::uint8_t kNoAuthentication = 0x00;
constexpr std::uint8_t kNoAcceptableMethod = 0xFF;
constexpr std::uint8_t kSocksConnect = 0x01;
constexpr std::uint8_t kAtypIpv4 = 0x01;
constexpr std::uint8_t kAtypDomain = 0x03;
constexpr std::uint8_t kAtypIpv6 = 0x04;
constexpr std::uint8_t kSocksGeneralFailure = 0x01;
constexpr std::uint8_t kSocksCommandNotSupported = 0x07;
constexpr std::uint8_t kSocksAddressTypeNotSupported = 0x08;

struct Refused {
  Refusal why;
  std::string reason;
};

bool isTokenChar(unsigned char c) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return std::isalnum(c) != 0 || kSpecials.find(static_cast<char>(c)) != std::string_view::npos;
}

bool isTargetChar(unsigned char c) { return c > 0x20 && c < 0x7F; }

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

// For the reasons a program reads: the program's own text, cut, with nothing that could
// break the reason's line.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text.substr(0, 80)) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(byte < 0x20 || byte == 0x7F ? '?' : c);
  }
  return out + (text.size() > 80 ? "...\"" : "\"");
}

std::string socksReply(std::uint8_t code) {
  return std::string{static_cast<char>(kSocks5), static_cast<char>(code), 0, 1, 0, 0, 0, 0, 0, 0};
}

std::uint8_t socksCode(Refusal why) {
  switch (why) {
    case Refusal::kNotAllowed:
    case Refusal::kMisdirected:
      return 0x02;
    case Refusal::kUnreachable:
      return 0x04;
    case Refusal::kConnectFailed:
      return 0x05;
    case Refusal::kTimedOut:
      return 0x06;
    case Refusal::kUnsupported:
      return kSocksCommandNotSupported;
    case Refusal::kBadRequest:
    case Refusal::kLimit:
      break;
  }
  return kSocksGeneralFailure;
}

struct HttpStatus {
  int code;
  std::string_view token;  // X-Proxy-Error
};

HttpStatus httpStatus(Refusal why) {
  switch (why) {
    case Refusal::kNotAllowed:
      return {403, "blocked-by-allowlist"};
    case Refusal::kMisdirected:
      return {421, "misdirected"};
    case Refusal::kUnreachable:
      return {502, "unreachable"};
    case Refusal::kConnectFailed:
      return {502, "connect-failed"};
    case Refusal::kTimedOut:
      return {504, "timeout"};
    case Refusal::kLimit:
      return {503, "limit"};
    case Refusal::kUnsupported:
      return {501, "unsupported"};
    case Refusal::kBadRequest:
      break;
  }
  return {400, "bad-request"};
}

// "1" to "65535", without sign or leading zero.
std::optional<std::uint16_t> parsePort(std::string_view text) {
  if (text.empty() || text.size() > 5 || text.front() == '0' ||
      !std::all_of(text.begin(), text.end(),
                   [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return std::nullopt;
  }
  const unsigned long value = std::stoul(std::string(text));
  if (value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

struct Authority {
  std::string host;  // brackets of an IPv6 literal removed
  std::optional<std::uint16_t> port;
};

// "host[:port]" or "[v6][:port]": the shape only; whether the host is a name the policy
// accepts is the policy's question (parseTarget).
std::optional<Authority> parseAuthority(std::string_view text) {
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return isTargetChar(c); })) {
    return std::nullopt;
  }
  Authority authority;
  std::string_view after;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close == 1) {
      return std::nullopt;
    }
    authority.host = std::string(text.substr(1, close - 1));
    after = text.substr(close + 1);
    if (authority.host.find('[') != std::string::npos) {
      return std::nullopt;
    }
  } else {
    const std::size_t colon = text.find(':');
    authority.host = std::string(text.substr(0, colon));
    after = colon == std::string_view::npos ? std::string_view() : text.substr(colon);
    // A bare IPv6 address ("::1:443") cannot be told from its port: RFC 3986 wants brackets.
    if (authority.host.empty() || after.find(':', 1) != std::string_view::npos ||
        authority.host.find_first_of("[]@/?#") != std::string::npos) {
      return std::nullopt;
    }
  }
  if (!after.empty()) {
    if (after.front() != ':') {
      return std::nullopt;
    }
    authority.port = parsePort(after.substr(1));
    if (!authority.port) {
      return std::nullopt;
    }
  }
  return authority;
}

std::string badAuthority(std::string_view text) {
  return "The authority " + quoted(text) +
         " is not host:port (a name, an IPv4 address or a bracketed IPv6 address, and a port "
         "from 1 to 65535).";
}

struct HeaderLine {
  std::string_view line;  // without its CRLF
  std::string_view name;
  std::string_view value;  // without surrounding blanks
};

// The lines after the request line, each checked on its own.
std::variant<std::vector<HeaderLine>, Refused> headerLines(std::string_view block) {
  std::vector<HeaderLine> lines;
  while (!block.empty()) {
    const std::size_t end = block.find(kCrlf);  // the block ends in CRLF: always found
    const std::string_view line = block.substr(0, end);
    block.remove_prefix(end + kCrlf.size());
    if (line.find_first_of("\r\n") != std::string_view::npos) {
      return Refused{Refusal::kBadRequest, "A header line ends in a bare CR or LF, not CRLF."};
    }
    if (line.front() == ' ' || line.front() == '\t') {
      return Refused{Refusal::kBadRequest,
                     "A header line starts with a space or tab (obsolete line folding)."};
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return Refused{Refusal::kBadRequest, "A header line has no colon."};
    }
    const std::string_view name = line.substr(0, colon);
    // Blanks before the colon included: RFC 9112 section 5.1 says to refuse them.
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(), [](unsigned char c) { return isTokenChar(c); })) {
      return Refused{Refusal::kBadRequest, "The header name " + quoted(name) +
                                               " holds a byte that is not allowed in a token."};
    }
    const std::string_view value = trimmed(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(),
                    [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; })) {
      return Refused{Refusal::kBadRequest,
                     "The value of header " + quoted(name) + " holds a control character."};
    }
    lines.push_back({line, name, value});
  }
  return lines;
}

std::vector<std::string> connectionTokens(std::string_view value) {
  std::vector<std::string> tokens;
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view token = trimmed(value.substr(0, comma));
    if (!token.empty()) {
      tokens.push_back(lower(token));
    }
    if (comma == std::string_view::npos) {
      break;
    }
    value.remove_prefix(comma + 1);
  }
  return tokens;
}

bool isHopByHop(std::string_view lower_name, const std::vector<std::string>& named) {
  static constexpr std::array<std::string_view, 5> kHopByHop = {"connection", "keep-alive", "te",
                                                                "trailer", "upgrade"};
  // Every Proxy-* header is for us (Proxy-Authorization, Proxy-Connection) and never upstream.
  return lower_name.substr(0, 6) == "proxy-" ||
         std::find(kHopByHop.begin(), kHopByHop.end(), lower_name) != kHopByHop.end() ||
         std::find(named.begin(), named.end(), lower_name) != named.end();
}

// The smuggling defences and the hop-by-hop rewrite, for a request whose line was accepted.
std::variant<std::string, Refused> forwardedHeaders(const std::vector<HeaderLine>& lines,
                                                    bool http10) {
  std::size_t content_lengths = 0;
  std::size_t transfer_encodings = 0;
  std::vector<std::string> named;
  for (const HeaderLine& header : lines) {
    const std::string name = lower(header.name);
    if (name == "content-length") {
      ++content_lengths;
      if (header.value.empty() ||
          !std::all_of(header.value.begin(), header.value.end(),
                       [](unsigned char c) { return std::isdigit(c) != 0; })) {
        return Refused{Refusal::kBadRequest, "The Content-Length header is not a decimal number."};
      }
    } else if (name == "transfer-encoding") {
      ++transfer_encodings;
      if (!equalsIgnoringCase(header.value, "chunked")) {
        return Refused{Refusal::kUnsupported, "Transfer-Encoding " + quoted(header.value) +
                                                  " is not supported: only \"chunked\" alone is."};
      }
    } else if (name == "connection") {
      const std::vector<std::string> tokens = connectionTokens(header.value);
      named.insert(named.end(), tokens.begin(), tokens.end());
    }
  }
  if (content_lengths > 1) {
    return Refused{Refusal::kBadRequest, "The request has several Content-Length headers."};
  }
  if (transfer_encodings > 1) {
    return Refused{Refusal::kBadRequest, "The request has several Transfer-Encoding headers."};
  }
  if (transfer_encodings > 0 && content_lengths > 0) {
    return Refused{Refusal::kBadRequest,
                   "The request has both Transfer-Encoding and Content-Length, which a proxy and "
                   "a server could read differently."};
  }
  if (transfer_encodings > 0 && http10) {
    return Refused{Refusal::kBadRequest, "An HTTP/1.0 request cannot use Transfer-Encoding."};
  }
  // Dropping one of these would change where the request ends, or what it is for.
  for (const std::string& token : named) {
    if (token == "host" || token == "content-length" || token == "transfer-encoding") {
      return Refused{Refusal::kBadRequest, "The Connection header names " + quoted(token) +
                                               ", which a forwarded request cannot do without."};
    }
  }
  std::string out;
  for (const HeaderLine& header : lines) {
    if (!isHopByHop(lower(header.name), named)) {
      out.append(header.line).append(kCrlf);
    }
  }
  return out + "Connection: close\r\n";
}

bool sameAuthority(const Authority& a, const Authority& b) {
  return equalsIgnoringCase(a.host, b.host) &&
         a.port.value_or(kHttpPort) == b.port.value_or(kHttpPort);
}

// A scheme (RFC 3986 section 3.1) followed by "://", or nullopt.
std::optional<std::string> schemeOf(std::string_view target) {
  const std::size_t end = target.find("://");
  if (end == std::string_view::npos || end == 0 ||
      std::isalpha(static_cast<unsigned char>(target.front())) == 0) {
    return std::nullopt;
  }
  const std::string_view scheme = target.substr(0, end);
  const bool valid = std::all_of(scheme.begin(), scheme.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '+' || c == '-' || c == '.';
  });
  return valid ? std::optional<std::string>(lower(scheme)) : std::nullopt;
}

std::variant<ProxyRequest, Refused> parseHead(std::string_view head) {
  // The request line was scanned as it arrived: METHOD SP target SP HTTP/1.d CRLF.
  const std::size_t line_end = head.find(kCrlf);
  const std::string_view line = head.substr(0, line_end);
  const std::size_t first_space = line.find(' ');
  const std::size_t second_space = line.find(' ', first_space + 1);
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  const std::string_view version = line.substr(second_space + 1);

  const auto parsed =
      headerLines(head.substr(line_end + kCrlf.size(), head.size() - line_end - kHeadEnd.size()));
  if (const auto* refused = std::get_if<Refused>(&parsed)) {
    return *refused;
  }
  const auto& lines = std::get<std::vector<HeaderLine>>(parsed);

  ProxyRequest request;
  if (method == "CONNECT") {
    const std::optional<Authority> authority = parseAuthority(target);
    if (!authority) {
      return Refused{Refusal::kBadRequest, badAuthority(target)};
    }
    if (!authority->port) {
      return Refused{Refusal::kBadRequest,
                     "CONNECT needs host:port, and " + quoted(target) + " has no port."};
    }
    request.protocol = ProxyProtocol::kConnect;
    request.host = authority->host;
    request.port = *authority->port;
    return request;
  }

  if (target.front() == '/' || target == "*") {
    return Refused{Refusal::kBadRequest,
                   "This is a proxy: send the absolute form (GET http://host/path HTTP/1.1) or "
                   "CONNECT host:port, not a path alone."};
  }
  const std::optional<std::string> scheme = schemeOf(target);
  if (!scheme) {
    return Refused{Refusal::kBadRequest,
                   "The request target " + quoted(target) +
                       " is not an absolute http:// URL, and only CONNECT takes host:port."};
  }
  if (*scheme == "https") {
    return Refused{Refusal::kUnsupported,
                   "An https:// URL goes through CONNECT (set HTTPS_PROXY), never as a plain "
                   "proxy request."};
  }
  if (*scheme != "http") {
    return Refused{Refusal::kUnsupported,
                   "Only http:// URLs are forwarded; use CONNECT for " + quoted(*scheme) + "."};
  }
  std::string_view rest = target.substr(scheme->size() + 3);
  if (rest.find('#') != std::string_view::npos) {
    return Refused{Refusal::kBadRequest, "The request target carries a fragment (#)."};
  }
  const std::size_t path_start = rest.find_first_of("/?");
  const std::string_view authority_text = rest.substr(0, path_start);
  if (authority_text.find('@') != std::string_view::npos) {
    return Refused{Refusal::kBadRequest, "The URL carries credentials (user@host), refused."};
  }
  const std::optional<Authority> authority = parseAuthority(authority_text);
  if (!authority) {
    return Refused{Refusal::kBadRequest, badAuthority(authority_text)};
  }
  std::string path =
      path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (path.front() == '?') {
    path.insert(0, "/");
  }

  std::size_t hosts = 0;
  std::string_view host_value;
  for (const HeaderLine& header : lines) {
    if (equalsIgnoringCase(header.name, "host")) {
      ++hosts;
      host_value = header.value;
    }
  }
  if (hosts == 0) {
    return Refused{Refusal::kBadRequest, "The request has no Host header."};
  }
  if (hosts > 1) {
    return Refused{Refusal::kBadRequest, "The request has several Host headers."};
  }
  const std::optional<Authority> host = parseAuthority(host_value);
  if (!host || !sameAuthority(*host, *authority)) {
    return Refused{Refusal::kMisdirected, "The Host header " + quoted(host_value) +
                                              " is not the URL's authority " +
                                              quoted(authority_text) + "."};
  }
  const auto headers = forwardedHeaders(lines, version == "HTTP/1.0");
  if (const auto* refused = std::get_if<Refused>(&headers)) {
    return *refused;
  }
  request.protocol = ProxyProtocol::kHttp;
  request.host = authority->host;
  request.port = authority->port.value_or(kHttpPort);
  request.forward = std::string(method) + " " + path + " " + std::string(version) + "\r\n" +
                    std::get<std::string>(headers) + "\r\n";
  return request;
}

}  // namespace

ProxyHandshake::Step ProxyHandshake::feed(std::string_view bytes) {
  if (state_ == State::kDone) {
    return {};
  }
  buffer_.append(bytes);
  if (state_ == State::kFirst) {
    if (buffer_.empty()) {
      return {};
    }
    const auto first = static_cast<std::uint8_t>(buffer_.front());
    if (first == kSocks5) {
      wire_ = Wire::kSocks5;
      state_ = State::kSocksGreeting;
    } else if (first == kSocks4) {
      // Its reply form is known, so the program reads "request rejected" (0x5B) rather than
      // a stream that ends; SOCKS4 has no names (4a is a hack) and no IPv6.
      wire_ = Wire::kSocks4;
      return refuse(Refusal::kUnsupported, "SOCKS4 is not spoken here; use SOCKS5 (socks5h://).");
    } else {
      state_ = State::kHttpHead;
    }
  }
  switch (state_) {
    case State::kHttpHead:
      return httpHead();
    case State::kSocksGreeting:
      return socksGreeting();
    case State::kSocksRequest:
      return socksRequest();
    case State::kFirst:
    case State::kDone:
      break;
  }
  return {};
}

// Judges the request line byte by byte up to `end`, each byte as soon as it is seen, so that
// a refusal never depends on how the bytes were split. The refusal once it cannot be well
// formed; otherwise nothing, and line_part_ is kDone once the line is whole.
std::optional<ProxyHandshake::Step> ProxyHandshake::scanRequestLine(std::size_t end) {
  static constexpr std::string_view kVersion = "HTTP/1.";
  const auto bad = [this](std::string text) {
    return refuse(Refusal::kBadRequest, std::move(text));
  };
  for (; line_scanned_ < end && line_part_ != LinePart::kDone; ++line_scanned_) {
    const auto c = static_cast<unsigned char>(buffer_[line_scanned_]);
    switch (line_part_) {
      case LinePart::kMethod:
        if (c == ' ' && part_bytes_ > 0) {
          line_part_ = LinePart::kTarget;
          part_bytes_ = 0;
        } else if (isTokenChar(c)) {
          ++part_bytes_;
        } else {
          return bad(
              "The stream does not start with an HTTP request (METHOD target HTTP/1.1) "
              "or a SOCKS5 greeting.");
        }
        break;
      case LinePart::kTarget:
        if (c == ' ' && part_bytes_ > 0) {
          line_part_ = LinePart::kVersion;
          part_bytes_ = 0;
        } else if (isTargetChar(c)) {
          ++part_bytes_;
        } else {
          return bad("The request target holds a space, a control or a non-ASCII byte.");
        }
        break;
      case LinePart::kVersion: {
        // "HTTP/1." then a digit, CR, LF. Another major version is understood but not spoken.
        const std::size_t at = part_bytes_++;
        bool good = false;
        if (at < kVersion.size()) {
          good = c == static_cast<unsigned char>(kVersion[at]);
          if (!good && at == 5 && std::isdigit(c) != 0) {
            return refuse(Refusal::kUnsupported, "Only HTTP/1.0 and HTTP/1.1 are spoken here.");
          }
        } else if (at == kVersion.size()) {
          good = c == '0' || c == '1';
          if (!good && std::isdigit(c) != 0) {
            return refuse(Refusal::kUnsupported, "Only HTTP/1.0 and HTTP/1.1 are spoken here.");
          }
        } else if (at == kVersion.size() + 1) {
          good = c == '\r';
        } else {
          good = c == '\n';
          line_part_ = LinePart::kDone;
        }
        if (!good) {
          return bad("The request line does not end in \"HTTP/1.1\" and CRLF.");
        }
        break;
      }
      case LinePart::kDone:
        break;
    }
  }
  return std::nullopt;
}

ProxyHandshake::Step ProxyHandshake::httpHead() {
  const std::size_t region = std::min(buffer_.size(), kMaxHeadBytes);
  if (std::optional<Step> refused = scanRequestLine(region)) {
    return std::move(*refused);
  }
  if (line_part_ == LinePart::kDone) {
    const std::size_t from = head_searched_ < kHeadEnd.size() ? 0 : head_searched_ - 3;
    const std::size_t found = std::string_view(buffer_).substr(0, region).find(kHeadEnd, from);
    if (found != std::string::npos) {
      const std::size_t head_size = found + kHeadEnd.size();
      auto parsed = parseHead(std::string_view(buffer_).substr(0, head_size));
      if (auto* refused = std::get_if<Refused>(&parsed)) {
        return refuse(refused->why, std::move(refused->reason));
      }
      Step step;
      step.kind = Step::Kind::kRequest;
      step.request = std::get<ProxyRequest>(std::move(parsed));
      step.rest = buffer_.substr(head_size);
      protocol_ = step.request.protocol;
      granted_ = true;
      state_ = State::kDone;
      buffer_.clear();
      return step;
    }
    head_searched_ = region;
  }
  if (buffer_.size() >= kMaxHeadBytes) {
    return refuse(Refusal::kBadRequest,
                  "The request head is longer than " + std::to_string(kMaxHeadBytes) + " bytes.");
  }
  return {};
}

ProxyHandshake::Step ProxyHandshake::socksGreeting() {
  // VER NMETHODS METHODS...
  if (buffer_.size() < 2) {
    return {};
  }
  const std::size_t methods = static_cast<std::uint8_t>(buffer_[1]);
  if (buffer_.size() < 2 + methods) {
    return {};
  }
  const std::string_view offered = std::string_view(buffer_).substr(2, methods);
  const bool no_auth = offered.find(static_cast<char>(kNoAuthentication)) != std::string_view::npos;
  buffer_.erase(0, 2 + methods);
  if (!no_auth) {
    return refuseWith(
        std::string{static_cast<char>(kSocks5), static_cast<char>(kNoAcceptableMethod)},
        "The SOCKS5 client does not offer \"no authentication\", the only method "
        "spoken here.");
  }
  state_ = State::kSocksRequest;
  Step step;
  step.kind = Step::Kind::kReply;
  step.reply = std::string{static_cast<char>(kSocks5), static_cast<char>(kNoAuthentication)};
  return step;
}

ProxyHandshake::Step ProxyHandshake::socksRequest() {
  // VER CMD RSV ATYP DST.ADDR DST.PORT, judged a byte at a time like the HTTP request line.
  const std::string_view in = buffer_;
  if (in.empty()) {
    return {};
  }
  if (static_cast<std::uint8_t>(in[0]) != kSocks5) {
    return refuse(Refusal::kBadRequest, "The SOCKS5 request does not start with version 5.");
  }
  if (in.size() < 2) {
    return {};
  }
  if (static_cast<std::uint8_t>(in[1]) != kSocksConnect) {
    return refuseWith(socksReply(kSocksCommandNotSupported),
                      "Only the SOCKS5 CONNECT command is supported (not BIND or UDP ASSOCIATE).");
  }
  if (in.size() < 3) {
    return {};
  }
  if (in[2] != 0) {
    return refuse(Refusal::kBadRequest, "The SOCKS5 request's reserved byte is not zero.");
  }
  if (in.size() < 4) {
    return {};
  }
  const auto type = static_cast<std::uint8_t>(in[3]);
  std::size_t address_size = 0;
  if (type == kAtypIpv4) {
    address_size = 4;
  } else if (type == kAtypIpv6) {
    address_size = 16;
  } else if (type == kAtypDomain) {
    if (in.size() < 5) {
      return {};
    }
    address_size = 1 + static_cast<std::uint8_t>(in[4]);
    if (address_size == 1) {
      return refuse(Refusal::kBadRequest, "The SOCKS5 request names an empty domain.");
    }
  } else {
    return refuseWith(socksReply(kSocksAddressTypeNotSupported),
                      "The SOCKS5 address type is not IPv4 (1), a domain (3) or IPv6 (4).");
  }
  const std::size_t size = 4 + address_size + 2;
  if (in.size() < size) {
    return {};
  }
  const std::string_view address = in.substr(4, address_size);
  ProxyRequest request;
  request.protocol = ProxyProtocol::kSocks5;
  if (type == kAtypDomain) {
    request.host = std::string(address.substr(1));
    // Kept as written for the policy to judge, but never a byte that could end a line or a
    // string further on (a name with CR LF has injected headers into chained proxies).
    if (std::any_of(request.host.begin(), request.host.end(),
                    [](unsigned char c) { return c <= 0x20 || c == 0x7F; })) {
      return refuse(Refusal::kBadRequest,
                    "The SOCKS5 domain holds a space or a control character.");
    }
  } else {
    std::array<char, INET6_ADDRSTRLEN> text{};
    inet_ntop(type == kAtypIpv4 ? AF_INET : AF_INET6, address.data(), text.data(), text.size());
    request.host = text.data();
  }
  request.port = static_cast<std::uint16_t>((static_cast<std::uint8_t>(in[size - 2]) << 8) |
                                            static_cast<std::uint8_t>(in[size - 1]));
  if (request.port == 0) {
    return refuse(Refusal::kBadRequest, "The SOCKS5 request names port 0.");
  }
  Step step;
  step.kind = Step::Kind::kRequest;
  step.request = std::move(request);
  step.rest = buffer_.substr(size);
  protocol_ = ProxyProtocol::kSocks5;
  granted_ = true;
  state_ = State::kDone;
  buffer_.clear();
  return step;
}

ProxyHandshake::Step ProxyHandshake::refuse(Refusal why, std::string reason) {
  std::string reply = refused(why, reason);
  return refuseWith(std::move(reply), std::move(reason));
}

ProxyHandshake::Step ProxyHandshake::refuseWith(std::string reply, std::string reason) {
  state_ = State::kDone;
  buffer_.clear();
  Step step;
  step.kind = Step::Kind::kRefuse;
  step.reply = std::move(reply);
  step.reason = std::move(reason);
  return step;
}

std::string ProxyHandshake::granted() const {
  if (!granted_) {
    return {};
  }
  switch (protocol_) {
    case ProxyProtocol::kConnect:
      return "HTTP/1.1 200 Connection established\r\n\r\n";
    case ProxyProtocol::kSocks5:
      return socksReply(0x00);
    case ProxyProtocol::kHttp:
      break;
  }
  return {};
}

std::string ProxyHandshake::refused(Refusal why, std::string_view reason) const {
  switch (wire_) {
    case Wire::kSocks5:
      return socksReply(socksCode(why));
    case Wire::kSocks4:
      // VN 0, CD 0x5B (rejected or failed), then a port and an address nobody reads.
      return std::string{0, 0x5B, 0, 0, 0, 0, 0, 0};
    case Wire::kHttp:
      break;
  }
  // The same response a brokered stream's refusal is (http_requests.h).
  const HttpStatus status = httpStatus(why);
  return refusalResponse({status.code, std::string(status.token), std::string(reason)});
}

}  // namespace scs::egress
