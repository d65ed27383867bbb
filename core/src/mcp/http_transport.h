#pragma once

#include <Poco/Net/SocketAddress.h>

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mcp/server.h"

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
  std::size_t max_requests_per_tenant = 32;  // in flight at once; past it, 429
};

// Parses a --http (or --metrics) value: "ADDR:PORT", "[IPV6]:PORT", ":PORT" or "PORT" (the
// address is then 127.0.0.1). ADDR may be a name, resolved now. Port 0 asks for any free port.
// Returns the address, or a sentence saying what is wrong, starting with `flag`.
std::variant<Poco::Net::SocketAddress, std::string> parseListenAddress(
    const std::string& text, const std::string& flag = "--http");

// The items of a comma-separated flag value, trimmed, empty ones dropped.
std::vector<std::string> splitList(const std::string& text);

// The bearer tokens of --token-file and the tenants they stand for.
class TokenTable {
 public:
  static constexpr std::size_t kMinTokenLength = 16;

  // Parses a token file: one token per line, or NAME:TOKEN where NAME ([A-Za-z0-9_.-], at
  // most 64) is the tenant; several tokens may share a name. Surrounding blanks, blank
  // lines and lines starting with # are ignored. A token is printable ASCII without
  // blanks, at least kMinTokenLength long; an unnamed token must not contain ':'. Its tenant
  // is "token-" and the first 12 hex digits of its SHA-256. Returns the table, or a sentence
  // naming the bad line (never quoting a token) when a line is malformed, a token appears
  // twice, or there is no token at all.
  static std::variant<TokenTable, std::string> parse(const std::string& text);

  // Reads and parses the file at `path`. Refuses a file that is not a regular file or that
  // users other than its owner and group may read, write or execute.
  static std::variant<TokenTable, std::string> load(const std::string& path);

  // The tenant of `token`, or nullopt. Compares SHA-256 digests against every entry in time
  // that depends on neither the token nor where it matched.
  std::optional<std::string> tenantOf(std::string_view token) const;

  std::size_t size() const { return entries_.size(); }
  // Every tenant the tokens stand for, each once, sorted.
  std::vector<std::string> tenants() const;

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Entry {
    Digest digest;
    std::string tenant;
  };
  static Digest digestOf(std::string_view token);

  std::vector<Entry> entries_;
};

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
  // at the total, the tenant holding the most does (runs/tenant_share.h).
  std::size_t max_sessions = 10000;
  std::size_t max_sessions_per_tenant = 1000;
  // Requests of one tenant in flight at once (their answers not yet sent): one more is
  // refused with 429 before it takes a worker, so no tenant can hold every worker.
  std::size_t max_requests_per_tenant = 32;
  // The checks of GET /readyz, called on each request from any thread; none: ready while it
  // serves.
  std::function<std::vector<ReadinessCheck>()> readiness;
};

// Checks `settings`: the address parses, the token file loads, and an address beyond
// loopback has a token file. Returns the endpoint, or a sentence for the operator.
std::variant<HttpEndpoint, std::string> resolveHttpSettings(const HttpSettings& settings);

// MCP Streamable HTTP on one endpoint, /mcp, in both eras at once, chosen per request: the
// modern revision (2026-07-28: a request whose _meta or MCP-Protocol-Version header names it;
// no session; Mcp-Method and Mcp-Name checked against the body, 400 with -32020 otherwise; an
// unknown method 404, other errors 400) and the legacy ones (2025-11-25 and earlier: sessions
// opened by initialize, bound to their tenant). A POST carries one JSON-RPC message,
// answered by Server::respond: as application/json, or as an SSE stream once the request has
// something to send ahead of its answer (a waiting get_result). Notifications and responses
// get 202; GET gets 405 (the server never speaks first); DELETE ends a legacy session. Beside it,
// GET /healthz (200 while the process serves) and GET /readyz (200 when every
// HttpEndpoint::readiness check passes, else 503), each with a short JSON body, answer anyone: no
// token, and no Host or Origin check (a load balancer's probe names an address), since they tell
// nothing but that the server is up and ready. Every request is checked in this order: Host and
// Origin against the allow-lists (DNS rebinding: 421, 403), the path (404), the bearer token when
// there are tokens (401), then method, Accept, Content-Type and size, then for a legacy request
// its session and MCP-Protocol-Version, for a modern one its routing headers (read from the
// head as sent: net::rawRequestHead). Sessions are bound to the tenant that opened them. Request
// bodies are read or the connection closed before an early answer, so a kept-alive connection stays
// in step.
class HttpTransport {
 public:
  HttpTransport(Server& server, HttpEndpoint endpoint);
  ~HttpTransport();  // stop() and finish()

  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds the address and serves on a pool of threads. Returns a sentence when the address
  // cannot be bound. Call once.
  std::optional<std::string> start();

  // The bound address (the real port when port 0 was asked for); valid after start().
  Poco::Net::SocketAddress address() const;

  // "http://HOST:PORT/mcp" for the bound address.
  std::string url() const;

  // Stops accepting connections and shuts down the open ones. Requests in flight run on
  // until they answer (RunManager::shutdown() ends long polls). Idempotent.
  void stop();

  // Waits until every connection thread has finished. Call after stop(). Idempotent.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scs::mcp
