// The health probes: /healthz says the process serves, /readyz runs the endpoint's readiness
// checks and names each one's problem.
#include "mcp/http/health.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Object.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>

#include <sstream>

namespace scs::mcp::http {
namespace {

using Poco::JSON::Object;
using Poco::Net::HTTPResponse;

constexpr const char* kHealthPath = "/healthz";
constexpr const char* kReadyPath = "/readyz";

}  // namespace

bool isProbePath(const std::string& path) { return path == kHealthPath || path == kReadyPath; }

bool serveHealth(Poco::Net::HTTPServerRequest& request, Reply& reply,
                 const std::function<std::vector<ReadinessCheck>()>& readiness) {
  std::string path;
  try {
    path = Poco::URI(request.getURI()).getPath();
  } catch (const Poco::Exception&) {
    return false;
  }
  if (!isProbePath(path)) {
    return false;
  }
  if (request.getMethod() != Poco::Net::HTTPRequest::HTTP_GET) {
    reply.setHeader("Allow", "GET");
    reply.refuse(HTTPResponse::HTTP_METHOD_NOT_ALLOWED, path + " answers GET only.");
    return true;
  }
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  bool ready = true;
  if (path == kHealthPath) {
    body->set("status", "ok");
  } else {
    Object::Ptr checks = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    if (readiness) {
      for (const ReadinessCheck& check : readiness()) {
        checks->set(check.name, check.problem.empty() ? std::string("ok") : check.problem);
        ready = ready && check.problem.empty();
      }
    }
    body->set("status", ready ? "ready" : "not_ready");
    body->set("checks", checks);
  }
  std::ostringstream text;
  body->stringify(text);
  reply.drainBody();
  reply.json(ready ? HTTPResponse::HTTP_OK : HTTPResponse::HTTP_SERVICE_UNAVAILABLE, text.str());
  return true;
}

}  // namespace scs::mcp::http
