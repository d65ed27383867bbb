#pragma once

// Egress policy (issue 44): which hosts a tenant's programs may reach through the server, and
// what a name the policy allows may resolve to. The operator's, never the model's: it is made
// from --egress-allow, --egress-deny and --egress-resolve at startup and never changes after.
//
// The order of checks is the contract: a target's canonical form (parseTarget), deny, allow
// (EgressPolicy::decide), and only then resolution (EgressPolicy::resolve), which never sends a
// query for a name decide() refused (it is never called for one) and drops every address of a
// forbidden class unless the operator named that address.

#include <Poco/Net/IPAddress.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace scs::egress {

inline constexpr std::uint16_t kDefaultPort = 443;
// The tenant of stdio and of an HTTP server without tokens.
inline constexpr std::string_view kLocalTenant = "local";

// One operator entry, "PATTERN[:PORT]": an exact host, "*.suffix" (any name below the suffix,
// never the suffix itself; in an allow entry, never a name below a public suffix that is itself
// below the suffix: "*.amazonaws.com" does not allow "bucket.s3.amazonaws.com"), an IP address,
// or a CIDR. Hosts are held as canonical A-labels
// (lower case, no trailing dot; an internationalised name converted with libidn2).
struct Pattern {
  enum class Kind { kHost, kSuffix, kNetwork };
  Kind kind = Kind::kHost;
  std::string host;             // kHost: the host; kSuffix: the suffix, without "*."
  Poco::Net::IPAddress network;  // kNetwork: the network's address, host bits zero
  unsigned prefix = 0;           // kNetwork: prefix length (32 or 128 for one address)
  std::uint16_t port = kDefaultPort;
  // The canonical spelling, for tools/list, logs and refusals: "api.github.com:443",
  // "*.example.org:443", "10.0.0.0/8:5432", "[2001:db8::1]:443".
  std::string text;
};

// Parses operator input. Refused, with a sentence naming the input: empty, "*", "*.*", a
// wildcard anywhere but a whole first label, a wildcard whose suffix is a public suffix (libpsl,
// private section included: "*.com", "*.co.uk", "*.github.io"), a scheme, a path, userinfo, a
// port out of 1..65535, a name that is not a valid IDNA2008 host, a malformed address or CIDR.
Result<Pattern> parsePattern(std::string_view text);

// A host as a program names it (CONNECT's authority, a SOCKS5 domain or address, an absolute
// URI's host), checked strictly and never normalised beyond lower case and one trailing dot:
// anything else that is not already canonical is refused (no "127.1", "2130706433",
// "0x7f.0.0.1", "017700000001", no "%" zone, no non-ASCII, no control characters, labels of 1
// to 63 of [a-z0-9-_], at most 253 in all). An IPv6 literal may come bracketed or bare.
struct Target {
  std::string host;                        // canonical: "api.github.com", "10.1.2.3", "2001:db8::1"
  std::optional<Poco::Net::IPAddress> address;  // set when the host is an IP literal
};
Result<Target> parseTarget(std::string_view host);

// The class of an address a sandbox must not reach unless the operator named it, or nullopt
// for a public address: "unspecified", "loopback", "private", "shared address space" (CGNAT),
// "link-local", "metadata", "multicast", "broadcast", "reserved", "documentation",
// "unique local", "this server's own address". IPv4 embedded in IPv6 (mapped, compatible,
// NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32) is classified as the IPv4 address.
// `own` are the server host's own addresses (EgressPolicy reads them once with getifaddrs).
std::optional<std::string> forbiddenClass(const Poco::Net::IPAddress& address,
                                          const std::vector<Poco::Net::IPAddress>& own = {});

// Resolves a name the policy allowed. The production one is getaddrinfo on the name as an
// absolute name (a trailing dot, so no search domain is tried); tests give a stub that counts.
class Resolver {
 public:
  virtual ~Resolver() = default;
  virtual Result<std::vector<Poco::Net::IPAddress>> resolve(const std::string& host) = 0;
};
std::shared_ptr<Resolver> systemResolver();

struct Decision {
  bool allowed = false;
  // Refused: one line the program is shown, naming the host and port and why, for example
  // "example.com:443 is not on this server's allow-list for this tenant" or
  // "evil.example.com:443 is denied by this server's egress policy". Allowed: the pattern
  // that allowed it ("*.github.com:443").
  std::string reason;
};

class EgressPolicy {
 public:
  explicit EgressPolicy(std::shared_ptr<Resolver> resolver = systemResolver());

  // Reads the server host's own addresses (getifaddrs), which resolve() then refuses like any
  // forbidden class: once, at startup, before the policy serves (a server without egress never
  // reads them).
  Result<Done> readOwnAddresses();

  // "TENANT=PATTERN[:PORT]" (allow and deny) and "NAME=ADDRESS" (pin); the error names the
  // entry. A pinned name resolves to that address alone, and that address is the operator's
  // word that it may be reached (loopback and private included) for that name.
  Result<bool> allow(std::string_view entry);
  Result<bool> deny(std::string_view entry);
  Result<bool> pin(std::string_view entry);

  // Whether any tenant has an allow entry (the server carries egress at all).
  bool enabled() const;
  // Whether `tenant` has an allow entry.
  bool enabledFor(std::string_view tenant) const;
  // What `tenant` may reach, for tools/list and the instructions: the allow entries' text, in
  // the order given, then "except " and the deny entries' text. Empty without a policy.
  std::vector<std::string> allowedFor(std::string_view tenant) const;
  std::vector<std::string> deniedFor(std::string_view tenant) const;

  // Deny first, then allow; no resolution. An IP literal matches only kNetwork entries, a name
  // only kHost and kSuffix entries; the port must equal the entry's.
  Decision decide(std::string_view tenant, const Target& target, std::uint16_t port) const;

  // The addresses to dial for a target decide() allowed on `port`, in the resolver's order: an
  // IP literal as itself; a pinned name as its address; any other name through the resolver.
  // Every address of a forbiddenClass is dropped unless a kNetwork allow entry of the tenant
  // for that port covers it (or it is the pin of that name), and so is every address a kNetwork
  // deny entry of the tenant for that port covers (deny wins over a name, too); when none is
  // left the error says the class ("api.x.com resolved only to a private address"), never the
  // address, as kRefused (the policy's no); the resolver's own failure is kInternal.
  Result<std::vector<Poco::Net::IPAddress>> resolve(std::string_view tenant, const Target& target,
                                                    std::uint16_t port) const;

 private:
  Result<std::vector<Poco::Net::IPAddress>> resolveFor(std::string_view tenant,
                                                       const Target& target,
                                                       std::optional<std::uint16_t> port) const;

  struct Rules {
    std::vector<Pattern> allow;
    std::vector<Pattern> deny;
  };
  Result<bool> add(std::string_view entry, std::vector<Pattern> Rules::*list);
  std::shared_ptr<Resolver> resolver_;
  std::map<std::string, Rules, std::less<>> tenants_;
  std::map<std::string, Poco::Net::IPAddress, std::less<>> pins_;
  std::vector<Poco::Net::IPAddress> own_;
};

}  // namespace scs::egress
