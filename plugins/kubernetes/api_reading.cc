// The API server's answers read: label selectors matched, NetworkPolicies checked for both-way
// isolation, a container's end from the Pod's status, node and quota capacity, Pods as sandboxes.

#include "api_reading.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "pod_readback.h"

namespace scs::kubernetes {
namespace {

using json::ArrayPtr;
using json::ObjectPtr;

using json::objects;

std::string nameOf(const ObjectPtr& object) {
  return json::string(json::object(object, "metadata"), "name").value_or("(unnamed)");
}

// Whether one matchExpressions requirement holds for `labels`; a malformed one never holds.
bool holds(const ObjectPtr& requirement, const Labels& labels) {
  const std::optional<std::string> key = json::string(requirement, "key");
  const std::optional<std::string> op = json::string(requirement, "operator");
  if (!key || !op) {
    return false;
  }
  const std::vector<std::string> values = json::strings(json::array(requirement, "values"));
  const auto found = labels.find(*key);
  const bool in_values = found != labels.end() &&
                         std::find(values.begin(), values.end(), found->second) != values.end();
  if (*op == "In") {
    return !values.empty() && in_values;
  }
  if (*op == "NotIn") {
    return !values.empty() && !in_values;
  }
  if (*op == "Exists") {
    return values.empty() && found != labels.end();
  }
  if (*op == "DoesNotExist") {
    return values.empty() && found == labels.end();
  }
  return false;
}

// Whether a sandbox Pod can be scheduled on `node`: Ready, not cordoned, and without a taint
// that keeps Pods off (NoSchedule, NoExecute), since a sandbox Pod tolerates none but the
// not-ready and unreachable ones admission adds.
bool ready(const ObjectPtr& node) {
  const ObjectPtr spec = json::object(node, "spec");
  if (json::boolean(spec, "unschedulable") == true) {
    return false;
  }
  for (const ObjectPtr& taint : objects(json::array(spec, "taints"))) {
    const std::string effect = json::string(taint, "effect").value_or("");
    if (effect == "NoSchedule" || effect == "NoExecute") {
      return false;
    }
  }
  for (const ObjectPtr& condition :
       objects(json::array(json::object(node, "status"), "conditions"))) {
    if (json::string(condition, "type") == std::string("Ready")) {
      return json::string(condition, "status") == std::string("True");
    }
  }
  return false;
}

}  // namespace

Labels labelsOf(const json::ObjectPtr& object) {
  Labels labels;
  for (const auto& [key, value] :
       json::stringMap(json::object(json::object(object, "metadata"), "labels"))) {
    labels[key] = value;
  }
  return labels;
}

bool selects(const json::ObjectPtr& selector, const Labels& labels) {
  if (!selector) {
    return false;
  }
  for (const auto& [key, value] : json::stringMap(json::object(selector, "matchLabels"))) {
    const auto found = labels.find(key);
    if (found == labels.end() || found->second != value) {
      return false;
    }
  }
  const ArrayPtr expressions = json::array(selector, "matchExpressions");
  const std::vector<ObjectPtr> requirements = objects(expressions);
  if (expressions && requirements.size() != expressions->size()) {
    return false;
  }
  return std::all_of(requirements.begin(), requirements.end(),
                     [&](const ObjectPtr& requirement) { return holds(requirement, labels); });
}

std::vector<std::string> isolationProblems(const json::ObjectPtr& policy_list,
                                           const Labels& labels) {
  std::vector<std::string> problems;
  bool ingress_isolated = false;
  bool egress_isolated = false;
  for (const ObjectPtr& policy : objects(json::array(policy_list, "items"))) {
    const ObjectPtr spec = json::object(policy, "spec");
    if (!selects(json::object(spec, "podSelector"), labels)) {
      continue;
    }
    const std::vector<std::string> types = json::strings(json::array(spec, "policyTypes"));
    const auto names = [&](const char* type) {
      return std::find(types.begin(), types.end(), type) != types.end();
    };
    ingress_isolated = ingress_isolated || names("Ingress");
    egress_isolated = egress_isolated || names("Egress");
    for (const char* direction : {"ingress", "egress"}) {
      const ArrayPtr rules = json::array(spec, direction);
      if (rules && rules->size() > 0) {
        problems.push_back("the NetworkPolicy " + nameOf(policy) + " allows " + direction +
                           " traffic to or from sandbox Pods");
      }
    }
  }
  if (!ingress_isolated) {
    problems.push_back("no NetworkPolicy of the namespace isolates sandbox Pods for Ingress");
  }
  if (!egress_isolated) {
    problems.push_back("no NetworkPolicy of the namespace isolates sandbox Pods for Egress");
  }
  return problems;
}

backend::Exit exitOf(const json::ObjectPtr& pod, const std::string& container) {
  static const std::set<std::string> kStuck = {"ErrImagePull",         "ImagePullBackOff",
                                               "InvalidImageName",     "CreateContainerConfigError",
                                               "CreateContainerError", "RunContainerError"};
  backend::Exit exit;
  const ObjectPtr status = json::object(pod, "status");
  // Ended from outside, whatever the container's own record says (a kill leaves exit 137):
  // the Pod failed as a whole (its deadline, an eviction), is being deleted, or was disrupted.
  bool disrupted = false;
  for (const ObjectPtr& condition : objects(json::array(status, "conditions"))) {
    disrupted = disrupted || (json::string(condition, "type") == std::string("DisruptionTarget") &&
                              json::string(condition, "status") == std::string("True"));
  }
  const ObjectPtr metadata = json::object(pod, "metadata");
  const bool outside =
      disrupted || (metadata && metadata->has("deletionTimestamp")) ||
      (json::string(status, "phase") == std::string("Failed") && json::string(status, "reason"));
  for (const ObjectPtr& record : objects(json::array(status, "containerStatuses"))) {
    if (json::string(record, "name") != container) {
      continue;
    }
    const ObjectPtr state = json::object(record, "state");
    if (const ObjectPtr terminated = json::object(state, "terminated")) {
      exit.exited = true;
      if (const auto code = json::integer(terminated, "exitCode")) {
        exit.exit_code = static_cast<int>(*code);
      }
      exit.oom_killed = json::string(terminated, "reason") == std::string("OOMKilled");
      exit.killed_outside = outside;
      return exit;
    }
    if (const ObjectPtr waiting = json::object(state, "waiting")) {
      const std::string reason = json::string(waiting, "reason").value_or("");
      if (kStuck.count(reason) != 0) {
        exit.exited = true;
        exit.engine_error = "kubernetes: the sandbox container cannot start: " + reason + ": " +
                            json::string(waiting, "message").value_or("");
        return exit;
      }
    }
  }
  if (json::string(status, "phase") == std::string("Failed")) {
    exit.exited = true;
    exit.killed_outside = true;
    exit.engine_error = "kubernetes: the Pod failed (" +
                        json::string(status, "reason").value_or("no reason given") +
                        "): " + json::string(status, "message").value_or("");
  }
  return exit;
}

std::string terminationMessage(const json::ObjectPtr& pod, const std::string& container) {
  constexpr std::size_t kMost = 512;
  for (const ObjectPtr& record :
       objects(json::array(json::object(pod, "status"), "containerStatuses"))) {
    if (json::string(record, "name") != container) {
      continue;
    }
    const ObjectPtr terminated = json::object(json::object(record, "state"), "terminated");
    std::string message = json::string(terminated, "message").value_or("");
    // The launcher's refusal is its last line; anything before it is not the reason.
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
      message.pop_back();
    }
    if (const std::size_t newline = message.rfind('\n'); newline != std::string::npos) {
      message.erase(0, newline + 1);
    }
    return message.size() > kMost ? message.substr(message.size() - kMost) : message;
  }
  return {};
}

bool containerRunning(const json::ObjectPtr& pod, const std::string& container) {
  for (const ObjectPtr& record :
       objects(json::array(json::object(pod, "status"), "containerStatuses"))) {
    if (json::string(record, "name") == container) {
      return json::object(json::object(record, "state"), "running") != nullptr;
    }
  }
  return false;
}

backend::Capacity capacityOf(const json::ObjectPtr& node_list, const json::ObjectPtr& pod_list,
                             const json::ObjectPtr& quota_list) {
  struct Amount {
    std::int64_t millicores = 0;
    std::int64_t bytes = 0;
  };
  // What a Pod takes from its node, as the scheduler counts it (resource.PodRequests).
  const auto requested = [](const ObjectPtr& spec) {
    const auto of = [](const ObjectPtr& container) {
      const ObjectPtr requests = json::object(json::object(container, "resources"), "requests");
      return Amount{quantityOf(requests, "cpu", 1000).value_or(0),
                    quantityOf(requests, "memory", 1).value_or(0)};
    };
    Amount sum;
    for (const ObjectPtr& container : objects(json::array(spec, "containers"))) {
      sum.millicores += of(container).millicores;
      sum.bytes += of(container).bytes;
    }
    for (const ObjectPtr& container : objects(json::array(spec, "initContainers"))) {
      sum.millicores = std::max(sum.millicores, of(container).millicores);
      sum.bytes = std::max(sum.bytes, of(container).bytes);
    }
    const ObjectPtr overhead = json::object(spec, "overhead");
    sum.millicores += quantityOf(overhead, "cpu", 1000).value_or(0);
    sum.bytes += quantityOf(overhead, "memory", 1).value_or(0);
    return sum;
  };
  std::map<std::string, Amount> placed;  // by node name
  for (const ObjectPtr& pod : objects(json::array(pod_list, "items"))) {
    const ObjectPtr spec = json::object(pod, "spec");
    const Amount taken = requested(spec);
    Amount& on = placed[json::string(spec, "nodeName").value_or("")];
    on.millicores += taken.millicores;
    on.bytes += taken.bytes;
  }
  Amount free;
  for (const ObjectPtr& node : objects(json::array(node_list, "items"))) {
    if (!ready(node)) {
      continue;
    }
    const ObjectPtr allocatable = json::object(json::object(node, "status"), "allocatable");
    const Amount& taken = placed[nameOf(node)];
    free.millicores += std::max<std::int64_t>(
        0, quantityOf(allocatable, "cpu", 1000).value_or(0) - taken.millicores);
    free.bytes +=
        std::max<std::int64_t>(0, quantityOf(allocatable, "memory", 1).value_or(0) - taken.bytes);
  }
  for (const ObjectPtr& quota : objects(json::array(quota_list, "items"))) {
    const ObjectPtr hard = json::object(json::object(quota, "spec"), "hard");
    const ObjectPtr used = json::object(json::object(quota, "status"), "used");
    const auto left = [&](const std::vector<std::string>& keys, std::int64_t unit) {
      std::optional<std::int64_t> result;
      for (const std::string& key : keys) {
        if (const auto limit = quantityOf(hard, key, unit)) {
          const std::int64_t rest =
              std::max<std::int64_t>(0, *limit - quantityOf(used, key, unit).value_or(0));
          result = result ? std::min(*result, rest) : rest;
        }
      }
      return result;
    };
    if (const auto cpu = left({"limits.cpu", "requests.cpu", "cpu"}, 1000)) {
      free.millicores = std::min(free.millicores, *cpu);
    }
    if (const auto bytes = left({"limits.memory", "requests.memory", "memory"}, 1)) {
      free.bytes = std::min(free.bytes, *bytes);
    }
  }
  const std::int64_t cores = free.millicores / 1000;
  return {static_cast<int>(std::min<std::int64_t>(cores, std::numeric_limits<int>::max())),
          free.bytes};
}

std::vector<backend::SandboxInfo> sandboxesOf(const json::ObjectPtr& pod_list) {
  std::vector<backend::SandboxInfo> sandboxes;
  for (const ObjectPtr& pod : objects(json::array(pod_list, "items"))) {
    const ObjectPtr metadata = json::object(pod, "metadata");
    const std::optional<std::string> name = json::string(metadata, "name");
    if (!name) {
      continue;
    }
    sandboxes.push_back({*name, labelsOf(pod)});
  }
  return sandboxes;
}

}  // namespace scs::kubernetes
