// Host and Origin allow-lists (421, 403) and their defaults, and the bearer token check (401)
// that names a request's tenant.
#include "mcp/http/access.h"

#include <Poco/Logger.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/IPAddress.h>
#include <Poco/String.h>

#include <algorithm>

#include "mcp/http/text.h"
#include "runs/run_manager.h"

namespace scs::mcp::http {
namespace {

using Poco::Net::HTTPResponse;

constexpr const char* kRealm = "safe-code-sandbox";

Poco::Logger& logger() { return Poco::Logger::get("scs.http"); }

}  // namespace

bool hostAllowed(const std::vector<std::string>& allowed_hosts, const std::string& header) {
  std::string host;
  std::string port;
  if (!splitHostPort(Poco::toLower(trim(header)), &host, &port) || host.empty()) {
    return false;
  }
  if (port.empty()) {
    port = "80";
  }
  for (const std::string& allowed : allowed_hosts) {
    std::string allowed_host;
    std::string allowed_port;
    if (allowed == "*") {
      return true;
    }
    if (splitHostPort(allowed, &allowed_host, &allowed_port) && allowed_host == host &&
        (allowed_port.empty() || allowed_port == port)) {
      return true;
    }
  }
  return false;
}

bool originAllowed(const std::vector<std::string>& allowed_origins, const std::string& header) {
  std::string origin = Poco::toLower(trim(header));
  while (origin.size() > 1 && origin.back() == '/') {
    origin.pop_back();
  }
  return std::any_of(
      allowed_origins.begin(), allowed_origins.end(),
      [&](const std::string& allowed) { return allowed == "*" || allowed == origin; });
}

void deriveAllowLists(const Poco::Net::SocketAddress& bound, HttpEndpoint* endpoint) {
  const std::string port = std::to_string(bound.port());
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "[::1]"};
  const Poco::Net::IPAddress& address = bound.host();
  if (!address.isLoopback() && !address.isWildcard()) {
    hosts.push_back(Poco::toLower(hostText(address)));
  }
  if (endpoint->allowed_hosts.empty()) {
    for (const std::string& host : hosts) {
      endpoint->allowed_hosts.push_back(host + ":" + port);
    }
  }
  if (endpoint->allowed_origins.empty()) {
    for (const std::string& host : hosts) {
      endpoint->allowed_origins.push_back("http://" + host + ":" + port);
    }
  }
}

std::optional<std::string> tenantOfAuthorization(const TokenTable& tokens,
                                                 const std::string& text) {
  const std::string header = trim(text);
  const std::string scheme = Poco::toLower(header.substr(0, header.find(' ')));
  if (scheme != "bearer" || header.find(' ') == std::string::npos) {
    return std::nullopt;
  }
  return tokens.tenantOf(trim(header.substr(header.find(' '))));
}

std::optional<std::string> authenticatedTenant(const HttpEndpoint& endpoint,
                                               Poco::Net::HTTPServerRequest& request,
                                               Reply& reply) {
  if (!endpoint.tokens) {
    // Without tokens the server must only be reachable from this host; a proxy in front
    // would open it to everyone the proxy serves.
    if (request.has("Forwarded") || request.has("X-Forwarded-For")) {
      logger().warning("refused a proxied request from " + request.clientAddress().toString() +
                       ": the server has no --token-file");
      reply.refuse(HTTPResponse::HTTP_FORBIDDEN,
                   "this server has no authentication and does not accept requests forwarded "
                   "by a proxy; the operator must give it a --token-file.");
      return std::nullopt;
    }
    return std::string(runs::kLocalTenant);
  }
  const std::string header = trim(request.get("Authorization", ""));
  if (std::optional<std::string> tenant = tenantOfAuthorization(*endpoint.tokens, header)) {
    return tenant;
  }
  const bool presented = !header.empty();
  logger().warning("refused a request from " + request.clientAddress().toString() + ": " +
                   (presented ? "the bearer token is not valid" : "no bearer token"));
  std::string challenge = std::string("Bearer realm=\"") + kRealm + "\"";
  if (presented) {
    challenge += ", error=\"invalid_token\"";
  }
  reply.setHeader("WWW-Authenticate", challenge);
  reply.refuse(HTTPResponse::HTTP_UNAUTHORIZED,
               presented ? "the bearer token is not valid."
                         : "this server needs 'Authorization: Bearer <token>'.");
  return std::nullopt;
}

}  // namespace scs::mcp::http
