#pragma once

// Readings of the API server's answers that the Kubernetes backend acts on (issue 16): whether
// the namespace's NetworkPolicies cut sandbox Pods off the network, how a Pod's sandbox container
// ended, what the cluster can hold, which sandboxes a list holds. Pure functions over the JSON
// the API returns; anything missing or malformed reads as the weaker, or the emptier, answer.

#include <scs/backend/backend.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "json_access.h"

namespace scs::kubernetes {

using Labels = std::map<std::string, std::string>;

// The labels of an object (its metadata.labels).
Labels labelsOf(const json::ObjectPtr& object);

// Whether a LabelSelector ({matchLabels, matchExpressions}) selects a Pod with `labels`. An
// empty selector selects every Pod; a malformed one selects none (it would not isolate any).
bool selects(const json::ObjectPtr& selector, const Labels& labels);

// Whether the NetworkPolicies of a namespace (a NetworkPolicyList) cut a Pod with `labels` off
// the network in both directions. NetworkPolicies add up: a Pod is isolated in a direction once
// any policy that selects it names that direction in policyTypes, and then every rule of every
// policy that selects it is allowed. So at least one selecting policy must isolate each of
// Ingress and Egress, and no selecting policy may carry an ingress or egress rule at all. One
// sentence per problem; empty when the Pod is isolated. (That the network plugin enforces
// NetworkPolicy at all is the cluster's to say: docs/SCALING.md will list it.)
std::vector<std::string> isolationProblems(const json::ObjectPtr& policy_list,
                                           const Labels& labels);

// How the container named `container` of `pod` ended, from the Pod's status:
// - terminated: exited, with its exitCode, and oom_killed when the reason is OOMKilled;
//   killed_outside too when the Pod failed as a whole with a reason (its deadline, an eviction),
//   has a deletionTimestamp, or a DisruptionTarget condition (the backend clears it when the
//   deletion was its own);
// - the Pod failed as a whole (its active deadline passed, it was evicted, or it failed
//   without the container's record): exited, killed_outside, with the reason as the message;
// - waiting for a reason that does not pass by itself (an image that cannot be pulled, a
//   container that cannot be created): exited, with engine_error;
// - otherwise (pending, running): not exited.
backend::Exit exitOf(const json::ObjectPtr& pod, const std::string& container);

// The launcher's refusal as the kubelet kept it for the container named `container`: the last
// line of its terminated state's message (with terminationMessagePolicy FallbackToLogsOnError,
// the tail of its output when it failed and wrote no termination log) when that line is the
// launcher's ("sandbox launcher: rejected ..."), at most 512 bytes, cut on a character's
// boundary; empty otherwise.
std::string launcherRefusal(const json::ObjectPtr& pod, const std::string& container);

// Whether the container named `container` of `pod` runs now (its state is running).
bool containerRunning(const json::ObjectPtr& pod, const std::string& container);

// What the cluster can hold for sandboxes: the allocatable cpu and memory of its nodes (a
// NodeList) that are Ready and schedulable (not cordoned, no NoSchedule or NoExecute taint),
// each less what other Pods placed on it request (a PodList of the Pods that have not ended:
// the scheduler's sum of their containers' requests, or their largest init container's when
// more, and their overhead), lowered to what the namespace's ResourceQuotas (a
// ResourceQuotaList: limits.*, requests.* or the bare names) leave: hard less what Pods other
// than sandboxes use of it (status.used less the sandboxes' own). This server's sandboxes, the
// Pods for which `own(namespace, name)` holds, are not taken: the core counts its own runs
// against this capacity. Every other Pod is, another replica's sandboxes included. Cores are
// whole cores, rounded down.
using OwnPod = std::function<bool(const std::string& namespace_name, const std::string& name)>;
backend::Capacity capacityOf(const json::ObjectPtr& node_list, const json::ObjectPtr& pod_list,
                             const json::ObjectPtr& quota_list, const OwnPod& own);

// The Pods of a PodList as sandboxes: each Pod's name as its id, with its labels.
std::vector<backend::SandboxInfo> sandboxesOf(const json::ObjectPtr& pod_list);

}  // namespace scs::kubernetes
