// Dispatcher: answers one well-formed request. The legacy revisions' methods (initialize, ping,
// tools/list, tools/call, logging/setLevel) and tools/call with its progress notifications.

#include "mcp/dispatcher.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <string>

#include "common/utf8.h"
#include "mcp/server.h"
#include "mcp/tools.h"

namespace scs::mcp::rpc {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kLogLevels[] = {"debug", "info",     "notice", "warning",
                                      "error", "critical", "alert",  "emergency"};

// Where `params._meta.progressToken` is a string or an integer, that token; else empty.
Var progressToken(const Object::Ptr& params) {
  if (!params || !params->has("_meta") || !isObject(params->get("_meta"))) {
    return Var();
  }
  const Object::Ptr meta = asObject(params->get("_meta"));
  const Var token = meta->has("progressToken") ? meta->get("progressToken") : Var();
  return isUsableId(token) ? token : Var();
}

std::string progressNotification(const Var& token, double progress, double total,
                                 const std::string& message) {
  Object::Ptr params = newObject();
  params->set("progressToken", responseId(token));
  params->set("progress", progress);
  params->set("total", total);
  params->set("message", common::toValidUtf8(message));
  Object::Ptr notification = newObject();
  notification->set("jsonrpc", "2.0");
  notification->set("method", "notifications/progress");
  notification->set("params", params);
  return serialise(notification);
}

}  // namespace

Dispatcher::Dispatcher(runs::RunManager& runs, const policy::LimitPolicy& limits,
                       const policy::FileSettings& files, const ServerInfo& info,
                       const RequestContext& context, bool modern, bool tasks)
    : tools_(runs, limits, files, info.run_retention, info.tools),
      info_(info),
      context_(context),
      modern_(modern),
      tasks_(tasks) {}

std::string Dispatcher::instructions() const {
  const std::string network =
      egressSentence(info_.tools.egress, context_.tenant, info_.tools.credentials);
  if (network.empty()) {
    return kInstructions;
  }
  std::string text = kInstructions;
  const std::string closed = " without network";
  if (const auto at = text.find(closed); at != std::string::npos) {
    text.erase(at, closed.size());
  }
  return text + " " + network;
}

Object::Ptr Dispatcher::dispatch(const std::string& method, const Object::Ptr& params) {
  if (modern_) {
    return dispatchModern(method, params);
  }
  if (method == "initialize") {
    return initialize(params);
  }
  if (method == "ping") {
    return newObject();
  }
  if (method == "tools/list") {
    Object::Ptr result = newObject();
    result->set("tools", tools_.definitions(context_.tenant));
    return result;
  }
  if (method == "tools/call") {
    return callTool(params);
  }
  if (method == "logging/setLevel") {
    return setLogLevel(params);
  }
  throw RpcError(RpcCode::kMethodNotFound, "Method not found: " + cut(method));
}

CallContext Dispatcher::callContext() const {
  CallContext call;
  call.tenant = context_.tenant;
  return call;
}

Object::Ptr Dispatcher::serverInfo() const {
  Object::Ptr server_info = newObject();
  server_info->set("name", info_.name);
  server_info->set("title", info_.title);
  server_info->set("version", info_.version.empty() ? std::string("0.0.0") : info_.version);
  return server_info;
}

Object::Ptr Dispatcher::initialize(const Object::Ptr& params) {
  const Var requested =
      params && params->has("protocolVersion") ? params->get("protocolVersion") : Var();
  if (!requested.isString()) {
    Array::Ptr supported = new Array;
    for (const char* version : kSupportedProtocolVersions) {
      supported->add(std::string(version));
    }
    Object::Ptr data = newObject();
    data->set("supported", supported);
    throw RpcError(RpcCode::kInvalidParams,
                   "Invalid params: initialize needs \"protocolVersion\" (a string).", data);
  }
  const std::string version = isSupportedProtocolVersion(requested.toString())
                                  ? requested.toString()
                                  : std::string(kLatestProtocolVersion);

  Object::Ptr tools = newObject();
  tools->set("listChanged", false);
  Object::Ptr capabilities = newObject();
  capabilities->set("tools", tools);
  // Declared so that clients may set a level; the server has no log for them (its log goes
  // to stderr), and sending none is within the capability.
  capabilities->set("logging", newObject());

  Object::Ptr result = newObject();
  result->set("protocolVersion", version);
  result->set("capabilities", capabilities);
  result->set("serverInfo", serverInfo());
  result->set("instructions", instructions());
  return result;
}

Object::Ptr Dispatcher::setLogLevel(const Object::Ptr& params) {
  const Var level = params && params->has("level") ? params->get("level") : Var();
  for (const char* known : kLogLevels) {
    if (level.isString() && level.toString() == known) {
      return newObject();
    }
  }
  throw RpcError(RpcCode::kInvalidParams,
                 "Invalid params: \"level\" must be one of debug, info, notice, warning, error, "
                 "critical, alert, emergency.");
}

Object::Ptr Dispatcher::callTool(const Object::Ptr& params) {
  const Var name = params && params->has("name") ? params->get("name") : Var();
  if (!name.isString()) {
    throw RpcError(RpcCode::kInvalidParams,
                   "Invalid params: tools/call needs \"name\" (a string).");
  }
  Object::Ptr arguments;
  const Var value = params->has("arguments") ? params->get("arguments") : Var();
  if (!value.isEmpty()) {
    if (!isObject(value)) {
      throw RpcError(RpcCode::kInvalidParams, "Invalid params: \"arguments\" must be an object.");
    }
    arguments = asObject(value);
  }
  const std::string tool = name.toString();
  if (!tools_.has(tool)) {
    throw RpcError(RpcCode::kInvalidParams, "Unknown tool: " + common::toValidUtf8(tool));
  }
  CallContext call;
  call.tenant = context_.tenant;
  call.abandoned = context_.abandoned;
  if (context_.on_progress) {
    call.progress_interval = info_.progress_interval;
    call.on_wait = [this, token = progressToken(params)](double waited, double total,
                                                         const std::string& message) {
      context_.on_progress(token.isEmpty() ? std::string()
                                           : progressNotification(token, waited, total, message));
    };
  }
  return tools_.call(tool, arguments, call);
}

}  // namespace scs::mcp::rpc
