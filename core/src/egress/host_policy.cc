// The egress policy: operator patterns (libidn2 for names, libpsl for wildcards), the strict
// syntax gate every requested host passes first, the address classes no sandbox may reach
// unnamed, and the decide-then-resolve order. Everything here is read-only after startup.

#include "egress/host_policy.h"

#include <arpa/inet.h>
#include <idn2.h>
#include <ifaddrs.h>
#include <libpsl.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>
#include <system_error>

namespace scs::egress {
namespace {

using Poco::Net::IPAddress;

constexpr std::size_t kMaxHostBytes = 253;
constexpr std::size_t kMaxLabelBytes = 63;
constexpr std::size_t kMaxShownBytes = 100;
constexpr std::string_view kOwnAddress = "this server's own address";
constexpr char kNotListed[] = " is not on this server's allow-list for this tenant";

// Input echoed in an error may reach a program's 403 line or a log: every byte outside
// printable ASCII is escaped, so a "\r\n" in a requested host cannot start a header of its own.
std::string shown(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : text.substr(0, kMaxShownBytes)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7e || c == '"' || c == '\\') {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out + (text.size() > kMaxShownBytes ? "...\"" : "\"");
}

std::string lowered(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return out;
}

bool isAscii(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool isDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string_view> labelsOf(std::string_view name) {
  std::vector<std::string_view> labels;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    labels.push_back(name.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) {
      return labels;
    }
    start = dot + 1;
  }
}

// --- Addresses -------------------------------------------------------------------------------

const unsigned char* bytesOf(const IPAddress& address) {
  return static_cast<const unsigned char*>(address.addr());
}

// inet_pton, never inet_aton: only the dotted quad of four decimal numbers without leading
// zeros parses, so "127.1", "0x7f.0.0.1" and "0177.0.0.1" are not addresses here.
std::optional<IPAddress> parseIPv4(std::string_view text) {
  in_addr address{};
  if (inet_pton(AF_INET, std::string(text).c_str(), &address) != 1) {
    return std::nullopt;
  }
  return IPAddress(&address, sizeof(address));
}

// A zone ("%eth0") would make the address mean something else on each host: never accepted.
std::optional<IPAddress> parseIPv6(std::string_view text) {
  in6_addr address{};
  if (text.find('%') != std::string_view::npos ||
      inet_pton(AF_INET6, std::string(text).c_str(), &address) != 1) {
    return std::nullopt;
  }
  return IPAddress(&address, sizeof(address));
}

// RFC 5952 text (inet_ntop), not Poco's toString, which appends a scope.
std::string textOf(const IPAddress& address) {
  char text[INET6_ADDRSTRLEN] = {};
  const int family = address.family() == IPAddress::IPv4 ? AF_INET : AF_INET6;
  inet_ntop(family, address.addr(), text, sizeof(text));
  return text;
}

unsigned bitsOf(const IPAddress& address) { return address.family() == IPAddress::IPv4 ? 32 : 128; }

bool within(const unsigned char* address, const unsigned char* network, unsigned prefix) {
  const unsigned whole = prefix / 8;
  if (std::memcmp(address, network, whole) != 0) {
    return false;
  }
  const unsigned rest = prefix % 8;
  const auto mask = static_cast<unsigned char>(0xff << (8 - rest));
  return rest == 0 || (address[whole] & mask) == (network[whole] & mask);
}

IPAddress masked(const IPAddress& address, unsigned prefix) {
  std::array<unsigned char, 16> bytes{};
  const unsigned char* from = bytesOf(address);
  for (unsigned i = 0; i < address.length(); ++i) {
    const unsigned kept = prefix > i * 8 ? std::min(prefix - i * 8, 8U) : 0;
    bytes[i] = static_cast<unsigned char>(from[i] & (0xff00 >> kept));
  }
  return IPAddress(bytes.data(), address.length());
}

bool sameAddress(const IPAddress& a, const IPAddress& b) {
  return a.family() == b.family() && std::memcmp(a.addr(), b.addr(), a.length()) == 0;
}

bool covers(const Pattern& pattern, const IPAddress& address) {
  return pattern.kind == Pattern::Kind::kNetwork && pattern.network.family() == address.family() &&
         within(bytesOf(address), bytesOf(pattern.network), pattern.prefix);
}

struct AddressClass {
  std::string_view cidr;
  std::string_view name;
};

// Most specific first: a metadata address inside a wider range is named as metadata.
constexpr AddressClass kIPv4Classes[] = {
    {"255.255.255.255/32", "broadcast"},
    {"169.254.169.254/32", "metadata"},  // AWS, GCP, Azure, OpenStack and most others
    {"100.100.100.200/32", "metadata"},  // Alibaba Cloud
    {"168.63.129.16/32", "metadata"},    // Azure's wire server, a public address
    {"192.0.0.192/32", "metadata"},      // Oracle Cloud
    {"0.0.0.0/8", "unspecified"},        // Linux connects 0.0.0.0 to itself
    {"127.0.0.0/8", "loopback"},
    {"10.0.0.0/8", "private"},
    {"172.16.0.0/12", "private"},
    {"192.168.0.0/16", "private"},
    {"100.64.0.0/10", "shared address space"},
    {"169.254.0.0/16", "link-local"},
    {"192.0.0.0/24", "reserved"},
    {"192.0.2.0/24", "documentation"},
    {"198.51.100.0/24", "documentation"},
    {"203.0.113.0/24", "documentation"},
    {"198.18.0.0/15", "reserved"},  // benchmarking
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved"},
};

constexpr AddressClass kIPv6Classes[] = {
    {"::/128", "unspecified"},           // RFC 4291
    {"::1/128", "loopback"},             // RFC 4291
    {"fd00:ec2::/32", "metadata"},       // AWS: the instance metadata service, DNS, time
    {"fd20:ce::254/128", "metadata"},    // GCP
    {"fc00::/7", "unique local"},        // RFC 4193
    {"fe80::/10", "link-local"},         // RFC 4291
    {"fec0::/10", "reserved"},           // site-local, deprecated, still routed on some networks
    {"ff00::/8", "multicast"},           // RFC 4291
    {"2001:db8::/32", "documentation"},  // RFC 3849
    {"3fff::/20", "documentation"},      // RFC 9637
    {"100::/64", "reserved"},            // discard-only, RFC 6666
    {"64:ff9b:1::/48", "reserved"},      // local-use NAT64, its IPv4 wherever its operator put it
    {"2001:2::/48", "reserved"},         // benchmarking, RFC 5180
};

struct Range {
  IPAddress network;
  unsigned prefix = 0;
  std::string_view name;
};

std::vector<Range> rangesOf(std::span<const AddressClass> classes) {
  std::vector<Range> ranges;
  for (const AddressClass& entry : classes) {
    const std::size_t slash = entry.cidr.find('/');
    const std::string_view address = entry.cidr.substr(0, slash);
    const std::optional<IPAddress> network =
        address.find(':') == std::string_view::npos ? parseIPv4(address) : parseIPv6(address);
    ranges.push_back(
        {*network,
         static_cast<unsigned>(std::atoi(std::string(entry.cidr.substr(slash + 1)).c_str())),
         entry.name});
  }
  return ranges;
}

std::optional<std::string_view> classIn(const std::vector<Range>& ranges,
                                        const IPAddress& address) {
  for (const Range& range : ranges) {
    if (range.network.family() == address.family() &&
        within(bytesOf(address), bytesOf(range.network), range.prefix)) {
      return range.name;
    }
  }
  return std::nullopt;
}

// The IPv4 address an IPv6 address carries, where a translator or tunnel would deliver it there:
// the same host by another spelling, so it gets the IPv4 rules.
std::optional<IPAddress> embeddedIPv4(const IPAddress& address) {
  const unsigned char* b = bytesOf(address);
  const auto zeros = [b](int from, int to) {
    return std::all_of(b + from, b + to, [](unsigned char c) { return c == 0; });
  };
  std::array<unsigned char, 4> v4{};
  if ((zeros(0, 10) && b[10] == 0xff && b[11] == 0xff) ||  // mapped ::ffff:0:0/96
      (zeros(0, 8) && b[8] == 0xff && b[9] == 0xff &&
       zeros(10, 12)) ||  // translated ::ffff:0:0:0/96
      zeros(0, 12) ||     // compatible ::/96
      (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zeros(4, 12))) {  // NAT64
    std::copy(b + 12, b + 16, v4.begin());
  } else if (b[0] == 0x20 && b[1] == 0x02) {  // 6to4 2002::/16: bits 16 to 47
    std::copy(b + 2, b + 6, v4.begin());
  } else if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00) {
    // Teredo 2001::/32: the client's address is the last 32 bits, inverted.
    std::transform(b + 12, b + 16, v4.begin(), [](unsigned char c) { return c ^ 0xff; });
  } else {
    return std::nullopt;
  }
  return IPAddress(v4.data(), static_cast<poco_socklen_t>(v4.size()));
}

bool isOwn(const IPAddress& address, const std::vector<IPAddress>& own) {
  return std::any_of(own.begin(), own.end(),
                     [&](const IPAddress& mine) { return sameAddress(mine, address); });
}

// "a private address", for "api.x.com resolved only to a private address".
std::string asAddress(std::string_view name) {
  if (name == kOwnAddress) {
    return std::string(name);
  }
  if (name == "shared address space") {
    return "an address in the shared address space";
  }
  const bool an = name == "unspecified";
  return std::string(an ? "an " : "a ") + std::string(name) + " address";
}

std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return out;
}

// --- Names -----------------------------------------------------------------------------------

// Whether `name` (lower case, no trailing dot) is a host of ASCII labels; the Error's message is
// a clause saying why not ("it is empty").
Result<Done> checkHostName(std::string_view name) {
  if (name.empty()) {
    return invalid("it is empty");
  }
  if (name.size() > kMaxHostBytes) {
    return invalid("it is longer than " + std::to_string(kMaxHostBytes) + " characters");
  }
  for (const std::string_view label : labelsOf(name)) {
    if (label.empty()) {
      return invalid("it has an empty label");
    }
    if (label.size() > kMaxLabelBytes) {
      return invalid("a label is longer than " + std::to_string(kMaxLabelBytes) + " characters");
    }
    const bool ldh = std::all_of(label.begin(), label.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
    if (!ldh) {
      return invalid("a label may hold only letters, digits, \"-\" and \"_\"");
    }
  }
  return Done{};
}

// A name whose last label is a number, or hex, is some parser's address: it must be the one
// spelling every parser reads alike.
bool looksNumeric(std::string_view name) {
  const std::string_view last = name.substr(name.rfind('.') + 1);
  return isDigits(last) || last.substr(0, 2) == "0x";
}

std::string_view withoutTrailingDot(std::string_view name) {
  return !name.empty() && name.back() == '.' ? name.substr(0, name.size() - 1) : name;
}

// One label in A-label form. ASCII labels are only lower-cased: libidn2 would also refuse real
// hosts such as "r1---sn-a.googlevideo.com" (hyphens in the third and fourth places), and they
// need no conversion. An "xn--" label must decode, so a garbage A-label is refused.
Result<std::string> aLabel(std::string_view label) {
  std::string ascii = lowered(label);
  if (isAscii(label) && ascii.substr(0, 4) != "xn--") {
    return ascii;
  }
  char* converted = nullptr;
  const int rc = idn2_to_ascii_8z(ascii.c_str(), &converted, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
  if (rc != IDN2_OK) {
    return invalid("the label " + shown(label) + " is not a valid internationalised label (" +
                   idn2_strerror(rc) + ")");
  }
  std::string out(converted);
  idn2_free(converted);
  if (out.find('.') != std::string::npos) {
    return invalid("the label " + shown(label) + " holds a character that reads as a dot");
  }
  return out;
}

// An operator's host in canonical form: A-labels, lower case, no trailing dot.
Result<std::string> canonicalName(std::string_view name) {
  const std::string_view bare = withoutTrailingDot(name);
  if (bare.empty()) {
    return invalid("it is empty");
  }
  std::string canonical;
  for (const std::string_view label : labelsOf(bare)) {
    if (label.empty()) {
      return invalid("it has an empty label");
    }
    Result<std::string> converted = aLabel(label);
    if (const Error* error = std::get_if<Error>(&converted)) {
      return *error;
    }
    canonical += (canonical.empty() ? "" : ".") + std::get<std::string>(converted);
  }
  const Result<Done> checked = checkHostName(canonical);
  if (const Error* problem = std::get_if<Error>(&checked)) {
    return *problem;
  }
  return canonical;
}

const psl_ctx_t* publicSuffixes() {
  // psl_latest takes the newer of the built-in list and Debian's publicsuffix package; it lives
  // as long as the process.
  static const psl_ctx_t* const list = [] {
    const psl_ctx_t* latest = psl_latest(nullptr);
    return latest != nullptr ? latest : psl_builtin();
  }();
  return list;
}

// --- Patterns --------------------------------------------------------------------------------

Result<std::uint16_t> portOf(std::string_view text) {
  const unsigned long port = isDigits(text) && text.size() <= 5 ? std::stoul(std::string(text)) : 0;
  if (port == 0 || port > 65535) {
    return invalid("the port " + shown(text) + " is not a number from 1 to 65535");
  }
  return static_cast<std::uint16_t>(port);
}

std::string patternText(const Pattern& pattern) {
  const std::string port = ":" + std::to_string(pattern.port);
  switch (pattern.kind) {
    case Pattern::Kind::kHost:
      return pattern.host + port;
    case Pattern::Kind::kSuffix:
      return "*." + pattern.host + port;
    case Pattern::Kind::kNetwork:
      break;
  }
  const bool v6 = pattern.network.family() == IPAddress::IPv6;
  const std::string address = v6 ? "[" + textOf(pattern.network) + "]" : textOf(pattern.network);
  return pattern.prefix == bitsOf(pattern.network)
             ? address + port
             : address + "/" + std::to_string(pattern.prefix) + port;
}

// A network with host bits set is refused rather than masked: "10.1.2.3/8" is more likely a
// typo for "10.1.2.3/32" than a wish for all of 10/8, and the operator must see what is opened.
Result<Pattern> networkPattern(const IPAddress& address, const std::string& prefix_text) {
  const unsigned bits = bitsOf(address);
  if (!isDigits(prefix_text) || prefix_text.size() > 3 || std::stoul(prefix_text) > bits) {
    return invalid("the prefix length " + shown(prefix_text) + " is not a number from 0 to " +
                   std::to_string(bits));
  }
  Pattern pattern;
  pattern.kind = Pattern::Kind::kNetwork;
  pattern.prefix = static_cast<unsigned>(std::stoul(prefix_text));
  pattern.network = masked(address, pattern.prefix);
  if (!sameAddress(pattern.network, address)) {
    return invalid("the address has bits set past the prefix (did you mean \"" +
                   textOf(pattern.network) + "/" + std::to_string(pattern.prefix) + "\"?)");
  }
  return pattern;
}

// A host, a "*.suffix" or a plain IPv4 address, without its port.
Result<Pattern> namedPattern(std::string_view host) {
  Pattern pattern;
  const std::string_view bare = withoutTrailingDot(host);
  std::string_view name = bare;
  if (bare.find('*') != std::string_view::npos) {
    if (bare.substr(0, 2) != "*." || bare.find('*', 1) != std::string_view::npos) {
      return invalid("a wildcard must be the whole first label, as in \"*.example.com\"");
    }
    pattern.kind = Pattern::Kind::kSuffix;
    name = bare.substr(2);
  }
  Result<std::string> canonical = canonicalName(name);
  if (const Error* error = std::get_if<Error>(&canonical)) {
    return *error;
  }
  pattern.host = std::get<std::string>(canonical);
  if (looksNumeric(pattern.host)) {
    const std::optional<IPAddress> address = parseIPv4(pattern.host);
    if (!address) {
      return invalid(
          "a name ending in a number must be an IPv4 address written as four "
          "decimal numbers, as in \"10.1.2.3\"");
    }
    if (pattern.kind == Pattern::Kind::kSuffix) {
      return invalid("a wildcard covers names, not addresses: give a CIDR such as \"10.0.0.0/8\"");
    }
    return networkPattern(*address, "32");
  }
  if (pattern.kind == Pattern::Kind::kSuffix) {
    const psl_ctx_t* suffixes = publicSuffixes();
    if (suffixes == nullptr) {
      return invalid(
          "this server has no public suffix list to check a wildcard against; name "
          "each host");
    }
    // The private section counts: anyone can make a name below github.io or s3.amazonaws.com.
    if (psl_is_public_suffix2(suffixes, pattern.host.c_str(), PSL_TYPE_ANY) != 0) {
      return invalid("\"" + pattern.host +
                     "\" is a public suffix, below which anyone can register names; name the "
                     "hosts, or a wildcard below a domain you trust");
    }
  }
  return pattern;
}

// The parts of "[v6]", "[v6]:443", "[v6]/32:443", "v6/32:443", "10.0.0.0/8:5432", "v6" and
// "host:443".
struct PatternParts {
  std::string_view head;
  bool bracketed = false;
  bool has_prefix = false;
  std::string_view prefix;
  bool has_port = false;
  std::string_view port;
};

// "/PREFIX" and ":PORT", each optional, in that order.
Result<PatternParts> withTail(PatternParts parts, std::string_view tail) {
  if (!tail.empty() && tail.front() == '/') {
    const std::size_t colon = tail.find(':');
    parts.has_prefix = true;
    parts.prefix = tail.substr(1, colon == std::string_view::npos ? colon : colon - 1);
    tail = colon == std::string_view::npos ? std::string_view() : tail.substr(colon);
  }
  if (!tail.empty() && tail.front() != ':') {
    return invalid("only \"/PREFIX\" or \":PORT\" may follow the address");
  }
  parts.has_port = !tail.empty();
  parts.port = parts.has_port ? tail.substr(1) : tail;
  return parts;
}

Result<PatternParts> partsOf(std::string_view text) {
  PatternParts parts;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return invalid("it opens \"[\" without closing it");
    }
    parts.bracketed = true;
    parts.head = text.substr(1, close - 1);
    return withTail(parts, text.substr(close + 1));
  }
  const std::size_t slash = text.find('/');
  if (slash != std::string_view::npos) {
    parts.head = text.substr(0, slash);
    if (!parseIPv4(parts.head) && !parseIPv6(parts.head)) {
      return invalid("it has a path: give the host alone, as in \"api.example.com\"");
    }
    return withTail(parts, text.substr(slash));
  }
  // A bare IPv6 address takes no port: "2001:db8::1:443" is an address of its own.
  const std::size_t colon = text.find(':');
  if (parseIPv6(text) || colon == std::string_view::npos) {
    parts.head = text;
    return parts;
  }
  if (text.find(':', colon + 1) != std::string_view::npos) {
    return invalid(
        "it is not an IPv6 address, and a port after one goes after brackets, as in "
        "\"[2001:db8::1]:443\"");
  }
  parts.head = text.substr(0, colon);
  return withTail(parts, text.substr(colon));
}

Result<Pattern> addressOrNamePattern(std::string_view text) {
  Result<PatternParts> split = partsOf(text);
  if (const Error* error = std::get_if<Error>(&split)) {
    return *error;
  }
  const PatternParts& parts = std::get<PatternParts>(split);
  std::uint16_t port = kDefaultPort;
  if (parts.has_port) {
    Result<std::uint16_t> parsed = portOf(parts.port);
    if (const Error* error = std::get_if<Error>(&parsed)) {
      return *error;
    }
    port = std::get<std::uint16_t>(parsed);
  }
  const std::optional<IPAddress> v6 = parseIPv6(parts.head);
  const std::optional<IPAddress> v4 = v6 ? std::nullopt : parseIPv4(parts.head);
  if (parts.bracketed && !v6) {
    return invalid("brackets hold an IPv6 address, and " + shown(parts.head) + " is not one");
  }
  Result<Pattern> pattern = invalid("");
  if (v6 || (v4 && parts.has_prefix)) {
    const IPAddress& address = v6 ? *v6 : *v4;
    pattern = networkPattern(
        address, parts.has_prefix ? std::string(parts.prefix) : std::to_string(bitsOf(address)));
  } else {
    pattern = namedPattern(parts.head);
  }
  if (Pattern* made = std::get_if<Pattern>(&pattern)) {
    made->port = port;
    made->text = patternText(*made);
  }
  return pattern;
}

// Why `text` is refused, as a clause: the pattern without its sentence.
Result<Pattern> patternOrWhy(std::string_view text) {
  if (text.empty()) {
    return invalid("it is empty");
  }
  if (std::any_of(text.begin(), text.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) == 0x7f;
      })) {
    return invalid("it holds a space or a control character");
  }
  if (text.find("://") != std::string_view::npos) {
    return invalid(
        "it is a URL: give the host alone, as in \"api.example.com\" or "
        "\"api.example.com:8443\"");
  }
  if (text.find('@') != std::string_view::npos) {
    return invalid("it names a user: give the host alone, as in \"api.example.com\"");
  }
  if (text.find_first_of("?#\\") != std::string_view::npos) {
    return invalid("it has a path or a query: give the host alone, as in \"api.example.com\"");
  }
  return addressOrNamePattern(text);
}

bool validTenant(std::string_view tenant) {
  return !tenant.empty() && std::all_of(tenant.begin(), tenant.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// "TENANT=PATTERN" into the tenant and the pattern, or an error naming the entry.
Result<std::pair<std::string, Pattern>> tenantEntry(std::string_view entry) {
  const std::size_t equals = entry.find('=');
  const std::string_view tenant = entry.substr(0, equals);
  if (equals == std::string_view::npos || !validTenant(tenant)) {
    return invalid("The egress entry " + shown(entry) +
                   " does not start with a tenant: write TENANT=PATTERN, as in "
                   "\"local=api.github.com\" (a tenant is letters, digits, \".\", \"_\", \"-\").");
  }
  Result<Pattern> pattern = patternOrWhy(entry.substr(equals + 1));
  if (const Error* error = std::get_if<Error>(&pattern)) {
    return invalid("The egress entry " + shown(entry) + " is refused: " + error->message + ".");
  }
  return std::pair{std::string(tenant), std::get<Pattern>(pattern)};
}

bool matchesName(const Pattern& pattern, std::string_view host) {
  if (pattern.kind == Pattern::Kind::kHost) {
    return host == pattern.host;
  }
  // Strictly below the suffix, at a label boundary: not the suffix itself, not "x" + suffix.
  return pattern.kind == Pattern::Kind::kSuffix && host.size() > pattern.host.size() + 1 &&
         host.ends_with(pattern.host) && host[host.size() - pattern.host.size() - 1] == '.';
}

bool matches(const Pattern& pattern, const Target& target, std::uint16_t port) {
  return pattern.port == port &&
         (target.address ? covers(pattern, *target.address) : matchesName(pattern, target.host));
}

// The public suffix strictly between an allowed wildcard's suffix and `host`, if there is one:
// "*.amazonaws.com" must not open "bucket.s3.amazonaws.com", a name anyone can make below the
// public suffix "s3.amazonaws.com". A deny wildcard covers such names all the same.
std::optional<std::string> publicSuffixBetween(const Pattern& pattern, const std::string& host) {
  if (pattern.kind != Pattern::Kind::kSuffix) {
    return std::nullopt;
  }
  const psl_ctx_t* suffixes = publicSuffixes();
  const char* longest = suffixes ? psl_unregistrable_domain(suffixes, host.c_str()) : nullptr;
  if (longest == nullptr) {
    return host;  // no list to tell: refused, as no list refuses every wildcard
  }
  if (std::strlen(longest) > pattern.host.size()) {
    return std::string(longest);
  }
  return std::nullopt;
}

std::string hostPort(const Target& target, std::uint16_t port) {
  const bool v6 = target.address && target.address->family() == IPAddress::IPv6;
  return (v6 ? "[" + target.host + "]" : target.host) + ":" + std::to_string(port);
}

Result<std::vector<IPAddress>> ownAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return internal("egress cannot read this server's own addresses, which it must refuse "
                    "(getifaddrs: " + std::error_code(errno, std::generic_category()).message() +
                    "; it needs an AF_NETLINK socket, which a unit's RestrictAddressFamilies "
                    "must allow)");
  }
  std::vector<IPAddress> own;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr ||
        (entry->ifa_addr->sa_family != AF_INET && entry->ifa_addr->sa_family != AF_INET6)) {
      continue;
    }
    const IPAddress address(*entry->ifa_addr);
    if (!isOwn(address, own)) {
      own.push_back(address);
    }
  }
  freeifaddrs(list);
  return own;
}

class SystemResolver final : public Resolver {
 public:
  Result<std::vector<IPAddress>> resolve(const std::string& host) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    // Absolute, so no search domain turns "pypi.org" into a query for "pypi.org.corp.internal".
    const int rc = getaddrinfo((host + ".").c_str(), nullptr, &hints, &list);
    if (rc != 0) {
      const std::string why = rc == EAI_SYSTEM
                                  ? std::error_code(errno, std::generic_category()).message()
                                  : gai_strerror(rc);
      const std::string message = host + " could not be resolved (" + why + ")";
      return internal(message);  // the relay answers a resolver's failure as unreachable
    }
    std::vector<IPAddress> addresses;
    for (const addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
      if (entry->ai_addr == nullptr ||
          (entry->ai_family != AF_INET && entry->ai_family != AF_INET6)) {
        continue;
      }
      const IPAddress address(*entry->ai_addr);
      if (!isOwn(address, addresses)) {
        addresses.push_back(address);
      }
    }
    freeaddrinfo(list);
    return addresses;
  }
};

}  // namespace

// --- The public functions --------------------------------------------------------------------

Result<Pattern> parsePattern(std::string_view text) {
  Result<Pattern> pattern = patternOrWhy(text);
  if (const Error* error = std::get_if<Error>(&pattern)) {
    return invalid("The egress pattern " + shown(text) + " is refused: " + error->message + ".");
  }
  return pattern;
}

Result<Target> parseTarget(std::string_view host) {
  const auto refuse = [host](const std::string& why) {
    return invalid(shown(host) + " is not a host this server accepts: " + why + ".");
  };
  if (host.empty()) {
    return refuse("it is empty");
  }
  if (std::any_of(host.begin(), host.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f;
      })) {
    return refuse("it holds a space, a control character or a non-ASCII byte");
  }
  if (host.find('%') != std::string_view::npos) {
    return refuse("it holds \"%\" (no percent-encoding, no IPv6 zone)");
  }
  if (host.front() == '[' || host.find(':') != std::string_view::npos) {
    const bool bracketed = host.front() == '[';
    if (bracketed && (host.size() < 2 || host.back() != ']')) {
      return refuse("it opens \"[\" without closing it at the end (a port is given apart)");
    }
    const std::optional<IPAddress> address =
        parseIPv6(bracketed ? host.substr(1, host.size() - 2) : host);
    if (!address) {
      return refuse("it is not an IPv6 address (a port is given apart from the host)");
    }
    return Target{textOf(*address), address};
  }
  std::string name = lowered(withoutTrailingDot(host));
  const Result<Done> checked = checkHostName(name);
  if (const Error* problem = std::get_if<Error>(&checked)) {
    return refuse(problem->message);
  }
  if (looksNumeric(name)) {
    std::optional<IPAddress> address = parseIPv4(name);
    if (!address) {
      return refuse(
          "an IPv4 address is four decimal numbers without leading zeros, as in "
          "\"10.1.2.3\"");
    }
    return Target{std::move(name), address};
  }
  return Target{std::move(name), std::nullopt};
}

std::optional<std::string> forbiddenClass(const IPAddress& address,
                                          const std::vector<IPAddress>& own) {
  static const std::vector<Range> ipv4 = rangesOf(kIPv4Classes);
  static const std::vector<Range> ipv6 = rangesOf(kIPv6Classes);
  if (address.family() == IPAddress::IPv4) {
    if (std::optional<std::string_view> name = classIn(ipv4, address)) {
      return std::string(*name);
    }
  } else {
    if (std::optional<std::string_view> name = classIn(ipv6, address)) {
      return std::string(*name);
    }
    if (const std::optional<IPAddress> v4 = embeddedIPv4(address)) {
      if (std::optional<std::string> name = forbiddenClass(*v4, own)) {
        return name;
      }
    }
  }
  if (isOwn(address, own)) {
    return std::string(kOwnAddress);
  }
  return std::nullopt;
}

std::shared_ptr<Resolver> systemResolver() { return std::make_shared<SystemResolver>(); }

EgressPolicy::EgressPolicy(std::shared_ptr<Resolver> resolver) : resolver_(std::move(resolver)) {}

Result<Done> EgressPolicy::readOwnAddresses() {
  Result<std::vector<IPAddress>> own = ownAddresses();
  if (const Error* error = std::get_if<Error>(&own)) {
    return *error;
  }
  own_ = std::move(std::get<std::vector<IPAddress>>(own));
  return Done{};
}

// An allow or deny entry added to the tenant's `list`; false for an exact repeat.
Result<bool> EgressPolicy::add(std::string_view entry, std::vector<Pattern> Rules::*list) {
  Result<std::pair<std::string, Pattern>> parsed = tenantEntry(entry);
  if (const Error* error = std::get_if<Error>(&parsed)) {
    return *error;
  }
  std::pair<std::string, Pattern>& added = std::get<std::pair<std::string, Pattern>>(parsed);
  std::vector<Pattern>& patterns = tenants_[added.first].*list;
  const std::string& text = added.second.text;
  if (std::any_of(patterns.begin(), patterns.end(),
                  [&text](const Pattern& p) { return p.text == text; })) {
    return false;
  }
  patterns.push_back(std::move(added.second));
  return true;
}

Result<bool> EgressPolicy::allow(std::string_view entry) { return add(entry, &Rules::allow); }

Result<bool> EgressPolicy::deny(std::string_view entry) { return add(entry, &Rules::deny); }

Result<bool> EgressPolicy::pin(std::string_view entry) {
  const auto refuse = [entry](const std::string& why) {
    return invalid("The egress pin " + shown(entry) + " is refused: " + why +
                   ". Write NAME=ADDRESS, as in \"db.internal=10.1.2.3\".");
  };
  const std::size_t equals = entry.find('=');
  if (equals == std::string_view::npos) {
    return refuse("it has no \"=\"");
  }
  Result<std::string> name = canonicalName(entry.substr(0, equals));
  if (const Error* error = std::get_if<Error>(&name)) {
    return refuse("the name is not a host: " + error->message);
  }
  const std::string& host = std::get<std::string>(name);
  if (looksNumeric(host)) {
    return refuse("the name is an address, which needs no pin");
  }
  std::string_view address_text = entry.substr(equals + 1);
  if (address_text.size() >= 2 && address_text.front() == '[' && address_text.back() == ']') {
    address_text = address_text.substr(1, address_text.size() - 2);
  }
  std::optional<IPAddress> address = parseIPv4(address_text);
  if (!address) {
    address = parseIPv6(address_text);
  }
  if (!address) {
    return refuse(shown(address_text) + " is not an IP address");
  }
  const auto pinned = pins_.find(host);
  if (pinned != pins_.end()) {
    if (sameAddress(pinned->second, *address)) {
      return false;
    }
    return refuse(host + " is already pinned to " + textOf(pinned->second) +
                  ", and a name is pinned to one address");
  }
  pins_.emplace(host, *address);
  return true;
}

bool EgressPolicy::enabled() const {
  return std::any_of(tenants_.begin(), tenants_.end(),
                     [](const auto& tenant) { return !tenant.second.allow.empty(); });
}

bool EgressPolicy::enabledFor(std::string_view tenant) const {
  const auto rules = tenants_.find(tenant);
  return rules != tenants_.end() && !rules->second.allow.empty();
}

std::vector<std::string> EgressPolicy::allowedFor(std::string_view tenant) const {
  std::vector<std::string> texts;
  if (enabledFor(tenant)) {
    for (const Pattern& pattern : tenants_.find(tenant)->second.allow) {
      texts.push_back(pattern.text);
    }
  }
  return texts;
}

std::vector<std::string> EgressPolicy::deniedFor(std::string_view tenant) const {
  std::vector<std::string> texts;
  if (enabledFor(tenant)) {
    for (const Pattern& pattern : tenants_.find(tenant)->second.deny) {
      texts.push_back(pattern.text);
    }
  }
  return texts;
}

Decision EgressPolicy::decide(std::string_view tenant, const Target& target,
                              std::uint16_t port) const {
  const auto rules = tenants_.find(tenant);
  if (rules != tenants_.end()) {
    for (const Pattern& pattern : rules->second.deny) {
      if (matches(pattern, target, port)) {
        return {false, hostPort(target, port) + " is denied by this server's egress policy"};
      }
    }
    std::string why;
    for (const Pattern& pattern : rules->second.allow) {
      if (!matches(pattern, target, port)) {
        continue;
      }
      const std::optional<std::string> between = publicSuffixBetween(pattern, target.host);
      if (!between) {
        return {true, pattern.text};
      }
      why = ": " + pattern.text + " does not reach below the public suffix " + *between;
    }
    if (!why.empty()) {
      return {false, hostPort(target, port) + kNotListed + why};
    }
  }
  return {false, hostPort(target, port) + kNotListed};
}

Result<std::vector<IPAddress>> EgressPolicy::resolve(std::string_view tenant, const Target& target,
                                                     std::uint16_t port) const {
  return resolveFor(tenant, target, port);
}

Result<std::vector<IPAddress>> EgressPolicy::resolveFor(std::string_view tenant,
                                                        const Target& target,
                                                        std::optional<std::uint16_t> port) const {
  // A pinned name resolves to its pin, which is the operator's word for that name's class;
  // the tenant's deny entries still apply to it (deny wins).
  const auto pinned = target.address ? pins_.end() : pins_.find(target.host);
  Result<std::vector<IPAddress>> answer =
      target.address ? Result<std::vector<IPAddress>>(std::vector<IPAddress>{*target.address})
      : pinned != pins_.end() ? Result<std::vector<IPAddress>>(std::vector<IPAddress>{pinned->second})
                              : resolver_->resolve(target.host);
  if (const Error* error = std::get_if<Error>(&answer)) {
    return *error;
  }
  const auto& found = std::get<std::vector<IPAddress>>(answer);
  if (found.empty()) {
    return invalid(target.host + " resolved to no address");
  }
  static const Rules kNone;
  const auto entry = tenants_.find(tenant);
  const Rules& rules = entry == tenants_.end() ? kNone : entry->second;
  const auto named = [port](const std::vector<Pattern>& patterns, const IPAddress& address) {
    return std::any_of(patterns.begin(), patterns.end(), [&](const Pattern& pattern) {
      return (!port || pattern.port == *port) && covers(pattern, address);
    });
  };
  // An allow entry is the operator's word for a forbidden address only when it names that
  // class itself: a network inside a forbidden range (10.0.0.0/8, 127.0.0.1), not one that
  // merely spans it (0.0.0.0/0 means any public address, not the metadata service).
  const auto namedForbidden = [&](const std::vector<Pattern>& patterns, const IPAddress& address) {
    return std::any_of(patterns.begin(), patterns.end(), [&](const Pattern& pattern) {
      return (!port || pattern.port == *port) && covers(pattern, address) &&
             pattern.kind == Pattern::Kind::kNetwork &&
             forbiddenClass(pattern.network, own_).has_value() &&
             forbiddenClass(pattern.network, own_) == forbiddenClass(address, own_);
    });
  };
  std::vector<IPAddress> vetted;
  std::vector<std::string> dropped;
  for (const IPAddress& address : found) {
    std::optional<std::string> why;
    if (named(rules.deny, address)) {
      why = "an address this server's egress policy denies";
    } else if (const std::optional<std::string> forbidden = forbiddenClass(address, own_);
               forbidden && pinned == pins_.end() && !namedForbidden(rules.allow, address)) {
      why = asAddress(*forbidden);
    }
    if (!why) {
      vetted.push_back(address);
    } else if (std::find(dropped.begin(), dropped.end(), *why) == dropped.end()) {
      dropped.push_back(*why);
    }
  }
  if (vetted.empty()) {
    return refused(target.host + " resolved only to " + listed(dropped));  // the policy's no
  }
  return vetted;
}

}  // namespace scs::egress
