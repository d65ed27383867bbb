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

std::string launcherRefusal(const json::ObjectPtr& pod, const std::string& container) {
  constexpr std::size_t kMost = 512;
  constexpr std::string_view kRefusal = "sandbox launcher: rejected ";  // rejection.py's words
  for (const ObjectPtr& record :
       objects(json::array(json::object(pod, "status"), "containerStatuses"))) {
    if (json::string(record, "name") != container) {
      continue;
    }
    const ObjectPtr terminated = json::object(json::object(record, "state"), "terminated");
    std::string message = json::string(terminated, "message").value_or("");
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
      message.pop_back();
    }
    if (const std::size_t newline = message.rfind('\n'); newline != std::string::npos) {
      message.erase(0, newline + 1);
    }
    if (message.rfind(kRefusal, 0) != 0) {
      return {};
    }
    if (message.size() > kMost) {
      std::size_t cut = kMost;
      while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) {
        --cut;  // not inside a UTF-8 sequence
      }
      message.resize(cut);
    }
    return message;
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
                             const json::ObjectPtr& quota_list, const OwnPod& own) {
  struct Amount {
    std::int64_t millicores = 0;
    std::int64_t bytes = 0;
    void add(const Amount& more) {
      millicores += more.millicores;
      bytes += more.bytes;
    }
  };
  // A Pod's requests or limits (`kind`), as the scheduler and quota count them
  // (resource.PodRequests): its containers' sum, or its largest init container's when more, and
  // its overhead.
  const auto amountOf = [](const ObjectPtr& spec, const char* kind) {
    Amount sum;
    Amount largest_init;
    for (const char* list : {"containers", "initContainers"}) {
      for (const ObjectPtr& container : objects(json::array(spec, list))) {
        const ObjectPtr amounts = json::object(json::object(container, "resources"), kind);
        const Amount one{quantityOf(amounts, "cpu", 1000).value_or(0),
                         quantityOf(amounts, "memory", 1).value_or(0)};
        if (std::string_view(list) == "containers") {
          sum.add(one);
        } else {
          largest_init = {std::max(largest_init.millicores, one.millicores),
                          std::max(largest_init.bytes, one.bytes)};
        }
      }
    }
    sum = {std::max(sum.millicores, largest_init.millicores),
           std::max(sum.bytes, largest_init.bytes)};
    const ObjectPtr overhead = json::object(spec, "overhead");
    sum.add({quantityOf(overhead, "cpu", 1000).value_or(0),
             quantityOf(overhead, "memory", 1).value_or(0)});
    return sum;
  };
  // This server's sandboxes are its core's to count (it admits runs against this capacity):
  // only what other Pods hold is taken from the nodes, and from a quota's use only what is not
  // this server's. Another replica's sandboxes, with the same labels, are other Pods here.
  std::map<std::string, Amount> others_on;  // by node name
  Amount ours_requested;
  Amount ours_limited;
  for (const ObjectPtr& pod : objects(json::array(pod_list, "items"))) {
    const ObjectPtr spec = json::object(pod, "spec");
    const ObjectPtr metadata = json::object(pod, "metadata");
    if (own(json::string(metadata, "namespace").value_or(""),
            json::string(metadata, "name").value_or(""))) {
      ours_requested.add(amountOf(spec, "requests"));
      ours_limited.add(amountOf(spec, "limits"));
    } else {
      others_on[json::string(spec, "nodeName").value_or("")].add(amountOf(spec, "requests"));
    }
  }
  Amount room;
  for (const ObjectPtr& node : objects(json::array(node_list, "items"))) {
    if (!ready(node)) {
      continue;
    }
    const ObjectPtr allocatable = json::object(json::object(node, "status"), "allocatable");
    const Amount& taken = others_on[nameOf(node)];
    room.add({std::max<std::int64_t>(
                  0, quantityOf(allocatable, "cpu", 1000).value_or(0) - taken.millicores),
              std::max<std::int64_t>(
                  0, quantityOf(allocatable, "memory", 1).value_or(0) - taken.bytes)});
  }
  for (const ObjectPtr& quota : objects(json::array(quota_list, "items"))) {
    const ObjectPtr hard = json::object(json::object(quota, "spec"), "hard");
    const ObjectPtr used = json::object(json::object(quota, "status"), "used");
    // What the quota leaves sandboxes of `resource`: the least over its keys of hard less what
    // others use of it.
    const auto left = [&](const char* resource, std::int64_t unit, std::int64_t ours_requests,
                          std::int64_t ours_limits) {
      std::optional<std::int64_t> result;
      for (const std::string prefix : {"limits.", "requests.", ""}) {
        const std::string key = prefix + resource;
        const auto limit = quantityOf(hard, key, unit);
        if (!limit) {
          continue;
        }
        const std::int64_t ours = prefix == "limits." ? ours_limits : ours_requests;
        const std::int64_t others =
            std::max<std::int64_t>(0, quantityOf(used, key, unit).value_or(0) - ours);
        const std::int64_t rest = std::max<std::int64_t>(0, *limit - others);
        result = result ? std::min(*result, rest) : rest;
      }
      return result;
    };
    if (const auto cpu = left("cpu", 1000, ours_requested.millicores, ours_limited.millicores)) {
      room.millicores = std::min(room.millicores, *cpu);
    }
    if (const auto bytes = left("memory", 1, ours_requested.bytes, ours_limited.bytes)) {
      room.bytes = std::min(room.bytes, *bytes);
    }
  }
  const std::int64_t cores = room.millicores / 1000;
  return {static_cast<int>(std::min<std::int64_t>(cores, std::numeric_limits<int>::max())),
          room.bytes};
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
