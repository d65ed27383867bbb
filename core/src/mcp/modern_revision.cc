// Protocol revision 2026-07-28, served without a handshake: the per-request _meta envelope
// check, server/discover, and the resultType and serverInfo every result carries.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <string>

#include "mcp/dispatcher.h"
#include "mcp/server.h"
#include "mcp/tools.h"

namespace scs::mcp::rpc {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

// How long a client or a cache may keep server/discover and tools/list (the modern revision's
// ttlMs). What they say changes only when the operator restarts the server with other flags;
// ten minutes bounds how long a model may read limits that no longer hold (the server
// enforces the new ones either way). Neither depends on the tenant: cacheScope "public".
constexpr int kListTtlMs = 600000;

Array::Ptr modernVersions() {
  Array::Ptr versions = new Array;
  for (const char* version : kModernProtocolVersions) {
    versions->add(std::string(version));
  }
  return versions;
}

}  // namespace

void checkEnvelope(const Message& message, bool has_envelope) {
  if (!has_envelope) {
    throw RpcError(RpcCode::kInvalidParams,
                   std::string("Invalid params: a request of protocol revision 2026-07-28 "
                               "carries params._meta with \"") +
                       kMetaVersion + "\" (a string) and \"" + kMetaCapabilities +
                       "\" (an object).");
  }
  if (!isModernProtocolVersion(message.metaVersion())) {
    Object::Ptr data = newObject();
    data->set("supported", modernVersions());
    data->set("requested", cut(message.metaVersion()));
    throw RpcError(RpcCode::kUnsupportedVersion, "Unsupported protocol version", data);
  }
}

Object::Ptr Dispatcher::dispatchModern(const std::string& method, const Object::Ptr& params) {
  Object::Ptr result;
  if (method == kDiscover) {
    result = discover();
  } else if (method == "tools/list") {
    result = newObject();
    result->set("tools", tools_.definitions(context_.tenant));
    result->set("ttlMs", kListTtlMs);
    // With egress, a tenant's list names the hosts its programs reach: its own.
    result->set("cacheScope", info_.tools.egress != nullptr ? "private" : "public");
  } else if (method == "tools/call") {
    result = callTool(params);
    if (tasks_ && params->getValue<std::string>("name") == kStartRun) {
      result = taskOfStartedRun(result);
    }
  } else if (isTaskMethod(method)) {
    result = taskRequest(method, params);
  } else {
    const bool legacy_only =
        method == "initialize" || method == "ping" || method == "logging/setLevel";
    throw RpcError(RpcCode::kMethodNotFound,
                   "Method not found: " + cut(method) +
                       (legacy_only ? " is not part of protocol revision 2026-07-28, which "
                                      "needs no handshake; this server answers "
                                      "server/discover, tools/list and tools/call."
                                    : "."));
  }
  if (!result->has("resultType")) {
    result->set("resultType", "complete");
  }
  Object::Ptr meta = newObject();
  meta->set(kMetaServerInfo, serverInfo());
  result->set("_meta", meta);
  return result;
}

Object::Ptr Dispatcher::discover() {
  Object::Ptr tools = newObject();
  tools->set("listChanged", false);  // the tool set is fixed for the process's lifetime
  Object::Ptr capabilities = newObject();
  capabilities->set("tools", tools);
  capabilities->set("extensions", tasksExtension());
  Object::Ptr result = newObject();
  result->set("supportedVersions", modernVersions());
  result->set("capabilities", capabilities);
  result->set("instructions", instructions());
  result->set("ttlMs", kListTtlMs);
  result->set("cacheScope", "public");
  return result;
}

}  // namespace scs::mcp::rpc
