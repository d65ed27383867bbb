#include "pod_api.h"

#include <Poco/URI.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <thread>

#include "api_reading.h"
#include "pod_readback.h"

namespace scs::kubernetes {
namespace {

using backend::Code;

std::string joined(const std::vector<std::string>& sentences) {
  std::string out;
  for (const std::string& sentence : sentences) {
    out += (out.empty() ? "" : "; ") + sentence;
  }
  return out;
}

// One watch's timeoutSeconds: kWatchSeconds, or less when the wait ends sooner, and at least
// the 1 s the API takes.
int watchSeconds(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 1, kWatchSeconds));
}

Labels labelsOf(const json::ObjectPtr& pod) {
  Labels labels;
  for (const auto& [key, value] :
       json::stringMap(json::object(json::object(pod, "metadata"), "labels"))) {
    labels[key] = value;
  }
  return labels;
}

}  // namespace

PodApi::PodApi(const KubeClient& client, PodSettings settings)
    : client_(client), settings_(std::move(settings)) {}

std::string PodApi::podPath(const std::string& id) const {
  std::string name;
  Poco::URI::encode(id, "/?#", name);
  return "/api/v1/namespaces/" + settings_.namespace_name + "/pods/" + name;
}

ApiReply PodApi::policies() const {
  return client_.call("GET", "/apis/networking.k8s.io/v1/namespaces/" + settings_.namespace_name +
                                 "/networkpolicies");
}

std::vector<std::string> PodApi::clusterProblems() const {
  const ApiReply reply = policies();
  if (!reply.status.ok()) {
    return {"the namespace's NetworkPolicies cannot be read: " + reply.status.message};
  }
  return isolationProblems(reply.body, {{backend::kManagedLabel, "true"}});
}

backend::CapacityReply PodApi::capacity() const {
  backend::CapacityReply result;
  const ApiReply nodes = client_.call("GET", "/api/v1/nodes");
  const ApiReply quotas =
      client_.call("GET", "/api/v1/namespaces/" + settings_.namespace_name + "/resourcequotas");
  if (!nodes.status.ok() || !quotas.status.ok()) {
    result.status = nodes.status.ok() ? quotas.status : nodes.status;
    return result;
  }
  result.capacity = capacityOf(nodes.body, quotas.body);
  return result;
}

backend::CreateReply PodApi::create(const backend::SandboxSpec& spec, std::int64_t now_unix) const {
  const auto label = spec.labels.find(backend::kDeadlineLabel);
  std::int64_t deadline = 0;
  if (label == spec.labels.end() ||
      std::from_chars(label->second.data(), label->second.data() + label->second.size(), deadline)
              .ec != std::errc()) {
    return {{Code::kUnsupported, "kubernetes: the spec carries no deadline label"}, {}};
  }
  const PodManifest manifest = podFor(
      spec, settings_, std::max<std::int64_t>(1, deadline - now_unix) + kDeadlineGraceSeconds);
  if (!manifest.status.ok()) {
    return {manifest.status, {}};
  }
  const ApiReply reply = client_.call(
      "POST", "/api/v1/namespaces/" + settings_.namespace_name + "/pods", manifest.pod);
  if (!reply.status.ok()) {
    return {reply.status, {}};
  }
  const std::string id = podName(spec.run_id);
  std::lock_guard lock(mutex_);
  sent_[id] = spec;
  return {{}, id};
}

backend::InspectReply PodApi::inspect(const std::string& id) const {
  backend::InspectReply result;
  backend::SandboxSpec sent;
  {
    std::lock_guard lock(mutex_);
    const auto it = sent_.find(id);
    if (it == sent_.end()) {
      result.status = {Code::kNotFound, "kubernetes: the Pod " + id + " was not created here"};
      return result;
    }
    sent = it->second;
  }
  const ApiReply pod = client_.call("GET", podPath(id));
  if (!pod.status.ok()) {
    result.status = pod.status;
    return result;
  }
  const ApiReply listed = policies();
  if (!listed.status.ok()) {
    result.status = listed.status;
    return result;
  }
  std::vector<std::string> problems = isolationProblems(listed.body, labelsOf(pod.body));
  const bool isolated = problems.empty();
  result.posture = postureFromPod(pod.body, settings_, isolated);
  const std::vector<std::string> deviations = podDeviations(pod.body, settings_, sent);
  problems.insert(problems.end(), deviations.begin(), deviations.end());
  if (!problems.empty()) {
    result.status = {Code::kRejected, "kubernetes: the Pod " + id +
                                          " as stored may not run code: " + joined(problems)};
  }
  return result;
}

PodApi::State PodApi::stateNow(const std::string& id) const {
  State result;
  const ApiReply pod = client_.call("GET", podPath(id));
  if (!pod.status.ok()) {
    result.status = pod.status;
    return result;
  }
  return stateOf(pod.body);
}

PodApi::State PodApi::stateOf(const json::ObjectPtr& pod) {
  State result;
  result.exit = exitOf(pod, kSandboxContainer);
  result.running = !result.exit.exited && containerRunning(pod, kSandboxContainer);
  result.resource_version =
      json::string(json::object(pod, "metadata"), "resourceVersion").value_or("");
  return result;
}

PodApi::State PodApi::awaitState(const std::string& id,
                                 const std::function<bool(const State&)>& done,
                                 std::chrono::steady_clock::time_point deadline,
                                 const std::function<bool()>& cancelled) const {
  const auto transient = [](const backend::Status& status) {
    return status.code == Code::kTimeout || status.code == Code::kUnavailable;
  };
  const auto gone = [&] {
    State state;
    state.status = {Code::kNotFound, "kubernetes: the Pod " + id + " is gone"};
    return state;
  };
  std::string name;
  Poco::URI::encode("metadata.name=" + id, "=&,!/+ ", name);
  backend::Status last;
  const std::string pods = "/api/v1/namespaces/" + settings_.namespace_name + "/pods";
  while (!cancelled()) {
    // A list of the one Pod, as an informer reads: its resourceVersion is the collection's, from
    // which a watch is valid even when the Pod itself has not changed for long.
    State state;
    std::string version;
    const ApiReply listed = client_.call("GET", pods + "?fieldSelector=" + name);
    state.status = listed.status;
    if (listed.status.ok()) {
      const std::vector<json::ObjectPtr> items = json::objects(json::array(listed.body, "items"));
      if (items.empty()) {
        return gone();
      }
      state = stateOf(items.front());
      version = json::string(json::object(listed.body, "metadata"), "resourceVersion").value_or("");
    }
    if (state.status.ok()) {
      if (done(state)) {
        return state;
      }
      // From the version read, the watch gives every change after it, then ends.
      std::optional<State> reached;
      bool deleted = false;
      while (!reached && !deleted && !cancelled() && std::chrono::steady_clock::now() < deadline) {
        const KubeClient::WatchReply watched = client_.watch(
            pods + "?fieldSelector=" + name +
                "&watch=1&allowWatchBookmarks=false&resourceVersion=" + version +
                "&timeoutSeconds=" + std::to_string(watchSeconds(deadline)),
            [&](const json::ObjectPtr& event) {
              const json::ObjectPtr pod = json::object(event, "object");
              if (json::string(event, "type") == std::string("DELETED")) {
                deleted = true;
                return false;
              }
              State seen = stateOf(pod);
              version = seen.resource_version.empty() ? version : seen.resource_version;
              if (done(seen)) {
                reached = seen;
                return false;
              }
              return true;
            });
        if (watched.expired || !watched.status.ok()) {
          last = watched.status;
          if (!watched.expired && !transient(watched.status)) {
            state.status = watched.status;
            return state;
          }
          break;  // read the Pod again, and watch from there
        }
      }
      if (reached) {
        return *reached;
      }
      if (deleted) {
        return gone();
      }
    } else if (!transient(state.status)) {
      return state;
    } else {
      last = state.status;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      State timed_out;
      timed_out.status = {Code::kTimeout, "kubernetes: the Pod " + id +
                                              " did not reach the state waited for in time" +
                                              (last.ok() ? "" : " (" + last.message + ")")};
      return timed_out;
    }
    if (!last.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the API server is busy
    }
  }
  return gone();
}

std::string PodApi::attachPath(const std::string& id) const {
  return podPath(id) + "/attach?container=" + kSandboxContainer +
         "&stdin=true&stdout=true&stderr=true";
}

backend::Status PodApi::deletePod(const std::string& id) const {
  return client_.call("DELETE", podPath(id) + "?gracePeriodSeconds=1").status;
}

backend::Status PodApi::kill(const std::string& id) const { return deletePod(id); }

backend::Status PodApi::remove(const std::string& id) const {
  if (const backend::Status status = deletePod(id);
      !status.ok() && status.code != Code::kNotFound) {
    return status;
  }
  std::lock_guard lock(mutex_);
  sent_.erase(id);
  return {};
}

backend::ListReply PodApi::list(const std::string& label_key) const {
  backend::ListReply result;
  std::string selector;
  Poco::URI::encode(label_key, "=&,!/+ ", selector);
  const ApiReply reply = client_.call(
      "GET", "/api/v1/namespaces/" + settings_.namespace_name + "/pods?labelSelector=" + selector);
  if (!reply.status.ok()) {
    result.status = reply.status;
    return result;
  }
  result.sandboxes = sandboxesOf(reply.body);
  return result;
}

}  // namespace scs::kubernetes
