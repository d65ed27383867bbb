#pragma once

// The MCP server's private parts, shared by its four source files: server.cc (Server: framing,
// parsing, the error map), dispatcher.cc (Dispatcher: the legacy methods and tools/call),
// modern_revision.cc (2026-07-28: envelope, server/discover, result decoration) and tasks.cc
// (the tasks extension of 2026-07-28).

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Object.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "mcp/report_json.h"
#include "mcp/server.h"
#include "mcp/tools.h"
#include "policy/files.h"
#include "policy/limits.h"
#include "runs/run_manager.h"

namespace scs::mcp::rpc {

// The JSON-RPC error a message is answered with: the protocol's vocabulary, not the core's
// ErrorKind (result.h). A tool that cannot do what was asked is not an RpcError but a result
// with isError (tools.cc), whatever the Error's kind.
enum class RpcCode {
  kParse,
  kInvalidRequest,
  kMethodNotFound,
  kInvalidParams,
  kInternal,
  kHeaderMismatch,      // modern revision
  kMissingCapability,   // modern revision
  kUnsupportedVersion,  // modern revision
};

// The one map from RpcCode to the JSON-RPC error code; anything unexpected is an internal error.
int errorCode(RpcCode code);

// A JSON-RPC error answer, raised while handling one message and caught in Server::handle.
class RpcError : public std::runtime_error {
 public:
  RpcError(RpcCode code, const std::string& message, Poco::Dynamic::Var data = {})
      : std::runtime_error(message), code_(code), data_(std::move(data)) {}
  RpcCode code() const { return code_; }
  const Poco::Dynamic::Var& data() const { return data_; }

 private:
  RpcCode code_;
  Poco::Dynamic::Var data_;
};

// What initialize and server/discover tell a client the server is for.
inline constexpr const char* kInstructions =
    "Runs Python 3 (or bash or Node.js, by `language`) in a locked-down, throwaway sandbox "
    "without network; the default image has "
    "numpy, pandas, matplotlib and more. start_run(code, wait_seconds) answers with the final "
    "report when the run ends within wait_seconds, otherwise with its run_id: then call "
    "get_result(run_id, wait_seconds) until the status is final (succeeded, failed, timed_out, "
    "out_of_memory, stopped or sandbox_error). Files saved under /workspace/out come back, "
    "images as images. For work in steps, open_session keeps variables and files between runs "
    "(pass its session_id to start_run; close_session when done). stop_run cancels a run.";

// The keys of a modern request's _meta, and of a modern result's.
inline constexpr const char* kMetaVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kMetaCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";
// A request of this method is of the modern revision whatever its _meta says.
inline constexpr const char* kDiscover = "server/discover";

void logError(const std::string& message) noexcept;

inline bool isObject(const Poco::Dynamic::Var& value) {
  return value.type() == typeid(Poco::JSON::Object::Ptr);
}
inline Poco::JSON::Object::Ptr asObject(const Poco::Dynamic::Var& value) {
  return value.extract<Poco::JSON::Object::Ptr>();
}

std::string serialise(const Poco::JSON::Object::Ptr& object);
// Client text to quote back in an error: made valid UTF-8 and cut to a bounded length.
std::string cut(const std::string& text);
// A JSON-RPC id (or progress token) the server can answer to: a string or an integer.
bool isUsableId(const Poco::Dynamic::Var& id);
// `id` as an answer carries it: a string made valid UTF-8.
Poco::Dynamic::Var responseId(const Poco::Dynamic::Var& id);

// tasks/get, tasks/update or tasks/cancel.
bool isTaskMethod(const std::string& method);
// A request's clientCapabilities declare the tasks extension.
bool declaresTasks(const Poco::JSON::Object::Ptr& capabilities);
// {"io.modelcontextprotocol/tasks":{}}: the extensions the server offers, and the one a
// tasks/* request requires of its client.
Poco::JSON::Object::Ptr tasksExtension();

// A modern request must carry its version and capabilities in _meta (-32602 otherwise) and
// name a version this server serves (-32022, with the ones it does).
void checkEnvelope(const Message& message, bool has_envelope);

// Answers one well-formed request; every failure is an exception.
class Dispatcher {
 public:
  Dispatcher(runs::RunManager& runs, const policy::LimitPolicy& limits,
             const policy::FileSettings& files, const ServerInfo& info,
             const RequestContext& context, bool modern, bool tasks);

  Poco::JSON::Object::Ptr dispatch(const std::string& method,
                                   const Poco::JSON::Object::Ptr& params);

 private:
  // The modern revision: no handshake, no ping or logging/setLevel (it removed them), and
  // every result says its resultType and names the server.
  Poco::JSON::Object::Ptr dispatchModern(const std::string& method,
                                         const Poco::JSON::Object::Ptr& params);
  Poco::JSON::Object::Ptr discover();

  // A start_run's result for a client of the tasks extension: the task its run is while the
  // run has not ended (taskId = run_id, so get_result and stop_run work on it too), else the
  // report.
  Poco::JSON::Object::Ptr taskOfStartedRun(const Poco::JSON::Object::Ptr& result);
  // tasks/get, tasks/update and tasks/cancel, for a client that declares the extension.
  Poco::JSON::Object::Ptr taskRequest(const std::string& method,
                                      const Poco::JSON::Object::Ptr& params);
  // The Task of the extension for a run: stopped is cancelled, any other end completed (a
  // run that failed is a tool result, not a protocol error).
  Poco::JSON::Object::Ptr taskObject(const runs::RunSnapshot& snapshot) const;

  CallContext callContext() const;
  Poco::JSON::Object::Ptr serverInfo() const;
  Poco::JSON::Object::Ptr initialize(const Poco::JSON::Object::Ptr& params);
  // kInstructions, and for a tenant with egress the hosts its programs reach.
  std::string instructions() const;
  Poco::JSON::Object::Ptr setLogLevel(const Poco::JSON::Object::Ptr& params);
  Poco::JSON::Object::Ptr callTool(const Poco::JSON::Object::Ptr& params);

  Tools tools_;
  const ServerInfo& info_;
  const RequestContext& context_;
  const bool modern_;
  const bool tasks_;  // the request declares the tasks extension
};

}  // namespace scs::mcp::rpc
