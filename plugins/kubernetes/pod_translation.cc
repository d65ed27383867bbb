// SandboxSpec to Pod: what no Pod can carry refused, the container command with the launcher's
// --rlimits, --masked, --readonly and --confine, and the Pod body with every control explicit.

#include "pod_translation.h"

#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <limits>
#include <set>

#include "rlimits.h"
#include "text.h"

namespace scs::kubernetes {

namespace launcher = backend::launcher;
namespace {

using backend::Code;
using backend::Posture;
using backend::TmpfsMount;
using json::ArrayPtr;
using json::ObjectPtr;
using json::objects;

struct Owner {
  std::int64_t uid = -1;
  std::int64_t gid = -1;
};

// "uid:gid", both numeric; nullopt otherwise.
std::optional<Owner> parseOwner(std::string_view text) {
  const std::vector<std::string_view> parts = text::split(text, ':');
  constexpr std::int64_t kMost = std::numeric_limits<std::int64_t>::max();
  const auto uid = parts.size() == 2 ? text::wholeNumber(parts[0], 0, kMost) : std::nullopt;
  const auto gid = parts.size() == 2 ? text::wholeNumber(parts[1], 0, kMost) : std::nullopt;
  if (!uid || !gid) {
    return std::nullopt;
  }
  return Owner{*uid, *gid};
}

// The value after the last `flag` of a command; nullopt when it has none.
std::optional<std::string_view> lastValue(const std::vector<std::string>& command,
                                          const std::string& flag) {
  const auto found = std::find(command.rbegin(), command.rend(), flag);
  if (found == command.rend() || found == command.rbegin()) {
    return std::nullopt;
  }
  return *(found - 1);
}

bool isLabelValue(std::string_view value) {
  const auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (value.size() > 63) {
    return false;
  }
  if (value.empty()) {
    return true;
  }
  return alnum(value.front()) && alnum(value.back()) &&
         std::all_of(value.begin(), value.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A label key without a prefix: a name of at most 63 characters, as a value but never empty.
bool isLabelKey(std::string_view key) { return !key.empty() && isLabelValue(key); }

bool isDnsLabel(std::string_view name) {
  return !name.empty() && name.size() <= 63 && name.front() != '-' && name.back() != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
         });
}

ObjectPtr seccompProfile(const Posture& p, const PodSettings& settings) {
  ObjectPtr profile = json::newObject();
  if (p.seccomp_profile.empty()) {
    profile->set("type", "RuntimeDefault");
  } else {
    profile->set("type", "Localhost");
    profile->set("localhostProfile", settings.seccomp_localhost);
  }
  return profile;
}

ObjectPtr resources(const Posture& p) {
  ObjectPtr amounts = json::newObject();
  amounts->set("cpu", std::to_string(p.nano_cpus / 1'000'000) + "m");
  amounts->set("memory", std::to_string(p.memory_bytes));
  ObjectPtr result = json::newObject();
  result->set("limits", amounts);
  result->set("requests", amounts);  // equal: the Guaranteed class, which never swaps
  return result;
}

ObjectPtr memoryVolume(const std::string& name, std::uint64_t size_bytes) {
  ObjectPtr empty_dir = json::newObject();
  empty_dir->set("medium", "Memory");
  empty_dir->set("sizeLimit", std::to_string(size_bytes));
  ObjectPtr volume = json::newObject();
  volume->set("name", name);
  volume->set("emptyDir", empty_dir);
  return volume;
}

ObjectPtr mountOf(const std::string& name, const std::string& path) {
  ObjectPtr mount = json::newObject();
  mount->set("name", name);
  mount->set("mountPath", path);
  return mount;
}

}  // namespace

std::string unsupportedReason(const backend::Posture& p, const PodSettings& settings) {
  if (p.image.empty()) {
    return "the spec names no image";
  }
  if (p.runtime == "runsc") {
    return "the launcher's --confine needs Landlock, which gVisor (runsc) does not have, so "
           "every sandbox would end before its code ran: use --runtime runc, with a RuntimeClass "
           "runc whose sandboxes run on a kernel with Landlock (runc, or a VM runtime whose "
           "kernel has it)";
  }
  const std::optional<Owner> owner = parseOwner(p.user);
  if (!owner) {
    return "the sandbox user must be numeric uid:gid, got '" + p.user + "'";
  }
  if (owner->uid == 0) {
    return "the sandbox user must not be root (runAsNonRoot)";
  }
  if (p.privileged || !p.all_capabilities_dropped || !p.added_capabilities.empty() ||
      !p.no_new_privileges || !p.read_only_root || !p.network_disabled || !p.seccomp_enabled) {
    return "the spec asks for a weaker setting than a sandbox Pod allows";
  }
  if (!p.host_namespaces.empty() || !p.host_mounts.empty() || !p.devices.empty()) {
    return "the spec shares host namespaces, mounts or devices";
  }
  if (p.engine_init) {
    return "the spec asks for the engine's init as PID 1, which a Pod does not have";
  }
  for (const auto* list : {&p.masked_paths, &p.readonly_paths}) {
    for (const std::string& path : *list) {
      if (path.empty() || path.front() != '/' || path.find(',') != std::string::npos) {
        return "a masked or read-only path must be absolute and without a comma, got '" + path +
               "'";
      }
    }
  }
  if (!p.seccomp_profile.empty() && settings.seccomp_localhost.empty()) {
    return "a Pod cannot carry a seccomp profile's text: name the node path that holds the "
           "core's profile (seccomp-localhost)";
  }
  if (!p.seccomp_profile.empty() && p.seccomp_profile != settings.seccomp_localhost_text) {
    return "the core's seccomp profile is not the one the nodes hold at " +
           settings.seccomp_localhost;
  }
  if (p.memory_bytes <= 0 || p.memory_swap_bytes != p.memory_bytes) {
    return "memory must be capped, with no swap";
  }
  if (p.nano_cpus <= 0 || p.nano_cpus % 1'000'000 != 0) {
    return "the cpu limit must be a whole number of millicores";
  }
  if (p.shm_bytes <= 0) {
    return "/dev/shm must be capped";
  }
  for (const TmpfsMount& mount : p.tmpfs) {
    if (mount.size_bytes == 0 || mount.path.empty() || mount.path == kShmPath) {
      return "every scratch mount needs a path and a size";
    }
  }
  return {};
}

namespace {

// The first reason `spec` cannot be carried by a Pod exactly; empty when it can.
std::string specUnsupportedReason(const backend::SandboxSpec& spec, const PodSettings& settings) {
  if (std::string reason = unsupportedReason(spec.posture, settings); !reason.empty()) {
    return reason;
  }
  if (spec.posture.init_command != spec.command || spec.command.empty()) {
    return "the launcher must be the container's command (PID 1)";
  }
  if (!isDnsLabel(podName(spec.run_id))) {
    return "the run id '" + spec.run_id + "' does not make a valid Pod name";
  }
  for (const auto& [key, value] : spec.labels) {
    if (!isLabelKey(key) || !isLabelValue(value)) {
      return "the label " + key + "=" + value + " is not a valid Kubernetes label";
    }
  }
  for (const std::string& entry : spec.env) {
    if (entry.find('=') == std::string::npos || entry.front() == '=') {
      return "an environment entry is not KEY=value";
    }
  }
  return {};
}

}  // namespace

std::string podName(const std::string& run_id) { return "scs-" + run_id; }

std::vector<std::string> containerCommand(const backend::SandboxSpec& spec) {
  const Posture& p = spec.posture;
  std::vector<std::string> command = spec.command;
  std::vector<std::string> limits;
  for (const rlimits::Rlimit& limit : rlimits::of(p)) {
    limits.push_back(limit.name + "=" + std::to_string(limit.value));
  }
  command.insert(command.end(), {std::string(launcher::kFlagRlimits), text::join(limits, ",")});
  for (const auto& [flag, paths] : {std::pair{launcher::kFlagMasked, &p.masked_paths},
                                    std::pair{launcher::kFlagReadonly, &p.readonly_paths}}) {
    if (!paths->empty()) {
      command.insert(command.end(), {std::string(flag), text::join(*paths, ",")});
    }
  }
  // What no Pod field carries, Landlock gives from PID 1 on: nothing is execve'd from the
  // emptyDirs, and the kubelet's termination log and /etc/hosts, files of the node's disk, are not
  // written (docs/SECURITY.md, 2b). The core accepts the emptyDirs only with this flag.
  // A Pod has a network interface whatever its NetworkPolicy (which a CNI may not enforce, and
  // which never covers its own node): the program opens no socket but AF_UNIX, and the kubelet's
  // KUBERNETES_SERVICE_* variables, set even without service links, leave its environment.
  command.emplace_back(launcher::kFlagNoNetwork);
  command.emplace_back(launcher::kFlagConfine);
  return command;
}

std::vector<std::string> launcherPaths(const std::vector<std::string>& command,
                                       const std::string& flag) {
  const std::optional<std::string_view> value = lastValue(command, flag);
  if (!value) {
    return {};
  }
  // As the launcher's parse_paths() reads it: absolute paths, comma-separated.
  std::vector<std::string> paths;
  for (const std::string_view path : text::split(*value, ',')) {
    if (path.empty() || path.front() != '/' || path.find('\0') != std::string_view::npos) {
      return {};
    }
    paths.emplace_back(path);
  }
  return paths;
}

void readLauncherLimits(const std::vector<std::string>& command, backend::Posture* posture) {
  const std::optional<std::string_view> value =
      lastValue(command, std::string(launcher::kFlagRlimits));
  if (!value) {
    return;
  }
  // As the launcher's parse_rlimits() reads it: NAME=N items, each name once, nothing else.
  backend::Posture read = *posture;
  std::set<std::string_view> seen;
  for (const std::string_view item : text::split(*value, ',')) {
    const std::vector<std::string_view> parts = text::split(item, '=');
    const auto number =
        parts.size() == 2 ? text::wholeNumber(parts[1], 0, std::numeric_limits<std::int64_t>::max())
                          : std::nullopt;
    if (!number || !seen.insert(parts[0]).second || !rlimits::set(&read, parts[0], *number)) {
      return;
    }
  }
  *posture = read;
}

PodManifest podFor(const backend::SandboxSpec& spec, const PodSettings& settings,
                   std::int64_t active_deadline_seconds) {
  if (const std::string reason = specUnsupportedReason(spec, settings); !reason.empty()) {
    return {{Code::kUnsupported, "kubernetes: " + reason}, nullptr};
  }
  if (active_deadline_seconds <= 0) {
    return {{Code::kInternal, "kubernetes: a Pod needs a positive active deadline"}, nullptr};
  }
  const Posture& p = spec.posture;
  const Owner owner = *parseOwner(p.user);

  ObjectPtr labels = json::newObject();
  for (const auto& [key, value] : spec.labels) {
    labels->set(key, value);
  }
  ObjectPtr metadata = json::newObject();
  metadata->set("name", podName(spec.run_id));
  metadata->set("namespace", settings.namespace_name);
  metadata->set("labels", labels);

  ObjectPtr context = json::newObject();
  context->set("runAsNonRoot", true);
  context->set("runAsUser", static_cast<Poco::Int64>(owner.uid));
  context->set("runAsGroup", static_cast<Poco::Int64>(owner.gid));
  context->set("privileged", false);
  context->set("allowPrivilegeEscalation", false);
  context->set("readOnlyRootFilesystem", true);
  ObjectPtr capabilities = json::newObject();
  capabilities->set("drop", json::arrayOf({"ALL"}));
  context->set("capabilities", capabilities);
  context->set("procMount", "Default");
  context->set("seccompProfile", seccompProfile(p, settings));

  ArrayPtr env = json::emptyArray();
  for (const std::string& entry : spec.env) {
    const std::size_t equals = entry.find('=');
    ObjectPtr variable = json::newObject();
    variable->set("name", entry.substr(0, equals));
    variable->set("value", entry.substr(equals + 1));
    env->add(variable);
  }

  ArrayPtr volumes = json::emptyArray();
  ArrayPtr mounts = json::emptyArray();
  for (std::size_t i = 0; i < p.tmpfs.size(); ++i) {
    const std::string name = "scratch-" + std::to_string(i);
    volumes->add(memoryVolume(name, p.tmpfs[i].size_bytes));
    mounts->add(mountOf(name, p.tmpfs[i].path));
  }
  volumes->add(memoryVolume("shm", static_cast<std::uint64_t>(p.shm_bytes)));
  mounts->add(mountOf("shm", kShmPath));

  ObjectPtr container = json::newObject();
  container->set("name", kSandboxContainer);
  container->set("image", p.image);
  container->set("imagePullPolicy", "IfNotPresent");
  container->set("command", json::arrayOf(containerCommand(spec)));
  container->set("env", env);
  container->set("workingDir", spec.working_dir);
  container->set("stdin", true);
  container->set("stdinOnce", true);  // stdin ends with the first attach that closes it
  container->set("tty", false);
  container->set("securityContext", context);
  // The launcher's refusals come before it reads stdin, and an attach replays nothing written
  // before it: the kubelet keeps the tail of a failed container's output as its message.
  container->set("terminationMessagePolicy", "FallbackToLogsOnError");
  container->set("resources", resources(p));
  container->set("volumeMounts", mounts);
  ArrayPtr containers = json::emptyArray();
  containers->add(container);

  ObjectPtr pod_context = json::newObject();
  pod_context->set("runAsNonRoot", true);
  pod_context->set("runAsUser", static_cast<Poco::Int64>(owner.uid));
  pod_context->set("runAsGroup", static_cast<Poco::Int64>(owner.gid));
  pod_context->set("seccompProfile", seccompProfile(p, settings));

  ObjectPtr dns = json::newObject();
  dns->set("nameservers", json::arrayOf({settings.nameserver}));

  ObjectPtr pod_spec = json::newObject();
  pod_spec->set("restartPolicy", "Never");
  pod_spec->set("activeDeadlineSeconds", static_cast<Poco::Int64>(active_deadline_seconds));
  // Not 0: a Pod deleted with no grace leaves the API at once, while its container may run on
  // until the kubelet notices, out of reach of the startup sweep.
  pod_spec->set("terminationGracePeriodSeconds", 1);
  pod_spec->set("automountServiceAccountToken", false);
  pod_spec->set("enableServiceLinks", false);
  pod_spec->set("hostNetwork", false);
  pod_spec->set("hostPID", false);
  pod_spec->set("hostIPC", false);
  pod_spec->set("shareProcessNamespace", false);
  pod_spec->set("dnsPolicy", "None");
  pod_spec->set("dnsConfig", dns);
  pod_spec->set("hostname", spec.hostname);
  pod_spec->set("runtimeClassName", p.runtime);
  pod_spec->set("securityContext", pod_context);
  pod_spec->set("containers", containers);
  pod_spec->set("volumes", volumes);

  ObjectPtr pod = json::newObject();
  pod->set("apiVersion", "v1");
  pod->set("kind", "Pod");
  pod->set("metadata", metadata);
  pod->set("spec", pod_spec);
  return {{}, pod};
}

}  // namespace scs::kubernetes
