#include "mcp/routing_headers.h"

#include <Poco/Base64Decoder.h>

#include <cctype>
#include <sstream>

#include "runs/output.h"

namespace scs::mcp {
namespace {

constexpr const char* kVersionHeader = "MCP-Protocol-Version";
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
  std::string cut = runs::toValidUtf8(text.substr(0, kMaxQuoted));
  return "'" + cut + (text.size() > kMaxQuoted ? "...'" : "'");
}

// The problem with header `name`, which must be present and say `expected` (after decoding,
// where the transport lets it be Base64: Mcp-Name, not Mcp-Method).
std::string mismatch(const Poco::Net::NameValueCollection& headers, const std::string& name,
                     const std::string& expected, const std::string& source, bool base64) {
  if (!headers.has(name)) {
    return "the " + name + " header is missing; it must repeat " + source + ".";
  }
  const std::string& raw = headers.get(name);
  std::optional<std::string> value = decodeHeaderValue(raw);
  if (value && !base64 && *value != trimmed(raw)) {
    value = std::string(trimmed(raw));  // compared as sent
  }
  if (!value) {
    return "the " + name + " header holds characters a header may not, or malformed Base64.";
  }
  if (*value != expected) {
    return name + " header value " + quoted(*value) + " does not match " + source + " " +
           quoted(expected) + ".";
  }
  return {};
}

}  // namespace

std::optional<std::string> decodeHeaderValue(std::string_view value) {
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte > 0x7e) {
      return std::nullopt;
    }
  }
  const std::string_view text = trimmed(value);
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

std::string routingHeaderProblem(const Poco::Net::NameValueCollection& headers,
                                 const Message& message) {
  if (!headers.has(kVersionHeader)) {
    return std::string("the ") + kVersionHeader + " header is missing.";
  }
  if (!message.metaVersion().empty()) {
    const std::string header = std::string(trimmed(headers.get(kVersionHeader)));
    if (header != message.metaVersion()) {
      return std::string(kVersionHeader) + " header value " + quoted(header) +
             " does not match _meta's protocol version " + quoted(message.metaVersion()) + ".";
    }
  }
  if (std::string problem = mismatch(headers, kMethodHeader, message.method(), "the method", false);
      !problem.empty()) {
    return problem;
  }
  if (message.method() == "tools/call") {
    return mismatch(headers, kNameHeader, message.routingName(), "params.name", true);
  }
  if (message.method() == "tasks/get" || message.method() == "tasks/update" ||
      message.method() == "tasks/cancel") {
    return mismatch(headers, kNameHeader, message.routingName(), "params.taskId", true);
  }
  return {};
}

}  // namespace scs::mcp
