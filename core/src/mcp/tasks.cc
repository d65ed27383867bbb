// The tasks extension of protocol revision 2026-07-28: a start_run still going answers a task
// (taskId = run_id), and tasks/get, tasks/update and tasks/cancel act on it.

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <exception>
#include <optional>
#include <string>

#include "mcp/dispatcher.h"
#include "mcp/report_json.h"
#include "mcp/tools.h"
#include "policy/status_map.h"

namespace scs::mcp::rpc {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Object;

// The tasks extension of the modern revision: a start_run that does not end within its wait
// answers a task (the run, taskId = run_id) for a client that declares it.
constexpr const char* kTasksExtension = "io.modelcontextprotocol/tasks";
constexpr int kTaskPollIntervalMs = 1000;

// A report's status before the run has ended.
bool isStillGoing(const std::string& status) { return status == "queued" || status == "running"; }

}  // namespace

bool isTaskMethod(const std::string& method) {
  return method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel";
}

bool declaresTasks(const Object::Ptr& capabilities) {
  const Var extensions = capabilities->has("extensions") ? capabilities->get("extensions") : Var();
  return isObject(extensions) && asObject(extensions)->has(kTasksExtension) &&
         isObject(asObject(extensions)->get(kTasksExtension));
}

Object::Ptr tasksExtension() {
  Object::Ptr extensions = newObject();
  extensions->set(kTasksExtension, newObject());
  return extensions;
}

Object::Ptr Dispatcher::taskOfStartedRun(const Object::Ptr& result) {
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

Object::Ptr Dispatcher::taskRequest(const std::string& method, const Object::Ptr& params) {
  if (!tasks_) {
    Object::Ptr required = newObject();
    required->set("extensions", tasksExtension());
    Object::Ptr data = newObject();
    data->set("requiredCapabilities", required);
    throw RpcError(RpcCode::kMissingCapability,
                   "Missing required client capability: " + method + " needs the " +
                       kTasksExtension + " extension declared in the request's " +
                       kMetaCapabilities + ".",
                   data);
  }
  const Var id = params && params->has("taskId") ? params->get("taskId") : Var();
  if (!id.isString()) {
    throw RpcError(RpcCode::kInvalidParams,
                   "Invalid params: " + method + " needs \"taskId\" (a string).");
  }
  const std::string task_id = id.toString();
  const std::optional<Tools::RunView> view = tools_.view(task_id, callContext());
  if (!view) {
    throw RpcError(RpcCode::kInvalidParams,
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

Object::Ptr Dispatcher::taskObject(const runs::RunSnapshot& snapshot) const {
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

}  // namespace scs::mcp::rpc
