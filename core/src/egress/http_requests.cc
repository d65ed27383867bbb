// The requests a program sends a brokered host, read and rewritten (see the header for why so
// strictly). Every byte is judged once, in stream order, at the moment it is read: the head and
// chunk lines byte by byte as they arrive, bodies a run at a time. A refusal therefore falls on
// the same byte however the stream was split, and what was sent before it is the same too.

#include "egress/http_requests.h"

#include <algorithm>
#include <utility>

namespace scs::egress {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr std::size_t kMaxReasonBytes = 512;
constexpr std::uint64_t kMaxContentLength = std::uint64_t{1} << 62;
constexpr std::size_t kMaxChunkSizeDigits = 15;  // 16^15 = 2^60: never overflows 64 bits
constexpr std::size_t kQuotedBytes = 80;

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

// Header names as the rules compare them: ASCII case ignored and "_" taken for "-", because
// servers that read headers through CGI-style variables (HTTP_CONTENT_LENGTH) see
// "Content_Length" and "Content-Length" as one name.
bool sameFieldName(std::string_view a, std::string_view b) {
  const auto fold = [](char c) { return c == '_' ? '-' : lowerAscii(c); };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&fold](char x, char y) { return fold(x) == fold(y); });
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

// The methods whose body some servers do not read (RFC 9110 section 9.3.1 calls a GET body a
// smuggling risk; TRACE may carry none): a host that skipped it would read the body as the
// next request, and the next real head, credential included, as that request's body.
bool bodyIsAmbiguous(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "TRACE";
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
    } else if (sameFieldName(rule.name, "content-length") ||
               sameFieldName(rule.name, "transfer-encoding") ||
               sameFieldName(rule.name, "upgrade")) {
      problem = "the header " + quoted(rule.name) + " frames requests and cannot be set";
    } else if (hasControl(rule.value)) {
      problem = "the value set for " + quoted(rule.name) + " holds a control character";
    }
  }
  for (const Substitution& substitution : rules_.substitute) {
    if (substitution.placeholder.empty()) {
      problem = "a placeholder is empty";
    } else if (hasControl(substitution.value)) {
      problem = "the value of a placeholder holds a control character";
    }
  }
  for (const std::string& foreign : rules_.foreign) {
    if (foreign.empty()) {
      problem = "another host's placeholder is empty";
    }
    longest_foreign_ = std::max(longest_foreign_, foreign.size());
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

bool RequestRewriter::betweenRequests() const { return state_ == State::kHead && head_.empty(); }

std::optional<RequestRewriter::Refused> RequestRewriter::feed(std::string_view bytes,
                                                              std::string& out) {
  if (state_ == State::kRefused) {
    return refused_;
  }
  // Foreign placeholders are looked for in the raw bytes first, across calls, and only the
  // bytes before the last byte of the first one are read: whatever the split, the stream
  // stops at that byte, and no part of it after is carried.
  const std::size_t clean = beforeForeign(bytes);
  std::string_view rest = bytes.substr(0, clean);
  while (!rest.empty() && state_ != State::kRefused) {
    std::size_t used = 0;
    switch (state_) {
      case State::kHead:
        used = readHead(rest, out);
        break;
      case State::kBody:
        used = readBody(rest, out);
        break;
      case State::kChunkSize:
        used = readChunkSize(rest, out);
        break;
      case State::kChunkData:
        used = readChunkData(rest, out);
        break;
      case State::kChunkDataCr:
      case State::kChunkDataLf:
        used = readChunkDataEnd(rest, out);
        break;
      case State::kTrailer:
        used = readTrailer(rest, out);
        break;
      case State::kRefused:
        break;
    }
    rest.remove_prefix(used);
  }
  if (state_ != State::kRefused && clean < bytes.size()) {
    refuse(403, "placeholder", std::string(kForeignReason));
  }
  if (state_ == State::kRefused) {
    return refused_;
  }
  return std::nullopt;
}

std::size_t RequestRewriter::beforeForeign(std::string_view bytes) {
  if (longest_foreign_ == 0 || bytes.empty()) {
    return bytes.size();
  }
  std::size_t first = bytes.size();  // the last byte of the earliest-ending match
  if (!carry_.empty()) {
    // Matches that begin in the bytes before these and end in them.
    std::string window = carry_;
    window.append(bytes.substr(0, longest_foreign_ - 1));
    for (const std::string& foreign : rules_.foreign) {
      const std::size_t from =
          carry_.size() + 1 > foreign.size() ? carry_.size() + 1 - foreign.size() : 0;
      const std::size_t at = window.find(foreign, from);
      if (at != std::string::npos && at < carry_.size()) {
        first = std::min(first, at + foreign.size() - 1 - carry_.size());
      }
    }
  }
  for (const std::string& foreign : rules_.foreign) {
    const std::size_t at = bytes.substr(0, std::min(bytes.size(), first + 1)).find(foreign);
    if (at != std::string_view::npos) {
      first = std::min(first, at + foreign.size() - 1);
    }
  }
  const std::size_t keep = longest_foreign_ - 1;
  if (bytes.size() >= keep) {
    carry_.assign(bytes.substr(bytes.size() - keep));
  } else {
    carry_.append(bytes);
    if (carry_.size() > keep) {
      carry_.erase(0, carry_.size() - keep);
    }
  }
  return first;
}

std::size_t RequestRewriter::readHead(std::string_view bytes, std::string& out) {
  // Never more than the head may hold: a byte past kMaxHeadBytes is not needed to refuse it.
  const std::size_t limit = std::min(bytes.size(), kMaxHeadBytes - head_.size());
  for (std::size_t i = 0; i < limit; ++i) {
    switch (checkHeadByte(static_cast<unsigned char>(bytes[i]))) {
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

RequestRewriter::HeadByte RequestRewriter::checkHeadByte(unsigned char c) {
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
      const std::size_t at = part_bytes_++;
      const bool digit = c >= '0' && c <= '9';
      if (at == 5 && c == '2') {
        refuse(505, "http-version",
               "HTTP/2 is not carried to a brokered host; HTTP/1.1 is (the server reads each "
               "request to add the host's credential). Turn HTTP/2 off in the client.");
        return HeadByte::kRefused;
      }
      if ((at == 5 && digit && c != '1') || (at == 7 && digit && c != '0' && c != '1')) {
        refuse(505, "http-version", "Only HTTP/1.1 and HTTP/1.0 are carried to a brokered host.");
        return HeadByte::kRefused;
      }
      if (c != static_cast<unsigned char>(kVersion[at]) && !(at == 7 && c == '0')) {
        return bad("The request line does not end in \"HTTP/1.1\" and CRLF.");
      }
      if (at + 1 == kVersion.size()) {
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

void RequestRewriter::acceptHead(std::string& out) {
  const std::string_view head = head_;
  const std::size_t line_end = head.find(kCrlf);
  const std::string_view line = head.substr(0, line_end);
  const std::string_view method = line.substr(0, line.find(' '));
  const bool http10 = line.ends_with("HTTP/1.0");
  if (method == "CONNECT") {
    return refuse(501, "unsupported",
                  "CONNECT is not carried to a brokered host: this stream already is the tunnel "
                  "to it, and it carries HTTP/1.1 requests only.");
  }

  // The header lines; the byte checks already refused bare CR or LF, control characters and
  // folded lines.
  struct Field {
    std::string_view line;
    std::string_view name;
    std::size_t value_begin;  // the value, OWS around it excluded, as offsets into `line`
    std::size_t value_end;
    std::string_view value() const { return line.substr(value_begin, value_end - value_begin); }
  };
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

  std::size_t hosts = 0;
  std::vector<const Field*> encodings;
  std::vector<const Field*> lengths;
  for (const Field& field : fields) {
    if (equalsIgnoringCase(field.name, "host")) {
      ++hosts;
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
  if (hosts > 1) {
    return refuse(400, "bad-request", "The request has several Host headers.");
  }
  if (hosts == 0 && !http10) {
    return refuse(400, "bad-request", "The HTTP/1.1 request has no Host header.");
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
  if ((chunked || length > 0) && bodyIsAmbiguous(method)) {
    return refuse(400, "bad-request",
                  "A " + std::string(method) +
                      " request with a body is not carried to a brokered host: servers "
                      "disagree on whether it has one (RFC 9110 section 9.3.1). Send it as "
                      "POST.");
  }

  // Accepted: the request line as it came, the program's headers but those the server sets
  // (placeholders replaced in their values), the server's headers, the empty line.
  out.append(head.substr(0, line_end + kCrlf.size()));
  bool length_written = false;
  for (const Field& field : fields) {
    if (std::any_of(rules_.set.begin(), rules_.set.end(), [&field](const HeaderRule& rule) {
          return sameFieldName(field.name, rule.name);
        })) {
      continue;
    }
    if (length_values > 1 && equalsIgnoringCase(field.name, "content-length")) {
      if (!length_written) {
        out.append(field.name).append(": ").append(length_text).append(kCrlf);
        length_written = true;
      }
      continue;
    }
    out.append(field.line.substr(0, field.value_begin));
    appendRewrittenValue(field.value(), out);
    out.append(field.line.substr(field.value_end)).append(kCrlf);
  }
  for (const HeaderRule& rule : rules_.set) {
    out.append(rule.name).append(": ").append(rule.value).append(kCrlf);
  }
  out.append(kCrlf);
  ++requests_;

  head_.clear();
  head_part_ = HeadPart::kMethod;
  part_bytes_ = 0;
  if (chunked) {
    state_ = State::kChunkSize;
  } else if (length > 0) {
    state_ = State::kBody;
    remaining_ = length;
  } else {
    endRequest();
  }
}

// One pass, leftmost match first (the longest where several start at one byte), and never into
// a value already put in: a secret that held a placeholder stays as it is.
void RequestRewriter::appendRewrittenValue(std::string_view value, std::string& out) const {
  const std::vector<Substitution>& substitutions = rules_.substitute;
  std::vector<std::size_t> next(substitutions.size(), 0);
  for (std::size_t k = 0; k < substitutions.size(); ++k) {
    next[k] = value.find(substitutions[k].placeholder);
  }
  std::size_t at = 0;
  while (true) {
    std::size_t best = std::string_view::npos;
    std::size_t chosen = 0;
    for (std::size_t k = 0; k < substitutions.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < at) {
        next[k] = value.find(substitutions[k].placeholder, at);
      }
      if (next[k] < best ||
          (next[k] == best && next[k] != std::string_view::npos &&
           substitutions[k].placeholder.size() > substitutions[chosen].placeholder.size())) {
        best = next[k];
        chosen = k;
      }
    }
    if (best == std::string_view::npos) {
      break;
    }
    out.append(value.substr(at, best - at)).append(substitutions[chosen].value);
    at = best + substitutions[chosen].placeholder.size();
  }
  out.append(value.substr(at));
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
  state_ = State::kHead;
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
