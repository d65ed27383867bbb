// The egress policy (issue 44): operator patterns, the strict gate a requested host passes, the
// address classes a sandbox must not reach in any spelling, decide()'s order and reasons, and
// resolve() with a stub resolver that counts, so a refused name provably sends no query.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "egress/host_policy.h"

namespace scs::egress {
namespace {

using Poco::Net::IPAddress;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

template <class T>
std::string errorOf(const Result<T>& result) {
  const Error* error = std::get_if<Error>(&result);
  return error ? error->message : "";
}

Target target(std::string_view host) {
  const Result<Target> parsed = parseTarget(host);
  EXPECT_TRUE(std::holds_alternative<Target>(parsed)) << host << ": " << errorOf(parsed);
  return std::holds_alternative<Target>(parsed) ? std::get<Target>(parsed) : Target{};
}

std::string classOf(const std::string& address, const std::vector<IPAddress>& own = {}) {
  return forbiddenClass(IPAddress(address), own).value_or("public");
}

std::vector<std::string> texts(const std::vector<IPAddress>& addresses) {
  std::vector<std::string> out;
  for (const IPAddress& address : addresses) {
    out.push_back(address.toString());
  }
  return out;
}

// Answers from a table and counts every question, so a test can prove none was asked.
class CountingResolver final : public Resolver {
 public:
  explicit CountingResolver(std::map<std::string, std::vector<std::string>> answers)
      : answers_(std::move(answers)) {}

  Result<std::vector<IPAddress>> resolve(const std::string& host) override {
    {
      std::lock_guard lock(mutex_);
      asked_.push_back(host);
    }
    const auto answer = answers_.find(host);
    if (answer == answers_.end()) {
      return invalid(host + " could not be resolved (Name or service not known)");
    }
    std::vector<IPAddress> addresses;
    for (const std::string& text : answer->second) {
      addresses.emplace_back(text);
    }
    return addresses;
  }

  std::vector<std::string> asked() const {
    std::lock_guard lock(mutex_);
    return asked_;
  }

 private:
  const std::map<std::string, std::vector<std::string>> answers_;
  mutable std::mutex mutex_;
  std::vector<std::string> asked_;
};

// --- parseTarget: egress-notes §8 item 1 ----------------------------------------------------

TEST(TargetTest, CanonicalNamesAndAddressesPassInTheirCanonicalForm) {
  struct Case {
    std::string input;
    std::string host;
    bool address;
  };
  const std::string label63(63, 'a');
  const std::string long_name =
      label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(long_name.size(), 253U);
  for (const Case& c : std::vector<Case>{
           {"Example.COM.", "example.com", false},
           {"api.github.com", "api.github.com", false},
           {"a_b-c.example", "a_b-c.example", false},
           {"xn--bcher-kva.example", "xn--bcher-kva.example", false},
           {"0x.example", "0x.example", false},  // only the last label reads as a number
           {"10.1.2.3", "10.1.2.3", true},
           {"1.2.3.4.", "1.2.3.4", true},
           {"0.0.0.0", "0.0.0.0", true},
           {"2001:db8::1", "2001:db8::1", true},
           {"[2001:DB8::1]", "2001:db8::1", true},
           {"[0:0:0:0:0:0:0:1]", "::1", true},
           {"[::ffff:127.0.0.1]", "::ffff:127.0.0.1", true},
           {"[::ffff:7f00:1]", "::ffff:127.0.0.1", true},
           {"[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe", true},
           {"[2002:a9fe:a9fe::]", "2002:a9fe:a9fe::", true},
           {label63 + ".example", label63 + ".example", false},
           {long_name, long_name, false},
           {long_name + ".", long_name, false},
       }) {
    const Result<Target> parsed = parseTarget(c.input);
    ASSERT_TRUE(std::holds_alternative<Target>(parsed)) << c.input << ": " << errorOf(parsed);
    EXPECT_EQ(std::get<Target>(parsed).host, c.host) << c.input;
    EXPECT_EQ(std::get<Target>(parsed).address.has_value(), c.address) << c.input;
  }
}

TEST(TargetTest, EveryOtherSpellingIsRefusedNeverNormalised) {
  const std::string label64(64, 'a');
  const std::string too_long = std::string(63, 'a') + "." + std::string(63, 'a') + "." +
                               std::string(63, 'a') + "." + std::string(62, 'b');
  ASSERT_EQ(too_long.size(), 254U);
  for (const std::string& bad : std::vector<std::string>{
           "",
           ".",
           "127.1",
           "2130706433",
           "0x7f.0.0.1",
           "0x7f000001",
           "017700000001",
           "127.000.0.1",
           "0177.0.0.1",
           "127.0.0.01",
           "1.2.3",
           "1.2.3.4.5",
           "256.0.0.1",
           "example.0x1",
           "[fe80::1%25eth0]",
           "[fe80::1%eth0]",
           "fe80::1%eth0",
           "allowed.test%00.evil",
           "allowed%2etest",
           "ａllowed.test",  // a fullwidth "a"
           "bücher.example",
           "allowed.test:443.evil",
           "allowed.test:443",
           "1.2.3.4:443",
           "a..b",
           ".a",
           "a..",
           label64 + ".example",
           too_long,
           "allowed.test\r\nX: y",
           std::string("allowed.test\0.evil", 18),
           "exa mple.com",
           " example.com",
           "example.com\t",
           "a/b",
           "user@example.com",
           "*.example.com",
           "[1.2.3.4]",
           "[::1",
           "::1]",
           "[]",
           "[example.com]",
           "1:2",
       }) {
    const Result<Target> parsed = parseTarget(bad);
    EXPECT_TRUE(std::holds_alternative<Error>(parsed)) << bad;
    const std::string message = errorOf(parsed);
    EXPECT_THAT(message, HasSubstr("is not a host this server accepts")) << bad;
    // The message may reach a 403 line: nothing in it may end that line early.
    EXPECT_EQ(message.find_first_of(std::string("\r\n\0", 3)), std::string::npos) << bad;
  }
}

// --- forbiddenClass: §8 item 4 ----------------------------------------------------------------

TEST(AddressClassTest, EveryForbiddenRangeIsNamedAndItsNeighboursArePublic) {
  for (const auto& [address, expected] : std::vector<std::pair<std::string, std::string>>{
           {"0.0.0.0", "unspecified"},
           {"0.255.255.255", "unspecified"},
           {"127.0.0.1", "loopback"},
           {"127.255.255.254", "loopback"},
           {"10.0.0.1", "private"},
           {"10.255.255.255", "private"},
           {"11.0.0.1", "public"},
           {"172.16.0.1", "private"},
           {"172.31.255.255", "private"},
           {"172.15.255.255", "public"},
           {"172.32.0.1", "public"},
           {"192.168.0.1", "private"},
           {"192.169.0.1", "public"},
           {"100.64.0.1", "shared address space"},
           {"100.127.255.255", "shared address space"},
           {"100.63.255.255", "public"},
           {"100.128.0.1", "public"},
           {"169.254.0.1", "link-local"},
           {"169.254.169.254", "metadata"},
           {"224.0.0.1", "multicast"},
           {"239.255.255.255", "multicast"},
           {"240.0.0.1", "reserved"},
           {"255.255.255.254", "reserved"},
           {"255.255.255.255", "broadcast"},
           {"192.0.0.1", "reserved"},
           {"192.0.0.192", "metadata"},
           {"192.0.2.1", "documentation"},
           {"198.51.100.1", "documentation"},
           {"203.0.113.1", "documentation"},
           {"198.18.0.1", "reserved"},
           {"198.19.255.255", "reserved"},
           {"198.20.0.1", "public"},
           {"100.100.100.200", "metadata"},
           {"168.63.129.16", "metadata"},
           {"168.63.129.17", "public"},
           {"8.8.8.8", "public"},
           {"::", "unspecified"},
           {"::1", "loopback"},
           {"fc00::1", "unique local"},
           {"fdff:ffff::1", "unique local"},
           {"fe80::1", "link-local"},
           {"febf::1", "link-local"},
           {"fec0::1", "reserved"},
           {"ff02::1", "multicast"},
           {"2001:db8::1", "documentation"},
           {"2001:db9::1", "public"},
           {"fd00:ec2::254", "metadata"},
           {"fd00:ec2::23", "metadata"},
           {"fd20:ce::254", "metadata"},
           {"100::1", "reserved"},
           {"2606:4700::1111", "public"},
       }) {
    EXPECT_EQ(classOf(address), expected) << address;
  }
}

TEST(AddressClassTest, AnIPv4AddressInsideIPv6IsJudgedAsTheIPv4Address) {
  for (const auto& [address, expected] : std::vector<std::pair<std::string, std::string>>{
           {"::ffff:127.0.0.1", "loopback"},  // mapped
           {"::ffff:7f00:1", "loopback"},
           {"::ffff:169.254.169.254", "metadata"},
           {"::ffff:10.0.0.1", "private"},
           {"::ffff:8.8.8.8", "public"},
           {"::ffff:0:127.0.0.1", "loopback"},  // translated
           {"::127.0.0.1", "loopback"},         // compatible
           {"::10.0.0.1", "private"},
           {"::8.8.8.8", "public"},
           {"64:ff9b::a9fe:a9fe", "metadata"},  // NAT64
           {"64:ff9b::7f00:1", "loopback"},
           {"64:ff9b::808:808", "public"},
           {"64:ff9b:1::1", "reserved"},
           {"2002:a9fe:a9fe::", "metadata"},  // 6to4
           {"2002:7f00:1::1", "loopback"},
           {"2002:0a00:0001:1::1", "private"},
           {"2002:808:808::1", "public"},
           // Teredo: the client is the last 32 bits inverted; the server part is ignored.
           {"2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"},  // 127.0.0.1
           {"2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"},   // 10.0.0.1
           {"2001:0:4136:e378:8000:63bf:5601:5601", "metadata"},  // 169.254.169.254
           {"2001:0:4136:e378:8000:63bf:f7f7:f7f7", "public"},    // 8.8.8.8
       }) {
    EXPECT_EQ(classOf(address), expected) << address;
  }
}

TEST(AddressClassTest, TheServersOwnAddressesAreForbiddenInEverySpelling) {
  const std::vector<IPAddress> own = {IPAddress("93.184.216.34"), IPAddress("2606:2800:220:1::1")};
  EXPECT_EQ(classOf("93.184.216.34", own), "this server's own address");
  EXPECT_EQ(classOf("::ffff:93.184.216.34", own), "this server's own address");
  EXPECT_EQ(classOf("64:ff9b::5db8:d822", own), "this server's own address");
  EXPECT_EQ(classOf("2606:2800:220:1::1", own), "this server's own address");
  EXPECT_EQ(classOf("93.184.216.35", own), "public");
  EXPECT_EQ(classOf("2606:2800:220:1::2", own), "public");
  // A narrower class says more than "own" does.
  EXPECT_EQ(classOf("127.0.0.1", {IPAddress("127.0.0.1")}), "loopback");
}

// --- parsePattern: §8 items 2 and 3 -------------------------------------------------------------

TEST(PatternTest, HostsSuffixesAddressesAndNetworksAreHeldInCanonicalForm) {
  struct Case {
    std::string input;
    Pattern::Kind kind;
    std::string host;
    unsigned prefix;
    std::uint16_t port;
    std::string text;
  };
  using K = Pattern::Kind;
  for (const Case& c : std::vector<Case>{
           {"api.github.com", K::kHost, "api.github.com", 0, 443, "api.github.com:443"},
           {"API.GitHub.com.:8443", K::kHost, "api.github.com", 0, 8443, "api.github.com:8443"},
           {"github.io", K::kHost, "github.io", 0, 443, "github.io:443"},
           {"a_b.example:1", K::kHost, "a_b.example", 0, 1, "a_b.example:1"},
           {"r1---sn-a.example:65535", K::kHost, "r1---sn-a.example", 0, 65535,
            "r1---sn-a.example:65535"},
           {"bücher.example", K::kHost, "xn--bcher-kva.example", 0, 443,
            "xn--bcher-kva.example:443"},
           {"BÜCHER.example", K::kHost, "xn--bcher-kva.example", 0, 443,
            "xn--bcher-kva.example:443"},
           {"xn--bcher-kva.example", K::kHost, "xn--bcher-kva.example", 0, 443,
            "xn--bcher-kva.example:443"},
           // The operator's own fullwidth letters are mapped (UTS 46), unlike a program's.
           {"ａllowed.test", K::kHost, "allowed.test", 0, 443, "allowed.test:443"},
           {"*.example.org", K::kSuffix, "example.org", 0, 443, "*.example.org:443"},
           {"*.Example.ORG.:8443", K::kSuffix, "example.org", 0, 8443, "*.example.org:8443"},
           {"*.foo.github.io", K::kSuffix, "foo.github.io", 0, 443, "*.foo.github.io:443"},
           {"*.bücher.example", K::kSuffix, "xn--bcher-kva.example", 0, 443,
            "*.xn--bcher-kva.example:443"},
           {"10.1.2.3", K::kNetwork, "", 32, 443, "10.1.2.3:443"},
           {"10.1.2.3:80", K::kNetwork, "", 32, 80, "10.1.2.3:80"},
           {"10.0.0.0/8:5432", K::kNetwork, "", 8, 5432, "10.0.0.0/8:5432"},
           {"10.0.0.0/8", K::kNetwork, "", 8, 443, "10.0.0.0/8:443"},
           {"0.0.0.0/0", K::kNetwork, "", 0, 443, "0.0.0.0/0:443"},
           {"10.1.2.3/32", K::kNetwork, "", 32, 443, "10.1.2.3:443"},
           {"2001:db8::1", K::kNetwork, "", 128, 443, "[2001:db8::1]:443"},
           {"[2001:DB8::1]:443", K::kNetwork, "", 128, 443, "[2001:db8::1]:443"},
           {"[2001:db8::1]:8443", K::kNetwork, "", 128, 8443, "[2001:db8::1]:8443"},
           {"2001:db8::/32", K::kNetwork, "", 32, 443, "[2001:db8::]/32:443"},
           {"2001:db8::/32:8443", K::kNetwork, "", 32, 8443, "[2001:db8::]/32:8443"},
           {"[2001:db8::]/32:8443", K::kNetwork, "", 32, 8443, "[2001:db8::]/32:8443"},
           {"fd00::/8", K::kNetwork, "", 8, 443, "[fd00::]/8:443"},
       }) {
    const Result<Pattern> parsed = parsePattern(c.input);
    ASSERT_TRUE(std::holds_alternative<Pattern>(parsed)) << c.input << ": " << errorOf(parsed);
    const Pattern& pattern = std::get<Pattern>(parsed);
    EXPECT_EQ(pattern.kind, c.kind) << c.input;
    EXPECT_EQ(pattern.host, c.host) << c.input;
    EXPECT_EQ(pattern.port, c.port) << c.input;
    EXPECT_EQ(pattern.text, c.text) << c.input;
    if (c.kind == K::kNetwork) {
      EXPECT_EQ(pattern.prefix, c.prefix) << c.input;
    }
    // The canonical text reads back as the same pattern.
    const Result<Pattern> again = parsePattern(pattern.text);
    ASSERT_TRUE(std::holds_alternative<Pattern>(again)) << pattern.text << ": " << errorOf(again);
    EXPECT_EQ(std::get<Pattern>(again).text, pattern.text);
  }
}

TEST(PatternTest, WildcardsOverPublicSuffixesAndEverythingButAHostAreRefused) {
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "empty"},
           {"*", "wildcard"},
           {"*.*", "wildcard"},
           {"**.com", "wildcard"},
           {"*.*.com", "wildcard"},
           {"*x.com", "wildcard"},
           {"x*.com", "wildcard"},
           {"a.*.com", "wildcard"},
           {"api.*", "wildcard"},
           {"*.", "wildcard"},
           {"*.com", "public suffix"},
           {"*.co.uk", "public suffix"},
           {"*.github.io", "public suffix"},
           {"*.s3.amazonaws.com", "public suffix"},
           {"*.cloudfront.net", "public suffix"},
           {"*.herokuapp.com", "public suffix"},
           {"*.xn--55qx5d.cn", "public suffix"},
           {"*.公司.cn", "public suffix"},
           {"*.test", "public suffix"},  // a single label is a top-level domain
           {"*.1.2.3.4", "CIDR"},
           {"http://x", "URL"},
           {"https://api.github.com/", "URL"},
           {"x/y", "path"},
           {"api.github.com/", "path"},
           {"x?y", "path"},
           {"x#y", "path"},
           {"u@x", "user"},
           {"user:pw@x", "user"},
           {"x:0", "port"},
           {"x:65536", "port"},
           {"x:99999999999", "port"},
           {"x:", "port"},
           {"x:abc", "port"},
           {"x:+1", "port"},
           {"x:-1", "port"},
           {"[::1]:", "port"},
           {"10.0.0.1/8", "did you mean \"10.0.0.0/8\""},
           {"2001:db8::1/32", "did you mean \"2001:db8::/32\""},
           {"10.0.0.0/33", "prefix"},
           {"10.0.0.0/", "prefix"},
           {"10.0.0.0/x", "prefix"},
           {"2001:db8::/129", "prefix"},
           {"[1.2.3.4]:443", "brackets"},
           {"[example.com]:443", "brackets"},
           {"[2001:db8::1", "\"[\""},
           {"[2001:db8::1]x", "follow"},
           {"a:b:c", "brackets"},
           {"127.1", "four decimal numbers"},
           {"0x7f.0.0.1", "four decimal numbers"},
           {"2130706433", "four decimal numbers"},
           {"010.0.0.1", "four decimal numbers"},
           {"xn--garbage.example", "internationalised"},
           {"😀.com", "internationalised"},
           {"a..b", "empty label"},
           {"exa mple.com", "space"},
           {"example.com\n", "control"},
           {std::string(64, 'a') + ".example", "63"},
           {"a!b.example", "letters, digits"},
           {"2001:db8::1%eth0", "brackets"},
           {"[fe80::1%eth0]:443", "brackets"},
       }) {
    const Result<Pattern> parsed = parsePattern(bad);
    ASSERT_TRUE(std::holds_alternative<Error>(parsed))
        << bad << " -> " << std::get<Pattern>(parsed).text;
    EXPECT_THAT(errorOf(parsed),
                AllOf(StartsWith("The egress pattern \""), HasSubstr(why), testing::EndsWith(".")))
        << bad;
  }
}

// --- The policy: entries, listings, decide() -----------------------------------------------------

TEST(EgressPolicyTest, EntriesNameATenantAndRepeatsAreKeptOnce) {
  EgressPolicy policy(
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{}));
  EXPECT_FALSE(policy.enabled());
  EXPECT_THAT(policy.allowedFor("local"), IsEmpty());

  EXPECT_EQ(std::get<bool>(policy.allow("local=api.github.com")), true);
  EXPECT_EQ(std::get<bool>(policy.allow("local=*.Example.org:8443")), true);
  EXPECT_EQ(std::get<bool>(policy.allow("local=API.github.com.:443")), false);  // the same entry
  EXPECT_EQ(std::get<bool>(policy.deny("local=evil.example.org:8443")), true);
  EXPECT_EQ(std::get<bool>(policy.deny("team-b.2=*.example.net")), true);

  EXPECT_TRUE(policy.enabled());
  EXPECT_TRUE(policy.enabledFor("local"));
  EXPECT_FALSE(policy.enabledFor("team-b.2"));  // a deny alone opens nothing
  EXPECT_FALSE(policy.enabledFor("other"));
  EXPECT_THAT(policy.allowedFor("local"), ElementsAre("api.github.com:443", "*.example.org:8443"));
  EXPECT_THAT(policy.deniedFor("local"), ElementsAre("evil.example.org:8443"));
  EXPECT_THAT(policy.allowedFor("team-b.2"), IsEmpty());
  EXPECT_THAT(policy.deniedFor("team-b.2"), IsEmpty());

  for (const char* bad : {"api.github.com", "=api.github.com", "lo cal=x.example", "t/1=x.example",
                          "local=", "local=*.com", "local=http://x"}) {
    const Result<bool> added = policy.allow(bad);
    EXPECT_THAT(errorOf(added), StartsWith("The egress entry \"")) << bad;
  }
  EXPECT_THAT(errorOf(policy.deny("local=*.github.io")),
              AllOf(HasSubstr("local=*.github.io"), HasSubstr("public suffix")));
  EXPECT_THAT(errorOf(policy.allow("local=a.example:70000")), HasSubstr("1 to 65535"));
}

TEST(EgressPolicyTest, PinsNameACanonicalHostAndOneAddress) {
  EgressPolicy policy(
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{}));
  EXPECT_EQ(std::get<bool>(policy.pin("db.internal=10.1.2.3")), true);
  EXPECT_EQ(std::get<bool>(policy.pin("DB.internal.=10.1.2.3")), false);
  EXPECT_EQ(std::get<bool>(policy.pin("bücher.example=[::1]")), true);
  EXPECT_EQ(std::get<bool>(policy.pin("v6.internal=2001:db8::1")), true);
  for (const char* bad : {"db.internal=10.1.2.4", "db.internal", "=10.1.2.3", "x.internal=",
                          "x.internal=127.1", "x.internal=fe80::1%eth0", "x.internal=x.example",
                          "*.x.internal=10.1.2.3", "1.2.3.4=10.1.2.3", "x.internal=10.1.2.3:443"}) {
    EXPECT_THAT(errorOf(policy.pin(bad)), StartsWith("The egress pin \"")) << bad;
  }
  EXPECT_THAT(errorOf(policy.pin("db.internal=10.1.2.4")), HasSubstr("already pinned"));
}

TEST(EgressPolicyTest, AWildcardCoversNamesStrictlyBelowItsSuffix) {
  auto resolver =
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{});
  EgressPolicy policy(resolver);
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=*.ex.com")));
  for (const auto& [host, allowed] : std::vector<std::pair<std::string, bool>>{
           {"a.ex.com", true},
           {"a.b.ex.com", true},
           {"A.EX.COM.", true},
           {"_dmarc.ex.com", true},
           {"ex.com", false},
           {"xex.com", false},
           {"a.xex.com", false},
           {"ex.com.evil.com", false},
           {"a.ex.co", false},
       }) {
    const Decision decision = policy.decide("t", target(host), 443);
    EXPECT_EQ(decision.allowed, allowed) << host << ": " << decision.reason;
  }
  EXPECT_THAT(resolver->asked(), IsEmpty());
}

TEST(EgressPolicyTest, AnAllowedWildcardStopsAtAPublicSuffixBelowIt) {
  EgressPolicy policy(
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{}));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=*.amazonaws.com")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("u=evil.s3.amazonaws.com")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.deny("u=*.amazonaws.com")));
  EXPECT_TRUE(policy.decide("t", target("sts.amazonaws.com"), 443).allowed);
  EXPECT_TRUE(policy.decide("t", target("a.b.sts.amazonaws.com"), 443).allowed);
  const Decision bucket = policy.decide("t", target("evil.s3.amazonaws.com"), 443);
  EXPECT_FALSE(bucket.allowed);
  EXPECT_EQ(bucket.reason,
            "evil.s3.amazonaws.com:443 is not on this server's allow-list for this tenant: "
            "*.amazonaws.com:443 does not reach below the public suffix s3.amazonaws.com");
  // A deny wildcard covers every name below it, public suffixes or not.
  EXPECT_THAT(policy.decide("u", target("evil.s3.amazonaws.com"), 443).reason,
              HasSubstr("is denied by this server's egress policy"));
}

TEST(EgressPolicyTest, DenyWinsThenAllowAndEachRefusalSaysWhyInOneLine) {
  auto resolver =
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{});
  EgressPolicy policy(resolver);
  for (const char* entry :
       {"t=*.example.com", "t=evil.example.com", "t=api.github.com:8443", "t=10.0.0.0/8:5432",
        "t=[2001:db8::]/32:443", "t=ok.bad.example", "t=bücher.example"}) {
    ASSERT_TRUE(std::holds_alternative<bool>(policy.allow(entry))) << entry;
  }
  for (const char* entry : {"t=evil.example.com", "t=*.bad.example", "t=10.9.0.0/16:5432"}) {
    ASSERT_TRUE(std::holds_alternative<bool>(policy.deny(entry))) << entry;
  }
  struct Case {
    std::string tenant;
    std::string host;
    std::uint16_t port;
    bool allowed;
    std::string reason;
  };
  const std::string not_listed = " is not on this server's allow-list for this tenant";
  const std::string denied = " is denied by this server's egress policy";
  for (const Case& c : std::vector<Case>{
           {"t", "a.example.com", 443, true, "*.example.com:443"},
           {"t", "evil.example.com", 443, false, "evil.example.com:443" + denied},
           {"t", "x.evil.example.com", 443, true, "*.example.com:443"},  // deny is exact
           {"t", "evil.example.com", 8443, false, "evil.example.com:8443" + not_listed},
           {"t", "ok.bad.example", 443, false, "ok.bad.example:443" + denied},
           {"t", "api.github.com", 8443, true, "api.github.com:8443"},
           {"t", "api.github.com", 443, false, "api.github.com:443" + not_listed},
           {"t", "xn--bcher-kva.example", 443, true, "xn--bcher-kva.example:443"},
           {"t", "10.1.2.3", 5432, true, "10.0.0.0/8:5432"},
           {"t", "10.1.2.3", 443, false, "10.1.2.3:443" + not_listed},
           {"t", "10.9.1.1", 5432, false, "10.9.1.1:5432" + denied},
           {"t", "[2001:db8::5]", 443, true, "[2001:db8::]/32:443"},
           {"t", "::ffff:10.1.2.3", 5432, false, "[::ffff:10.1.2.3]:5432" + not_listed},
           {"t", "2001:db9::1", 443, false, "[2001:db9::1]:443" + not_listed},
           {"other", "a.example.com", 443, false, "a.example.com:443" + not_listed},
           {"", "a.example.com", 443, false, "a.example.com:443" + not_listed},
       }) {
    const Decision decision = policy.decide(c.tenant, target(c.host), c.port);
    EXPECT_EQ(decision.allowed, c.allowed) << c.host << ":" << c.port;
    EXPECT_EQ(decision.reason, c.reason) << c.host << ":" << c.port;
  }
  EXPECT_THAT(resolver->asked(), IsEmpty());
}

TEST(EgressPolicyTest, AnAddressMatchesOnlyNetworksAndANameOnlyNames) {
  auto resolver =
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{});
  EgressPolicy policy(resolver);
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=93.184.216.34")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=example.net")));
  // A name is never compared with an address entry, nor an address with a name entry, even
  // when one would resolve to the other.
  EXPECT_FALSE(policy.decide("t", target("93.184.216.34.nip.io"), 443).allowed);
  EXPECT_TRUE(policy.decide("t", target("93.184.216.34"), 443).allowed);
  EXPECT_TRUE(policy.decide("t", target("example.net"), 443).allowed);
  EXPECT_FALSE(policy.decide("t", target("[::ffff:93.184.216.34]"), 443).allowed);
  EXPECT_THAT(resolver->asked(), IsEmpty());
}

// --- resolve()
// -------------------------------------------------------------------------------------

class ResolveTest : public ::testing::Test {
 protected:
  ResolveTest()
      : resolver_(
            std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{
                {"api.example.com", {"93.184.216.34", "2606:2800:220:1::1"}},
                {"mixed.example.com", {"10.0.0.1", "93.184.216.34", "::1", "93.184.216.34"}},
                {"metadata.example.com", {"169.254.169.254"}},
                {"mapped.example.com", {"::ffff:127.0.0.1"}},
                {"inside.example.com", {"10.0.0.1", "127.0.0.1", "10.0.0.2"}},
                {"nat64.example.com", {"64:ff9b::a9fe:a9fe"}},
                {"empty.example.com", {}},
                {"db.internal", {"10.1.2.3"}},
                {"other.internal", {"127.0.0.2"}},
            })),
        policy_(resolver_) {
    for (const char* entry :
         {"t=*.example.com", "t=db.internal:5432", "t=10.0.0.0/8:5432", "t=other.internal",
          "t=allowed.test:8443", "u=db.internal:5432", "t=[2001:db8::1]:443"}) {
      EXPECT_TRUE(std::holds_alternative<bool>(policy_.allow(entry))) << entry;
    }
    EXPECT_TRUE(std::holds_alternative<bool>(policy_.deny("t=denied.example.com")));
    EXPECT_TRUE(std::holds_alternative<bool>(policy_.pin("allowed.test=127.0.0.2")));
  }

  // What the relay does: gate, decide, and only then resolve.
  Result<std::vector<IPAddress>> connect(std::string_view tenant, std::string_view host,
                                         std::uint16_t port) {
    const Result<Target> parsed = parseTarget(host);
    if (const Error* error = std::get_if<Error>(&parsed)) {
      return *error;
    }
    const Decision decision = policy_.decide(tenant, std::get<Target>(parsed), port);
    if (!decision.allowed) {
      return invalid(decision.reason);
    }
    return policy_.resolve(tenant, std::get<Target>(parsed), port);
  }

  std::shared_ptr<CountingResolver> resolver_;
  EgressPolicy policy_;
};

TEST_F(ResolveTest, ARefusedNameIsNeverResolved) {
  for (const auto& [tenant, host] : std::vector<std::pair<std::string, std::string>>{
           {"t", "denied.example.com"},
           {"t", "secret-data.attacker.test"},
           {"t", "api.example.com:443"},
           {"t", "example.com"},
           {"u", "api.example.com"},
           {"nobody", "api.example.com"},
       }) {
    EXPECT_TRUE(std::holds_alternative<Error>(connect(tenant, host, 443))) << host;
  }
  EXPECT_THAT(resolver_->asked(), IsEmpty());
}

TEST_F(ResolveTest, AnAllowedNameIsResolvedOnceAsCanonicalAndKeepsTheResolversOrder) {
  const auto addresses = connect("t", "API.Example.COM.", 443);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(addresses)) << errorOf(addresses);
  EXPECT_THAT(texts(std::get<std::vector<IPAddress>>(addresses)),
              ElementsAre("93.184.216.34", "2606:2800:220:1::1"));
  EXPECT_THAT(resolver_->asked(), ElementsAre("api.example.com"));
}

TEST_F(ResolveTest, ForbiddenAddressesAreDroppedAndTheErrorNamesOnlyTheirClass) {
  const auto mixed = connect("t", "mixed.example.com", 443);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(mixed)) << errorOf(mixed);
  EXPECT_THAT(texts(std::get<std::vector<IPAddress>>(mixed)),
              ElementsAre("93.184.216.34", "93.184.216.34"));

  for (const auto& [host, message] : std::vector<std::pair<std::string, std::string>>{
           {"metadata.example.com", "metadata.example.com resolved only to a metadata address"},
           {"mapped.example.com", "mapped.example.com resolved only to a loopback address"},
           {"nat64.example.com", "nat64.example.com resolved only to a metadata address"},
           {"inside.example.com",
            "inside.example.com resolved only to a private address and a loopback address"},
           {"empty.example.com", "empty.example.com resolved to no address"},
           {"nowhere.example.com", "nowhere.example.com could not be resolved"},
       }) {
    const auto resolved = connect("t", host, 443);
    EXPECT_THAT(errorOf(resolved), AllOf(StartsWith(message), Not(HasSubstr("169.254")),
                                         Not(HasSubstr("127.0.0")), Not(HasSubstr("10.0.0"))))
        << host;
  }
}

TEST_F(ResolveTest, AnAddressTheOperatorNamedMayBeReachedButOnlyAsNamed) {
  // A network the tenant's own allow-list names.
  const auto db = connect("t", "db.internal", 5432);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(db)) << errorOf(db);
  EXPECT_THAT(texts(std::get<std::vector<IPAddress>>(db)), ElementsAre("10.1.2.3"));
  // Another tenant allowed the same name, without the network: not for it.
  EXPECT_THAT(errorOf(connect("u", "db.internal", 5432)),
              StartsWith("db.internal resolved only to a private address"));
  // A pinned name, loopback included, never reaches the resolver.
  const auto pinned = connect("t", "allowed.test", 8443);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(pinned)) << errorOf(pinned);
  EXPECT_THAT(texts(std::get<std::vector<IPAddress>>(pinned)), ElementsAre("127.0.0.2"));
  // Another name resolving to the pinned address gets no benefit from the pin.
  EXPECT_THAT(errorOf(connect("t", "other.internal", 443)),
              StartsWith("other.internal resolved only to a loopback address"));
  // An IP literal is its own answer.
  const auto literal = connect("t", "10.7.7.7", 5432);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(literal)) << errorOf(literal);
  EXPECT_THAT(texts(std::get<std::vector<IPAddress>>(literal)), ElementsAre("10.7.7.7"));
  const auto v6 = connect("t", "[2001:db8::1]", 443);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(v6)) << errorOf(v6);
  EXPECT_THAT(resolver_->asked(), ElementsAre("db.internal", "db.internal", "other.internal"));
}

TEST_F(ResolveTest, ANetworkEntryCoversAnAddressOnlyOnItsOwnPort) {
  // t allows 10.0.0.0/8 on 5432 only: a name allowed on 443 that resolves into it gains nothing.
  EXPECT_THAT(errorOf(connect("t", "inside.example.com", 443)),
              StartsWith("inside.example.com resolved only to a private address and a loopback "
                         "address"));
  const auto mixed = connect("t", "mixed.example.com", 443);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(mixed)) << errorOf(mixed);
  EXPECT_THAT(texts(std::get<std::vector<IPAddress>>(mixed)),
              ElementsAre("93.184.216.34", "93.184.216.34"));
}

TEST(EgressPolicyResolveTest, ADeniedNetworkIsNotReachedThroughAnAllowedName) {
  EgressPolicy policy(
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{
          {"cdn.example.com", {"93.184.216.34", "8.8.8.8"}},
          {"only.example.com", {"93.184.216.40"}}}));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=*.example.com")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.deny("t=93.184.216.0/24")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.deny("t=8.8.8.8:80")));
  const auto cdn = policy.resolve("t", target("cdn.example.com"), 443);
  ASSERT_TRUE(std::holds_alternative<std::vector<IPAddress>>(cdn)) << errorOf(cdn);
  EXPECT_THAT(texts(std::get<std::vector<IPAddress>>(cdn)), ElementsAre("8.8.8.8"));
  EXPECT_EQ(errorOf(policy.resolve("t", target("only.example.com"), 443)),
            "only.example.com resolved only to an address this server's egress policy denies");
}

TEST(EgressPolicyResolveTest, EveryAddressOfThisHostIsDropped) {
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  std::vector<std::string> own;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr != nullptr &&
        (entry->ifa_addr->sa_family == AF_INET || entry->ifa_addr->sa_family == AF_INET6)) {
      own.push_back(IPAddress(*entry->ifa_addr).toString());
    }
  }
  freeifaddrs(list);
  ASSERT_THAT(own, Not(IsEmpty()));
  for (std::string& address : own) {
    address = address.substr(0, address.find('%'));  // a link-local address's scope
  }
  EgressPolicy policy(std::make_shared<CountingResolver>(
      std::map<std::string, std::vector<std::string>>{{"self.example.com", own}}));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=self.example.com")));
  const auto resolved = policy.resolve("t", target("self.example.com"), 443);
  EXPECT_THAT(errorOf(resolved), StartsWith("self.example.com resolved only to "));
}

TEST_F(ResolveTest, ConstCallsFromManyThreadsAgree) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int n = 0; n < 200; ++n) {
        const Decision decision = policy_.decide("t", target("a.example.com"), 443);
        const auto pinned = policy_.resolve("t", target("allowed.test"), 8443);
        if (!decision.allowed || !std::holds_alternative<std::vector<IPAddress>>(pinned) ||
            !forbiddenClass(IPAddress("::ffff:10.0.0.1")).has_value()) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_THAT(resolver_->asked(), IsEmpty());
}

}  // namespace
}  // namespace scs::egress

namespace scs::egress {
namespace {

// A wide network is any public address, not the forbidden ones inside it (review of issue 44).
TEST(EgressPolicyReviewTest, AWideNetworkDoesNotOpenForbiddenAddresses) {
  EgressPolicy policy(std::make_shared<CountingResolver>(
      std::map<std::string, std::vector<std::string>>{}));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=0.0.0.0/0")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=169.254.169.254/32:80")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=10.0.0.0/8:5432")));
  for (const char* forbidden : {"127.0.0.1", "169.254.169.254", "10.1.2.3", "192.168.1.1"}) {
    EXPECT_TRUE(policy.decide("t", target(forbidden), 443).allowed) << forbidden;
    EXPECT_THAT(errorOf(policy.resolve("t", target(forbidden), 443)), HasSubstr("resolved only"))
        << forbidden;
  }
  EXPECT_TRUE(std::holds_alternative<std::vector<IPAddress>>(
      policy.resolve("t", target("93.184.216.34"), 443)));
  // Named as itself, a forbidden address may be reached, on that entry's port.
  EXPECT_TRUE(std::holds_alternative<std::vector<IPAddress>>(
      policy.resolve("t", target("169.254.169.254"), 80)));
  EXPECT_TRUE(
      std::holds_alternative<std::vector<IPAddress>>(policy.resolve("t", target("10.1.2.3"), 5432)));
}

TEST(EgressPolicyReviewTest, APinnedNameIsStillSubjectToDeny) {
  const auto resolver =
      std::make_shared<CountingResolver>(std::map<std::string, std::vector<std::string>>{});
  EgressPolicy policy(resolver);
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("t=db.internal:5432")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.deny("t=10.0.0.0/8:5432")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.pin("db.internal=10.1.2.3")));
  EXPECT_THAT(errorOf(policy.resolve("t", target("db.internal"), 5432)), HasSubstr("denies"));
  EXPECT_TRUE(resolver->asked().empty());
}

}  // namespace
}  // namespace scs::egress
