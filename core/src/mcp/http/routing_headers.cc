// The routing headers read from the raw request head: each found once, decoded (plain ASCII or
// =?base64?...?=), compared with the body's method, name and version, and the mismatch quoted.

#include "mcp/http/routing_headers.h"

#include <Poco/Base64Decoder.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

#include "common/utf8.h"

namespace scs::mcp {
namespace {

constexpr const char* kMethodHeader = "Mcp-Method";
constexpr const char* kNameHeader = "Mcp-Name";
constexpr std::string_view kBase64Prefix = "=?base64?";
constexpr std::string_view kBase64Suffix = "?=";
// Header values are quoted back cut to this many bytes.
constexpr std::size_t kMaxQuoted = 100;

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// A header value as sent, surrounding blanks dropped; nullopt when it holds a control or
// non-ASCII byte.
std::optional<std::string> plainHeaderValue(std::string_view value) {
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte > 0x7e) {
      return std::nullopt;
    }
  }
  return std::string(trimmed(value));
}

bool isBase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) {
    return false;
  }
  const std::size_t padding = text.size() - text.find_last_not_of('=') - 1;
  if (padding > 2) {
    return false;
  }
  for (const char c : text.substr(0, text.size() - padding)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/') {
      return false;
    }
  }
  return true;
}

std::string quoted(std::string_view text) {
  std::string cut = common::toValidUtf8(text.substr(0, kMaxQuoted));
  return "'" + cut + (text.size() > kMaxQuoted ? "...'" : "'");
}

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The header lines of a raw head, up to where Poco's parser ends it (an empty line, or one
// that starts with CR), each without its line end.
std::vector<std::string_view> headerLines(std::string_view head) {
  std::vector<std::string_view> lines;
  std::size_t at = head.find('\n');  // past the request line
  while (at != std::string_view::npos && at + 1 < head.size()) {
    const std::size_t start = at + 1;
    at = head.find('\n', start);
    std::string_view line = head.substr(start, at == std::string_view::npos ? at : at - start);
    if (line.empty() || line.front() == '\r') {
      break;
    }
    lines.push_back(line);
  }
  return lines;
}

// What makes a head read differently by different parsers, which the routing headers must not
// depend on: a folded line (obsolete in HTTP/1.1; some proxies read it as a header of its own)
// and blanks between a name and its colon (RFC 9112 has a server refuse them). Empty when none.
std::string ambiguity(std::string_view head) {
  for (const std::string_view line : headerLines(head)) {
    if (line.front() == ' ' || line.front() == '\t') {
      return "the request head folds a header line over two; send each header on one line.";
    }
    const std::string_view name = line.substr(0, line.find(':'));
    if (!name.empty() && (name.back() == ' ' || name.back() == '\t')) {
      return "a header name in the request head is followed by blanks before its colon.";
    }
  }
  return {};
}

// The values of header `name` in a raw head, each as sent.
std::vector<std::string> valuesOf(std::string_view head, std::string_view name) {
  std::vector<std::string> values;
  for (std::string_view line : headerLines(head)) {
    if (line.back() == '\r') {
      line.remove_suffix(1);
    }
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && equalsIgnoringCase(line.substr(0, colon), name)) {
      values.emplace_back(line.substr(colon + 1));
    }
  }
  return values;
}

// Header `name` as sent once: its value (decoded from the Base64 sentinel where the transport
// allows one: Mcp-Name, not the others) in `value`, or the sentence saying what is wrong.
std::string single(std::string_view head, const std::string& name, const std::string& source,
                   bool base64, std::string* value) {
  const std::vector<std::string> values = valuesOf(head, name);
  if (values.empty()) {
    return "the " + name + " header is missing; it must repeat " + source + ".";
  }
  if (values.size() > 1) {
    return "the " + name + " header appears " + std::to_string(values.size()) +
           " times; send it once.";
  }
  std::optional<std::string> decoded =
      base64 ? decodeHeaderValue(values.front()) : plainHeaderValue(values.front());
  if (!decoded) {
    return "the " + name + " header holds characters a header may not" +
           (base64 ? ", or malformed Base64." : ".");
  }
  *value = std::move(*decoded);
  return {};
}

// The problem with header `name`, which must be sent once and say `expected`.
std::string mismatch(std::string_view head, const std::string& name, const std::string& expected,
                     const std::string& source, bool base64) {
  std::string value;
  if (std::string problem = single(head, name, source, base64, &value); !problem.empty()) {
    return problem;
  }
  if (value != expected) {
    return name + " header value " + quoted(value) + " does not match " + source + " " +
           quoted(expected) + ".";
  }
  return {};
}

}  // namespace

std::optional<std::string> decodeHeaderValue(std::string_view value) {
  const std::optional<std::string> plain = plainHeaderValue(value);
  if (!plain) {
    return std::nullopt;
  }
  const std::string_view text = *plain;
  if (text.size() < kBase64Prefix.size() + kBase64Suffix.size() ||
      text.substr(0, kBase64Prefix.size()) != kBase64Prefix ||
      text.substr(text.size() - kBase64Suffix.size()) != kBase64Suffix) {
    return std::string(text);
  }
  const std::string_view encoded =
      text.substr(kBase64Prefix.size(), text.size() - kBase64Prefix.size() - kBase64Suffix.size());
  if (!isBase64(encoded)) {
    return std::nullopt;
  }
  std::istringstream in{std::string(encoded)};
  Poco::Base64Decoder decoder(in);
  std::ostringstream out;
  out << decoder.rdbuf();
  return out.str();
}

bool namesModernRevision(std::string_view raw_head) {
  const std::vector<std::string> versions = valuesOf(raw_head, kProtocolVersionHeader);
  return versions.size() > 1 || !ambiguity(raw_head).empty() ||
         (versions.size() == 1 && isModernProtocolVersion(trimmed(versions.front())));
}

std::string routingHeaderProblem(std::string_view raw_head, const Message& message) {
  if (std::string problem = ambiguity(raw_head); !problem.empty()) {
    return problem;
  }
  const std::string version_source = "_meta's protocol version";
  std::string version;
  if (std::string problem =
          single(raw_head, kProtocolVersionHeader, version_source, false, &version);
      !problem.empty()) {
    return problem;
  }
  if (!message.metaVersion().empty() && version != message.metaVersion()) {
    return std::string(kProtocolVersionHeader) + " header value " + quoted(version) +
           " does not match " + version_source + " " + quoted(message.metaVersion()) + ".";
  }
  if (std::string problem =
          mismatch(raw_head, kMethodHeader, message.method(), "the method", false);
      !problem.empty()) {
    return problem;
  }
  if (!message.routingField().empty()) {
    return mismatch(raw_head, kNameHeader, message.routingName(),
                    "params." + message.routingField(), true);
  }
  return {};
}

}  // namespace scs::mcp
