#pragma once

// A Pod as the API server stored it, after admission, read back (issue 16): the Posture the
// core checks, and what the Pod must still show that the Posture does not hold. Pure functions.

#include <scs/backend/backend.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json_access.h"
#include "pod_translation.h"

namespace scs::kubernetes {

// Reads the posture of a Pod from the object the API server returns (GET .../pods/{name}).
// A pointer field that is absent reads as the weak value; a plain boolean the API server omits
// when false (hostNetwork, hostPID, hostIPC) reads as false, as the API defines it. No Pod
// field disables the network: `network_isolated` is the plugin's own finding that a deny-all
// NetworkPolicy of its namespace selects this Pod, and only then does the Pod read as
// network_disabled (with no host network). What no field carries reads as the weak value.
backend::Posture postureFromPod(const json::ObjectPtr& pod, const PodSettings& settings,
                                bool network_isolated);

// The controls the Posture does not hold that the stored Pod must still show, one sentence
// each; empty when all hold: restartPolicy Never, no service-account token, no service links,
// dnsPolicy None with only the settings' nameserver, an active deadline, one container and no
// init or ephemeral ones, cpu and memory limits equal to requests, one stdin that ends, no
// terminal; exactly the command and environment `sent` asked for (no args, no value from a
// secret); and none of what podFor() never writes and a webhook could add: runtime annotations
// (gVisor's, CRI-O's, AppArmor's), AppArmor, SELinux, supplemental groups, fsGroup, sysctls,
// lifecycle hooks and probes (the kubelet would run them in the sandbox), host ports, resource
// claims, a /proc that is not masked; and nothing that steers where it runs but the default
// scheduler, the nodeSelector and tolerations of `runtime_class` (the Pod's RuntimeClass as the
// API server holds it: its admission merges its scheduling into the Pod; null when it has
// none), and the tolerations default admission adds (not-ready and unreachable NoExecute, and
// memory-pressure NoSchedule).
std::vector<std::string> podDeviations(const json::ObjectPtr& pod, const PodSettings& settings,
                                       const backend::SandboxSpec& sent,
                                       const json::ObjectPtr& runtime_class);

// A resource quantity as the API server writes it ("2", "500m", "5Gi", "1e3", "1.5"), scaled
// by `unit` (1000 reads cpu in millicores, 1 reads bytes), rounded up; nullopt when malformed.
std::optional<std::int64_t> parseQuantity(std::string_view text, std::int64_t unit);

// The quantity `key` of `amounts` (a resources map: limits, allocatable, a quota's hard), parsed
// as parseQuantity() does; nullopt when absent or malformed.
std::optional<std::int64_t> quantityOf(const json::ObjectPtr& amounts, const std::string& key,
                                       std::int64_t unit);

}  // namespace scs::kubernetes
