// The Streamable HTTP flags (HttpSettings) and the endpoint they resolve to (HttpEndpoint):
// the listen address and its host/port text, the token file, allow-lists and limits.
#pragma once

#include <Poco/Net/IPAddress.h>
#include <Poco/Net/SocketAddress.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "mcp/http/token_table.h"

namespace scs::mcp {

// The Streamable HTTP flags, as given.
struct HttpSettings {
  std::string listen;                        // ADDR:PORT, :PORT or PORT; empty: serve stdio
  std::string token_file;                    // empty: no authentication (loopback binds only)
  std::vector<std::string> allowed_origins;  // empty: derived from the bind address
  std::vector<std::string> allowed_hosts;    // empty: derived from the bind address
  std::size_t max_body_bytes = std::size_t{16} << 20;
  std::size_t max_sessions = 10000;  // all tenants together
  std::size_t max_sessions_per_tenant = 1000;
  std::size_t max_requests_per_tenant = 32;                       // in flight at once; past it, 429
  std::size_t max_body_bytes_per_tenant = std::size_t{24} << 20;  // in flight; past it, 429
};

// Parses a --http (or --metrics) value: "ADDR:PORT", "[IPV6]:PORT", ":PORT" or "PORT" (the
// address is then 127.0.0.1). ADDR may be a name, resolved now. Port 0 asks for any free port.
// Returns the address, or a sentence saying what is wrong, starting with `flag`.
Result<Poco::Net::SocketAddress> parseListenAddress(const std::string& text,
                                                    const std::string& flag = "--http");

// The items of a comma-separated flag value, trimmed, empty ones dropped.
std::vector<std::string> splitList(const std::string& text);

// One check behind GET /readyz: its name, and why it fails (empty: it passes). Problems are
// short fixed phrases: the endpoint answers strangers.
struct ReadinessCheck {
  std::string name;
  std::string problem;
};

// The HTTP settings checked and resolved, before any socket is bound.
struct HttpEndpoint {
  Poco::Net::SocketAddress address;
  std::optional<TokenTable> tokens;          // none: every request is runs::kLocalTenant
  std::vector<std::string> allowed_origins;  // empty: derived at start(); "*" allows any
  std::vector<std::string> allowed_hosts;    // empty: derived at start(); "*" allows any
  std::size_t max_body_bytes = std::size_t{16} << 20;
  // Open MCP sessions: a tenant at its limit loses its least recently used one to a new one;
  // at the total, the tenant holding the most does (common/tenant_share.h).
  std::size_t max_sessions = 10000;
  std::size_t max_sessions_per_tenant = 1000;
  // Requests of one tenant in flight at once (their answers not yet sent): one more is
  // refused with 429 before it takes a worker, so no tenant can hold every worker.
  std::size_t max_requests_per_tenant = 32;
  // Bytes of request bodies one tenant's requests in flight may hold (each counted at its
  // Content-Length, or at max_body_bytes when chunked): a POST past it is refused with 429
  // before its body is read, so that a tenant's bodies cost the server at most this.
  std::size_t max_body_bytes_per_tenant = std::size_t{24} << 20;
  // The checks of GET /readyz, called on each request from any thread; none: ready while it
  // serves.
  std::function<std::vector<ReadinessCheck>()> readiness;
};

// Checks `settings`: the address parses, the token file loads, and an address beyond
// loopback has a token file. Returns the endpoint, or a sentence for the operator.
Result<HttpEndpoint> resolveHttpSettings(const HttpSettings& settings);

namespace http {

// Splits "host", "host:port", "[v6]" or "[v6]:port". False when it is none of them.
bool splitHostPort(const std::string& text, std::string* host, std::string* port);

// `host` as it stands in a URL or a Host header: an IPv6 address in brackets.
std::string hostText(const Poco::Net::IPAddress& host);

}  // namespace http
}  // namespace scs::mcp
