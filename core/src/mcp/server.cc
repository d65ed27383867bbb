#include "mcp/server.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Logger.h>

#include <cctype>
#include <cstdio>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "mcp/report_json.h"
#include "mcp/tools.h"
#include "policy/status_map.h"
#include "runs/output.h"

namespace scs::mcp {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kLogLevels[] = {"debug", "info",     "notice", "warning",
                                      "error", "critical", "alert",  "emergency"};

constexpr const char* kInstructions =
    "Runs Python 3 in a locked-down, throwaway sandbox without network; the default image has "
    "numpy, pandas, matplotlib and more. start_run(code, wait_seconds) answers with the final "
    "report when the run ends within wait_seconds, otherwise with its run_id: then call "
    "get_result(run_id, wait_seconds) until the status is final (succeeded, failed, timed_out, "
    "out_of_memory, stopped or sandbox_error). Files saved under /workspace/out come back, "
    "images as images. For work in steps, open_session keeps variables and files between runs "
    "(pass its session_id to start_run; close_session when done). stop_run cancels a run.";

// The keys of a modern request's _meta, and of a modern result's.
constexpr const char* kMetaVersion = "io.modelcontextprotocol/protocolVersion";
constexpr const char* kMetaCapabilities = "io.modelcontextprotocol/clientCapabilities";
constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";
constexpr const char* kDiscover = "server/discover";
// The tasks extension of the modern revision: a start_run that does not end within its wait
// answers a task (the run, taskId = run_id) for a client that declares it.
constexpr const char* kTasksExtension = "io.modelcontextprotocol/tasks";
constexpr int kTaskPollIntervalMs = 1000;

bool isTaskMethod(const std::string& method) {
  return method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel";
}

// Client text quoted back in an error is cut to this many bytes.
constexpr std::size_t kMaxQuotedBytes = 100;

std::string cut(const std::string& text) {
  return runs::toValidUtf8(text.substr(0, kMaxQuotedBytes)) +
         (text.size() > kMaxQuotedBytes ? "..." : "");
}

// How long a client or a cache may keep server/discover and tools/list (the modern revision's
// ttlMs). What they say changes only when the operator restarts the server with other flags;
// ten minutes bounds how long a model may read limits that no longer hold (the server
// enforces the new ones either way). Neither depends on the tenant: cacheScope "public".
constexpr int kListTtlMs = 600000;

enum class ErrorKind {
  kParse,
  kInvalidRequest,
  kMethodNotFound,
  kInvalidParams,
  kInternal,
  kHeaderMismatch,      // modern revision
  kMissingCapability,   // modern revision
  kUnsupportedVersion,  // modern revision
};

// The one map from error kind to JSON-RPC code; anything unexpected is an internal error.
int errorCode(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kParse:
      return -32700;
    case ErrorKind::kInvalidRequest:
      return -32600;
    case ErrorKind::kMethodNotFound:
      return Server::kMethodNotFound;
    case ErrorKind::kInvalidParams:
      return -32602;
    case ErrorKind::kHeaderMismatch:
      return -32020;
    case ErrorKind::kMissingCapability:
      return -32021;
    case ErrorKind::kUnsupportedVersion:
      return -32022;
    case ErrorKind::kInternal:
      break;
  }
  return Server::kInternalError;
}

// A JSON-RPC error answer, raised while handling one message and caught in Server::handle.
class RpcError : public std::runtime_error {
 public:
  RpcError(ErrorKind kind, const std::string& message, Var data = Var())
      : std::runtime_error(message), kind_(kind), data_(std::move(data)) {}
  ErrorKind kind() const { return kind_; }
  const Var& data() const { return data_; }

 private:
  ErrorKind kind_;
  Var data_;
};

struct ErrorInfo {
  ErrorKind kind;
  std::string message;
  Var data;
};

Poco::Logger& logger() { return Poco::Logger::get("scs.mcp"); }

void logError(const std::string& message) noexcept {
  try {
    logger().error(message);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scs.mcp: %s (logging failed: %s)\n", message.c_str(), e.what());
  }
}

Object::Ptr newObject() { return new Object(Poco::JSON_PRESERVE_KEY_ORDER); }

// {"io.modelcontextprotocol/tasks":{}}: the extensions the server offers, and the one a
// tasks/* request requires of its client.
Object::Ptr tasksExtension() {
  Object::Ptr extensions = newObject();
  extensions->set(kTasksExtension, newObject());
  return extensions;
}

Array::Ptr modernVersions() {
  Array::Ptr versions = new Array;
  for (const char* version : kModernProtocolVersions) {
    versions->add(std::string(version));
  }
  return versions;
}

std::string serialise(const Object::Ptr& object) {
  std::ostringstream out;
  object->stringify(out);
  return out.str();
}

bool fitsIn64Bits(std::string_view literal) {
  const bool negative = !literal.empty() && literal.front() == '-';
  std::string_view digits = negative ? literal.substr(1) : literal;
  const std::string_view limit = negative ? "9223372036854775808" : "18446744073709551615";
  if (digits.size() != limit.size()) {
    return digits.size() < limit.size();
  }
  return digits <= limit;
}

// Poco 1.11 silently wraps integer literals that do not fit in 64 bits (2^64 parses as 0),
// which would let an absurd limit or id pass as a small one. Such literals get a ".0" so
// that they parse as the (large) floating-point numbers they are.
std::string widenHugeIntegers(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  bool in_string = false;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        i += 2;
        continue;
      }
      in_string = c != '"';
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      ++i;
      continue;
    }
    if (c != '-' && !std::isdigit(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    i += c == '-' ? 1 : 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    if (i < text.size() && (text[i] == '.' || text[i] == 'e' || text[i] == 'E')) {
      while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) ||
                                 std::string_view(".eE+-").find(text[i]) != std::string::npos)) {
        ++i;
      }
      continue;
    }
    if (!fitsIn64Bits(text.substr(start, i - start))) {
      out.append(text.substr(copied, i - copied));
      out += ".0";
      copied = i;
    }
  }
  if (copied == 0) {
    return std::string(text);
  }
  out.append(text.substr(copied));
  return out;
}

// Parses one message of any JSON type. Poco parses only objects and arrays at the top
// level, so the message is wrapped in an array that must hold exactly one value.
Var parseMessage(std::string_view message) {
  Array::Ptr wrapper;
  try {
    Poco::JSON::Parser parser;
    const Var parsed = parser.parse("[" + widenHugeIntegers(message) + "]");
    wrapper = parsed.extract<Array::Ptr>();
  } catch (const Poco::Exception& e) {
    throw RpcError(ErrorKind::kParse, "Parse error: " + runs::toValidUtf8(e.message()));
  }
  if (!wrapper || wrapper->size() != 1) {
    throw RpcError(ErrorKind::kParse, "Parse error: expected exactly one JSON value.");
  }
  return wrapper->get(0);
}

bool isObject(const Var& value) { return value.type() == typeid(Object::Ptr); }

Object::Ptr asObject(const Var& value) { return value.extract<Object::Ptr>(); }

// A report's status before the run has ended.
bool isStillGoing(const std::string& status) { return status == "queued" || status == "running"; }

bool declaresTasks(const Object::Ptr& capabilities) {
  const Var extensions = capabilities->has("extensions") ? capabilities->get("extensions") : Var();
  return isObject(extensions) && asObject(extensions)->has(kTasksExtension) &&
         isObject(asObject(extensions)->get(kTasksExtension));
}

bool isUsableId(const Var& id) { return id.isString() || (id.isInteger() && !id.isBoolean()); }

Var responseId(const Var& id) { return id.isString() ? Var(runs::toValidUtf8(id.toString())) : id; }

std::string resultResponse(const Var& id, const Object::Ptr& result) {
  Object::Ptr response = newObject();
  response->set("jsonrpc", "2.0");
  response->set("id", responseId(id));
  response->set("result", result);
  return serialise(response);
}

std::string errorResponse(const Var& id, ErrorKind kind, const std::string& message,
                          const Var& data) {
  Object::Ptr error = newObject();
  error->set("code", errorCode(kind));
  error->set("message", runs::toValidUtf8(message));
  if (!data.isEmpty()) {
    error->set("data", data);
  }
  Object::Ptr response = newObject();
  response->set("jsonrpc", "2.0");
  response->set("id", responseId(id));
  response->set("error", error);
  return serialise(response);
}

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
  params->set("message", runs::toValidUtf8(message));
  Object::Ptr notification = newObject();
  notification->set("jsonrpc", "2.0");
  notification->set("method", "notifications/progress");
  notification->set("params", params);
  return serialise(notification);
}

// Answers one well-formed request; every failure is an exception.
class Dispatcher {
 public:
  Dispatcher(runs::RunManager& runs, const policy::LimitPolicy& limits,
             const policy::FileSettings& files, const ServerInfo& info,
             const RequestContext& context, bool modern, bool tasks)
      : tools_(runs, limits, files, info.run_retention, info.tools),
        info_(info),
        context_(context),
        modern_(modern),
        tasks_(tasks) {}

  Object::Ptr dispatch(const std::string& method, const Object::Ptr& params) {
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
      result->set("tools", tools_.definitions());
      return result;
    }
    if (method == "tools/call") {
      return callTool(params);
    }
    if (method == "logging/setLevel") {
      return setLogLevel(params);
    }
    throw RpcError(ErrorKind::kMethodNotFound, "Method not found: " + cut(method));
  }

 private:
  // The modern revision: no handshake, no ping or logging/setLevel (it removed them), and
  // every result says its resultType and names the server.
  Object::Ptr dispatchModern(const std::string& method, const Object::Ptr& params) {
    Object::Ptr result;
    if (method == kDiscover) {
      result = discover();
    } else if (method == "tools/list") {
      result = newObject();
      result->set("tools", tools_.definitions());
      result->set("ttlMs", kListTtlMs);
      result->set("cacheScope", "public");
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
      throw RpcError(ErrorKind::kMethodNotFound,
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

  Object::Ptr discover() {
    Object::Ptr tools = newObject();
    tools->set("listChanged", false);  // the tool set is fixed for the process's lifetime
    Object::Ptr capabilities = newObject();
    capabilities->set("tools", tools);
    capabilities->set("extensions", tasksExtension());
    Object::Ptr result = newObject();
    result->set("supportedVersions", modernVersions());
    result->set("capabilities", capabilities);
    result->set("instructions", kInstructions);
    result->set("ttlMs", kListTtlMs);
    result->set("cacheScope", "public");
    return result;
  }

  // A start_run's result for a client of the tasks extension: the task its run is while the
  // run has not ended (taskId = run_id, so get_result and stop_run work on it too), else the
  // report.
  Object::Ptr taskOfStartedRun(const Object::Ptr& result) {
    const Var structured =
        result->has("structuredContent") ? result->get("structuredContent") : Var();
    if (result->getValue<bool>("isError") || !isObject(structured) ||
        !asObject(structured)->has("run_id") || !asObject(structured)->has("status") ||
        !isStillGoing(asObject(structured)->getValue<std::string>("status"))) {
      return result;
    }
    // The run has started: whatever happens here, the client gets its run_id.
    try {
      const std::optional<Tools::RunView> view =
          tools_.view(asObject(structured)->getValue<std::string>("run_id"), callContext());
      if (!view || policy::isFinal(view->snapshot.status)) {
        return view ? view->result : result;
      }
      Object::Ptr task = taskObject(view->snapshot);
      task->set("resultType", "task");
      return task;
    } catch (const std::exception& e) {
      logError(std::string("cannot answer a start_run as a task: ") + e.what());
      return result;
    }
  }

  // tasks/get, tasks/update and tasks/cancel, for a client that declares the extension.
  Object::Ptr taskRequest(const std::string& method, const Object::Ptr& params) {
    if (!tasks_) {
      Object::Ptr required = newObject();
      required->set("extensions", tasksExtension());
      Object::Ptr data = newObject();
      data->set("requiredCapabilities", required);
      throw RpcError(ErrorKind::kMissingCapability,
                     "Missing required client capability: " + method + " needs the " +
                         kTasksExtension + " extension declared in the request's " +
                         kMetaCapabilities + ".",
                     data);
    }
    const Var id = params && params->has("taskId") ? params->get("taskId") : Var();
    if (!id.isString()) {
      throw RpcError(ErrorKind::kInvalidParams,
                     "Invalid params: " + method + " needs \"taskId\" (a string).");
    }
    const std::string task_id = id.toString();
    const std::optional<Tools::RunView> view = tools_.view(task_id, callContext());
    if (!view) {
      throw RpcError(ErrorKind::kInvalidParams,
                     "Invalid params: unknown or expired task \"" + cut(task_id) +
                         "\". Reports are kept for a limited time after a run ends.");
    }
    if (method == "tasks/update") {
      // A run never asks for input, so no response is outstanding: acknowledged and ignored,
      // as the extension has a server do with responses to keys it did not ask for.
      return newObject();
    }
    if (method == "tasks/cancel") {
      if (!policy::isFinal(view->snapshot.status)) {
        Object::Ptr arguments = newObject();
        arguments->set("run_id", task_id);
        tools_.call(kStopRun, arguments, callContext());
      }
      return newObject();  // an empty acknowledgement: the task ends as the run does
    }
    Object::Ptr task = taskObject(view->snapshot);
    if (policy::isFinal(view->snapshot.status) &&
        view->snapshot.status != policy::RunStatus::kStopped) {
      task->set("result", view->result);  // completed: the report inline
    }
    return task;
  }

  // The Task of the extension for a run: stopped is cancelled, any other end completed (a
  // run that failed is a tool result, not a protocol error).
  Object::Ptr taskObject(const runs::RunSnapshot& snapshot) const {
    const bool final = policy::isFinal(snapshot.status);
    const std::string status = !final                                           ? "working"
                               : snapshot.status == policy::RunStatus::kStopped ? "cancelled"
                                                                                : "completed";
    const auto updated =
        snapshot.finished_at.value_or(snapshot.started_at.value_or(snapshot.submitted_at));
    Object::Ptr task = newObject();
    task->set("taskId", snapshot.run_id);
    task->set("status", status);
    task->set("statusMessage", "Run " + snapshot.run_id + " is " +
                                   std::string(policy::statusName(snapshot.status)) + ".");
    task->set("createdAt", formatTimestamp(snapshot.submitted_at));
    task->set("lastUpdatedAt", formatTimestamp(updated));
    // Counted from createdAt: unknown while the run goes on (its report is kept the retention
    // time after it ends), then its run's length and the retention.
    if (snapshot.finished_at) {
      const auto ttl = *snapshot.finished_at - snapshot.submitted_at + info_.run_retention;
      task->set("ttlMs", static_cast<Poco::Int64>(
                             std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count()));
    } else {
      task->set("ttlMs", Var());
    }
    task->set("pollIntervalMs", kTaskPollIntervalMs);
    return task;
  }

  CallContext callContext() const {
    CallContext call;
    call.tenant = context_.tenant;
    return call;
  }

  Object::Ptr serverInfo() const {
    Object::Ptr server_info = newObject();
    server_info->set("name", info_.name);
    server_info->set("title", info_.title);
    server_info->set("version", info_.version.empty() ? std::string("0.0.0") : info_.version);
    return server_info;
  }

  Object::Ptr initialize(const Object::Ptr& params) {
    const Var requested =
        params && params->has("protocolVersion") ? params->get("protocolVersion") : Var();
    if (!requested.isString()) {
      Array::Ptr supported = new Array;
      for (const char* version : kSupportedProtocolVersions) {
        supported->add(std::string(version));
      }
      Object::Ptr data = newObject();
      data->set("supported", supported);
      throw RpcError(ErrorKind::kInvalidParams,
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
    result->set("instructions", kInstructions);
    return result;
  }

  Object::Ptr setLogLevel(const Object::Ptr& params) {
    const Var level = params && params->has("level") ? params->get("level") : Var();
    for (const char* known : kLogLevels) {
      if (level.isString() && level.toString() == known) {
        return newObject();
      }
    }
    throw RpcError(ErrorKind::kInvalidParams,
                   "Invalid params: \"level\" must be one of debug, info, notice, warning, error, "
                   "critical, alert, emergency.");
  }

  Object::Ptr callTool(const Object::Ptr& params) {
    const Var name = params && params->has("name") ? params->get("name") : Var();
    if (!name.isString()) {
      throw RpcError(ErrorKind::kInvalidParams,
                     "Invalid params: tools/call needs \"name\" (a string).");
    }
    Object::Ptr arguments;
    const Var value = params->has("arguments") ? params->get("arguments") : Var();
    if (!value.isEmpty()) {
      if (!isObject(value)) {
        throw RpcError(ErrorKind::kInvalidParams,
                       "Invalid params: \"arguments\" must be an object.");
      }
      arguments = asObject(value);
    }
    const std::string tool = name.toString();
    if (!tools_.has(tool)) {
      throw RpcError(ErrorKind::kInvalidParams, "Unknown tool: " + runs::toValidUtf8(tool));
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

  Tools tools_;
  const ServerInfo& info_;
  const RequestContext& context_;
  const bool modern_;
  const bool tasks_;  // the request declares the tasks extension
};

}  // namespace

struct Message::Detail {
  Var id;                          // the usable id, or empty
  Object::Ptr params;              // a request's params, when given
  std::optional<ErrorInfo> error;  // set: the answer is this error
  // The modern revision's per-request _meta: the version (a string) and capabilities (an
  // object) it must carry; false when either is missing or of another type.
  bool has_envelope = false;
  bool tasks = false;  // its capabilities declare the tasks extension
};

namespace {

// A modern request must carry its version and capabilities in _meta (-32602 otherwise) and
// name a version this server serves (-32022, with the ones it does).
void checkEnvelope(const Message& message, bool has_envelope) {
  if (!has_envelope) {
    throw RpcError(ErrorKind::kInvalidParams,
                   std::string("Invalid params: a request of protocol revision 2026-07-28 "
                               "carries params._meta with \"") +
                       kMetaVersion + "\" (a string) and \"" + kMetaCapabilities +
                       "\" (an object).");
  }
  if (!isModernProtocolVersion(message.metaVersion())) {
    Object::Ptr data = newObject();
    data->set("supported", modernVersions());
    data->set("requested", cut(message.metaVersion()));
    throw RpcError(ErrorKind::kUnsupportedVersion, "Unsupported protocol version", data);
  }
}

}  // namespace

Server::Server(runs::RunManager& runs, const policy::LimitPolicy& limits,
               const policy::FileSettings& files, ServerInfo info)
    : runs_(runs), limits_(limits), files_(files), info_(std::move(info)) {
  info_.tools.waiting = std::make_shared<net::TenantSlots>(info_.tools.max_waiting_per_tenant);
}

Message Server::parse(std::string_view text) {
  Message message;
  auto detail = std::make_shared<Message::Detail>();
  try {
    const Var parsed = parseMessage(text);
    if (parsed.type() == typeid(Array::Ptr)) {
      throw RpcError(ErrorKind::kInvalidRequest,
                     "Invalid Request: batches are not supported; send one message at a time.");
    }
    if (!isObject(parsed)) {
      throw RpcError(ErrorKind::kInvalidRequest,
                     "Invalid Request: a JSON-RPC message must be a JSON object.");
    }
    const Object::Ptr request = asObject(parsed);
    const bool has_id = request->has("id");
    const Var raw_id = has_id ? request->get("id") : Var();
    if (has_id && isUsableId(raw_id)) {
      detail->id = raw_id;
    }
    if (!request->has("method") && (request->has("result") || request->has("error"))) {
      message.kind_ = Message::Kind::kResponse;  // we never send requests
      message.detail_ = detail;
      return message;
    }
    const Var jsonrpc = request->has("jsonrpc") ? request->get("jsonrpc") : Var();
    if (!jsonrpc.isString() || jsonrpc.toString() != "2.0") {
      throw RpcError(ErrorKind::kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\".");
    }
    const Var method_value = request->has("method") ? request->get("method") : Var();
    if (!method_value.isString()) {
      throw RpcError(ErrorKind::kInvalidRequest, "Invalid Request: \"method\" must be a string.");
    }
    if (has_id && !isUsableId(raw_id)) {
      throw RpcError(ErrorKind::kInvalidRequest,
                     "Invalid Request: \"id\" must be a string or an integer.");
    }
    message.method_ = method_value.toString();
    message.kind_ = has_id ? Message::Kind::kRequest : Message::Kind::kNotification;
    if (has_id && request->has("params")) {
      const Var value = request->get("params");
      if (!isObject(value)) {
        throw RpcError(ErrorKind::kInvalidParams, "Invalid params: \"params\" must be an object.");
      }
      detail->params = asObject(value);
    }
    const Object::Ptr params = detail->params;
    const Var meta_value = params && params->has("_meta") ? params->get("_meta") : Var();
    if (isObject(meta_value)) {
      const Object::Ptr meta = asObject(meta_value);
      const Var version = meta->has(kMetaVersion) ? meta->get(kMetaVersion) : Var();
      message.modern_ = meta->has(kMetaVersion);
      message.meta_version_ = version.isString() ? runs::toValidUtf8(version.toString()) : "";
      const Var capabilities = meta->has(kMetaCapabilities) ? meta->get(kMetaCapabilities) : Var();
      detail->has_envelope = version.isString() && isObject(capabilities);
      detail->tasks = isObject(capabilities) && declaresTasks(asObject(capabilities));
    }
    message.modern_ = message.modern_ || message.method_ == kDiscover;
    message.routing_field_ = message.method_ == "tools/call" ? "name"
                             : isTaskMethod(message.method_) ? "taskId"
                                                             : "";
    if (!message.routing_field_.empty() && params && params->has(message.routing_field_) &&
        params->get(message.routing_field_).isString()) {
      message.routing_name_ = params->get(message.routing_field_).toString();
    }
  } catch (const RpcError& e) {
    if (e.kind() != ErrorKind::kInvalidParams) {
      message.kind_ = Message::Kind::kInvalid;
    }
    detail->error = ErrorInfo{e.kind(), e.what(), e.data()};
  } catch (const std::exception& e) {
    logError(std::string("internal error parsing a message: ") + e.what());
    message.kind_ = Message::Kind::kInvalid;
    detail->error = ErrorInfo{ErrorKind::kInternal, "Internal error", Var()};
  }
  message.detail_ = detail;
  return message;
}

std::optional<std::string> Server::handle(std::string_view message, const RequestContext& context) {
  return handle(parse(message), context);
}

std::optional<std::string> Server::handle(const Message& message, const RequestContext& context) {
  std::optional<Answer> answer = respond(message, context);
  if (!answer) {
    return std::nullopt;
  }
  return std::move(answer->text);
}

std::optional<Server::Answer> Server::respond(const Message& message,
                                              const RequestContext& context) {
  const Message::Detail* detail = message.detail_.get();
  if (message.kind() == Message::Kind::kResponse) {
    return std::nullopt;
  }
  if (message.kind() == Message::Kind::kNotification) {
    if (logger().debug()) {  // poco_debug() is compiled out of release builds
      logger().debug("notification " + runs::toValidUtf8(message.method()));
    }
    return std::nullopt;
  }
  const Var id = detail != nullptr ? detail->id : Var();
  ErrorKind kind = ErrorKind::kInternal;
  std::string error_message = "Internal error";
  Var data;
  if (detail == nullptr) {
    kind = ErrorKind::kInvalidRequest;
    error_message = "Invalid Request";
  } else if (detail->error) {
    kind = detail->error->kind;
    error_message = detail->error->message;
    data = detail->error->data;
  } else {
    if (logger().debug()) {
      logger().debug("request " + runs::toValidUtf8(message.method()));
    }
    try {
      const bool modern = message.modern() || context.modern;
      if (modern) {
        checkEnvelope(message, detail->has_envelope);
      }
      Dispatcher dispatcher(runs_, limits_, files_, info_, context, modern,
                            modern && detail->tasks);
      return Answer{resultResponse(id, dispatcher.dispatch(message.method(), detail->params))};
    } catch (const RpcError& e) {
      kind = e.kind();
      error_message = e.what();
      data = e.data();
    } catch (const Poco::Exception& e) {
      logError("internal error handling a message: " + e.displayText());
    } catch (const std::exception& e) {
      logError(std::string("internal error handling a message: ") + e.what());
    } catch (...) {
      logError("internal error handling a message: unknown exception");
    }
  }
  try {
    return Answer{errorResponse(id, kind, error_message, data), errorCode(kind)};
  } catch (const std::exception& e) {
    logError(std::string("cannot serialise an error answer: ") + e.what());
    return Answer{
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}})",
        errorCode(ErrorKind::kInternal)};
  }
}

std::string Server::oversizedMessageError(std::size_t limit, const std::optional<Var>& id) {
  return errorResponse(id.value_or(Var()), ErrorKind::kInvalidRequest,
                       "Invalid Request: the message is longer than the limit of " +
                           std::to_string(limit) + " bytes.",
                       Var());
}

std::string Server::refusal(const std::string& message, const Message* refused) {
  const Var id = refused && refused->detail_ ? refused->detail_->id : Var();
  return errorResponse(id, ErrorKind::kInvalidRequest, "Invalid Request: " + message, Var());
}

std::string Server::headerMismatch(const std::string& message, const Message& refused) {
  const Var id = refused.detail_ ? refused.detail_->id : Var();
  return errorResponse(id, ErrorKind::kHeaderMismatch, "Header mismatch: " + message, Var());
}

bool isModernProtocolVersion(std::string_view version) {
  for (const char* modern : kModernProtocolVersions) {
    if (version == modern) {
      return true;
    }
  }
  return false;
}

bool isSupportedProtocolVersion(std::string_view version) {
  for (const char* supported : kSupportedProtocolVersions) {
    if (version == supported) {
      return true;
    }
  }
  return false;
}

}  // namespace scs::mcp
