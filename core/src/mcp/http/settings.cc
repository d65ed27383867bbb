// The listen address (ADDR:PORT, [V6]:PORT, :PORT, PORT) and the other --http flags checked
// and resolved into an HttpEndpoint.
#include "mcp/http/settings.h"

#include <Poco/Exception.h>
#include <Poco/String.h>

#include <charconv>
#include <cstdint>
#include <sstream>
#include <system_error>
#include <utility>

#include "mcp/http/text.h"

namespace scs::mcp {
namespace {

using http::splitHostPort;
using http::trim;

std::optional<std::uint16_t> parsePort(const std::string& text) {
  unsigned value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

namespace http {

bool splitHostPort(const std::string& text, std::string* host, std::string* port) {
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) {
      return false;
    }
    *host = text.substr(0, close + 1);
    const std::string rest = text.substr(close + 1);
    if (rest.empty()) {
      port->clear();
      return true;
    }
    if (rest.front() != ':') {
      return false;
    }
    *port = rest.substr(1);
    return true;
  }
  const auto colon = text.find(':');
  if (colon != text.rfind(':')) {
    return false;  // a bare IPv6 address: ambiguous
  }
  *host = text.substr(0, colon);
  *port = colon == std::string::npos ? std::string() : text.substr(colon + 1);
  return true;
}

std::string hostText(const Poco::Net::IPAddress& host) {
  return host.family() == Poco::Net::IPAddress::IPv6 ? "[" + host.toString() + "]"
                                                     : host.toString();
}

}  // namespace http

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    item = trim(item);
    if (!item.empty()) {
      items.push_back(item);
    }
  }
  return items;
}

Result<Poco::Net::SocketAddress> parseListenAddress(const std::string& text,
                                                    const std::string& flag) {
  const std::string value = trim(text);
  std::string host;
  std::string port_text = value;
  if (value.find(':') != std::string::npos || (!value.empty() && value.front() == '[')) {
    if (!splitHostPort(value, &host, &port_text)) {
      return invalid(flag + ": '" + text +
                     "' is not ADDR:PORT (write an IPv6 address as [ADDR]:PORT)");
    }
  }
  const std::optional<std::uint16_t> port = parsePort(port_text);
  if (!port) {
    return invalid(flag + ": '" + text + "' has no valid port (0 to 65535; 0 picks a free one)");
  }
  if (host.size() >= 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    host = "127.0.0.1";
  }
  try {
    return Poco::Net::SocketAddress(host, *port);
  } catch (const Poco::Exception& e) {
    return invalid(flag + ": cannot use the address '" + host + "': " + e.displayText());
  }
}

Result<HttpEndpoint> resolveHttpSettings(const HttpSettings& settings) {
  HttpEndpoint endpoint;
  auto address = parseListenAddress(settings.listen);
  if (auto* problem = std::get_if<Error>(&address)) {
    return *problem;
  }
  endpoint.address = std::get<Poco::Net::SocketAddress>(address);
  if (!settings.token_file.empty()) {
    auto tokens = TokenTable::load(settings.token_file);
    if (auto* problem = std::get_if<Error>(&tokens)) {
      return *problem;
    }
    endpoint.tokens = std::move(std::get<TokenTable>(tokens));
  }
  if (!endpoint.tokens && !endpoint.address.host().isLoopback()) {
    return invalid("--http " + settings.listen + ": refusing to serve beyond loopback (" +
                   endpoint.address.toString() +
                   ") without authentication; give --token-file FILE, or bind 127.0.0.1");
  }
  for (const std::string& host : settings.allowed_hosts) {
    endpoint.allowed_hosts.push_back(Poco::toLower(host));
  }
  for (const std::string& origin : settings.allowed_origins) {
    std::string value = Poco::toLower(origin);
    while (value.size() > 1 && value.back() == '/') {
      value.pop_back();
    }
    endpoint.allowed_origins.push_back(value);
  }
  endpoint.max_body_bytes = settings.max_body_bytes;
  endpoint.max_sessions = settings.max_sessions;
  endpoint.max_sessions_per_tenant = settings.max_sessions_per_tenant;
  endpoint.max_requests_per_tenant = settings.max_requests_per_tenant;
  if (settings.max_body_bytes_per_tenant < settings.max_body_bytes) {
    return invalid(
        "--max-http-body-bytes-per-tenant (" + std::to_string(settings.max_body_bytes_per_tenant) +
        ") must be at least --max-http-body-bytes (" + std::to_string(settings.max_body_bytes) +
        "), or no body of the largest size could ever be read");
  }
  endpoint.max_body_bytes_per_tenant = settings.max_body_bytes_per_tenant;
  return endpoint;
}

}  // namespace scs::mcp
