// What an egress stream begins with (issue 44): the proxy request (HTTP CONNECT, plain HTTP in
// absolute form, SOCKS5) and, inside a tunnel, the TLS ClientHello whose name must be the
// CONNECT host. Real hellos come from OpenSSL's client writing into a memory BIO; the odd ones
// are built by hand.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "egress/proxy_handshake.h"

namespace scs::egress {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Kind = ProxyHandshake::Step::Kind;

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int value : values) {
    out.push_back(static_cast<char>(value));
  }
  return out;
}

// Every step that asks something of the caller, feeding `input` in pieces of `piece` bytes
// (0: at once) and calling feed() again after a kReply, as the contract says. The bytes not
// fed after a kRequest are added to its `rest`, as a relay would carry them next.
std::vector<ProxyHandshake::Step> run(const std::string& input, std::size_t piece = 0) {
  ProxyHandshake handshake;
  std::vector<ProxyHandshake::Step> steps;
  const std::size_t size = piece == 0 ? std::max<std::size_t>(input.size(), 1) : piece;
  for (std::size_t at = 0; at < input.size() || (at == 0 && input.empty()); at += size) {
    ProxyHandshake::Step step = handshake.feed(std::string_view(input).substr(at, size));
    while (step.kind != Kind::kNeedMore) {
      const Kind kind = step.kind;
      steps.push_back(std::move(step));
      if (kind != Kind::kReply) {
        if (kind == Kind::kRequest) {
          steps.back().rest += input.substr(std::min(input.size(), at + size));
        }
        return steps;
      }
      step = handshake.feed({});
    }
  }
  return steps;
}

// The one step a request ends in (after any kReply).
ProxyHandshake::Step last(const std::string& input, std::size_t piece = 0) {
  std::vector<ProxyHandshake::Step> steps = run(input, piece);
  return steps.empty() ? ProxyHandshake::Step{} : steps.back();
}

std::string describe(const ProxyHandshake::Step& step) {
  return "kind " + std::to_string(static_cast<int>(step.kind)) + " reason: " + step.reason;
}

// --- HTTP CONNECT -------------------------------------------------------------------------

TEST(ProxyHandshakeTest, ConnectNamesHostAndPortAndKeepsWhatFollowsTheHead) {
  ProxyHandshake handshake;
  const ProxyHandshake::Step step = handshake.feed(
      "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n"
      "Proxy-Authorization: Basic eDp5\r\nUser-Agent: curl/7.88\r\n\r\n\x16\x03\x01");
  ASSERT_EQ(step.kind, Kind::kRequest) << describe(step);
  EXPECT_EQ(step.request.protocol, ProxyProtocol::kConnect);
  EXPECT_EQ(step.request.host, "api.github.com");
  EXPECT_EQ(step.request.port, 443);
  EXPECT_EQ(step.request.forward, "");
  EXPECT_EQ(step.rest, "\x16\x03\x01");
  EXPECT_EQ(handshake.granted(), "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(handshake.feed("more").kind, Kind::kNeedMore);  // over: ignored
}

TEST(ProxyHandshakeTest, ConnectTakesABracketedIpv6LiteralWithoutItsBrackets) {
  const ProxyHandshake::Step step = last("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(step.kind, Kind::kRequest) << describe(step);
  EXPECT_EQ(step.request.host, "2001:db8::1");
  EXPECT_EQ(step.request.port, 8443);
  EXPECT_EQ(step.rest, "");
}

TEST(ProxyHandshakeTest, ConnectWithoutAGoodPortIsABadRequest) {
  for (const std::string target :
       {"example.com", "example.com:", "example.com:0", "example.com:65536", "example.com:0443",
        "example.com:+443", "example.com:https", "example.com:443.evil", "::1:443", "[::1]",
        "[::1]443", "[]:443", "user@example.com:443", "example.com/x:443", "http://example.com:443",
        ":443"}) {
    const ProxyHandshake::Step step = last("CONNECT " + target + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(step.kind, Kind::kRefuse) << target;
    EXPECT_THAT(step.reply, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << target;
    EXPECT_THAT(step.reply, HasSubstr("\r\nX-Proxy-Error: bad-request\r\n")) << target;
    EXPECT_FALSE(step.reason.empty()) << target;
  }
  EXPECT_THAT(last("CONNECT example.com HTTP/1.1\r\n\r\n").reason, HasSubstr("has no port"));
  EXPECT_EQ(last("CONNECT example.com:65535 HTTP/1.1\r\n\r\n").request.port, 65535);
}

// --- Plain HTTP in absolute form ------------------------------------------------------------

TEST(ProxyHandshakeTest, AbsoluteFormIsRewrittenToOriginFormWithoutHopByHopHeaders) {
  const ProxyHandshake::Step step = last(
      "POST http://Example.com/upload?x=1&y=2 HTTP/1.1\r\n"
      "Host: example.COM\r\n"
      "Proxy-Authorization: Basic eDp5\r\n"
      "Proxy-Connection: keep-alive\r\n"
      "Connection: keep-alive, X-Secret\r\n"
      "Keep-Alive: timeout=5\r\n"
      "TE: trailers\r\n"
      "Trailer: Expires\r\n"
      "Upgrade: h2c\r\n"
      "X-Secret: dropped because Connection names it\r\n"
      "Content-Type: text/plain\r\n"
      "Content-Length: 5\r\n"
      "\r\n"
      "hello");
  ASSERT_EQ(step.kind, Kind::kRequest) << describe(step);
  EXPECT_EQ(step.request.protocol, ProxyProtocol::kHttp);
  EXPECT_EQ(step.request.host, "Example.com");  // as written: the policy canonicalises
  EXPECT_EQ(step.request.port, 80);
  EXPECT_EQ(step.request.forward,
            "POST /upload?x=1&y=2 HTTP/1.1\r\n"
            "Host: example.COM\r\n"
            "Content-Type: text/plain\r\n"
            "Content-Length: 5\r\n"
            "Connection: close\r\n"
            "\r\n");
  EXPECT_EQ(step.rest, "hello");
}

TEST(ProxyHandshakeTest, AbsoluteFormFillsInThePathAndTheDefaultPortOnEitherSide) {
  struct Case {
    std::string target, host, path;
    std::uint16_t port;
  };
  for (const Case& c :
       std::vector<Case>{{"http://example.com", "example.com", "/", 80},
                         {"http://example.com?q=1", "example.com", "/?q=1", 80},
                         {"HTTP://example.com:80/a", "example.com", "/a", 80},
                         {"http://example.com:8080/a/b", "example.com:8080", "/a/b", 8080},
                         {"http://[2001:db8::1]:8080/", "[2001:DB8::1]:8080", "/", 8080},
                         {"http://example.com/", "example.com:80", "/", 80},
                         {"http://example.com:80/", "example.com", "/", 80}}) {
    ProxyHandshake handshake;
    const ProxyHandshake::Step step =
        handshake.feed("GET " + c.target + " HTTP/1.0\r\nHost: " + c.host + "\r\n\r\n");
    ASSERT_EQ(step.kind, Kind::kRequest) << c.target << " " << describe(step);
    EXPECT_EQ(step.request.port, c.port) << c.target;
    EXPECT_EQ(step.request.forward,
              "GET " + c.path + " HTTP/1.0\r\nHost: " + c.host + "\r\nConnection: close\r\n\r\n")
        << c.target;
    EXPECT_EQ(handshake.granted(), "");
  }
}

TEST(ProxyHandshakeTest, AHostThatIsNotTheUrlsAuthorityIsMisdirected) {
  for (const std::string host : {"evil.example", "example.com:8080", "example.com.", "", "a b"}) {
    const ProxyHandshake::Step step =
        last("GET http://example.com/ HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    EXPECT_EQ(step.kind, Kind::kRefuse) << host;
    EXPECT_THAT(step.reply, StartsWith("HTTP/1.1 421 Misdirected Request\r\n")) << host;
    EXPECT_THAT(step.reply, HasSubstr("\r\nX-Proxy-Error: misdirected\r\n")) << host;
  }
}

TEST(ProxyHandshakeTest, NoHostOrSeveralHostsIsABadRequest) {
  const ProxyHandshake::Step two =
      last("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nhost: example.com\r\n\r\n");
  EXPECT_EQ(two.kind, Kind::kRefuse);
  EXPECT_THAT(two.reply, StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(two.reason, HasSubstr("several Host"));
  const ProxyHandshake::Step none = last("GET http://example.com/ HTTP/1.1\r\n\r\n");
  EXPECT_EQ(none.kind, Kind::kRefuse);
  EXPECT_THAT(none.reason, HasSubstr("no Host"));
}

// Whatever a proxy and an origin server could read as different requests.
TEST(ProxyHandshakeTest, RequestsThatCouldBeSmuggledAreRefused) {
  const std::string line = "POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n";
  struct Case {
    std::string headers;
    int status;
  };
  for (const Case& c : std::vector<Case>{
           {"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400},
           {"Content-Length: 5\r\nContent-Length: 5\r\n", 400},
           {"Content-Length: 5, 5\r\n", 400},
           {"Content-Length: -1\r\n", 400},
           {"Content-Length:\r\n", 400},
           {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400},
           {"Transfer-Encoding: chunked, identity\r\n", 501},
           {"Transfer-Encoding: xchunked\r\n", 501},
           {"X-Folded: a\r\n b\r\n", 400},
           {"X-Folded: a\r\n\tb\r\n", 400},
           {"Content-Length : 5\r\n", 400},
           {"Bad[Name]: 1\r\n", 400},
           {": no name\r\n", 400},
           {"No colon here\r\n", 400},
           {std::string("X-Nul: a\0b\r\n", 12), 400},
           {"X-Cr: a\rb\r\n", 400},
           {"X-Lf: a\nContent-Length: 5\r\n", 400},
           {"X-Bell: \x07\r\n", 400},
           {"Connection: Content-Length\r\nContent-Length: 5\r\n", 400},
           {"Connection: close, host\r\n", 400},
           {"Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n", 400}}) {
    const ProxyHandshake::Step step = last(line + c.headers + "\r\n");
    EXPECT_EQ(step.kind, Kind::kRefuse) << c.headers;
    EXPECT_THAT(step.reply, StartsWith("HTTP/1.1 " + std::to_string(c.status) + " ")) << c.headers;
  }
  const ProxyHandshake::Step old = last(
      "POST http://example.com/ HTTP/1.0\r\nHost: example.com\r\nTransfer-Encoding: "
      "chunked\r\n\r\n");
  EXPECT_EQ(old.kind, Kind::kRefuse);
  // One framing, stated once, passes; the body is not ours to read.
  const ProxyHandshake::Step chunked =
      last(line + "Transfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  ASSERT_EQ(chunked.kind, Kind::kRequest) << describe(chunked);
  EXPECT_EQ(chunked.rest, "5\r\nhello\r\n0\r\n\r\n");
}

TEST(ProxyHandshakeTest, ARequestToTheProxyItselfIsToldToUseTheProxyForm) {
  for (const std::string request : {"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
                                    "OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n"}) {
    const ProxyHandshake::Step step = last(request);
    EXPECT_EQ(step.kind, Kind::kRefuse) << request;
    EXPECT_THAT(step.reply, StartsWith("HTTP/1.1 400 Bad Request\r\n"));
    EXPECT_THAT(step.reason, HasSubstr("absolute form"));
    EXPECT_THAT(step.reply, HasSubstr(step.reason));
  }
  EXPECT_THAT(last("GET example.com:80 HTTP/1.1\r\n\r\n").reason, HasSubstr("not an absolute"));
}

TEST(ProxyHandshakeTest, OnlyHttpUrlsAreForwardedAndNeverWithCredentials) {
  const ProxyHandshake::Step https =
      last("GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_THAT(https.reply, StartsWith("HTTP/1.1 501 Not Implemented\r\n"));
  EXPECT_THAT(https.reason, HasSubstr("CONNECT"));
  EXPECT_THAT(last("GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n").reply,
              StartsWith("HTTP/1.1 501 "));
  for (const std::string target : {"http://user:pw@example.com/", "http://example.com/#frag",
                                   "http:///path", "http://example.com:99999/"}) {
    const ProxyHandshake::Step step =
        last("GET " + target + " HTTP/1.1\r\nHost: example.com\r\n\r\n");
    EXPECT_THAT(step.reply, StartsWith("HTTP/1.1 400 ")) << target;
  }
}

TEST(ProxyHandshakeTest, WhatIsNotHttpIsRefusedAtTheFirstByteThatShowsIt) {
  ProxyHandshake tls;
  const ProxyHandshake::Step step = tls.feed("\x16");  // a ClientHello sent to the proxy
  EXPECT_EQ(step.kind, Kind::kRefuse);
  EXPECT_THAT(step.reply, StartsWith("HTTP/1.1 400 "));

  ProxyHandshake bare_lf;
  EXPECT_EQ(bare_lf.feed("GET http://example.com/ HTTP/1.1").kind, Kind::kNeedMore);
  EXPECT_EQ(bare_lf.feed("\n").kind, Kind::kRefuse);

  EXPECT_EQ(last("GET  http://example.com/ HTTP/1.1\r\n").kind, Kind::kRefuse);
  EXPECT_EQ(last("GET http://example.com/\x7f HTTP/1.1\r\n").kind, Kind::kRefuse);
  EXPECT_THAT(last("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").reply, StartsWith("HTTP/1.1 501 "));
  EXPECT_THAT(last("GET http://example.com/ HTTP/1.2\r\n").reply, StartsWith("HTTP/1.1 501 "));
  EXPECT_THAT(last("GET http://example.com/ HTTP/1.1 \r\n").reply, StartsWith("HTTP/1.1 400 "));
}

TEST(ProxyHandshakeTest, TheHeadIsBoundedAt16KiB) {
  const std::string start = "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  const std::string fits(ProxyHandshake::kMaxHeadBytes - start.size() - end.size(), 'a');
  const ProxyHandshake::Step whole = last(start + fits + end + "body");
  ASSERT_EQ(whole.kind, Kind::kRequest) << describe(whole);
  EXPECT_EQ(whole.rest, "body");

  const ProxyHandshake::Step over = last(start + fits + "a" + end);
  EXPECT_EQ(over.kind, Kind::kRefuse);
  EXPECT_THAT(over.reason, HasSubstr("16384"));
  // Without an end in sight the refusal comes at the limit, not at some timeout.
  ProxyHandshake endless;
  EXPECT_EQ(endless.feed(start).kind, Kind::kNeedMore);
  EXPECT_EQ(endless.feed(std::string(ProxyHandshake::kMaxHeadBytes - start.size() - 1, 'a')).kind,
            Kind::kNeedMore);
  EXPECT_EQ(endless.feed("a").kind, Kind::kRefuse);
}

// --- SOCKS5 --------------------------------------------------------------------------------

const std::string kGreeting = bytes({5, 2, 2, 0});  // offers user/password and no auth

TEST(ProxyHandshakeTest, Socks5ChoosesNoAuthenticationThenTakesADomainAsWritten) {
  ProxyHandshake handshake;
  const ProxyHandshake::Step reply = handshake.feed(kGreeting);
  ASSERT_EQ(reply.kind, Kind::kReply);
  EXPECT_EQ(reply.reply, bytes({5, 0}));
  const ProxyHandshake::Step step =
      handshake.feed(bytes({5, 1, 0, 3, 14}) + "Api.GitHub.com" + bytes({1, 187}) + "GET");
  ASSERT_EQ(step.kind, Kind::kRequest) << describe(step);
  EXPECT_EQ(step.request.protocol, ProxyProtocol::kSocks5);
  EXPECT_EQ(step.request.host, "Api.GitHub.com");
  EXPECT_EQ(step.request.port, 443);
  EXPECT_EQ(step.rest, "GET");
  EXPECT_EQ(handshake.granted(), bytes({5, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(handshake.refused(Refusal::kNotAllowed, "no"), bytes({5, 2, 0, 1, 0, 0, 0, 0, 0, 0}));
}

TEST(ProxyHandshakeTest, Socks5WithoutNoAuthenticationIsRefused) {
  for (const std::string& greeting : {bytes({5, 1, 2}), bytes({5, 0})}) {
    const ProxyHandshake::Step step = last(greeting);
    EXPECT_EQ(step.kind, Kind::kRefuse);
    EXPECT_EQ(step.reply, bytes({5, 0xFF}));
  }
}

TEST(ProxyHandshakeTest, Socks5AddressesAreRendered) {
  const ProxyHandshake::Step v4 = last(kGreeting + bytes({5, 1, 0, 1, 10, 0, 0, 1, 0x1F, 0x90}));
  ASSERT_EQ(v4.kind, Kind::kRequest) << describe(v4);
  EXPECT_EQ(v4.request.host, "10.0.0.1");
  EXPECT_EQ(v4.request.port, 8080);
  const ProxyHandshake::Step v6 =
      last(kGreeting +
           bytes({5, 1, 0, 4, 0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80}));
  ASSERT_EQ(v6.kind, Kind::kRequest) << describe(v6);
  EXPECT_EQ(v6.request.host, "2001:db8::1");
  EXPECT_EQ(v6.request.port, 80);
  const ProxyHandshake::Step mapped =
      last(kGreeting +
           bytes({5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, 0, 80}));
  EXPECT_EQ(mapped.request.host, "::ffff:127.0.0.1");  // the policy sees the embedded IPv4
}

TEST(ProxyHandshakeTest, Socks5RefusesOtherCommandsAddressTypesAndOddBytes) {
  struct Case {
    std::string request;
    int code;
  };
  for (const Case& c : std::vector<Case>{
           {bytes({5, 2, 0, 1, 1, 2, 3, 4, 0, 80}), 0x07},  // BIND
           {bytes({5, 3, 0, 1, 1, 2, 3, 4, 0, 80}), 0x07},  // UDP ASSOCIATE
           {bytes({5, 9}), 0x07},                           // refused before the address
           {bytes({5, 1, 0, 2, 1, 2, 3, 4, 0, 80}), 0x08},  // no such address type
           {bytes({5, 1, 1, 1, 1, 2, 3, 4, 0, 80}), 0x01},  // reserved byte set
           {bytes({4, 1, 0, 1, 1, 2, 3, 4, 0, 80}), 0x01},  // wrong version
           {bytes({5, 1, 0, 3, 0, 0, 80}), 0x01},           // empty domain
           {bytes({5, 1, 0, 1, 1, 2, 3, 4, 0, 0}), 0x01},   // port 0
           {bytes({5, 1, 0, 3, 4}) + "a\r\nb" + bytes({0, 80}), 0x01},
           {bytes({5, 1, 0, 3, 3}) + std::string("a\0b", 3) + bytes({0, 80}), 0x01}}) {
    const ProxyHandshake::Step step = last(kGreeting + c.request);
    EXPECT_EQ(step.kind, Kind::kRefuse);
    EXPECT_EQ(step.reply, bytes({5, c.code, 0, 1, 0, 0, 0, 0, 0, 0}));
    EXPECT_FALSE(step.reason.empty());
  }
}

TEST(ProxyHandshakeTest, Socks5RequestPipelinedWithTheGreetingIsReadOnTheNextFeed) {
  ProxyHandshake handshake;
  const std::string request = bytes({5, 1, 0, 1, 1, 2, 3, 4, 1, 187});
  const ProxyHandshake::Step reply = handshake.feed(kGreeting + request + "data");
  ASSERT_EQ(reply.kind, Kind::kReply);
  const ProxyHandshake::Step step = handshake.feed({});
  ASSERT_EQ(step.kind, Kind::kRequest) << describe(step);
  EXPECT_EQ(step.request.host, "1.2.3.4");
  EXPECT_EQ(step.rest, "data");
}

TEST(ProxyHandshakeTest, Socks4IsRefusedInItsOwnReplyForm) {
  const ProxyHandshake::Step step = last(bytes({4, 1, 0, 80, 1, 2, 3, 4, 0}));
  EXPECT_EQ(step.kind, Kind::kRefuse);
  EXPECT_EQ(step.reply, bytes({0, 0x5B, 0, 0, 0, 0, 0, 0}));
  EXPECT_THAT(step.reason, HasSubstr("SOCKS5"));
}

// --- Any split -----------------------------------------------------------------------------

TEST(ProxyHandshakeTest, AnySplitOfTheBytesGivesTheSameSteps) {
  const std::vector<std::string> inputs = {
      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n\x16\x03\x01\x00",
      "GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: x\r\n\r\nz",
      "GET http://example.com/ HTTP/1.1\r\nHost: other\r\n\r\n",
      "POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX: a\r\n b\r\n\r\n",
      "GET / HTTP/1.1\r\n\r\n",
      "GET http://e/ HTTP/1.1\n\n",
      "\x16\x03\x01\x02\x00\x01",
      "CONNECT a:1 HTTP/1.1\r\n\r",
      kGreeting + bytes({5, 1, 0, 3, 3}) + "a.b" + bytes({0, 80}) + "tail",
      kGreeting + bytes({5, 1, 0, 7}),
      kGreeting + bytes({5, 2, 0}),
      bytes({5, 1, 1}),
      bytes({4, 1}),
      "",
  };
  for (const std::string& input : inputs) {
    const std::vector<ProxyHandshake::Step> whole = run(input);
    for (const std::size_t piece : {1, 2, 3, 7}) {
      const std::vector<ProxyHandshake::Step> split = run(input, piece);
      ASSERT_EQ(split.size(), whole.size()) << input << " in pieces of " << piece;
      for (std::size_t i = 0; i < whole.size(); ++i) {
        EXPECT_EQ(split[i].kind, whole[i].kind) << input;
        EXPECT_EQ(split[i].reply, whole[i].reply) << input;
        EXPECT_EQ(split[i].reason, whole[i].reason) << input;
        EXPECT_EQ(split[i].rest, whole[i].rest) << input;
        EXPECT_EQ(split[i].request.host, whole[i].request.host) << input;
        EXPECT_EQ(split[i].request.port, whole[i].request.port) << input;
        EXPECT_EQ(split[i].request.forward, whole[i].request.forward) << input;
      }
    }
  }
}

// --- Refusals ------------------------------------------------------------------------------

TEST(ProxyHandshakeTest, RefusalsAreCompleteHttpResponsesWithTheReasonOnOneLine) {
  struct Case {
    Refusal why;
    std::string status, token;
    int socks;
  };
  for (const Case& c :
       std::vector<Case>{{Refusal::kNotAllowed, "403 Forbidden", "blocked-by-allowlist", 2},
                         {Refusal::kBadRequest, "400 Bad Request", "bad-request", 1},
                         {Refusal::kMisdirected, "421 Misdirected Request", "misdirected", 2},
                         {Refusal::kUnreachable, "502 Bad Gateway", "unreachable", 4},
                         {Refusal::kConnectFailed, "502 Bad Gateway", "connect-failed", 5},
                         {Refusal::kTimedOut, "504 Gateway Timeout", "timeout", 6},
                         {Refusal::kLimit, "503 Service Unavailable", "limit", 1},
                         {Refusal::kUnsupported, "501 Not Implemented", "unsupported", 7}}) {
    ProxyHandshake fresh;  // nothing read yet: the HTTP form
    EXPECT_EQ(fresh.refused(c.why, "egress to x.test:443 denied by sandbox policy"),
              "HTTP/1.1 " + c.status +
                  "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Proxy-Error: " + c.token +
                  "\r\nContent-Length: 46\r\nConnection: close\r\n\r\n"
                  "egress to x.test:443 denied by sandbox policy\n");
    ProxyHandshake socks;
    ASSERT_EQ(socks.feed(kGreeting).kind, Kind::kReply);
    EXPECT_EQ(socks.refused(c.why, "x"), bytes({5, c.socks, 0, 1, 0, 0, 0, 0, 0, 0}));
  }

  ProxyHandshake handshake;
  const std::string injected =
      handshake.refused(Refusal::kNotAllowed, std::string("a\r\nX-Injected: 1\0\n", 18));
  EXPECT_THAT(injected, EndsWith("\r\n\r\na  X-Injected: 1  \n"));
  EXPECT_THAT(injected, HasSubstr("Content-Length: 19\r\n"));

  const std::string longer = handshake.refused(Refusal::kBadRequest, std::string(600, 'x'));
  EXPECT_THAT(longer, EndsWith("\r\n\r\n" + std::string(512, 'x') + "\n"));
  // A cut never leaves half a UTF-8 sequence: 511 bytes, then "é" would straddle 512.
  const std::string accented =
      handshake.refused(Refusal::kBadRequest, std::string(511, 'x') + "\xC3\xA9" + "tail");
  EXPECT_THAT(accented, EndsWith("\r\n\r\n" + std::string(511, 'x') + "\n"));
}

// --- TLS ClientHello -----------------------------------------------------------------------

std::string u16(std::size_t value) { return bytes({int(value >> 8) & 0xFF, int(value) & 0xFF}); }
std::string u24(std::size_t value) {
  return bytes({int(value >> 16) & 0xFF}) + u16(value & 0xFFFF);
}

std::string extension(int type, const std::string& data) {
  return u16(type) + u16(data.size()) + data;
}

std::string serverNames(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) {
    list += bytes({0}) + u16(name.size()) + name;
  }
  return extension(0, u16(list.size()) + list);
}

// A ClientHello handshake message; `extensions` is the whole extensions block's content.
std::string helloMessage(const std::string& extensions, bool with_extensions = true) {
  std::string body = bytes({3, 3}) + std::string(32, 'r') + bytes({32}) + std::string(32, 's') +
                     u16(4) + bytes({0x13, 0x01, 0x13, 0x02}) + bytes({1, 0});
  if (with_extensions) {
    body += u16(extensions.size()) + extensions;
  }
  return bytes({1}) + u24(body.size()) + body;
}

// `message` cut into handshake records of at most `size` bytes.
std::string records(const std::string& message, std::size_t size = 1 << 14, int minor = 1) {
  std::string out;
  for (std::size_t at = 0; at < message.size(); at += size) {
    const std::string fragment = message.substr(at, size);
    out += bytes({22, 3, minor}) + u16(fragment.size()) + fragment;
  }
  return out;
}

// The first flight of OpenSSL's own client, which a real program would send.
std::string opensslHello(const char* name) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                            &SSL_CTX_free);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context.get()), &SSL_free);
  BIO* from_server = BIO_new(BIO_s_mem());
  BIO* to_server = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), from_server, to_server);  // the SSL owns both now
  if (name != nullptr) {
    SSL_set_tlsext_host_name(ssl.get(), name);
  }
  SSL_set_connect_state(ssl.get());
  EXPECT_EQ(SSL_do_handshake(ssl.get()), -1);  // waits for a server that never answers
  std::string out(static_cast<std::size_t>(BIO_pending(to_server)), '\0');
  EXPECT_EQ(BIO_read(to_server, out.data(), static_cast<int>(out.size())),
            static_cast<int>(out.size()));
  return out;
}

// The handshake message inside records that each carry one fragment.
std::string messageOf(std::string flight) {
  std::string message;
  while (flight.size() >= 5) {
    const std::size_t length =
        (static_cast<std::uint8_t>(flight[3]) << 8) | static_cast<std::uint8_t>(flight[4]);
    message += flight.substr(5, length);
    flight.erase(0, 5 + length);
  }
  return message;
}

TEST(ClientHelloTest, OpenSslsHelloGivesItsServerNameInLowerCase) {
  const std::string flight = opensslHello("API.GitHub.com");
  ASSERT_GT(flight.size(), 100U);
  const ClientHello hello = readClientHello(flight);
  ASSERT_EQ(hello.state, ClientHello::State::kHello);
  EXPECT_EQ(hello.server_name, "api.github.com");
  EXPECT_FALSE(hello.several_names);
  EXPECT_FALSE(hello.encrypted_client_hello);
  // Early data or anything else after the hello's records is not the hello's business.
  EXPECT_EQ(readClientHello(flight + bytes({23, 3, 3, 0, 1, 0})).state, ClientHello::State::kHello);
}

TEST(ClientHelloTest, AHelloSplitAcrossRecordsIsReassembled) {
  const std::string message = messageOf(opensslHello("example.org"));
  for (const std::size_t size : {1, 2, 3, 4, 5, 100, 511}) {
    const ClientHello hello = readClientHello(records(message, size, 3));
    ASSERT_EQ(hello.state, ClientHello::State::kHello) << size;
    EXPECT_EQ(hello.server_name, "example.org") << size;
  }
}

TEST(ClientHelloTest, AHelloWithoutServerNameHasAnEmptyOne) {
  const ClientHello real = readClientHello(opensslHello(nullptr));
  ASSERT_EQ(real.state, ClientHello::State::kHello);
  EXPECT_EQ(real.server_name, "");
  const ClientHello bare = readClientHello(records(helloMessage("", false)));
  ASSERT_EQ(bare.state, ClientHello::State::kHello);
  EXPECT_EQ(bare.server_name, "");
}

TEST(ClientHelloTest, SeveralNamesAndEchAreReported) {
  const ClientHello two =
      readClientHello(records(helloMessage(serverNames({"Allowed.test", "denied.test"}))));
  ASSERT_EQ(two.state, ClientHello::State::kHello);
  EXPECT_EQ(two.server_name, "allowed.test");
  EXPECT_TRUE(two.several_names);

  const ClientHello ech = readClientHello(records(helloMessage(
      serverNames({"cloudflare-ech.com"}) + extension(0xfe0d, bytes({0, 0, 1, 0, 1, 7})))));
  ASSERT_EQ(ech.state, ClientHello::State::kHello);
  EXPECT_EQ(ech.server_name, "cloudflare-ech.com");
  EXPECT_TRUE(ech.encrypted_client_hello);
}

TEST(ClientHelloTest, EveryTruncationNeedsMoreAndNeverReadsPastTheEnd) {
  const std::vector<std::string> flights = {
      opensslHello("example.org"), records(messageOf(opensslHello("example.org")), 97),
      records(helloMessage(serverNames({"a.test", "b.test"})), 13)};
  for (const std::string& flight : flights) {
    for (std::size_t size = 0; size < flight.size(); ++size) {
      // A copy of exactly `size` bytes, so that AddressSanitizer sees any read beyond it.
      const std::unique_ptr<char[]> copy(new char[size + 1]);
      std::copy(flight.begin(), flight.begin() + static_cast<std::ptrdiff_t>(size), copy.get());
      const ClientHello hello = readClientHello(std::string_view(copy.get(), size));
      ASSERT_EQ(hello.state, ClientHello::State::kNeedMore) << size << " of " << flight.size();
      EXPECT_EQ(hello.server_name, "");
    }
    EXPECT_EQ(readClientHello(flight).state, ClientHello::State::kHello);
  }
}

TEST(ClientHelloTest, WhatIsNotATlsRecordIsNotTls) {
  for (const std::string& input :
       {std::string("GET / HTTP/1.1\r\n"), std::string("SSH-2.0-OpenSSH_9.2\r\n"),
        bytes({0x80, 0x2e, 0x01, 0x03, 0x01}),  // an SSLv2-format hello
        bytes({22, 3, 0, 0, 5}), bytes({22, 3, 5}), bytes({22, 2}), bytes({21, 3, 3, 0, 2, 2, 40}),
        bytes({23})}) {
    EXPECT_EQ(readClientHello(input).state, ClientHello::State::kNotTls);
  }
  EXPECT_EQ(readClientHello("").state, ClientHello::State::kNeedMore);
  EXPECT_EQ(readClientHello(bytes({22, 3})).state, ClientHello::State::kNeedMore);
}

TEST(ClientHelloTest, LengthsThatDoNotAddUpAreMalformed) {
  const std::string good = helloMessage(serverNames({"a.test"}));
  const std::string sni = serverNames({"a.test"});
  std::vector<std::string> inputs = {
      records(helloMessage(sni + sni)),                                     // duplicate extension
      records(helloMessage(serverNames({""}))),                             // empty name
      records(helloMessage(extension(0, u16(0)))),                          // empty name list
      records(helloMessage(extension(0, ""))),                              // no list at all
      records(helloMessage(extension(0, u16(4) + bytes({1, 0, 1, 'a'})))),  // not host_name
      records(helloMessage(extension(0, u16(9) + bytes({0, 0, 1, 'a'})))),  // list too long
      records(helloMessage(extension(0, u16(4) + bytes({0, 0, 1, 'a', 'b'})))),  // left over
      records(helloMessage(u16(5) + u16(9) + "ab")),             // extension runs over
      records(helloMessage(bytes({0}))),                         // a stray byte
      records(good + bytes({1, 0, 0, 0})),                       // a second message
      records(bytes({2}) + good.substr(1)),                      // not a ClientHello
      records(bytes({1, 0, 0, 0})),                              // an empty hello
      bytes({22, 3, 1, 0, 0}),                                   // an empty record
      bytes({22, 3, 1, 0x40, 1}),                                // 2^14 + 1 bytes
      records(bytes({1}) + u24(ClientHello::kMaxHelloBytes)),    // over the cap
      records(good.substr(0, 10)) + bytes({23, 3, 3, 0, 1, 0}),  // then not handshake
      records(good.substr(0, 10)) + bytes({22, 2, 0, 0, 1, 0}),  // then not TLS
  };
  // A session id over 32 bytes, an odd cipher suite list, no compression method.
  std::string message = good;
  message[4 + 2 + 32] = 33;
  inputs.push_back(records(message));
  message = good;
  message[4 + 2 + 32 + 1 + 32 + 1] = 3;
  inputs.push_back(records(message));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ClientHello hello = readClientHello(inputs[i]);
    EXPECT_EQ(hello.state, ClientHello::State::kMalformed) << "case " << i;
    EXPECT_EQ(hello.server_name, "") << "case " << i;
  }
  EXPECT_EQ(readClientHello(records(good)).state, ClientHello::State::kHello);
}

}  // namespace
}  // namespace scs::egress
