// Feeds bytes to egress::ProxyHandshake as the first bytes of a program's egress stream (issue
// 44: HTTP CONNECT, absolute-form HTTP, SOCKS5; written inside the sandbox, so untrusted),
// whole, cut at two places the input chooses, and a byte at a time. Every split must give the
// same steps (the bytes not yet fed after a request counting as its `rest`). A request must
// name a host with no blank or control byte and a port from 1 to 65535, come from a head that
// ends where an independent reading says it does, and, for plain HTTP, forward a head in
// origin form with no Proxy-* or hop-by-hop header, one Host that names the request's host,
// one framing and "Connection: close". A SOCKS5 request's host must be the address or name
// its bytes carry. Every refusal, and refused() for every reason with the input as the reason,
// must be a complete reply in the form the first byte chose.
//
// Input: byte 0 picks where the stream is cut; the rest is the stream.

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "egress/proxy_handshake.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

using egress::ProxyHandshake;
using egress::ProxyProtocol;
using egress::Refusal;
using Kind = ProxyHandshake::Step::Kind;

struct Outcome {
  std::vector<ProxyHandshake::Step> steps;  // those that are not kNeedMore
  std::string granted;
};

// Feeds `chunks` in order, calling feed() again after each kReply as the contract asks.
Outcome drive(std::string_view stream, const std::vector<std::size_t>& cuts) {
  ProxyHandshake handshake;
  Outcome outcome;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    const std::size_t end = i < cuts.size() ? cuts[i] : stream.size();
    ProxyHandshake::Step step = handshake.feed(stream.substr(start, end - start));
    start = end;
    while (step.kind != Kind::kNeedMore) {
      const Kind kind = step.kind;
      outcome.steps.push_back(std::move(step));
      if (kind == Kind::kRequest) {
        outcome.steps.back().rest.append(stream.substr(start));
        outcome.granted = handshake.granted();
      }
      if (kind != Kind::kReply) {
        return outcome;
      }
      step = handshake.feed({});
    }
  }
  return outcome;
}

bool sameStep(const ProxyHandshake::Step& a, const ProxyHandshake::Step& b) {
  return a.kind == b.kind && a.reply == b.reply && a.rest == b.rest && a.reason == b.reason &&
         a.request.protocol == b.request.protocol && a.request.host == b.request.host &&
         a.request.port == b.request.port && a.request.forward == b.request.forward;
}

void checkSame(const Outcome& a, const Outcome& b, std::string_view stream) {
  SCS_FUZZ_CHECK(a.steps.size() == b.steps.size(), stream);
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    SCS_FUZZ_CHECK(sameStep(a.steps[i], b.steps[i]), stream);
  }
  SCS_FUZZ_CHECK(a.granted == b.granted, stream);
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::vector<std::string_view> crlfLines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t end = text.find("\r\n"); end != std::string_view::npos;
       end = text.find("\r\n")) {
    lines.push_back(text.substr(0, end));
    text.remove_prefix(end + 2);
  }
  lines.push_back(text);  // what follows the last CRLF
  return lines;
}

// An HTTP reply as refused() must write it; `reason` is what it was asked to say.
void checkHttpRefusal(std::string_view reply, std::string_view reason) {
  static constexpr std::array<std::string_view, 7> kStatuses = {
      "HTTP/1.1 400 Bad Request",         "HTTP/1.1 403 Forbidden",
      "HTTP/1.1 421 Misdirected Request", "HTTP/1.1 501 Not Implemented",
      "HTTP/1.1 502 Bad Gateway",         "HTTP/1.1 503 Service Unavailable",
      "HTTP/1.1 504 Gateway Timeout"};
  const std::size_t head_end = reply.find("\r\n\r\n");
  SCS_FUZZ_CHECK(head_end != std::string_view::npos, reply);
  const std::vector<std::string_view> lines = crlfLines(reply.substr(0, head_end));
  const std::string_view body = reply.substr(head_end + 4);
  SCS_FUZZ_CHECK(lines.size() == 5, reply);
  SCS_FUZZ_CHECK(std::find(kStatuses.begin(), kStatuses.end(), lines[0]) != kStatuses.end(), reply);
  SCS_FUZZ_CHECK(lines[1] == "Content-Type: text/plain; charset=utf-8", reply);
  SCS_FUZZ_CHECK(lines[2].substr(0, 15) == "X-Proxy-Error: " && lines[2].size() > 15, reply);
  SCS_FUZZ_CHECK(lines[3] == "Content-Length: " + std::to_string(body.size()), reply);
  SCS_FUZZ_CHECK(lines[4] == "Connection: close", reply);
  SCS_FUZZ_CHECK(!body.empty() && body.back() == '\n' && body.size() <= 513, reply);
  const std::string_view text = body.substr(0, body.size() - 1);
  // The reason, cut to at most 512 bytes (and at least 509: a cut UTF-8 sequence is dropped),
  // with every control character a space.
  SCS_FUZZ_CHECK(text.size() == std::min<std::size_t>(reason.size(), 512) ||
                     (reason.size() > 512 && text.size() >= 509),
                 reply);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(reason[i]);
    const char expected = c < 0x20 || c == 0x7F ? ' ' : reason[i];
    SCS_FUZZ_CHECK(text[i] == expected, reply);
  }
  if (isValidUtf8(reason)) {
    SCS_FUZZ_CHECK(isValidUtf8(text), reply);
  }
}

void checkRefusal(std::string_view reply, std::uint8_t first) {
  if (first == 0x05) {
    SCS_FUZZ_CHECK((reply.size() == 2 && reply == std::string_view("\x05\xFF", 2)) ||
                       (reply.size() == 10 && reply[0] == 0x05 && reply[1] != 0 &&
                        reply.substr(2) == std::string_view("\0\x01\0\0\0\0\0\0", 8)),
                   reply);
  } else if (first == 0x04) {
    SCS_FUZZ_CHECK(reply == std::string_view("\0\x5B\0\0\0\0\0\0", 8), reply);
  } else {
    SCS_FUZZ_CHECK(reply.substr(0, 9) == "HTTP/1.1 ", reply);
  }
}

bool isToken(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// The host of a Host value, "name[:port]" or "[v6][:port]", without port or brackets.
std::string hostOf(std::string_view value) {
  if (!value.empty() && value.front() == '[') {
    return std::string(value.substr(1, value.find(']') - 1));
  }
  return std::string(value.substr(0, value.rfind(':')));
}

void checkForward(const egress::ProxyRequest& request, std::string_view head) {
  const std::string& forward = request.forward;
  SCS_FUZZ_CHECK(forward.size() >= 4 && forward.compare(forward.size() - 4, 4, "\r\n\r\n") == 0,
                 forward);
  SCS_FUZZ_CHECK(forward.find("\r\n\r\n") == forward.size() - 4, forward);
  const std::vector<std::string_view> lines =
      crlfLines(std::string_view(forward).substr(0, forward.size() - 4));
  // The request line: the client's method and version around a path.
  const std::string_view line = lines.front();
  const std::size_t space = line.find(' ');
  SCS_FUZZ_CHECK(space != std::string_view::npos &&
                     line.substr(0, space) == head.substr(0, space) && head[space] == ' ' &&
                     line.substr(space + 1, 1) == "/",
                 forward);
  SCS_FUZZ_CHECK(
      line.substr(line.size() - 9) == " HTTP/1.0" || line.substr(line.size() - 9) == " HTTP/1.1",
      forward);
  SCS_FUZZ_CHECK(line.find_first_of("\r\n") == std::string_view::npos, forward);
  SCS_FUZZ_CHECK(lines.back() == "Connection: close", forward);
  std::size_t hosts = 0;
  std::size_t framings = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view header = lines[i];
    SCS_FUZZ_CHECK(header.find_first_of("\r\n") == std::string_view::npos, forward);
    const std::size_t colon = header.find(':');
    SCS_FUZZ_CHECK(colon != std::string_view::npos && isToken(header.substr(0, colon)), forward);
    const std::string name = lower(header.substr(0, colon));
    SCS_FUZZ_CHECK(name.rfind("proxy-", 0) != 0, forward);
    SCS_FUZZ_CHECK(name != "keep-alive" && name != "te" && name != "trailer" && name != "upgrade",
                   forward);
    SCS_FUZZ_CHECK(name != "connection" || i == lines.size() - 1, forward);
    std::string_view value = header.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
      value.remove_suffix(1);
    }
    SCS_FUZZ_CHECK(
        std::none_of(value.begin(), value.end(),
                     [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; }),
        forward);
    if (name == "host") {
      ++hosts;
      SCS_FUZZ_CHECK(lower(hostOf(value)) == lower(request.host), forward);
    }
    if (name == "content-length" || name == "transfer-encoding") {
      ++framings;
    }
  }
  SCS_FUZZ_CHECK(hosts == 1 && framings <= 1, forward);
}

// SOCKS5's greeting and request read again, independently: the host the bytes carry.
void checkSocks(const egress::ProxyRequest& request, std::string_view consumed) {
  SCS_FUZZ_CHECK(consumed.size() >= 2 && consumed[0] == 0x05, consumed);
  const std::size_t methods = static_cast<std::uint8_t>(consumed[1]);
  SCS_FUZZ_CHECK(consumed.substr(2, methods).find('\0') != std::string_view::npos, consumed);
  const std::string_view ask = consumed.substr(2 + methods);
  SCS_FUZZ_CHECK(ask.size() >= 7 && ask.substr(0, 3) == std::string_view("\x05\x01\0", 3),
                 consumed);
  const std::string_view address = ask.substr(4, ask.size() - 6);
  const unsigned port =
      static_cast<unsigned>(static_cast<std::uint8_t>(ask[ask.size() - 2])) * 256 +
      static_cast<std::uint8_t>(ask.back());
  SCS_FUZZ_CHECK(request.port == port, consumed);
  std::array<unsigned char, 16> parsed{};
  switch (ask[3]) {
    case 1:
      SCS_FUZZ_CHECK(address.size() == 4, consumed);
      SCS_FUZZ_CHECK(
          request.host == std::to_string(static_cast<std::uint8_t>(address[0])) + "." +
                              std::to_string(static_cast<std::uint8_t>(address[1])) + "." +
                              std::to_string(static_cast<std::uint8_t>(address[2])) + "." +
                              std::to_string(static_cast<std::uint8_t>(address[3])),
          consumed);
      break;
    case 3:
      SCS_FUZZ_CHECK(address.size() >= 2 &&
                         static_cast<std::uint8_t>(address[0]) == address.size() - 1 &&
                         request.host == address.substr(1),
                     consumed);
      break;
    case 4:
      SCS_FUZZ_CHECK(
          address.size() == 16 && inet_pton(AF_INET6, request.host.c_str(), parsed.data()) == 1 &&
              std::equal(
                  parsed.begin(), parsed.end(), address.begin(),
                  [](unsigned char a, char b) { return a == static_cast<unsigned char>(b); }),
          consumed);
      break;
    default:
      SCS_FUZZ_CHECK(false, consumed);
  }
}

void checkRequest(const ProxyHandshake::Step& step, const std::string& granted,
                  std::string_view stream) {
  const egress::ProxyRequest& request = step.request;
  SCS_FUZZ_CHECK(!request.host.empty() && request.port != 0, stream);
  SCS_FUZZ_CHECK(std::none_of(request.host.begin(), request.host.end(),
                              [](unsigned char c) { return c <= 0x20 || c == 0x7F; }),
                 printable(request.host));
  SCS_FUZZ_CHECK(step.rest.size() <= stream.size() &&
                     stream.substr(stream.size() - step.rest.size()) == step.rest,
                 stream);
  const std::string_view consumed = stream.substr(0, stream.size() - step.rest.size());
  if (request.protocol == ProxyProtocol::kSocks5) {
    SCS_FUZZ_CHECK(stream.front() == 0x05 && request.forward.empty(), stream);
    SCS_FUZZ_CHECK(granted == std::string_view("\x05\0\0\x01\0\0\0\0\0\0", 10), stream);
    checkSocks(request, consumed);
    return;
  }
  // HTTP: the head ends at the first empty line, within the cap.
  SCS_FUZZ_CHECK(consumed.size() <= ProxyHandshake::kMaxHeadBytes &&
                     consumed.find("\r\n\r\n") == consumed.size() - 4,
                 stream);
  const bool connect = consumed.substr(0, 8) == "CONNECT ";
  SCS_FUZZ_CHECK((request.protocol == ProxyProtocol::kConnect) == connect, stream);
  if (connect) {
    SCS_FUZZ_CHECK(request.forward.empty(), stream);
    SCS_FUZZ_CHECK(granted == "HTTP/1.1 200 Connection established\r\n\r\n", stream);
    return;
  }
  SCS_FUZZ_CHECK(granted.empty(), stream);
  const std::string_view target = consumed.substr(consumed.find(' ') + 1);
  SCS_FUZZ_CHECK(lower(target.substr(0, 7)) == "http://", stream);
  checkForward(request, consumed);
}

void check(std::string_view stream, std::uint8_t cut) {
  const Outcome whole = drive(stream, {});
  const std::size_t first_cut = stream.empty() ? 0 : cut % (stream.size() + 1);
  const std::size_t second_cut = first_cut + (stream.size() - first_cut) / 2;
  checkSame(whole, drive(stream, {first_cut, second_cut}), stream);
  if (stream.size() <= 1024) {
    std::vector<std::size_t> every(stream.size());
    for (std::size_t i = 0; i < every.size(); ++i) {
      every[i] = i;
    }
    checkSame(whole, drive(stream, every), stream);
  }

  for (std::size_t i = 0; i < whole.steps.size(); ++i) {
    const ProxyHandshake::Step& step = whole.steps[i];
    SCS_FUZZ_CHECK(i + 1 == whole.steps.size() || step.kind == Kind::kReply, stream);
    if (step.kind == Kind::kReply) {
      SCS_FUZZ_CHECK(
          i == 0 && stream.front() == 0x05 && step.reply == std::string_view("\x05\0", 2), stream);
    } else if (step.kind == Kind::kRefuse) {
      SCS_FUZZ_CHECK(!step.reason.empty() && step.reason.size() <= 1024, stream);
      SCS_FUZZ_CHECK(step.reason.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos,
                     step.reason);
      checkRefusal(step.reply, static_cast<std::uint8_t>(stream.front()));
      if (step.reply.substr(0, 5) == "HTTP/") {
        checkHttpRefusal(step.reply, step.reason);
      }
    } else {
      checkRequest(step, whole.granted, stream);
    }
  }
  if (whole.steps.empty()) {
    // Waiting is only right for what may still become a request: never past the head's cap.
    SCS_FUZZ_CHECK(stream.size() < ProxyHandshake::kMaxHeadBytes || stream.front() == 0x05, stream);
  }

  // The replies a relay makes later, in the form the first byte chose, the input as reason.
  ProxyHandshake handshake;
  handshake.feed(stream.substr(0, 1));
  for (const Refusal why :
       {Refusal::kNotAllowed, Refusal::kBadRequest, Refusal::kMisdirected, Refusal::kUnreachable,
        Refusal::kConnectFailed, Refusal::kTimedOut, Refusal::kLimit, Refusal::kUnsupported}) {
    const std::string reply = handshake.refused(why, stream);
    checkRefusal(reply, stream.empty() ? 0 : static_cast<std::uint8_t>(stream.front()));
    if (stream.empty() || (stream.front() != 0x04 && stream.front() != 0x05)) {
      checkHttpRefusal(reply, stream);
    }
  }
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 20000) {
    return 0;
  }
  scs::fuzz::check(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), data[0]);
  return 0;
}
