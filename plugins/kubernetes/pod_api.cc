// PodApi: the namespace's sandbox Pods over REST: create with an active deadline, the read-back,
// a Pod's state listed then watched until it holds, kill, remove, list, and the attach path.

#include "pod_api.h"

#include <Poco/URI.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "api_reading.h"
#include "pod_readback.h"
#include "text.h"

namespace scs::kubernetes {
namespace {

using backend::Code;

// A watch that ends sooner than this without an event did not end by its timeoutSeconds.
constexpr auto kShortestWatch = std::chrono::milliseconds(500);

// Whether a quota's refusal ("... exceeded quota: NAME, requested: K=A, used: K=B, limited:
// K=C", the quota admission plugin's words) asks for more of a resource than the quota allows at
// all: no wait for other sandboxes to end could make room.
bool neverFits(const std::string& message) {
  const auto figures = [&](const std::string& label, const std::string& until) {
    std::map<std::string, std::int64_t> result;
    const std::size_t from = message.find(label);
    if (from == std::string::npos) {
      return result;
    }
    const std::size_t begin = from + label.size();
    const std::size_t end = until.empty() ? message.size() : message.find(until, begin);
    for (const std::string_view item :
         text::split(std::string_view(message).substr(begin, end - begin), ',')) {
      const std::vector<std::string_view> parts = text::split(item, '=');
      if (parts.size() == 2) {
        if (const auto amount = parseQuantity(parts[1], 1000)) {
          result[std::string(parts[0])] = *amount;
        }
      }
    }
    return result;
  };
  const auto limited = figures("limited: ", "");
  for (const auto& [key, asked] : figures("requested: ", ", used: ")) {
    if (const auto it = limited.find(key); it != limited.end() && asked > it->second) {
      return true;
    }
  }
  return false;
}

// `text` as one component of a path or query.
std::string encoded(const std::string& text) {
  std::string result;
  Poco::URI::encode(text, "=&,!/+?# ", result);
  return result;
}

// One watch's timeoutSeconds: kWatchSeconds, or less when the wait ends sooner or a request's
// own timeout is shorter (half of it, so the socket never times out first), and at least the
// 1 s the API takes; so a wait may end up to 1 s after its deadline.
int watchSeconds(std::chrono::steady_clock::time_point deadline,
                 std::chrono::steady_clock::time_point now,
                 std::chrono::milliseconds request_timeout) {
  const auto left = std::chrono::ceil<std::chrono::seconds>(deadline - now);
  const std::int64_t most = std::min<std::int64_t>(
      kWatchSeconds, std::chrono::duration_cast<std::chrono::seconds>(request_timeout / 2).count());
  return static_cast<int>(
      std::clamp<std::int64_t>(left.count(), 1, std::max<std::int64_t>(1, most)));
}

}  // namespace

PodApi::PodApi(const KubeClient& client, PodSettings settings)
    : client_(client), settings_(std::move(settings)) {}

void PodApi::pause(std::chrono::milliseconds length) const {
  const Clock& clock = client_.clock();
  const auto until = clock.now() + length;
  std::unique_lock lock(pause_mutex_);
  while (clock.now() < until) {
    clock.waitUntil(pause_cv_, lock, until);
  }
}

std::string PodApi::podPath(const std::string& id) const {
  std::string name;
  Poco::URI::encode(id, "/?#", name);
  return podsPath() + "/" + name;
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

backend::CapacityReply PodApi::capacity(const std::function<bool(const std::string&)>& own) const {
  backend::CapacityReply result;
  const ApiReply nodes = client_.call("GET", "/api/v1/nodes");
  const ApiReply quotas =
      client_.call("GET", "/api/v1/namespaces/" + settings_.namespace_name + "/resourcequotas");
  if (!nodes.status.ok() || !quotas.status.ok()) {
    result.status = nodes.status.ok() ? quotas.status : nodes.status;
    return result;
  }
  // Every Pod of the cluster is a large answer, and the readiness probe asks every second:
  // the list is read again only after kPodsListReused.
  json::ObjectPtr pods;
  {
    std::lock_guard lock(mutex_);
    if (pods_listed_ && client_.clock().now() - pods_listed_at_ < kPodsListReused) {
      pods = pods_listed_;
    }
  }
  if (!pods) {
    const std::string running =
        "?fieldSelector=" + encoded("status.phase!=Succeeded,status.phase!=Failed");
    ApiReply listed = client_.call("GET", "/api/v1/pods" + running);
    if (listed.status.code == Code::kRejected && listed.http_status == 403) {
      listed = client_.call("GET", podsPath() + running);  // RBAC gives this namespace's alone
    }
    if (!listed.status.ok()) {
      result.status = listed.status;
      return result;
    }
    pods = listed.body;
    std::lock_guard lock(mutex_);
    pods_listed_ = pods;
    pods_listed_at_ = client_.clock().now();
  }
  result.capacity = capacityOf(nodes.body, pods, quotas.body,
                               [&](const std::string& namespace_name, const std::string& name) {
                                 return namespace_name == settings_.namespace_name && own(name);
                               });
  return result;
}

PodApi::RuntimeClassReply PodApi::runtimeClass(const std::string& name, bool fresh) const {
  if (name.empty()) {  // a GET of the bare path would be a list
    return {{Code::kNotFound, "kubernetes: no RuntimeClass named"}, nullptr};
  }
  if (!fresh) {
    std::lock_guard lock(mutex_);
    if (const auto it = runtime_classes_.find(name); it != runtime_classes_.end()) {
      return {{}, it->second};
    }
  }
  const ApiReply reply =
      client_.call("GET", "/apis/node.k8s.io/v1/runtimeclasses/" + encoded(name));
  if (!reply.status.ok()) {
    return {reply.status, nullptr};
  }
  std::lock_guard lock(mutex_);
  runtime_classes_[name] = reply.body;
  return {{}, reply.body};
}

backend::CreateReply PodApi::create(const backend::SandboxSpec& spec, std::int64_t now_unix,
                                    std::chrono::steady_clock::time_point quota_deadline) const {
  const auto label = spec.labels.find(backend::kDeadlineLabel);
  const std::optional<std::int64_t> deadline =
      label == spec.labels.end()
          ? std::nullopt
          : text::wholeNumber(label->second, 0, std::numeric_limits<std::int64_t>::max());
  if (!deadline) {
    return {{Code::kUnsupported, "kubernetes: the spec carries no deadline label"}, {}};
  }
  const PodManifest manifest = podFor(
      spec, settings_, std::max<std::int64_t>(1, *deadline - now_unix) + kDeadlineGraceSeconds);
  if (!manifest.status.ok()) {
    return {manifest.status, {}};
  }
  ApiReply reply = client_.call("POST", podsPath(), manifest.pod);
  // The quota admission plugin refuses a Pod the namespace's quota cannot hold now; it can
  // later, once other sandboxes end: a wait, not a rejection.
  const auto over_quota = [&] {
    return reply.http_status == 403 &&
           reply.status.message.find("exceeded quota") != std::string::npos;
  };
  while (over_quota() && !neverFits(reply.status.message) &&
         client_.clock().now() + kQuotaPause < quota_deadline) {
    pause(kQuotaPause);
    reply = client_.call("POST", podsPath(), manifest.pod);
  }
  if (over_quota()) {
    return {{Code::kUnavailable, std::string("kubernetes: ") +
                                     (neverFits(reply.status.message)
                                          ? "the sandbox asks for more than the namespace's "
                                            "ResourceQuota allows at all: "
                                          : "the namespace's ResourceQuota stayed exceeded: ") +
                                     reply.status.message},
            {}};
  }
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
  // The RuntimeClass the core asked for (the read-back compares the Pod's with it), whose
  // scheduling admission merged in: read again once when the Pod deviates, in case the
  // operator changed it since it was read.
  std::vector<std::string> deviations;
  for (const bool fresh : {false, true}) {
    const RuntimeClassReply runtime = runtimeClass(sent.posture.runtime, fresh);
    if (!runtime.status.ok()) {
      result.status = runtime.status;
      return result;
    }
    deviations = podDeviations(pod.body, settings_, sent, runtime.runtime_class);
    if (deviations.empty()) {
      break;
    }
  }
  std::vector<std::string> problems = isolationProblems(listed.body, labelsOf(pod.body));
  const bool isolated = problems.empty();
  result.posture = postureFromPod(pod.body, settings_, isolated);
  problems.insert(problems.end(), deviations.begin(), deviations.end());
  if (!problems.empty()) {
    result.status = {
        Code::kRejected,
        "kubernetes: the Pod " + id + " as stored may not run code: " + text::join(problems, "; ")};
  }
  return result;
}

std::string PodApi::podsPath() const {
  return "/api/v1/namespaces/" + settings_.namespace_name + "/pods";
}

std::string PodApi::nameSelector(const std::string& id) {
  return "?fieldSelector=" + encoded("metadata.name=" + id);
}

PodApi::State PodApi::stateNow(const std::string& id) const {
  // A list of the one Pod, as an informer reads: its resourceVersion is the collection's, from
  // which a watch is valid even when the Pod itself has not changed for long.
  const ApiReply listed = client_.call("GET", podsPath() + nameSelector(id));
  State state;
  if (!listed.status.ok()) {
    state.status = listed.status;
    return state;
  }
  const std::vector<json::ObjectPtr> items = json::objects(json::array(listed.body, "items"));
  if (items.empty()) {
    state.status = {Code::kNotFound, "kubernetes: the Pod " + id + " is gone"};
    return state;
  }
  state = stateOf(items.front());
  state.resource_version =
      json::string(json::object(listed.body, "metadata"), "resourceVersion").value_or("");
  return state;
}

PodApi::State PodApi::stateOf(const json::ObjectPtr& pod) {
  State result;
  result.exit = exitOf(pod, kSandboxContainer);
  result.running = !result.exit.exited && containerRunning(pod, kSandboxContainer);
  result.refusal = launcherRefusal(pod, kSandboxContainer);
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
  const Clock& clock = client_.clock();
  const auto gone = [&] {
    State state;
    state.status = {Code::kNotFound, "kubernetes: the Pod " + id + " is gone"};
    return state;
  };
  backend::Status last;  // the latest failure of the API server, until a list succeeds
  int expired_in_a_row = 0;
  while (!cancelled()) {
    const State state = stateNow(id);
    if (state.status.ok() || state.status.code == Code::kNotFound) {
      last = {};
      if (!state.status.ok() || done(state)) {
        return state;
      }
      // From the version read, the watch gives every change after it, then ends.
      std::string version = state.resource_version;
      while (!cancelled() && clock.now() < deadline) {
        std::optional<State> reached;
        bool deleted = false;
        const auto began = clock.now();
        const KubeClient::WatchReply watched = client_.watch(
            podsPath() + nameSelector(id) +
                "&watch=1&allowWatchBookmarks=false&resourceVersion=" + version +
                "&timeoutSeconds=" +
                std::to_string(watchSeconds(deadline, began, client_.timeout())),
            [&](const json::ObjectPtr& event) {
              if (cancelled()) {
                return false;
              }
              State seen = stateOf(json::object(event, "object"));
              version = seen.resource_version.empty() ? version : seen.resource_version;
              if (done(seen)) {  // a DELETED event's object is the Pod's last state
                reached = seen;
                return false;
              }
              deleted = json::string(event, "type") == std::string("DELETED");
              return !deleted;
            });
        if (reached) {
          return *reached;
        }
        if (deleted) {
          return gone();
        }
        if (watched.expired) {
          if (++expired_in_a_row > 1) {
            // Expired again at once: the API server compacts faster than it is read.
            pause(kBusyPause);
          }
          break;  // list again, and watch from there
        }
        expired_in_a_row = 0;
        if (!watched.status.ok()) {
          if (!transient(watched.status)) {
            State failed;
            failed.status = watched.status;
            return failed;
          }
          last = watched.status;
          pause(kBusyPause);
          break;
        }
        if (clock.now() - began < kShortestWatch) {
          // Ended at once without a word: a proxy, or a server ignoring timeoutSeconds.
          pause(kBusyPause);
        }
      }
    } else if (!transient(state.status)) {
      return state;
    } else {
      last = state.status;
      pause(kBusyPause);
    }
    if (clock.now() >= deadline) {
      State timed_out;
      timed_out.status = {Code::kTimeout, "kubernetes: the Pod " + id +
                                              " did not reach the state waited for in time" +
                                              (last.ok() ? "" : " (" + last.message + ")")};
      return timed_out;
    }
  }
  return gone();
}

std::string PodApi::attachPath(const std::string& id) const {
  return podPath(id) + "/attach?container=" + kSandboxContainer +
         "&stdin=true&stdout=true&stderr=true";
}

backend::Status PodApi::kill(const std::string& id) const {
  return client_.call("DELETE", podPath(id) + "?gracePeriodSeconds=1").status;
}

backend::Status PodApi::remove(const std::string& id) const {
  if (const backend::Status status = kill(id); !status.ok() && status.code != Code::kNotFound) {
    return status;
  }
  std::lock_guard lock(mutex_);
  sent_.erase(id);
  return {};
}

backend::ListReply PodApi::list(const std::string& label_key) const {
  backend::ListReply result;
  const ApiReply reply = client_.call("GET", podsPath() + "?labelSelector=" + encoded(label_key));
  if (!reply.status.ok()) {
    result.status = reply.status;
    return result;
  }
  result.sandboxes = sandboxesOf(reply.body);
  return result;
}

}  // namespace scs::kubernetes
