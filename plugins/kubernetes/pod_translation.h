#pragma once

// The Kubernetes backend's translation (issue 16): a SandboxSpec into the one Pod that carries
// it, and what no Pod can carry. Pure functions: no API calls, no clock. Reading a stored Pod
// back is pod_readback.h.

#include <scs/backend/backend.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json_access.h"

namespace scs::kubernetes {

// Operator settings (backend options) that shape every sandbox Pod.
struct PodSettings {
  std::string namespace_name = "scs-sandboxes";
  // The one nameserver of a sandbox (dnsPolicy None): an address that answers nothing, so that
  // no name resolves, the cluster's own service names least of all.
  std::string nameserver = "127.0.0.1";
  // A Localhost seccomp profile (a path under the kubelet's seccomp directory) and the text
  // the operator installed there on every node. A Pod cannot carry profile text: a spec whose
  // profile is this text runs under this path, one with another profile is refused, and one
  // with none runs under RuntimeDefault. The plugin cannot read a node's file, so the read-back
  // takes the operator's word for what the path holds (docs/SCALING.md will say so).
  std::string seccomp_localhost;
  std::string seccomp_localhost_text;
};

// The name of the one container of a sandbox Pod, and where its /dev/shm volume is mounted.
inline constexpr const char* kSandboxContainer = "sandbox";
inline constexpr const char* kShmPath = "/dev/shm";

// The Pod's name for a run: "scs-" and the run id, which is lowercase hex with a prefix of
// lowercase letters and dashes, so a valid DNS-1123 label.
std::string podName(const std::string& run_id);

// The sandbox container's command: the launcher's argv as the spec says, then `--rlimits` with
// the posture's resource limits (nofile, nproc, fsize, and core=0 when core dumps are off), and
// `--masked` and `--readonly` with its masked and read-only paths, and `--confine`. No Pod field
// sets a process's limits, and the API does not show which paths the runtime masks: the
// launcher, PID 1 from the core's read-only image, lowers its own limits to these and checks
// each path before anything else runs, ending the sandbox when one is not masked or read-only.
// No emptyDir takes noexec, nosuid or nodev, and the kubelet mounts files of the node's disk
// into every container: `--confine` has the launcher keep, with Landlock, execution beneath
// /usr and writes to the scratch space, or end the sandbox where it cannot (landlock.py;
// policy::launcherConfines() is what the core accepts in their place).
std::vector<std::string> containerCommand(const backend::SandboxSpec& spec);

// The paths a container command's last `flag` ("--masked", "--readonly") names; empty when it
// names none, or its value is malformed.
std::vector<std::string> launcherPaths(const std::vector<std::string>& command,
                                       const std::string& flag);

// Sets the resource limits of `posture` (processes, open files, file size, core dumps off) to
// what a container command's last `--rlimits` gives the launcher; leaves them as they are when it
// gives none, or one malformed.
void readLauncherLimits(const std::vector<std::string>& command, backend::Posture* posture);

struct PodManifest {
  backend::Status status;  // kUnsupported when the spec cannot be carried exactly
  json::ObjectPtr pod;     // the exact body of POST /api/v1/namespaces/{ns}/pods when ok
};

// The first reason a sandbox of `posture` cannot be carried by a Pod exactly (a weaker setting
// than a sandbox Pod allows, a seccomp profile's text the nodes do not hold, ...); empty when it
// can. podFor() refuses a spec for it, and supports() refuses to start for it.
std::string unsupportedReason(const backend::Posture& posture, const PodSettings& settings);

// Translates `spec` into its Pod, every control explicit. `active_deadline_seconds` is the
// longest the Pod may run, counted by the kubelet from its start (the run's deadline, as the
// core's own timer counts it, plus a margin). A spec that asks for what this translation does
// not write (an added capability, host namespaces, mounts or devices, privileges), a user that
// is not numeric or is root, or a label Kubernetes would refuse fails with kUnsupported.
PodManifest podFor(const backend::SandboxSpec& spec, const PodSettings& settings,
                   std::int64_t active_deadline_seconds);

}  // namespace scs::kubernetes
