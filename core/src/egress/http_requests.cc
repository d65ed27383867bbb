// The requests a program sends a brokered host, read and rewritten (see the header for why so
// strictly). Every byte is judged once, in stream order, at the moment it is read: the head and
// chunk lines byte by byte as they arrive, bodies a run at a time. Placeholders are looked for in
// the raw stream first, and each one is judged when its last byte is next: a foreign one, or one
// of this host's that does not lie in its own header's value, ends the stream there. A refusal
// therefore falls on the same byte however the stream was split, and what was sent before it is
// the same too.

#include "egress/http_requests.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace scs::egress {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr std::size_t kMaxReasonBytes = 512;
constexpr std::uint64_t kMaxContentLength = std::uint64_t{1} << 62;
constexpr std::size_t kMaxChunkSizeDigits = 15;  // 16^15 = 2^60: never overflows 64 bits
constexpr std::size_t kQuotedBytes = 80;
constexpr std::size_t kForeignPattern = SIZE_MAX;
constexpr std::string_view kConnectionClose = "Connection: close\r\n";

bool isTokenChar(unsigned char c) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         kSpecials.find(static_cast<char>(c)) != std::string_view::npos;
}

bool isToken(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return isTokenChar(c); });
}

// What may not stand in a field value or a chunk extension: every control character but HTAB
// (CR and LF included, so that a value never ends a line).
bool isControl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; }

bool hasControl(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](unsigned char c) { return isControl(c); });
}

char lowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return lowerAscii(x) == lowerAscii(y);
         });
}

// Headers a front end may route by, or read as the request's real method or target: with the
// credential added, the program must not choose either.
bool routesOrRewrites(std::string_view name);

// Header names as the rules compare them: ASCII case ignored and "_" taken for "-", because
// servers that read headers through CGI-style variables (HTTP_CONTENT_LENGTH) see
// "Content_Length" and "Content-Length" as one name.
bool sameFieldName(std::string_view a, std::string_view b) {
  const auto fold = [](char c) { return c == '_' ? '-' : lowerAscii(c); };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&fold](char x, char y) { return fold(x) == fold(y); });
}

bool routesOrRewrites(std::string_view name) {
  static constexpr std::string_view kNames[] = {"forwarded",          "x-forwarded-host",
                                                "x-forwarded-server", "x-original-url",
                                                "x-rewrite-url",      "x-http-method-override",
                                                "x-http-method",      "x-method-override",
                                                "x-original-host",    "x-host"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](std::string_view known) { return sameFieldName(name, known); });
}

bool isBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

bool isDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return c >= '0' && c <= '9'; });
}

int hexValue(unsigned char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// The program's own text, cut, for a reason it reads: never a secret, which the program does
// not have, and nothing that could break the reason's line.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text.substr(0, kQuotedBytes)) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(byte < 0x20 || byte >= 0x7F ? '?' : c);
  }
  return out + (text.size() > kQuotedBytes ? "...\"" : "\"");
}

// One line of at most kMaxReasonBytes: control characters become spaces, and a cut never
// splits a UTF-8 sequence.
std::string oneLine(std::string_view reason) {
  std::string out(reason.substr(0, kMaxReasonBytes));
  if (reason.size() > kMaxReasonBytes) {
    std::size_t end = out.size();
    while (end > 0 && (static_cast<unsigned char>(out[end - 1]) & 0xC0) == 0x80) {
      --end;
    }
    if (end > 0) {
      const auto lead = static_cast<unsigned char>(out[end - 1]);
      const std::size_t length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
      if (out.size() - (end - 1) < length) {
        out.resize(end - 1);
      }
    }
  }
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      c = ' ';
    }
  }
  return out;
}

std::string_view statusText(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 405:
      return "Method Not Allowed";
    case 421:
      return "Misdirected Request";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      break;
  }
  return "Refused";
}

// Best effort: the bytes are overwritten through a volatile pointer, which the compiler may
// not drop as a dead store. Copies the string made when it grew are out of reach.
void wipe(std::string& text) {
  volatile char* bytes = text.data();
  for (std::size_t i = 0; i < text.size(); ++i) {
    bytes[i] = 0;
  }
  text.clear();
}

// The methods carried. TRACE would echo the head, credential included, back to the program;
// CONNECT would open a tunnel past this reading; WebDAV and custom methods are left out because
// no front end on the way is known to frame them as the host does.
bool isCarriedMethod(std::string_view method) {
  static constexpr std::array<std::string_view, 7> kMethods = {"GET",   "HEAD",   "POST",   "PUT",
                                                               "PATCH", "DELETE", "OPTIONS"};
  return std::find(kMethods.begin(), kMethods.end(), method) != kMethods.end();
}

// The methods whose body some servers do not read (RFC 9110 section 9.3.1 calls a GET body a
// smuggling risk): a host that skipped it would read the body as the next request.
bool bodyIsAmbiguous(std::string_view method) { return method == "GET" || method == "HEAD"; }

// Headers the parser frames, routes or closes requests by: never set by a rule nor the home of a
// placeholder.
bool isOwnedField(std::string_view name) {
  return sameFieldName(name, "content-length") || sameFieldName(name, "transfer-encoding") ||
         sameFieldName(name, "upgrade") || sameFieldName(name, "host") ||
         sameFieldName(name, "connection");
}

bool isHostName(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.';
  });
}

constexpr std::string_view kForeignReason =
    "This request carries a placeholder that belongs to another host; a placeholder is replaced "
    "only in requests to its own host, and a request to any other host that carries it is "
    "refused.";

}  // namespace

RequestRewriter::RequestRewriter(RequestRules rules) : rules_(std::move(rules)) {
  std::string problem;
  for (const HeaderRule& rule : rules_.set) {
    if (!isToken(rule.name)) {
      problem = "a header to set, " + quoted(rule.name) + ", is not a token";
    } else if (isOwnedField(rule.name)) {
      problem = "the header " + quoted(rule.name) + " frames requests and cannot be set";
    } else if (hasControl(rule.value)) {
      problem = "the value set for " + quoted(rule.name) + " holds a control character";
    }
  }
  for (std::size_t k = 0; k < rules_.substitute.size(); ++k) {
    const Substitution& substitution = rules_.substitute[k];
    const std::string_view placeholder = substitution.placeholder;
    if (placeholder.empty()) {
      problem = "a placeholder is empty";
    } else if (hasControl(placeholder) || isBlank(placeholder.front()) ||
               isBlank(placeholder.back())) {
      problem = "a placeholder holds a control character or starts or ends with a blank";
    } else if (hasControl(substitution.value)) {
      problem = "the value of a placeholder holds a control character";
    } else if (!isToken(substitution.header) || isOwnedField(substitution.header)) {
      problem = "the header of a placeholder, " + quoted(substitution.header) +
                ", is not a token or frames requests";
    }
    patterns_.push_back({placeholder, k});
  }
  for (const std::string& foreign : rules_.foreign) {
    if (foreign.empty()) {
      problem = "another host's placeholder is empty";
    }
    patterns_.push_back({foreign, kForeignPattern});
  }
  for (const Pattern& pattern : patterns_) {
    longest_ = std::max(longest_, pattern.text.size());
  }
  if (!rules_.host.empty() && !isHostName(rules_.host)) {
    problem = "the host " + quoted(rules_.host) + " is not a name";
  }
  if (!problem.empty()) {
    refuse(500, "misconfigured",
           "The server's credential rules for this host are not valid (" + problem +
               "); no request is carried.");
  }
}

RequestRewriter::~RequestRewriter() {
  for (HeaderRule& rule : rules_.set) {
    wipe(rule.value);
  }
  for (Substitution& substitution : rules_.substitute) {
    wipe(substitution.value);
  }
}

bool RequestRewriter::betweenRequests() const {
  return state_ == State::kClosed || (state_ == State::kHead && head_.empty());
}

std::optional<RequestRewriter::Refused> RequestRewriter::feed(std::string_view bytes,
                                                              std::string& out) {
  if (state_ == State::kRefused) {
    return refused_;
  }
  if (state_ == State::kClosed || bytes.empty()) {
    return std::nullopt;
  }
  if (patterns_.empty()) {
    read(bytes, out);
    return refused_;
  }
  // The stream's last bytes before these, then these: every placeholder that ends in these is
  // found, in the order of its last byte, and judged before that byte is read.
  std::string window = carry_;
  window.append(bytes);
  const std::size_t base = carry_.size();
  std::vector<std::size_t> next(patterns_.size());
  for (std::size_t k = 0; k < patterns_.size(); ++k) {
    const std::size_t size = patterns_[k].text.size();
    next[k] = window.find(patterns_[k].text, base + 1 > size ? base + 1 - size : 0);
  }
  std::size_t at = base;  // the next byte of the window to read
  while (true) {
    std::size_t last = std::string::npos;  // the earliest last byte of a placeholder
    for (std::size_t k = 0; k < patterns_.size(); ++k) {
      if (next[k] != std::string::npos) {
        last = std::min(last, next[k] + patterns_[k].text.size() - 1);
      }
    }
    const std::size_t stop = last == std::string::npos ? window.size() : last;
    read(std::string_view(window).substr(at, stop - at), out);
    at = stop;
    if (state_ == State::kRefused || state_ == State::kClosed || last == std::string::npos) {
      break;
    }
    const Pattern* foreign = nullptr;
    const Pattern* misplaced = nullptr;
    for (std::size_t k = 0; k < patterns_.size(); ++k) {
      if (next[k] == std::string::npos || next[k] + patterns_[k].text.size() - 1 != last) {
        continue;
      }
      if (patterns_[k].substitution == kForeignPattern) {
        foreign = foreign != nullptr ? foreign : &patterns_[k];
      } else if (!inOwnValue(patterns_[k].substitution)) {
        misplaced = misplaced != nullptr ? misplaced : &patterns_[k];
      }
      next[k] = window.find(patterns_[k].text, next[k] + 1);
    }
    if (foreign != nullptr) {
      refuse(403, "placeholder", std::string(kForeignReason));
      break;
    }
    if (misplaced != nullptr) {
      const std::string& header = rules_.substitute[misplaced->substitution].header;
      refuse(403, "placeholder",
             "This request carries a placeholder of this host outside its " + header +
                 " header; the placeholder of this host is replaced only in its " + header +
                 " header, and anywhere else (another header, the request line, a body, a "
                 "trailer) it is refused, so that the secret never lands where the host could "
                 "echo it back.");
      break;
    }
  }
  const std::size_t keep = std::min(window.size(), longest_ - 1);
  carry_.assign(window, window.size() - keep, keep);
  if (state_ == State::kRefused) {
    return refused_;
  }
  return std::nullopt;
}

void RequestRewriter::read(std::string_view bytes, std::string& out) {
  while (!bytes.empty() && state_ != State::kRefused && state_ != State::kClosed) {
    std::size_t used = 0;
    switch (state_) {
      case State::kHead:
        used = readHead(bytes, out);
        break;
      case State::kBody:
        used = readBody(bytes, out);
        break;
      case State::kChunkSize:
        used = readChunkSize(bytes, out);
        break;
      case State::kChunkData:
        used = readChunkData(bytes, out);
        break;
      case State::kChunkDataCr:
      case State::kChunkDataLf:
        used = readChunkDataEnd(bytes, out);
        break;
      case State::kTrailer:
        used = readTrailer(bytes, out);
        break;
      case State::kClosed:
      case State::kRefused:
        break;
    }
    bytes.remove_prefix(used);
  }
}

bool RequestRewriter::inOwnValue(std::size_t k) const {
  // The placeholder holds no control character and neither starts nor ends with a blank (the
  // constructor saw to it): it lies in a value when its bytes read so far are on a header line
  // past that line's colon, and the line's name is its header's.
  const Substitution& substitution = rules_.substitute[k];
  const std::size_t read = substitution.placeholder.size() - 1;
  if (state_ != State::kHead || head_part_ != HeadPart::kLine || colon_ == std::string::npos ||
      read > head_.size()) {
    return false;
  }
  return head_.size() - read > colon_ &&
         sameFieldName(std::string_view(head_).substr(line_begin_, colon_ - line_begin_),
                       substitution.header);
}

std::size_t RequestRewriter::readHead(std::string_view bytes, std::string& out) {
  // Never more than the head may hold: a byte past kMaxHeadBytes is not needed to refuse it.
  const std::size_t limit = std::min(bytes.size(), kMaxHeadBytes - head_.size());
  for (std::size_t i = 0; i < limit; ++i) {
    switch (checkHeadByte(static_cast<unsigned char>(bytes[i]), head_.size() + i)) {
      case HeadByte::kMore:
        break;
      case HeadByte::kEnd:
        head_.append(bytes.substr(0, i + 1));
        acceptHead(out);
        return i + 1;
      case HeadByte::kRefused:
        return i + 1;
    }
  }
  head_.append(bytes.substr(0, limit));
  if (head_.size() >= kMaxHeadBytes) {
    refuse(431, "head-too-large",
           "The request head (request line and headers) is longer than " +
               std::to_string(kMaxHeadBytes) + " bytes.");
  }
  return limit;
}

RequestRewriter::HeadByte RequestRewriter::checkHeadByte(unsigned char c, std::size_t at) {
  static constexpr std::string_view kVersion = "HTTP/1.1\r\n";
  const auto bad = [this](std::string reason) {
    refuse(400, "bad-request", std::move(reason));
    return HeadByte::kRefused;
  };
  switch (head_part_) {
    case HeadPart::kMethod:
      if (c == ' ' && part_bytes_ > 0) {
        head_part_ = HeadPart::kTarget;
        part_bytes_ = 0;
      } else if (isTokenChar(c)) {
        ++part_bytes_;
      } else {
        return bad(
            "The request does not start with a request line (METHOD target HTTP/1.1): a method "
            "is a token followed by one space.");
      }
      return HeadByte::kMore;
    case HeadPart::kTarget:
      if (c == ' ' && part_bytes_ > 0) {
        head_part_ = HeadPart::kVersion;
        part_bytes_ = 0;
      } else if (c > 0x20 && c < 0x7F) {
        ++part_bytes_;
      } else {
        return bad(
            "The request target holds a control character, a non-ASCII byte or a second "
            "space.");
      }
      return HeadByte::kMore;
    case HeadPart::kVersion: {
      // "HTTP/1.0" or "HTTP/1.1", then CRLF; another version is read as one, to be named.
      const std::size_t index = part_bytes_++;
      const bool digit = c >= '0' && c <= '9';
      if (index == 5 && c == '2') {
        refuse(505, "http-version",
               "HTTP/2 is not carried to a brokered host; HTTP/1.1 is (the server reads each "
               "request to add the host's credential). Turn HTTP/2 off in the client.");
        return HeadByte::kRefused;
      }
      if ((index == 5 && digit && c != '1') || (index == 7 && digit && c != '0' && c != '1')) {
        refuse(505, "http-version", "Only HTTP/1.1 and HTTP/1.0 are carried to a brokered host.");
        return HeadByte::kRefused;
      }
      if (c != static_cast<unsigned char>(kVersion[index]) && !(index == 7 && c == '0')) {
        return bad("The request line does not end in \"HTTP/1.1\" and CRLF.");
      }
      if (index + 1 == kVersion.size()) {
        head_part_ = HeadPart::kLineStart;
      }
      return HeadByte::kMore;
    }
    case HeadPart::kLineStart:
      if (c == '\r') {
        head_part_ = HeadPart::kEndLf;
        return HeadByte::kMore;
      }
      if (c == ' ' || c == '\t') {
        return bad(
            "A header line starts with a space or a tab (obsolete line folding, RFC 9112 "
            "section 5.2).");
      }
      line_begin_ = at;
      colon_ = std::string::npos;
      [[fallthrough]];
    case HeadPart::kLine:
      if (c == '\r') {
        head_part_ = HeadPart::kLineLf;
      } else if (c == '\n') {
        return bad("A header line ends in a bare LF, not CRLF.");
      } else if (c == 0) {
        return bad("The request head holds a NUL byte.");
      } else if (isControl(c)) {
        return bad("A header line holds a control character.");
      } else {
        head_part_ = HeadPart::kLine;
        if (c == ':' && colon_ == std::string::npos) {
          colon_ = at;
        }
      }
      return HeadByte::kMore;
    case HeadPart::kLineLf:
    case HeadPart::kEndLf:
      if (c != '\n') {
        return bad("A header line holds a bare CR, not followed by LF.");
      }
      if (head_part_ == HeadPart::kEndLf) {
        return HeadByte::kEnd;
      }
      head_part_ = HeadPart::kLineStart;
      return HeadByte::kMore;
  }
  return HeadByte::kMore;
}

// A header line of an accepted head.
struct RequestRewriter::Field {
  std::string_view line;
  std::string_view name;
  std::size_t value_begin;  // the value, OWS around it excluded, as offsets into `line`
  std::size_t value_end;
  std::string_view value() const { return line.substr(value_begin, value_end - value_begin); }
};

void RequestRewriter::acceptHead(std::string& out) {
  const std::string_view head = head_;
  const std::size_t line_end = head.find(kCrlf);
  const std::string_view line = head.substr(0, line_end);
  const std::string_view method = line.substr(0, line.find(' '));
  const std::string_view target =
      line.substr(method.size() + 1, line.size() - method.size() - 1 - 9);  // " HTTP/1.x"
  const bool http10 = line.ends_with("HTTP/1.0");
  const std::string authority =
      rules_.host.empty() ? std::string() : rules_.host + ":" + std::to_string(rules_.port);
  if (!isCarriedMethod(method)) {
    return refuse(
        405, "method",
        "The method " + quoted(method) +
            " is not carried to a brokered host; GET, HEAD, POST, PUT, PATCH, DELETE "
            "and OPTIONS are." +
            (method == "CONNECT" ? " This stream already is the tunnel to the host." : ""));
  }
  // A front end shared by several hosts routes by the target's or the Host header's name: the
  // request must name the host the credential is for, and nothing else.
  if (!rules_.host.empty() && !target.starts_with('/') && !(target == "*" && method == "OPTIONS")) {
    return refuse(421, "misdirected",
                  "The request target " + quoted(target) +
                      " is not a path (\"/...\"); this "
                      "stream was opened to " +
                      authority +
                      ", and its requests are carried in origin form only, naming the host in "
                      "the Host header.");
  }

  // The header lines; the byte checks already refused bare CR or LF, control characters and
  // folded lines.
  std::vector<Field> fields;
  std::string_view block =
      head.substr(line_end + kCrlf.size(), head.size() - line_end - 2 * kCrlf.size());
  while (!block.empty()) {
    const std::size_t end = block.find(kCrlf);  // the block ends in CRLF: always found
    const std::string_view field = block.substr(0, end);
    block.remove_prefix(end + kCrlf.size());
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos) {
      return refuse(400, "bad-request", "The header line " + quoted(field) + " has no colon.");
    }
    const std::string_view name = field.substr(0, colon);
    if (!isToken(name)) {
      return refuse(400, "bad-request",
                    "The header name " + quoted(name) +
                        " is not a token (no blank before the colon, no separator, no "
                        "non-ASCII byte).");
    }
    const std::string_view value = trimmed(field.substr(colon + 1));
    const auto begin = static_cast<std::size_t>(value.data() - field.data());
    fields.push_back({field, name, begin, begin + value.size()});
  }

  std::vector<const Field*> hosts;
  std::size_t expects = 0;
  std::vector<const Field*> encodings;
  std::vector<const Field*> lengths;
  for (const Field& field : fields) {
    if (equalsIgnoringCase(field.name, "host")) {
      hosts.push_back(&field);
    } else if (equalsIgnoringCase(field.name, "expect")) {
      if (!equalsIgnoringCase(field.value(), "100-continue")) {
        return refuse(400, "bad-request",
                      "The expectation " + quoted(field.value()) +
                          " is not carried; only \"Expect: 100-continue\" is.");
      }
      ++expects;
    } else if (!rules_.host.empty() && routesOrRewrites(field.name)) {
      return refuse(400, "bad-request",
                    "The header " + quoted(field.name) +
                        " tells a front end where to route the request or what it really is; "
                        "it is not carried to a host with a credential.");
    } else if (equalsIgnoringCase(field.name, "upgrade")) {
      return refuse(
          501, "unsupported",
          "The request asks to upgrade the connection (Upgrade: " + quoted(field.value()) +
              "); a brokered host is carried as HTTP/1.1 requests only, so neither "
              "WebSockets nor h2c are.");
    } else if (equalsIgnoringCase(field.name, "transfer-encoding")) {
      encodings.push_back(&field);
    } else if (equalsIgnoringCase(field.name, "content-length")) {
      lengths.push_back(&field);
    } else if (sameFieldName(field.name, "transfer-encoding") ||
               sameFieldName(field.name, "content-length")) {
      return refuse(400, "bad-request",
                    "The header name " + quoted(field.name) +
                        " is a framing header spelt with \"_\", which some servers read as "
                        "\"-\" and others not.");
    } else if (equalsIgnoringCase(field.name, "connection")) {
      // A hop-by-hop option strips the header it names at the next proxy on the way.
      std::string_view options = field.value();
      while (true) {
        const std::size_t comma = options.find(',');
        const std::string_view option = trimmed(options.substr(0, comma));
        bool owned = sameFieldName(option, "content-length") ||
                     sameFieldName(option, "transfer-encoding") || sameFieldName(option, "host");
        for (const HeaderRule& rule : rules_.set) {
          owned = owned || sameFieldName(option, rule.name);
        }
        if (owned) {
          return refuse(400, "bad-request",
                        "The Connection header names " + quoted(option) +
                            ", which a proxy on the way would then remove; it frames the request "
                            "or is set by the server.");
        }
        if (comma == std::string_view::npos) {
          break;
        }
        options.remove_prefix(comma + 1);
      }
    }
  }
  if (hosts.size() > 1) {
    return refuse(400, "bad-request", "The request has several Host headers.");
  }
  if (!rules_.host.empty()) {
    if (hosts.empty()) {
      return refuse(421, "misdirected",
                    "The request has no Host header; this stream was opened to " + authority +
                        ", and each request on it must name that host in its Host header.");
    }
    const std::string_view named = hosts.front()->value();
    // A bare name means port 443 to a front end; on another port only "host:port" names it.
    const bool bare = rules_.port == 443 && equalsIgnoringCase(named, rules_.host);
    if (!bare && !equalsIgnoringCase(named, authority)) {
      return refuse(421, "misdirected",
                    "The request names the host " + quoted(named) +
                        " in its Host header, but this stream was opened to " + authority +
                        "; a request is carried only to the host its stream was opened to.");
    }
  } else if (hosts.empty() && !http10) {
    return refuse(400, "bad-request", "The HTTP/1.1 request has no Host header.");
  }
  if (expects > 1) {
    return refuse(400, "bad-request", "The request has several Expect headers.");
  }

  const bool chunked = !encodings.empty();
  if (chunked && !lengths.empty()) {
    return refuse(400, "bad-request",
                  "The request has both Transfer-Encoding and Content-Length, which servers "
                  "read differently (RFC 9112 section 6.3).");
  }
  if (chunked && http10) {
    return refuse(400, "bad-request",
                  "An HTTP/1.0 request has a Transfer-Encoding header, whose framing is faulty "
                  "by RFC 9112 section 6.1.");
  }
  if (encodings.size() > 1) {
    return refuse(501, "unsupported",
                  "The request has several Transfer-Encoding headers; only one, \"chunked\", is "
                  "carried.");
  }
  if (chunked && !equalsIgnoringCase(encodings.front()->value(), "chunked")) {
    return refuse(501, "unsupported",
                  "The transfer coding " + quoted(encodings.front()->value()) +
                      " is not carried; only \"chunked\" alone is.");
  }

  // Content-Length: one decimal value, or the same one repeated (in several headers or a
  // list), which RFC 9110 section 8.6 lets a recipient take as that value; the host is then
  // sent the single value, as the same section asks of whoever forwards it.
  std::string_view length_text;
  std::size_t length_values = 0;
  for (const Field* field : lengths) {
    std::string_view list = field->value();
    while (true) {
      const std::size_t comma = list.find(',');
      const std::string_view item = trimmed(list.substr(0, comma));
      if (!isDigits(item)) {
        return refuse(400, "bad-request",
                      "The Content-Length " + quoted(field->value()) + " is not a decimal number.");
      }
      if (length_values > 0 && item != length_text) {
        return refuse(400, "bad-request",
                      "The request has several different Content-Length values.");
      }
      length_text = item;
      ++length_values;
      if (comma == std::string_view::npos) {
        break;
      }
      list.remove_prefix(comma + 1);
    }
  }
  std::uint64_t length = 0;
  for (const char c : length_text) {
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (length > (kMaxContentLength - digit) / 10) {
      return refuse(400, "bad-request", "The Content-Length is greater than 2^62 bytes.");
    }
    length = length * 10 + digit;
  }
  const bool body = chunked || length > 0;
  if (body && bodyIsAmbiguous(method)) {
    return refuse(400, "bad-request",
                  "A " + std::string(method) +
                      " request with a body is not carried to a brokered host: servers "
                      "disagree on whether it has one (RFC 9110 section 9.3.1). Send it as "
                      "POST.");
  }

  // What the head becomes, measured before it is written: secrets may make it much longer
  // than it came.
  std::size_t allowed = kMaxHeadBytes + kMaxHeadGrowthBytes;
  for (const HeaderRule& rule : rules_.set) {
    allowed += rule.name.size() + rule.value.size() + 4;
  }
  std::size_t substitutions = 0;
  const std::size_t size =
      writeHead(line, fields, length_text, length_values, body, substitutions, nullptr);
  if (substitutions > kMaxSubstitutions) {
    return refuse(431, "head-too-large",
                  "The request head holds more than " + std::to_string(kMaxSubstitutions) +
                      " of this host's placeholders to replace.");
  }
  if (size > allowed) {
    return refuse(431, "head-too-large",
                  "The request head, with this host's placeholders replaced, would be longer "
                  "than " +
                      std::to_string(allowed) + " bytes.");
  }
  writeHead(line, fields, length_text, length_values, body, substitutions, &out);
  ++requests_;
  if (!rules_.set.empty() || substitutions > 0) {
    ++credentialed_;
  }

  head_.clear();
  head_part_ = HeadPart::kMethod;
  part_bytes_ = 0;
  closing_ = closing_ || body;
  if (chunked) {
    state_ = State::kChunkSize;
  } else if (length > 0) {
    state_ = State::kBody;
    remaining_ = length;
  } else {
    endRequest();
  }
}

// The request line as it came, the program's headers but those the server sets (placeholders
// replaced in their own headers' values) and, on a request with a body, its Connection headers;
// the server's headers; "Connection: close" on a request with a body; the empty line.
std::size_t RequestRewriter::writeHead(std::string_view line, const std::vector<Field>& fields,
                                       std::string_view length_text, std::size_t length_values,
                                       bool body, std::size_t& substitutions,
                                       std::string* out) const {
  std::size_t size = 0;
  const auto put = [&size, out](std::string_view text) {
    size += text.size();
    if (out != nullptr) {
      out->append(text);
    }
  };
  substitutions = 0;
  put(line);
  put(kCrlf);
  bool length_written = false;
  for (const Field& field : fields) {
    if (std::any_of(rules_.set.begin(), rules_.set.end(), [&field](const HeaderRule& rule) {
          return sameFieldName(field.name, rule.name);
        })) {
      continue;
    }
    if (body && equalsIgnoringCase(field.name, "connection")) {
      continue;
    }
    if (length_values > 1 && equalsIgnoringCase(field.name, "content-length")) {
      if (!length_written) {
        put(field.name);
        put(": ");
        put(length_text);
        put(kCrlf);
        length_written = true;
      }
      continue;
    }
    put(field.line.substr(0, field.value_begin));
    size += rewriteValue(field.name, field.value(), substitutions, out);
    put(field.line.substr(field.value_end));
    put(kCrlf);
  }
  for (const HeaderRule& rule : rules_.set) {
    put(rule.name);
    put(": ");
    put(rule.value);
    put(kCrlf);
  }
  if (body) {
    put(kConnectionClose);
  }
  put(kCrlf);
  return size;
}

// The placeholders whose header is `name` replaced in `value`: one pass, leftmost match first
// (the longest where several start at one byte), and never into a value already put in, so a
// secret that held a placeholder stays as it is. Appends to `out` unless null; returns the size.
std::size_t RequestRewriter::rewriteValue(std::string_view name, std::string_view value,
                                          std::size_t& substitutions, std::string* out) const {
  std::vector<const Substitution*> own;
  for (const Substitution& substitution : rules_.substitute) {
    if (sameFieldName(name, substitution.header)) {
      own.push_back(&substitution);
    }
  }
  std::vector<std::size_t> next(own.size(), 0);
  for (std::size_t k = 0; k < own.size(); ++k) {
    next[k] = value.find(own[k]->placeholder);
  }
  std::size_t size = 0;
  std::size_t at = 0;
  while (true) {
    std::size_t best = std::string_view::npos;
    std::size_t chosen = 0;
    for (std::size_t k = 0; k < own.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < at) {
        next[k] = value.find(own[k]->placeholder, at);
      }
      if (next[k] < best || (next[k] == best && next[k] != std::string_view::npos &&
                             own[k]->placeholder.size() > own[chosen]->placeholder.size())) {
        best = next[k];
        chosen = k;
      }
    }
    if (best == std::string_view::npos) {
      break;
    }
    size += best - at + own[chosen]->value.size();
    if (out != nullptr) {
      out->append(value.substr(at, best - at)).append(own[chosen]->value);
    }
    ++substitutions;
    at = best + own[chosen]->placeholder.size();
  }
  size += value.size() - at;
  if (out != nullptr) {
    out->append(value.substr(at));
  }
  return size;
}

std::size_t RequestRewriter::readBody(std::string_view bytes, std::string& out) {
  const auto size = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size()));
  out.append(bytes.substr(0, size));
  remaining_ -= size;
  if (remaining_ == 0) {
    endRequest();
  }
  return size;
}

std::size_t RequestRewriter::readChunkSize(std::string_view bytes, std::string& out) {
  const auto bad = [this](std::size_t used, std::string reason) {
    refuse(400, "bad-request", std::move(reason));
    return used;
  };
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (line_.size() + i + 1 > kMaxChunkLineBytes) {
      return bad(i + 1, "A chunk-size line is longer than " + std::to_string(kMaxChunkLineBytes) +
                            " bytes.");
    }
    const auto c = static_cast<unsigned char>(bytes[i]);
    switch (chunk_part_) {
      case ChunkPart::kSize: {
        const int digit = hexValue(c);
        if (digit >= 0) {
          if (size_digits_ == kMaxChunkSizeDigits) {
            return bad(i + 1, "A chunk size has more than 15 hexadecimal digits.");
          }
          chunk_size_ = chunk_size_ * 16 + static_cast<std::uint64_t>(digit);
          ++size_digits_;
        } else if (size_digits_ == 0) {
          return bad(i + 1, "A chunk does not start with its size in hexadecimal digits.");
        } else if (c == ';') {
          chunk_part_ = ChunkPart::kExtension;
        } else if (c == ' ' || c == '\t') {
          chunk_part_ = ChunkPart::kBlank;
        } else if (c == '\r') {
          chunk_part_ = ChunkPart::kLf;
        } else if (c == '\n') {
          return bad(i + 1, "A chunk-size line ends in a bare LF, not CRLF.");
        } else {
          return bad(i + 1,
                     "A chunk size is followed by a byte that is neither a hexadecimal "
                     "digit, \";\" nor CRLF.");
        }
        break;
      }
      case ChunkPart::kBlank:
        if (c == ';') {
          chunk_part_ = ChunkPart::kExtension;
        } else if (c != ' ' && c != '\t') {
          return bad(i + 1,
                     "Blanks after a chunk size may only come before a chunk extension "
                     "(;name=value).");
        }
        break;
      case ChunkPart::kExtension:
        if (c == '\r') {
          chunk_part_ = ChunkPart::kLf;
        } else if (isControl(c)) {
          return bad(i + 1, "A chunk extension holds a control character or a bare LF.");
        }
        break;
      case ChunkPart::kLf:
        if (c != '\n') {
          return bad(i + 1, "A chunk-size line holds a bare CR, not followed by LF.");
        }
        line_.append(bytes.substr(0, i + 1));
        out.append(line_);
        line_.clear();
        chunk_part_ = ChunkPart::kSize;
        size_digits_ = 0;
        if (chunk_size_ > 0) {
          state_ = State::kChunkData;
          remaining_ = chunk_size_;
        } else {
          state_ = State::kTrailer;
        }
        chunk_size_ = 0;
        return i + 1;
    }
  }
  line_.append(bytes);
  return bytes.size();
}

std::size_t RequestRewriter::readChunkData(std::string_view bytes, std::string& out) {
  const auto size = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size()));
  out.append(bytes.substr(0, size));
  remaining_ -= size;
  if (remaining_ == 0) {
    state_ = State::kChunkDataCr;
  }
  return size;
}

std::size_t RequestRewriter::readChunkDataEnd(std::string_view bytes, std::string& out) {
  const char c = bytes.front();
  if (state_ == State::kChunkDataCr) {
    if (c != '\r') {
      refuse(400, "bad-request",
             "A chunk's data is not followed by CRLF: its size does not match its data.");
      return 1;
    }
    state_ = State::kChunkDataLf;
  } else {
    if (c != '\n') {
      refuse(400, "bad-request", "A chunk's data is followed by a bare CR, not CRLF.");
      return 1;
    }
    state_ = State::kChunkSize;
  }
  out.push_back(c);
  return 1;
}

std::size_t RequestRewriter::readTrailer(std::string_view bytes, std::string& out) {
  const auto bad = [this](std::size_t used, std::string reason) {
    refuse(400, "bad-request", std::move(reason));
    return used;
  };
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (line_.size() + i + 1 > kMaxChunkLineBytes) {
      return bad(i + 1,
                 "A trailer line is longer than " + std::to_string(kMaxChunkLineBytes) + " bytes.");
    }
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (chunk_part_ == ChunkPart::kLf) {
      if (c != '\n') {
        return bad(i + 1, "A trailer line holds a bare CR, not followed by LF.");
      }
      line_.append(bytes.substr(0, i + 1));
      chunk_part_ = ChunkPart::kSize;
      if (line_.size() == kCrlf.size()) {
        out.append(line_);
        endRequest();
        return i + 1;
      }
      const std::string_view field(line_.data(), line_.size() - kCrlf.size());
      const std::size_t colon = field.find(':');
      if (colon == std::string_view::npos || !isToken(field.substr(0, colon))) {
        return bad(i + 1, "A trailer line is not a header field (a token, a colon, a value).");
      }
      out.append(line_);
      line_.clear();
      return i + 1;
    }
    if (c == '\r') {
      chunk_part_ = ChunkPart::kLf;
    } else if (c == '\n') {
      return bad(i + 1, "A trailer line ends in a bare LF, not CRLF.");
    } else if (isControl(c)) {
      return bad(i + 1, "A trailer line holds a control character.");
    } else if ((c == ' ' || c == '\t') && line_.empty() && i == 0) {
      return bad(i + 1, "A trailer line starts with a space or a tab (obsolete line folding).");
    }
  }
  line_.append(bytes);
  return bytes.size();
}

void RequestRewriter::endRequest() {
  // After a request with a body nothing more is read: the host answers it and closes.
  state_ = closing_ ? State::kClosed : State::kHead;
  head_part_ = HeadPart::kMethod;
  part_bytes_ = 0;
  line_.clear();
  chunk_part_ = ChunkPart::kSize;
  chunk_size_ = 0;
  size_digits_ = 0;
  remaining_ = 0;
}

void RequestRewriter::refuse(int status, std::string token, std::string reason) {
  state_ = State::kRefused;
  refused_ = Refused{status, std::move(token), std::move(reason)};
  head_.clear();
  head_.shrink_to_fit();
  line_.clear();
  line_.shrink_to_fit();
}

std::string refusalResponse(const RequestRewriter::Refused& refused) {
  // A refusal is a final response: 4xx or 5xx, whatever the caller passed.
  const int status = refused.status >= 400 && refused.status <= 599 ? refused.status : 500;
  std::string token;
  for (const char c : refused.token) {
    if (isTokenChar(static_cast<unsigned char>(c))) {
      token.push_back(c);
    }
  }
  if (token.empty()) {
    token = "refused";
  }
  const std::string body = oneLine(refused.reason) + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(statusText(status)) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Proxy-Error: " + token +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

}  // namespace scs::egress
