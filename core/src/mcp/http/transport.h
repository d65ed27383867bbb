// HttpTransport: MCP Streamable HTTP on /mcp for both protocol eras, with the health probes
// beside it. The public header of the HTTP transport: it brings the settings and tokens too.
#pragma once

#include <Poco/Net/SocketAddress.h>

#include <memory>
#include <string>

#include "mcp/http/settings.h"
#include "mcp/http/token_table.h"
#include "mcp/server.h"
#include "result.h"

namespace scs::mcp {

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

  // Binds the address and serves on a pool of threads; an Error when the address cannot be
  // bound. Call once.
  Result<Done> start();

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
