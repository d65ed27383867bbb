// GET /healthz and GET /readyz: the probes a load balancer asks, answered to anyone with a
// short JSON body.
#pragma once

#include <Poco/Net/HTTPServerRequest.h>

#include <functional>
#include <string>
#include <vector>

#include "mcp/http/reply.h"
#include "mcp/http/settings.h"

namespace scs::mcp::http {

// Whether `path` is /healthz or /readyz.
bool isProbePath(const std::string& path);

// Answers GET /healthz (200 while the process serves) and /readyz (200 when every check of
// `readiness` passes, else 503; none: ready), 405 for another method; false for any other path.
bool serveHealth(Poco::Net::HTTPServerRequest& request, Reply& reply,
                 const std::function<std::vector<ReadinessCheck>()>& readiness);

}  // namespace scs::mcp::http
