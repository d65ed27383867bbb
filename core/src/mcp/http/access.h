// Who the HTTP transport answers: Host and Origin checked against the allow-lists (DNS
// rebinding), the lists' defaults for the bound address, and the bearer token's tenant.
#pragma once

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/SocketAddress.h>

#include <optional>
#include <string>
#include <vector>

#include "mcp/http/reply.h"
#include "mcp/http/settings.h"

namespace scs::mcp::http {

// Whether a Host header names a host (and port; none: 80) of `allowed_hosts`; "*" allows any.
bool hostAllowed(const std::vector<std::string>& allowed_hosts, const std::string& header);

// Whether an Origin header, trailing slashes dropped, is one of `allowed_origins`; "*" allows any.
bool originAllowed(const std::vector<std::string>& allowed_origins, const std::string& header);

// Fills the allow-lists `endpoint` leaves empty from the address it is bound to: localhost,
// 127.0.0.1 and [::1] at the bound port, and the bound address when it is neither loopback nor
// the wildcard.
void deriveAllowLists(const Poco::Net::SocketAddress& bound, HttpEndpoint* endpoint);

// The tenant of an Authorization header's bearer token; none without a valid one. (Here, and
// in authenticatedTenant, the optional holds the value; no error message.)
std::optional<std::string> tenantOfAuthorization(const TokenTable& tokens,
                                                 const std::string& header);

// The tenant `request` speaks for: runs::kLocalTenant without tokens (a proxied request is then
// refused), else its bearer token's. Without one, answers 401 with a challenge (403 for the
// proxy) on `reply` and returns nullopt.
std::optional<std::string> authenticatedTenant(const HttpEndpoint& endpoint,
                                               Poco::Net::HTTPServerRequest& request, Reply& reply);

}  // namespace scs::mcp::http
