#pragma once

// The sandbox Pods of one namespace through the API server (issue 16): the calls of the
// RuntimeBackend contract that are plain REST, each one request or two, in the contract's terms.
// The kubernetes backend (kubernetes_backend.h) adds attach and the wait on a Pod's end.

#include <scs/backend/backend.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kube_client.h"
#include "pod_translation.h"

namespace scs::kubernetes {

// Added to a sandbox's deadline label for the Pod's activeDeadlineSeconds: the kubelet's end of
// a Pod is the backstop, the core's own timer ends the run first.
inline constexpr std::int64_t kDeadlineGraceSeconds = 30;

// How long one watch of a Pod lasts before the API server ends it (timeoutSeconds), and so how
// often a wait sees that it was cancelled.
inline constexpr int kWatchSeconds = 2;

// How long a create waits before it tries again while the namespace's quota is exceeded.
inline constexpr auto kQuotaPause = std::chrono::milliseconds(500);

// How long a wait on a Pod pauses before it asks again an API server that failed (kTimeout,
// kUnavailable) or ended a watch at once.
inline constexpr auto kBusyPause = std::chrono::milliseconds(200);

// How long capacity() uses a list of the cluster's Pods before it reads one again.
inline constexpr auto kPodsListReused = std::chrono::seconds(10);

// Its deadlines and pauses are on the client's clock (KubeClient::clock()).
class PodApi {
 public:
  PodApi(const KubeClient& client, PodSettings settings);

  const PodSettings& settings() const { return settings_; }

  // Why the namespace cannot hold sandboxes, one sentence each; empty when it can: its
  // NetworkPolicies must cut a Pod with the managed label off the network both ways.
  std::vector<std::string> clusterProblems() const;

  // What the Ready nodes can hold for sandboxes (their allocatable cpu and memory less what
  // other Pods placed there request), lowered to what the namespace's ResourceQuotas leave them
  // (capacityOf()). The Pods are the cluster's, listed at most every kPodsListReused; where the
  // server may not list them (403), the namespace's alone. `own(name)`: whether the Pod of
  // that name in this namespace is one of this server's sandboxes.
  backend::CapacityReply capacity(const std::function<bool(const std::string&)>& own) const;

  // The RuntimeClass `name` as the API server holds it (read once, then remembered, unless
  // `fresh`): its admission merges its scheduling (nodeSelector, tolerations) into every Pod of
  // it. kNotFound when the cluster has none by that name.
  struct RuntimeClassReply {
    backend::Status status;
    json::ObjectPtr runtime_class;
  };
  RuntimeClassReply runtimeClass(const std::string& name, bool fresh = false) const;

  // POSTs the Pod for `spec`; its name is the sandbox id. Its activeDeadlineSeconds runs from
  // `now_unix` to the spec's deadline label and kDeadlineGraceSeconds more; a spec without that
  // label, or one podFor() refuses, is kUnsupported; a name taken is kRejected. While the
  // namespace's ResourceQuota is exceeded (403, "exceeded quota"), as while sandboxes of other
  // runs hold it, the create waits and tries again, every kQuotaPause, until `quota_deadline`;
  // then kUnavailable with the API's words, at once when the Pod asks for more than the quota
  // allows at all.
  backend::CreateReply create(const backend::SandboxSpec& spec, std::int64_t now_unix,
                              std::chrono::steady_clock::time_point quota_deadline) const;

  // Reads the Pod back as the API server stored it: its posture, with network_disabled only
  // when the namespace's policies isolate it. kRejected, with every reason, when the stored Pod
  // deviates from what podFor() wrote for the spec create() was given in a control the posture
  // does not hold (podDeviations), or the policies do not isolate it; kNotFound for a Pod this
  // PodApi did not create.
  backend::InspectReply inspect(const std::string& id) const;

  // Where the Pod's sandbox container is now, from a list of that one Pod: how it ended so far
  // (exitOf), or whether it runs, and the list's resourceVersion to watch from; kNotFound when
  // the Pod is gone.
  struct State {
    backend::Status status;
    backend::Exit exit;
    bool running = false;
    std::string refusal;           // the launcher's, as the kubelet kept it (launcherRefusal)
    std::string resource_version;  // to watch from: the list's, or the watched Pod's
  };
  State stateNow(const std::string& id) const;

  // Waits until `done(state)` holds for the Pod, from a list of that one Pod and then a watch
  // from the list's resourceVersion, so no change between them is missed; a watch the API server
  // expired (410 Gone) starts again from a list, and a slow or busy API server (kTimeout,
  // kUnavailable) is waited out. Returns the state that satisfied `done`; kNotFound once the Pod is
  // deleted; kTimeout at `deadline` (up to a second late: a watch lasts whole seconds); kNotFound
  // too once `cancelled()` (checked at each event and between watches, so at least every
  // kWatchSeconds). Any other failure ends it with that status.
  State awaitState(const std::string& id, const std::function<bool(const State&)>& done,
                   std::chrono::steady_clock::time_point deadline,
                   const std::function<bool()>& cancelled) const;

  // The path of the sandbox container's attach, with stdin, stdout and stderr.
  std::string attachPath(const std::string& id) const;

  // DELETE as remove() does, but the Pod stays this PodApi's until remove(); kNotFound when it
  // is gone.
  backend::Status kill(const std::string& id) const;

  // DELETE with gracePeriodSeconds=1: the kubelet kills the container within a second, and the
  // Pod stays listed until it has (a grace of 0 would drop it from the API at once, while its
  // container may run on). Gone already is kOk.
  backend::Status remove(const std::string& id) const;

  // The Pods that carry `label_key`, whatever its value.
  backend::ListReply list(const std::string& label_key) const;

 private:
  std::string podPath(const std::string& id) const;
  std::string podsPath() const;
  // "?fieldSelector=metadata.name%3D<id>", for a list or a watch of that one Pod.
  static std::string nameSelector(const std::string& id);
  static State stateOf(const json::ObjectPtr& pod);
  // GET of the namespace's NetworkPolicyList.
  ApiReply policies() const;
  // Returns once the client's clock has moved on by `length`.
  void pause(std::chrono::milliseconds length) const;

  const KubeClient& client_;
  PodSettings settings_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, backend::SandboxSpec> sent_;  // by Pod name, until removed
  mutable std::map<std::string, json::ObjectPtr> runtime_classes_;  // by name, as read
  mutable json::ObjectPtr pods_listed_;  // the cluster's Pods, for capacity()
  mutable std::chrono::steady_clock::time_point pods_listed_at_;
  mutable std::mutex pause_mutex_;  // of the pauses' waits, which no one notifies
  mutable std::condition_variable pause_cv_;
};

}  // namespace scs::kubernetes
