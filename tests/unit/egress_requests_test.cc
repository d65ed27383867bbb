// The requests a program sends a brokered host (issue 48), read and rewritten by
// RequestRewriter: the operator's headers set, this host's placeholders replaced in their own
// header and refused anywhere else, another host's placeholder refused anywhere, requests that
// name another host or use another method refused, a request with a body made the stream's
// last, and every framing that two servers could read differently refused. Each input is also
// fed a byte at a time and in odd pieces, which must give the same output and the same refusal.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "egress/http_requests.h"

namespace scs::egress {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Refused = RequestRewriter::Refused;

constexpr std::string_view kSecretHeader = "Bearer ghp_SECRETVALUE";
constexpr std::string_view kOwn = "scs-placeholder-0123456789abcdef0123456789abcdef";
constexpr std::string_view kOwnSecret = "OWN_SECRET_ONE";
constexpr std::string_view kOther = "scs-placeholder-aaaabbbbccccddddeeeeffff00001111";
constexpr std::string_view kOtherSecret = "OWN_SECRET_TWO";
constexpr std::string_view kForeign = "scs-placeholder-fedcba9876543210fedcba9876543210";

// Not checked against a host (RequestRules::host empty), as the authority tests below are.
RequestRules githubRules() {
  RequestRules rules;
  rules.set.push_back({"Authorization", std::string(kSecretHeader)});
  rules.substitute.push_back({std::string(kOwn), std::string(kOwnSecret), "X-Token"});
  rules.substitute.push_back({std::string(kOther), std::string(kOtherSecret), "Cookie"});
  rules.foreign.push_back(std::string(kForeign));
  return rules;
}

RequestRules hostRules(std::uint16_t port = 443) {
  RequestRules rules = githubRules();
  rules.host = "api.github.com";
  rules.port = port;
  return rules;
}

struct Outcome {
  std::string out;
  std::optional<Refused> refused;
  std::uint64_t requests = 0;
  bool between = false;
  bool closing = false;
};

// Feeds `input` in pieces of `piece` bytes (0: at once), as a relay would, stopping at a
// refusal.
Outcome run(const std::string& input, std::size_t piece = 0, RequestRules rules = githubRules()) {
  RequestRewriter rewriter(std::move(rules));
  Outcome outcome;
  const std::size_t size = piece == 0 ? std::max<std::size_t>(input.size(), 1) : piece;
  for (std::size_t at = 0; at < input.size(); at += size) {
    outcome.refused = rewriter.feed(std::string_view(input).substr(at, size), outcome.out);
    if (outcome.refused) {
      break;
    }
  }
  outcome.requests = rewriter.requests();
  outcome.between = rewriter.betweenRequests();
  outcome.closing = rewriter.closing();
  return outcome;
}

// The outcome, checked to be the same for every way of cutting the input tried here.
Outcome runAnyway(const std::string& input, RequestRules rules = githubRules()) {
  const Outcome whole = run(input, 0, rules);
  for (const std::size_t piece : {1, 2, 3, 7, 64}) {
    const Outcome cut = run(input, piece, rules);
    EXPECT_EQ(cut.out, whole.out) << "piece " << piece;
    EXPECT_EQ(cut.refused.has_value(), whole.refused.has_value()) << "piece " << piece;
    if (cut.refused && whole.refused) {
      EXPECT_EQ(cut.refused->status, whole.refused->status) << "piece " << piece;
      EXPECT_EQ(cut.refused->token, whole.refused->token) << "piece " << piece;
      EXPECT_EQ(cut.refused->reason, whole.refused->reason) << "piece " << piece;
    }
    EXPECT_EQ(cut.requests, whole.requests) << "piece " << piece;
    EXPECT_EQ(cut.between, whole.between) << "piece " << piece;
    EXPECT_EQ(cut.closing, whole.closing) << "piece " << piece;
  }
  return whole;
}

// The refusal of `input`, which must be one, whose reason holds no secret nor placeholder.
Refused refusalOf(const std::string& input, RequestRules rules = githubRules()) {
  const Outcome outcome = runAnyway(input, std::move(rules));
  EXPECT_TRUE(outcome.refused.has_value()) << input;
  if (!outcome.refused) {
    return {};
  }
  EXPECT_FALSE(outcome.refused->reason.empty());
  EXPECT_THAT(outcome.refused->reason, Not(HasSubstr("SECRET")));
  EXPECT_THAT(outcome.refused->reason, Not(HasSubstr("scs-placeholder-")));
  return *outcome.refused;
}

std::string get(std::string_view headers = "") {
  return "GET /user HTTP/1.1\r\nHost: api.github.com\r\n" + std::string(headers) + "\r\n";
}

std::string withAuthorization(std::string_view head_without_blank_line) {
  return std::string(head_without_blank_line) + "Authorization: " + std::string(kSecretHeader) +
         "\r\n\r\n";
}

// The head of a request with a body, as it is sent: the stream's last.
std::string closing(std::string_view head_without_blank_line) {
  return std::string(head_without_blank_line) + "Authorization: " + std::string(kSecretHeader) +
         "\r\nConnection: close\r\n\r\n";
}

struct Case {
  std::string input;
  int status;
  std::string token;
};

// Each refused, whole and in pieces, with nothing of it sent.
void expectRefusals(const std::vector<Case>& cases, const RequestRules& rules = githubRules()) {
  for (const Case& c : cases) {
    const Refused refused = refusalOf(c.input, rules);
    EXPECT_EQ(refused.status, c.status) << c.input << "\n" << refused.reason;
    EXPECT_EQ(refused.token, c.token) << c.input;
    // Nothing of the refused request reaches the host.
    const Outcome outcome = run(c.input, 0, rules);
    EXPECT_EQ(outcome.requests, 0U) << c.input;
    EXPECT_EQ(outcome.out, "") << c.input;
  }
}

// ---- Rewriting ----

TEST(RequestRewriterTest, SetsTheHeaderInPlaceOfTheProgramsOwnWhateverItsCase) {
  const Outcome outcome = runAnyway(
      "GET /user HTTP/1.1\r\nHost: api.github.com\r\nauthorization: token mine\r\n"
      "Accept: */*\r\nAUTHORIZATION: Basic eA==\r\nUser-Agent: curl/8\r\n\r\n");
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.out, withAuthorization("GET /user HTTP/1.1\r\nHost: api.github.com\r\n"
                                           "Accept: */*\r\nUser-Agent: curl/8\r\n"));
  EXPECT_EQ(outcome.requests, 1U);
  EXPECT_TRUE(outcome.between);
}

TEST(RequestRewriterTest, AddsTheHeaderWhenTheProgramSentNone) {
  const Outcome outcome = runAnyway(get());
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.out, withAuthorization("GET /user HTTP/1.1\r\nHost: api.github.com\r\n"));
}

TEST(RequestRewriterTest, RemovesTheProgramsHeaderSpeltWithUnderscores) {
  RequestRules rules;
  rules.set.push_back({"X-Api-Key", "KEY"});
  const Outcome outcome = runAnyway(get("x_api_key: mine\r\nX-API-KEY: mine too\r\n"), rules);
  EXPECT_EQ(outcome.out, "GET /user HTTP/1.1\r\nHost: api.github.com\r\nX-Api-Key: KEY\r\n\r\n");
}

TEST(RequestRewriterTest, SetsEveryRuleOnceInTheirOrder) {
  RequestRules rules;
  rules.set.push_back({"X-One", "1"});
  rules.set.push_back({"X-Two", "2"});
  const Outcome outcome = runAnyway(get("X-Two: mine\r\nX-Three: 3\r\n"), rules);
  EXPECT_EQ(outcome.out,
            "GET /user HTTP/1.1\r\nHost: api.github.com\r\nX-Three: 3\r\nX-One: 1\r\n"
            "X-Two: 2\r\n\r\n");
}

TEST(RequestRewriterTest, ReplacesEveryPlaceholderInItsOwnHeader) {
  const std::string own(kOwn);
  const std::string other(kOther);
  const Outcome outcome =
      runAnyway(get("X-Token: " + own + "," + own + " and more\r\nCookie: a=" + other +
                    "; b=" + other + "\r\nx_token: " + own + "\r\nX-Plain: nothing here\r\n"));
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.out,
            withAuthorization("GET /user HTTP/1.1\r\nHost: api.github.com\r\nX-Token: "
                              "OWN_SECRET_ONE,OWN_SECRET_ONE and more\r\nCookie: "
                              "a=OWN_SECRET_TWO; b=OWN_SECRET_TWO\r\nx_token: OWN_SECRET_ONE\r\n"
                              "X-Plain: nothing here\r\n"));
}

TEST(RequestRewriterTest, ReplacesAPlaceholderInAuthorizationByDefault) {
  RequestRules rules;
  rules.substitute.push_back({std::string(kOwn), std::string(kOwnSecret)});
  const Outcome outcome =
      runAnyway(get("authorization: Bearer " + std::string(kOwn) + "\r\n"), rules);
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.out,
            "GET /user HTTP/1.1\r\nHost: api.github.com\r\nauthorization: Bearer OWN_SECRET_ONE"
            "\r\n\r\n");
}

TEST(RequestRewriterTest, KeepsEveryOtherByteOfTheHead) {
  const std::string own(kOwn);
  const Outcome outcome =
      runAnyway("POST /a//b?c=%20 HTTP/1.1\r\nhOsT: api.github.com\r\nX-Token:   \t" + own +
                " \t \r\nX-Empty:\r\nX-Tab:\tv\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(outcome.out, withAuthorization("POST /a//b?c=%20 HTTP/1.1\r\nhOsT: api.github.com\r\n"
                                           "X-Token:   \tOWN_SECRET_ONE \t \r\nX-Empty:\r\n"
                                           "X-Tab:\tv\r\nContent-Length: 0\r\n"));
}

TEST(RequestRewriterTest, SubstitutesLeftmostLongestAndNeverIntoAValueItPutIn) {
  RequestRules rules;
  rules.substitute.push_back({"%p", "[%p%q]"});
  rules.substitute.push_back({"%pq", "<long>"});
  rules.substitute.push_back({"%q", "Q"});
  const Outcome outcome = runAnyway(get("Authorization: a%pqb%pc%q%p\r\n"), rules);
  EXPECT_EQ(outcome.out,
            "GET /user HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: a<long>b[%p%q]cQ[%p%q]"
            "\r\n\r\n");
}

TEST(RequestRewriterTest, AcceptsTheAbsoluteAndAsteriskFormsWithoutAHostToCheck) {
  const Outcome outcome = runAnyway(
      "GET https://api.github.com/user?a=1 HTTP/1.1\r\nHost: api.github.com\r\n\r\n"
      "OPTIONS * HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.requests, 2U);
  EXPECT_EQ(outcome.out, withAuthorization("GET https://api.github.com/user?a=1 HTTP/1.1\r\n"
                                           "Host: api.github.com\r\n") +
                             withAuthorization("OPTIONS * HTTP/1.1\r\nHost: api.github.com\r\n"));
}

TEST(RequestRewriterTest, PassesExpectContinueUnchanged) {
  const std::string input =
      "PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue \r\nContent-Length: 3\r\n\r\nabc";
  const Outcome outcome = runAnyway(input);
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.out, closing("PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue \r\n"
                                 "Content-Length: 3\r\n") +
                             "abc");
}

TEST(RequestRewriterTest, RefusesAnyOtherExpectation) {
  const std::string put = "PUT /f HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n";
  expectRefusals({
      {put + "Expect: 100-continue, x\r\n\r\nabc", 400, "bad-request"},
      {put + "Expect: 102-processing\r\n\r\nabc", 400, "bad-request"},
      {put + "Expect:\r\n\r\nabc", 400, "bad-request"},
      {put + "Expect: 100-continue\r\nexpect: 100-continue\r\n\r\nabc", 400, "bad-request"},
  });
  EXPECT_THAT(refusalOf(put + "Expect: x\r\n\r\n").reason, HasSubstr("100-continue"));
}

// ---- Bodies, keep-alive and the request that closes the stream ----

TEST(RequestRewriterTest, CarriesAContentLengthBodyUnchanged) {
  const std::string body = "{\"a\":1}\r\n\r\nGET / HTTP/1.1\r\n\r\n";
  const std::string head =
      "POST /repos HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  const Outcome outcome = runAnyway(head + "\r\n" + body);
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.out, closing(head) + body);
  EXPECT_EQ(outcome.requests, 1U);
  EXPECT_TRUE(outcome.between);
  EXPECT_TRUE(outcome.closing);
}

TEST(RequestRewriterTest, IsMidRequestUntilTheBodyIsWhole) {
  const std::string input = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n12345";
  const Outcome outcome = runAnyway(input);
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.requests, 1U);
  EXPECT_FALSE(outcome.between);
  EXPECT_TRUE(outcome.closing);
  EXPECT_THAT(outcome.out, ::testing::EndsWith("\r\nConnection: close\r\n\r\n12345"));
  EXPECT_FALSE(runAnyway("GET / HTTP/1.1\r\nHost").between);
  EXPECT_TRUE(runAnyway("").between);
}

TEST(RequestRewriterTest, CarriesAChunkedBodyWithExtensionsAndTrailers) {
  const std::string head = "POST /upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  Chunked \r\n";
  const std::string body =
      "5;name=value;q=\"a b\"\r\nhello\r\n"
      "A \t; ext\r\n0123456789\r\n"
      "00000000000000f\r\nfifteen bytes!!\r\n"
      "0;last\r\nX-Checksum: abc\r\nX-Other: x\r\n\r\n";
  const Outcome outcome = runAnyway(head + "\r\n" + body);
  EXPECT_FALSE(outcome.refused) << outcome.refused->reason;
  EXPECT_EQ(outcome.out, closing(head) + body);
  EXPECT_TRUE(outcome.between);
  EXPECT_TRUE(outcome.closing);
}

TEST(RequestRewriterTest, GivesEveryPipelinedRequestTheHeader) {
  const std::string first = "GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: mine\r\n";
  const std::string second = "DELETE /b HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n";
  const std::string third = "PATCH /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n";
  const Outcome outcome =
      runAnyway(first + "\r\n" + second + "\r\n" + third + "\r\n3\r\nabc\r\n0\r\n\r\n");
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.requests, 3U);
  EXPECT_TRUE(outcome.between);
  EXPECT_EQ(outcome.out, withAuthorization("GET /a HTTP/1.1\r\nHost: h\r\n") +
                             withAuthorization(second) + closing(third) + "3\r\nabc\r\n0\r\n\r\n");
}

TEST(RequestRewriterTest, KeepsTheConnectionOfARequestWithoutABody) {
  const std::string first = "GET /a HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n";
  const Outcome outcome = runAnyway(first + "\r\n" + get());
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.requests, 2U);
  EXPECT_FALSE(outcome.closing);
  EXPECT_EQ(outcome.out, withAuthorization(first) + withAuthorization("GET /user HTTP/1.1\r\n"
                                                                      "Host: api.github.com\r\n"));
}

TEST(RequestRewriterTest, ClosesAfterARequestWithABodyAndDropsWhatFollows) {
  const std::string head =
      "POST /b HTTP/1.1\r\nConnection: keep-alive\r\nHost: h\r\nconnection: X-Mine\r\n"
      "Content-Length: 4\r\n";
  // What follows the body is dropped unread, never refused: another request, another host's
  // placeholder, bytes that are no request at all.
  for (const std::string& after :
       {get(), "GET /?k=" + std::string(kForeign) + " HTTP/1.1\r\n\r\n",
        std::string("\x01\x02 not http\r\n\n"), std::string(kForeign).substr(3)}) {
    const Outcome outcome = runAnyway(head + "\r\nbody" + after);
    EXPECT_FALSE(outcome.refused) << after;
    EXPECT_EQ(outcome.requests, 1U);
    EXPECT_TRUE(outcome.between);
    EXPECT_TRUE(outcome.closing);
    EXPECT_EQ(outcome.out,
              closing("POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n") + "body");
  }
  // A placeholder across the end of the body: the body is sent, the placeholder never whole.
  const std::string foreign(kForeign);
  const Outcome across = runAnyway(head + "\r\nab" + foreign.substr(0, 2) + foreign.substr(2));
  EXPECT_FALSE(across.refused);
  EXPECT_THAT(across.out, ::testing::EndsWith("\r\n\r\nab" + foreign.substr(0, 2)));
}

TEST(RequestRewriterTest, SaysItIsClosingFromTheHeadOfARequestWithABody) {
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  RequestRewriter rewriter(githubRules());
  std::string out;
  EXPECT_FALSE(rewriter.feed(get(), out));
  EXPECT_FALSE(rewriter.closing());
  EXPECT_FALSE(rewriter.feed(head.substr(0, head.size() - 1), out));
  EXPECT_FALSE(rewriter.closing());
  EXPECT_FALSE(rewriter.feed(head.substr(head.size() - 1) + "1\r\nx\r\n", out));
  EXPECT_TRUE(rewriter.closing());
  EXPECT_FALSE(rewriter.betweenRequests());
  EXPECT_FALSE(rewriter.feed("0\r\n\r\n", out));
  EXPECT_TRUE(rewriter.closing());
  EXPECT_TRUE(rewriter.betweenRequests());
  const std::string sent = out;
  EXPECT_FALSE(rewriter.feed(get(), out));
  EXPECT_EQ(out, sent);
  EXPECT_EQ(rewriter.requests(), 2U);
}

TEST(RequestRewriterTest, ReadsHttp10RequestsTheSameWay) {
  const std::string input =
      "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /c HTTP/1.0\r\n\r\n"
      "POST /b HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
      "GET /d HTTP/1.0\r\n\r\n";
  const Outcome outcome = runAnyway(input);
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.requests, 3U);
  EXPECT_EQ(outcome.out, withAuthorization("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n") +
                             withAuthorization("GET /c HTTP/1.0\r\n") +
                             closing("POST /b HTTP/1.0\r\nContent-Length: 2\r\n") + "ok");
}

TEST(RequestRewriterTest, SendsARepeatedContentLengthOnce) {
  const Outcome listed =
      runAnyway("POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 3 , 3\r\n\r\nabc");
  EXPECT_FALSE(listed.refused);
  EXPECT_EQ(listed.out, closing("POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 3\r\n") + "abc");
  const Outcome repeated =
      runAnyway("POST / HTTP/1.1\r\nContent-Length: 3\r\nHost: h\r\nContent-Length:3\r\n\r\nabc");
  EXPECT_FALSE(repeated.refused);
  EXPECT_EQ(repeated.out, closing("POST / HTTP/1.1\r\nContent-Length: 3\r\nHost: h\r\n") + "abc");
}

TEST(RequestRewriterTest, AcceptsAZeroLengthOnAGetOrAPost) {
  const Outcome outcome =
      runAnyway(get("Content-Length: 0\r\n") +
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n" + get());
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.requests, 3U);
  EXPECT_FALSE(outcome.closing);
}

// ---- Foreign placeholders ----

TEST(RequestRewriterTest, RefusesAForeignPlaceholderInTheRequestLine) {
  const Refused refused = refusalOf("GET /?k=" + std::string(kForeign) + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.token, "placeholder");
  EXPECT_THAT(refused.reason, HasSubstr("another host"));
}

TEST(RequestRewriterTest, RefusesAForeignPlaceholderInAHeaderAndSendsNothingOfIt) {
  const std::string input = get() + get("X-Key: Bearer " + std::string(kForeign) + "\r\n");
  const Outcome outcome = runAnyway(input);
  ASSERT_TRUE(outcome.refused);
  EXPECT_EQ(outcome.refused->status, 403);
  EXPECT_EQ(outcome.out, withAuthorization("GET /user HTTP/1.1\r\nHost: api.github.com\r\n"));
  EXPECT_EQ(outcome.requests, 1U);
  EXPECT_FALSE(outcome.between);
}

TEST(RequestRewriterTest, RefusesAForeignPlaceholderEvenInAHeaderTheServerReplaces) {
  const Refused refused = refusalOf(get("Authorization: Bearer " + std::string(kForeign) + "\r\n"));
  EXPECT_EQ(refused.status, 403);
}

TEST(RequestRewriterTest, RefusesAForeignPlaceholderInABodyWithoutItsLastByte) {
  const std::string foreign(kForeign);
  const std::string body = "{\"token\":\"" + foreign + "\",\"more\":1}";
  const std::string head =
      "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  // Whatever the split (runAnyway tries several), what was sent ends just before the byte
  // that completes the placeholder.
  const Outcome outcome = runAnyway(head + "\r\n" + body);
  ASSERT_TRUE(outcome.refused);
  EXPECT_EQ(outcome.refused->status, 403);
  EXPECT_EQ(outcome.out, closing(head) + "{\"token\":\"" + foreign.substr(0, foreign.size() - 1));
  EXPECT_THAT(outcome.out, Not(HasSubstr(foreign)));
}

TEST(RequestRewriterTest, RefusesAForeignPlaceholderSplitAcrossFeeds) {
  const std::string foreign(kForeign);
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n";
  const std::string input = head + "abc" + foreign + "tail";
  for (std::size_t cut = head.size(); cut < head.size() + 3 + foreign.size(); ++cut) {
    RequestRewriter rewriter(githubRules());
    std::string out;
    EXPECT_FALSE(rewriter.feed(std::string_view(input).substr(0, cut), out));
    const std::optional<Refused> refused = rewriter.feed(std::string_view(input).substr(cut), out);
    ASSERT_TRUE(refused) << cut;
    EXPECT_EQ(refused->status, 403);
    EXPECT_EQ(out.substr(out.find("\r\n\r\n") + 4), "abc" + foreign.substr(0, foreign.size() - 1));
  }
}

TEST(RequestRewriterTest, RefusesAForeignPlaceholderInChunkDataExtensionOrTrailer) {
  const std::string foreign(kForeign);
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::vector<std::string> bodies = {
      "3\r\nabc\r\n30\r\n" + foreign + "\r\n0\r\n\r\n",  // data (48 bytes: 0x30)
      "1;n=" + foreign + "\r\nz\r\n0\r\n\r\n",           // a chunk extension
      "1\r\nz\r\n0\r\nX-T: " + foreign + "\r\n\r\n",     // a trailer
  };
  for (const std::string& body : bodies) {
    const Refused refused = refusalOf(head + body);
    EXPECT_EQ(refused.status, 403) << body;
    EXPECT_EQ(refused.token, "placeholder") << body;
    EXPECT_THAT(run(head + body).out, Not(HasSubstr(foreign)));
  }
}

TEST(RequestRewriterTest, RefusesAForeignPlaceholderAcrossTheEndOfARequest) {
  // Neither request holds it whole, but the stream does: refused all the same.
  RequestRules rules = githubRules();
  rules.foreign = {"\r\n\r\nGET /b"};
  const std::string first = "GET /a HTTP/1.1\r\nHost: h\r\n";
  const Outcome outcome = runAnyway(first + "\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n", rules);
  ASSERT_TRUE(outcome.refused);
  EXPECT_EQ(outcome.refused->status, 403);
  EXPECT_EQ(outcome.requests, 1U);
  EXPECT_EQ(outcome.out, withAuthorization(first));
}

// ---- This host's placeholders outside their own header ----

TEST(RequestRewriterTest, RefusesItsOwnPlaceholderOutsideItsHeader) {
  const std::string own(kOwn);
  const std::string post = "POST /x HTTP/1.1\r\nHost: h\r\n";
  const std::string chunked = post + "Transfer-Encoding: chunked\r\n\r\n";
  const std::vector<std::string> inputs = {
      "GET /login?t=" + own + " HTTP/1.1\r\nHost: h\r\n\r\n",   // the request line
      get("X-Other: " + own + "\r\n"),                          // another header
      get("Authorization: Bearer " + own + "\r\n"),             // a header set
      get(own + ": x\r\n"),                                     // a header name
      get("X-Token" + own + ": x\r\n"),                         // in a name, not a value
      get("X-Token-2: " + own + "\r\n"),                        // a longer name
      post + "Content-Length: 54\r\n\r\ntoken=" + own,          // a body
      chunked + "30\r\n" + own + "\r\n0\r\n\r\n",               // chunk data
      chunked + "1;" + own + "\r\nz\r\n0\r\n\r\n",              // a chunk extension
      chunked + "1\r\nz\r\n0\r\nX-Token: " + own + "\r\n\r\n",  // a trailer
      get("Cookie: a=" + own + "\r\n"),                         // the other's header
      get("Cookie: a=" + std::string(kOther) + ", " + own + "\r\n"),
  };
  for (const std::string& input : inputs) {
    const Refused refused = refusalOf(input);
    EXPECT_EQ(refused.status, 403) << input;
    EXPECT_EQ(refused.token, "placeholder") << input;
    EXPECT_THAT(refused.reason, HasSubstr("only in its X-Token header")) << input;
    EXPECT_THAT(run(input).out, Not(HasSubstr(own)));
    EXPECT_THAT(run(input).out, Not(HasSubstr(kOwnSecret)));
  }
  EXPECT_THAT(refusalOf(get("X-Token: " + std::string(kOther) + "\r\n")).reason,
              HasSubstr("only in its Cookie header"));
}

TEST(RequestRewriterTest, SendsTheBodyBeforeItsOwnPlaceholderThere) {
  const std::string own(kOwn);
  const std::string head = "PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n";
  const Outcome outcome = runAnyway(head + "\r\nabc" + own + "tail");
  ASSERT_TRUE(outcome.refused);
  EXPECT_EQ(outcome.refused->status, 403);
  EXPECT_EQ(outcome.out, closing(head) + "abc" + own.substr(0, own.size() - 1));
}

TEST(RequestRewriterTest, ReplacesItsOwnPlaceholderAfterAnyBlankOrText) {
  const std::string own(kOwn);
  for (const std::string& value : {own, " \t" + own + " \t", "a" + own + "b", own + ":" + own}) {
    const Outcome outcome = runAnyway(get("X-Token:" + value + "\r\n"));
    EXPECT_FALSE(outcome.refused) << value;
    EXPECT_THAT(outcome.out, HasSubstr(std::string(kOwnSecret))) << value;
    EXPECT_THAT(outcome.out, Not(HasSubstr(own))) << value;
  }
}

// ---- Framing and syntax refusals ----

TEST(RequestRewriterTest, RefusesTransferCodingsOtherThanChunkedAlone) {
  const std::string post = "POST / HTTP/1.1\r\nHost: h\r\n";
  expectRefusals({
      {post + "Transfer-Encoding: gzip\r\n\r\n", 501, "unsupported"},
      {post + "Transfer-Encoding: chunked, gzip\r\n\r\n", 501, "unsupported"},
      {post + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501, "unsupported"},
      {post + "Transfer-Encoding: chunked, chunked\r\n\r\n", 501, "unsupported"},
      {post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
       "unsupported"},
      {post + "Transfer-Encoding: \"chunked\"\r\n\r\n", 501, "unsupported"},
      {post + "Transfer-Encoding:\r\n\r\n", 501, "unsupported"},
      {post + "Transfer-Encoding: xchunked\r\n\r\n", 501, "unsupported"},
  });
}

TEST(RequestRewriterTest, RefusesAmbiguousLengths) {
  const std::string post = "POST / HTTP/1.1\r\nHost: h\r\n";
  expectRefusals({
      {post + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 3\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 3\r\nContent-Length: 4\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 3, 4\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 3, 03\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 3,\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: \r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: +3\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: -1\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 0x10\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 3 3\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 4611686018427387905\r\n\r\n", 400, "bad-request"},
      {post + "Content-Length: 99999999999999999999999999\r\n\r\n", 400, "bad-request"},
      {post + "Content_Length: 3\r\n\r\n", 400, "bad-request"},
      {post + "transfer_encoding: chunked\r\n\r\n", 400, "bad-request"},
      {post + "Connection: close, Content-Length\r\nContent-Length: 1\r\n\r\n", 400, "bad-request"},
      {post + "Connection: authorization\r\n\r\n", 400, "bad-request"},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "bad-request"},
      {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx", 400, "bad-request"},
      {"HEAD / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
       "bad-request"},
  });
}

TEST(RequestRewriterTest, AcceptsTheLargestContentLength) {
  const Outcome outcome =
      runAnyway("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4611686018427387904\r\n\r\nab");
  EXPECT_FALSE(outcome.refused);
  EXPECT_FALSE(outcome.between);
}

TEST(RequestRewriterTest, RefusesUpgradesAndOtherVersions) {
  expectRefusals({
      {get("Upgrade: websocket\r\nConnection: Upgrade\r\n"), 501, "unsupported"},
      {get("upgrade: h2c\r\n"), 501, "unsupported"},
      {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "http-version"},
      {"GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505, "http-version"},
      {"GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505, "http-version"},
      {"GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505, "http-version"},
  });
  const Refused preface = refusalOf("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  EXPECT_THAT(preface.reason, HasSubstr("HTTP/2 is not carried"));
  EXPECT_THAT(preface.reason, HasSubstr("HTTP/1.1 is"));
  // Refused at the version's first digit, without waiting for the rest.
  EXPECT_TRUE(run("PRI * HTTP/2").refused);
}

// ---- Methods ----

TEST(RequestRewriterTest, CarriesTheCommonMethods) {
  for (const std::string method : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    const std::string head = method + " /x HTTP/1.1\r\nHost: api.github.com\r\n";
    const Outcome outcome = runAnyway(head + "\r\n", hostRules());
    EXPECT_FALSE(outcome.refused) << method;
    EXPECT_EQ(outcome.out, withAuthorization(head)) << method;
  }
}

TEST(RequestRewriterTest, RefusesEveryOtherMethod) {
  const std::string rest = " / HTTP/1.1\r\nHost: api.github.com\r\n\r\n";
  expectRefusals({
      {"TRACE" + rest, 405, "method"},
      {"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n", 405, "method"},
      {"PROPFIND" + rest, 405, "method"},
      {"get" + rest, 405, "method"},
      {"Post" + rest, 405, "method"},
      {"BREW" + rest, 405, "method"},
      {"GETX" + rest, 405, "method"},
      {"TRACE / HTTP/1.0\r\n\r\n", 405, "method"},
  });
  for (const RequestRules& rules : {githubRules(), hostRules()}) {
    const Refused trace = refusalOf("TRACE" + rest, rules);
    EXPECT_EQ(trace.status, 405);
    EXPECT_THAT(trace.reason, HasSubstr("\"TRACE\""));
  }
  EXPECT_THAT(refusalOf("M\x7E~" + std::string(200, 'X') + rest).reason,
              HasSubstr("\"M~~" + std::string(77, 'X') + "...\""));
  EXPECT_THAT(refusalOf("CONNECT h:443 HTTP/1.1\r\nHost: h\r\n\r\n").reason, HasSubstr("tunnel"));
}

// ---- The host a request names ----

TEST(RequestRewriterTest, CarriesRequestsNamingTheStreamsHost) {
  const std::vector<std::string> heads = {
      "GET /user HTTP/1.1\r\nHost: api.github.com\r\n",
      "GET /user HTTP/1.1\r\nhost:   API.GitHub.COM:443 \r\n",
      "GET / HTTP/1.0\r\nHost: api.github.com\r\n",
      "OPTIONS * HTTP/1.1\r\nHost: api.github.com\r\n",
      "OPTIONS /x HTTP/1.1\r\nHost: api.github.com\r\n",
      "GET /?u=https://evil.example/ HTTP/1.1\r\nHost: api.github.com\r\n",
  };
  for (const std::string& head : heads) {
    const Outcome outcome = runAnyway(head + "\r\n", hostRules());
    EXPECT_FALSE(outcome.refused) << head << outcome.refused->reason;
    EXPECT_EQ(outcome.out, withAuthorization(head));
  }
  // Another port: with that port only (a bare name means 443 to a front end).
  const Outcome other_port =
      runAnyway("GET / HTTP/1.1\r\nHost: api.github.com:8443\r\n\r\n", hostRules(8443));
  EXPECT_FALSE(other_port.refused);
  EXPECT_EQ(other_port.requests, 1U);
  const Outcome bare = runAnyway("GET / HTTP/1.1\r\nHost: api.github.com\r\n\r\n", hostRules(8443));
  ASSERT_TRUE(bare.refused);
  EXPECT_EQ(bare.refused->status, 421);
}

TEST(RequestRewriterTest, RefusesHeadersAFrontEndRoutesOrRewritesBy) {
  for (const std::string name : {"Forwarded", "X-Forwarded-Host", "x_forwarded_host",
                                 "X-Original-URL", "X-HTTP-Method-Override", "X-Method-Override"}) {
    const Outcome outcome = runAnyway(
        "POST / HTTP/1.1\r\nHost: api.github.com\r\n" + name + ": TRACE\r\n\r\n", hostRules());
    ASSERT_TRUE(outcome.refused) << name;
    EXPECT_EQ(outcome.refused->status, 400) << name;
    EXPECT_EQ(outcome.out, "") << name;
  }
}

TEST(RequestRewriterTest, RefusesARequestNamingAnotherHost) {
  const std::string host = "\r\nHost: api.github.com\r\n\r\n";
  const std::vector<Case> cases = {
      {"GET https://evil.example/ HTTP/1.1" + host, 421, "misdirected"},
      {"GET https://api.github.com/user HTTP/1.1" + host, 421, "misdirected"},
      {"GET api.github.com:443 HTTP/1.1" + host, 421, "misdirected"},
      {"GET * HTTP/1.1" + host, 421, "misdirected"},
      {"OPTIONS *x HTTP/1.1" + host, 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost: api.github.com.evil.example\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost: api.github.com.\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost: api.github.com:8443\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost: api.github.com:\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost: user@api.github.com\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost:\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nX: y\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.0\r\n\r\n", 421, "misdirected"},
      {"GET / HTTP/1.1\r\nHost: api.github.com\r\nHost: api.github.com\r\n\r\n", 400,
       "bad-request"},
  };
  expectRefusals(cases, hostRules());
  // The reason names what the request named and the host the stream was opened to.
  const Refused absolute = refusalOf("GET https://evil.example/ HTTP/1.1" + host, hostRules());
  EXPECT_THAT(absolute.reason, HasSubstr("\"https://evil.example/\""));
  EXPECT_THAT(absolute.reason, HasSubstr("api.github.com:443"));
  const Refused named = refusalOf("GET / HTTP/1.1\r\nHost: evil.example\x7F\r\n\r\n", hostRules());
  EXPECT_EQ(named.status, 400);  // a control character, refused as the byte comes
  const Refused other = refusalOf("GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", hostRules());
  EXPECT_THAT(other.reason, HasSubstr("\"evil.example\""));
  EXPECT_THAT(other.reason, HasSubstr("api.github.com:443"));
  EXPECT_THAT(
      refusalOf("GET / HTTP/1.1\r\nHost: " + std::string(300, 'e') + "\r\n\r\n", hostRules())
          .reason,
      HasSubstr(std::string(80, 'e') + "...\""));
  // A request that names another host after one that named this one: the first is carried.
  const Outcome second = runAnyway(
      "GET / HTTP/1.1\r\nHost: api.github.com\r\n\r\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n",
      hostRules());
  ASSERT_TRUE(second.refused);
  EXPECT_EQ(second.refused->status, 421);
  EXPECT_EQ(second.requests, 1U);
  EXPECT_EQ(second.out, withAuthorization("GET / HTTP/1.1\r\nHost: api.github.com\r\n"));
}

TEST(RequestRewriterTest, RefusesMalformedRequestLines) {
  expectRefusals({
      {"GET /\r\n\r\n", 400, "bad-request"},
      {"GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"GET /\x7F HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"GET /\xC3\xA9 HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"GET / http/1.1\r\nHost: h\r\n\r\n", 400, "bad-request"},
      {"GET / HTTP/1.1\nHost: h\n\n", 400, "bad-request"},
      {"GET / HTTP/1.1\rHost: h\r\n\r\n", 400, "bad-request"},
      {std::string("GET /\0 HTTP/1.1\r\n\r\n", 19), 400, "bad-request"},
  });
}

TEST(RequestRewriterTest, RefusesMalformedHeaderLines) {
  expectRefusals({
      {get("X: a\nY: b\r\n"), 400, "bad-request"},
      {"GET / HTTP/1.1\r\nHost: h\n\n", 400, "bad-request"},
      {get("X: a\rb\r\n"), 400, "bad-request"},
      {get(std::string("X: a\0b\r\n", 8)), 400, "bad-request"},
      {get("X: a\x01"
           "b\r\n"),
       400, "bad-request"},
      {get("X: a\r\n folded\r\n"), 400, "bad-request"},
      {get("X: a\r\n\tfolded\r\n"), 400, "bad-request"},
      {"GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400, "bad-request"},
      {get("X (y): a\r\n"), 400, "bad-request"},
      {get("X : a\r\n"), 400, "bad-request"},
      {get("X\t: a\r\n"), 400, "bad-request"},
      {get(": a\r\n"), 400, "bad-request"},
      {get("No colon\r\n"), 400, "bad-request"},
      {get("X\xC3\xA9: a\r\n"), 400, "bad-request"},
      {get("Host: again\r\n"), 400, "bad-request"},
      {"GET / HTTP/1.1\r\nX: y\r\n\r\n", 400, "bad-request"},
  });
  // A bare LF is refused when it comes, not when the head would be too large.
  EXPECT_TRUE(run("GET / HTTP/1.1\r\nHost: h\n").refused);
}

TEST(RequestRewriterTest, RefusesMalformedChunks) {
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk_line_too_long =
      "1;" + std::string(RequestRewriter::kMaxChunkLineBytes, 'e');
  const std::string trailer_too_long =
      "0\r\nX: " + std::string(RequestRewriter::kMaxChunkLineBytes, 'v') + "\r\n\r\n";
  const std::vector<std::string> bodies = {
      "\r\n",
      "x\r\n",
      " 5\r\nhello\r\n0\r\n\r\n",
      "0x5\r\nhello\r\n0\r\n\r\n",
      "-1\r\n",
      "5 \r\nhello\r\n0\r\n\r\n",
      "5\nhello\r\n0\r\n\r\n",
      "5\r hello\r\n0\r\n\r\n",
      "5;a\nb\r\nhello\r\n0\r\n\r\n",
      "5;a\x01\r\nhello\r\n0\r\n\r\n",
      "1000000000000000\r\n",
      "5\r\nhelloX\r\n0\r\n\r\n",
      "5\r\nhello\rX0\r\n\r\n",
      "5\r\nhello\n0\r\n\r\n",
      chunk_line_too_long,
      "0\r\nX-T: a\n\r\n",
      "0\r\nX-T: a\rb\r\n\r\n",
      "0\r\n folded: x\r\n\r\n",
      "0\r\nno colon\r\n\r\n",
      "0\r\nX T: a\r\n\r\n",
      "0\r\nX: a\x01\r\n\r\n",
      trailer_too_long,
  };
  for (const std::string& body : bodies) {
    const Refused refused = refusalOf(head + body);
    EXPECT_EQ(refused.status, 400) << body;
    EXPECT_EQ(refused.token, "bad-request") << body;
  }
  // Fifteen digits are the most a size may have.
  const Outcome fifteen = runAnyway(head + "000000000000001\r\nx\r\n0\r\n\r\n");
  EXPECT_FALSE(fifteen.refused);
}

TEST(RequestRewriterTest, SendsTheChunksBeforeABadOne) {
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n";
  const Outcome outcome = runAnyway(head + "\r\n3\r\nabc\r\n2\r\nxyz\r\n");
  ASSERT_TRUE(outcome.refused);
  EXPECT_EQ(outcome.out, closing(head) + "3\r\nabc\r\n2\r\nxy");
}

TEST(RequestRewriterTest, RefusesAHeadLongerThanTheCap) {
  const std::string start = "GET / HTTP/1.1\r\nHost: h\r\nX-Big: ";
  const std::string end = "\r\n\r\n";
  const std::string fits =
      start + std::string(RequestRewriter::kMaxHeadBytes - start.size() - end.size(), 'a') + end;
  const Outcome accepted = run(fits);
  EXPECT_FALSE(accepted.refused);
  EXPECT_EQ(accepted.requests, 1U);
  EXPECT_EQ(run(fits, 4096).out, accepted.out);

  const std::string over =
      start + std::string(RequestRewriter::kMaxHeadBytes - start.size() - end.size() + 1, 'a') +
      end;
  for (const std::size_t piece : {0, 1000, 4096}) {
    const Outcome refused = run(over, piece);
    ASSERT_TRUE(refused.refused);
    EXPECT_EQ(refused.refused->status, 431);
    EXPECT_EQ(refused.refused->token, "head-too-large");
    EXPECT_EQ(refused.out, "");
  }
  // Refused once the cap is reached, without the rest of the head.
  EXPECT_TRUE(run(start + std::string(RequestRewriter::kMaxHeadBytes, 'a')).refused);
}

TEST(RequestRewriterTest, RefusesAHeadWithMoreThanSixteenPlaceholders) {
  const std::string own(kOwn);
  std::string sixteen;
  for (int i = 0; i < 16; ++i) {
    sixteen += "X-Token: " + own + "\r\n";
  }
  const Outcome accepted = runAnyway(get(sixteen));
  EXPECT_FALSE(accepted.refused);
  EXPECT_EQ(accepted.requests, 1U);
  std::string sixteen_in_one = "X-Token: ";
  for (int i = 0; i < 16; ++i) {
    sixteen_in_one += own + ",";
  }
  EXPECT_FALSE(runAnyway(get(sixteen_in_one + "\r\n")).refused);
  expectRefusals({
      {get(sixteen + "X-Token: " + own + "\r\n"), 431, "head-too-large"},
      {get(sixteen_in_one + own + "\r\n"), 431, "head-too-large"},
      {get(sixteen + "Cookie: " + std::string(kOther) + "\r\n"), 431, "head-too-large"},
  });
  // A placeholder in a header the server removes is not replaced, and not counted.
  RequestRules removed = githubRules();
  removed.substitute.push_back({"%p", "SECRET", "Authorization"});
  EXPECT_FALSE(runAnyway(get(sixteen + "Authorization: %p%p\r\n"), removed).refused);
}

TEST(RequestRewriterTest, RefusesAHeadTheSecretsWouldMakeTooLarge) {
  // 8 KiB secrets: the rewritten head may be kMaxHeadBytes, the set headers and 8 KiB.
  RequestRules rules;
  rules.set.push_back({"X-Set", std::string(1000, 'S')});
  rules.substitute.push_back({"%p", std::string(8 << 10, 'Q')});
  const std::size_t allowed =
      RequestRewriter::kMaxHeadBytes + RequestRewriter::kMaxHeadGrowthBytes + 5 + 1000 + 4;
  const std::string start = "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: %p %p\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  // The output: the head, less the two "%p", plus the secrets and the set header.
  const auto padded = [&](std::size_t output) {
    const std::size_t input = output + 4 - 2 * (8 << 10) - (5 + 2 + 1000 + 2);
    return start + std::string(input - start.size() - end.size(), 'a') + end;
  };
  const Outcome fits = run(padded(allowed), 0, rules);
  ASSERT_FALSE(fits.refused) << fits.refused->reason;
  EXPECT_EQ(fits.out.size(), allowed);
  EXPECT_EQ(run(padded(allowed), 1000, rules).out, fits.out);
  for (const std::size_t piece : {0, 1000}) {
    const Outcome over = run(padded(allowed + 1), piece, rules);
    ASSERT_TRUE(over.refused);
    EXPECT_EQ(over.refused->status, 431);
    EXPECT_EQ(over.refused->token, "head-too-large");
    EXPECT_THAT(over.refused->reason, HasSubstr(std::to_string(allowed)));
    EXPECT_THAT(over.refused->reason, Not(HasSubstr("QQ")));
    EXPECT_EQ(over.out, "");
  }
  // Two secrets in a head of 60,000 bytes: over, whole or a byte at a time.
  const Refused two = refusalOf("GET / HTTP/1.1\r\nHost: h\r\nAuthorization: %p %p\r\nX-Pad: " +
                                    std::string(60000, 'a') + "\r\n\r\n",
                                rules);
  EXPECT_EQ(two.status, 431);
}

// ---- The stream after a refusal, the rules, the response ----

TEST(RequestRewriterTest, StaysRefusedAndSendsNothingMore) {
  RequestRewriter rewriter(githubRules());
  std::string out;
  const std::optional<Refused> first = rewriter.feed("GET / HTTP/2.0\r\n", out);
  ASSERT_TRUE(first);
  const std::optional<Refused> again = rewriter.feed(get(), out);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, first->status);
  EXPECT_EQ(again->reason, first->reason);
  EXPECT_EQ(out, "");
  EXPECT_EQ(rewriter.requests(), 0U);
  EXPECT_FALSE(rewriter.betweenRequests());
}

TEST(RequestRewriterTest, FailsClosedOnRulesThatBreakTheirContract) {
  const auto refusedWith = [](RequestRules rules) {
    RequestRewriter rewriter(std::move(rules));
    std::string out;
    const std::optional<Refused> refused = rewriter.feed(get(), out);
    EXPECT_EQ(out.empty(), refused.has_value());
    return refused;
  };
  RequestRules framing;
  framing.set.push_back({"content-length", "0"});
  RequestRules injected;
  injected.set.push_back({"Authorization", "Bearer x\r\nX-Evil: 1"});
  RequestRules not_token;
  not_token.set.push_back({"Bad Name", "x"});
  RequestRules empty_placeholder;
  empty_placeholder.substitute.push_back({"", "SECRET"});
  RequestRules bad_value;
  bad_value.substitute.push_back({"p", std::string("SECRET\0", 7)});
  RequestRules empty_foreign;
  empty_foreign.foreign.push_back("");
  RequestRules set_connection;
  set_connection.set.push_back({"Connection", "keep-alive"});
  RequestRules set_host;
  set_host.set.push_back({"host", "SECRET.example"});
  RequestRules placeholder_blank;
  placeholder_blank.substitute.push_back({"p ", "SECRET"});
  RequestRules placeholder_tab;
  placeholder_tab.substitute.push_back({"\tp", "SECRET"});
  RequestRules placeholder_crlf;
  placeholder_crlf.substitute.push_back({"p\r\nq", "SECRET"});
  RequestRules header_not_token;
  header_not_token.substitute.push_back({"p", "SECRET", "X Token"});
  RequestRules header_empty;
  header_empty.substitute.push_back({"p", "SECRET", ""});
  RequestRules header_framing;
  header_framing.substitute.push_back({"p", "SECRET", "Transfer_Encoding"});
  RequestRules header_host;
  header_host.substitute.push_back({"p", "SECRET", "Host"});
  RequestRules host_not_name;
  host_not_name.host = "api.github.com:443";
  RequestRules host_blank;
  host_blank.host = "api.github.com\r\nX: y";
  for (RequestRules* rules : {&framing, &injected, &not_token, &empty_placeholder, &bad_value,
                              &empty_foreign, &set_connection, &set_host, &placeholder_blank,
                              &placeholder_tab, &placeholder_crlf, &header_not_token, &header_empty,
                              &header_framing, &header_host, &host_not_name, &host_blank}) {
    const std::optional<Refused> refused = refusedWith(*rules);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 500);
    EXPECT_EQ(refused->token, "misconfigured");
    EXPECT_THAT(refused->reason, Not(HasSubstr("SECRET")));
    EXPECT_THAT(refused->reason, Not(HasSubstr("Bearer")));
  }
  EXPECT_FALSE(refusedWith(RequestRules{}));
}

TEST(RequestRewriterTest, WithoutRulesPassesRequestsAsTheyCame) {
  const std::string input = get() + "GET https://x/ HTTP/1.1\r\nHost: h\r\n\r\n";
  const Outcome outcome = runAnyway(input, RequestRules{});
  EXPECT_FALSE(outcome.refused);
  EXPECT_EQ(outcome.out, input);
  EXPECT_EQ(outcome.requests, 2U);
  // But for the rules that hold whatever the host: a body closes the stream.
  const Outcome post = runAnyway(
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok" + get(), RequestRules{});
  EXPECT_EQ(post.out,
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  EXPECT_EQ(refusalOf("TRACE / HTTP/1.1\r\nHost: h\r\n\r\n", RequestRules{}).status, 405);
}

TEST(RequestRewriterTest, GivesTheSameOutputForEverySplit) {
  const std::string own(kOwn);
  const std::vector<std::string> inputs = {
      get("Authorization: x\r\nX: " + own + own + "\r\n") + get(),
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;e=1\r\nab\r\n\r\n0\r\n"
      "T: 1\r\n\r\nGET / HTTP/1.0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /x HTTP/1.1\r\nHost: h\r\n"
      "X-Key: " +
          std::string(kForeign) + "\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n1 x\r\n",
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
      get("X-Token: a" + own + "\r\nCookie: " + std::string(kOther) + "\r\n") + "GET /" + own +
          " HTTP/1.1\r\n\r\n",
      "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 60\r\n\r\nab" + own + "cd",
      get() + "TRACE / HTTP/1.1\r\nHost: h\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nxGET /" + std::string(kForeign) +
          " HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: api.github.com\r\n\r\nGET http://evil/ HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: api.github.com:443\r\nX-Token: " + own +
          "\r\n\r\nGET / HTTP/1.1\r\nHost: evil\r\n\r\n",
  };
  for (const RequestRules& rules : {githubRules(), hostRules()}) {
    for (const std::string& input : inputs) {
      const Outcome whole = run(input, 0, rules);
      // Every cut into two pieces, then a byte at a time.
      for (std::size_t cut = 0; cut <= input.size(); ++cut) {
        RequestRewriter rewriter(rules);
        std::string out;
        std::optional<Refused> refused = rewriter.feed(std::string_view(input).substr(0, cut), out);
        if (!refused) {
          refused = rewriter.feed(std::string_view(input).substr(cut), out);
        }
        EXPECT_EQ(out, whole.out) << cut;
        EXPECT_EQ(refused.has_value(), whole.refused.has_value()) << cut;
        if (refused && whole.refused) {
          EXPECT_EQ(refused->reason, whole.refused->reason) << cut;
        }
        EXPECT_EQ(rewriter.requests(), whole.requests) << cut;
        EXPECT_EQ(rewriter.betweenRequests(), whole.between) << cut;
        EXPECT_EQ(rewriter.closing(), whole.closing) << cut;
      }
      const Outcome bytewise = run(input, 1, rules);
      EXPECT_EQ(bytewise.out, whole.out);
      EXPECT_EQ(bytewise.requests, whole.requests);
      EXPECT_EQ(bytewise.refused.has_value(), whole.refused.has_value());
    }
  }
}

TEST(RequestRewriterTest, IgnoresAnEmptyFeed) {
  RequestRewriter rewriter(githubRules());
  std::string out;
  EXPECT_FALSE(rewriter.feed("", out));
  EXPECT_EQ(out, "");
  EXPECT_TRUE(rewriter.betweenRequests());
}

TEST(RequestRewriterTest, WritesARefusalAsACompleteResponse) {
  EXPECT_EQ(refusalResponse({403, "placeholder", "No."}),
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "X-Proxy-Error: placeholder\r\nContent-Length: 4\r\nConnection: close\r\n\r\nNo.\n");
  EXPECT_THAT(refusalResponse({431, "head-too-large", "x"}),
              ::testing::StartsWith("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
  EXPECT_THAT(refusalResponse({405, "method", "x"}),
              ::testing::StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(refusalResponse({421, "misdirected", "x"}),
              ::testing::StartsWith("HTTP/1.1 421 Misdirected Request\r\n"));
  EXPECT_THAT(refusalResponse({505, "http-version", "x"}),
              ::testing::StartsWith("HTTP/1.1 505 HTTP Version Not Supported\r\n"));
  EXPECT_THAT(refusalResponse({501, "unsupported", "x"}),
              ::testing::StartsWith("HTTP/1.1 501 Not Implemented\r\n"));
  EXPECT_THAT(refusalResponse({502, "upstream-tls", "x"}),
              ::testing::StartsWith("HTTP/1.1 502 Bad Gateway\r\n"));
  EXPECT_THAT(refusalResponse({200, "x", "x"}),
              ::testing::StartsWith("HTTP/1.1 500 Internal Server Error\r\n"));

  // The reason on one line of at most 512 bytes; the token cannot break the header.
  const std::string response =
      refusalResponse({400, "bad\r\nX-Injected: 1", "line\r\nbreak\t" + std::string(600, 'r')});
  EXPECT_THAT(response, HasSubstr("\r\nX-Proxy-Error: badX-Injected1\r\n"));
  const std::string body = response.substr(response.find("\r\n\r\n") + 4);
  EXPECT_EQ(body.size(), 513U);
  EXPECT_EQ(body.substr(0, 12), "line  break ");
  EXPECT_EQ(body.find('\n'), 512U);
  EXPECT_THAT(response, HasSubstr("Content-Length: 513\r\n"));
  // A UTF-8 sequence cut by the limit is dropped whole.
  const std::string cut = refusalResponse({400, "t", std::string(511, 'a') + "\xC3\xA9"});
  EXPECT_EQ(cut.substr(cut.find("\r\n\r\n") + 4), std::string(511, 'a') + "\n");
}

}  // namespace
}  // namespace scs::egress

namespace scs::egress {
namespace {

// The report counts requests that got a credential, not every request carried.
TEST(RequestRewriterTest, CountsTheRequestsThatGotACredential) {
  RequestRules rules;
  rules.host = "api.test";
  rules.substitute.push_back({"scs-placeholder-22222222222222222222222222222222", "token"});
  RequestRewriter rewriter(rules);
  std::string out;
  EXPECT_FALSE(rewriter.feed("GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", out));
  EXPECT_FALSE(
      rewriter.feed("GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "
                    "scs-placeholder-22222222222222222222222222222222\r\n\r\n",
                    out));
  EXPECT_EQ(rewriter.requests(), 2U);
  EXPECT_EQ(rewriter.credentialed(), 1U);
}

}  // namespace
}  // namespace scs::egress
