// A stored Pod read back: its posture from the effective security context, resources and
// volumes; every deviation from what podFor() wrote, one sentence each; resource quantities.

#include "pod_readback.h"

#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

namespace scs::kubernetes {

namespace launcher = backend::launcher;
namespace {

using backend::Posture;
using backend::TmpfsMount;
using json::ObjectPtr;
using json::objects;

// The effective value of a security-context field: the container's, else the Pod's.
std::optional<std::int64_t> effectiveInteger(const ObjectPtr& container_context,
                                             const ObjectPtr& pod_context, const char* key) {
  if (auto value = json::integer(container_context, key)) {
    return value;
  }
  return json::integer(pod_context, key);
}

ObjectPtr effectiveObject(const ObjectPtr& container_context, const ObjectPtr& pod_context,
                          const char* key) {
  if (ObjectPtr value = json::object(container_context, key)) {
    return value;
  }
  return json::object(pod_context, key);
}

// The sandbox container of a stored Pod: the one named kSandboxContainer.
ObjectPtr sandboxContainer(const ObjectPtr& spec) {
  for (const ObjectPtr& container : objects(json::array(spec, "containers"))) {
    if (json::string(container, "name") == std::string(kSandboxContainer)) {
      return container;
    }
  }
  return nullptr;
}

// One toleration as the API compares them: key, operator (Equal when unset), value, effect.
bool sameToleration(const ObjectPtr& a, const ObjectPtr& b) {
  const auto field = [](const ObjectPtr& t, const char* key, const char* unset) {
    return json::string(t, key).value_or(unset);
  };
  return field(a, "key", "") == field(b, "key", "") &&
         field(a, "operator", "Equal") == field(b, "operator", "Equal") &&
         field(a, "value", "") == field(b, "value", "") &&
         field(a, "effect", "") == field(b, "effect", "");
}

// What default admission adds to every Pod that does not tolerate it already:
// DefaultTolerationSeconds, the not-ready and unreachable NoExecute taints (for 300 s); and
// PodTolerationRestriction, where enabled, the memory-pressure NoSchedule taint to a Pod that
// is not BestEffort (plugin/pkg/admission/podtolerationrestriction). None lets a Pod onto a node
// it would not be scheduled on when healthy.
bool toleratedByAdmission(const ObjectPtr& toleration) {
  const std::string key = json::string(toleration, "key").value_or("");
  const std::string effect = json::string(toleration, "effect").value_or("");
  const std::string op = json::string(toleration, "operator").value_or("Equal");
  return ((key == "node.kubernetes.io/not-ready" || key == "node.kubernetes.io/unreachable") &&
          effect == "NoExecute") ||
         (key == "node.kubernetes.io/memory-pressure" && effect == "NoSchedule" && op == "Exists");
}

std::int64_t quantity(const ObjectPtr& amounts, const char* key, std::int64_t unit) {
  return quantityOf(amounts, key, unit).value_or(0);
}

}  // namespace

backend::Posture postureFromPod(const json::ObjectPtr& pod, const PodSettings& settings,
                                bool network_isolated) {
  Posture p;
  const ObjectPtr spec = json::object(pod, "spec");
  const ObjectPtr container = sandboxContainer(spec);
  const ObjectPtr context = json::object(container, "securityContext");
  const ObjectPtr pod_context = json::object(spec, "securityContext");

  p.image = json::string(container, "image").value_or("");
  p.runtime = json::string(spec, "runtimeClassName").value_or("");
  const auto uid = effectiveInteger(context, pod_context, "runAsUser");
  const auto gid = effectiveInteger(context, pod_context, "runAsGroup");
  if (uid && gid) {
    p.user = std::to_string(*uid) + ":" + std::to_string(*gid);
  }

  // Plain booleans of the Pod spec: the API server leaves out one that is false.
  const auto shared = [&](const char* key) { return json::boolean(spec, key).value_or(false); };
  if (shared("hostNetwork")) {
    p.host_namespaces.push_back("network");
  }
  if (shared("hostPID")) {
    p.host_namespaces.push_back("pid");
  }
  if (shared("hostIPC")) {
    p.host_namespaces.push_back("ipc");
  }
  const std::vector<std::string> command = json::strings(json::array(container, "command"));
  // Two layers: the launcher refuses the program every IP socket, and the namespace's policies
  // cut the Pod off (for what the launcher's filter cannot cover: its own node's traffic).
  p.network_disabled =
      network_isolated && !shared("hostNetwork") &&
      std::find(command.begin(), command.end(), launcher::kFlagNoNetwork) != command.end();

  p.read_only_root = json::boolean(context, "readOnlyRootFilesystem") == true;
  p.privileged = json::boolean(context, "privileged") != false;
  p.no_new_privileges = json::boolean(context, "allowPrivilegeEscalation") == false;
  const ObjectPtr capabilities = json::object(context, "capabilities");
  const std::vector<std::string> dropped = json::strings(json::array(capabilities, "drop"));
  p.all_capabilities_dropped = std::find(dropped.begin(), dropped.end(), "ALL") != dropped.end();
  p.added_capabilities = json::strings(json::array(capabilities, "add"));

  const ObjectPtr seccomp = effectiveObject(context, pod_context, "seccompProfile");
  const std::string seccomp_type = json::string(seccomp, "type").value_or("");
  p.seccomp_enabled = seccomp_type == "RuntimeDefault" || seccomp_type == "Localhost";
  if (seccomp_type == "Localhost") {
    // The text is on the node; the operator's settings say which profile that path holds.
    const bool configured = !settings.seccomp_localhost.empty() &&
                            json::string(seccomp, "localhostProfile") == settings.seccomp_localhost;
    p.seccomp_profile = configured ? settings.seccomp_localhost_text : "";
    p.seccomp_enabled = configured;
  }

  // A Pod has no engine init, but a shared process namespace makes the pause container PID 1.
  p.engine_init = json::boolean(spec, "shareProcessNamespace") != false;
  p.init_command = json::strings(json::array(container, "command"));
  const std::vector<std::string> args = json::strings(json::array(container, "args"));
  p.init_command.insert(p.init_command.end(), args.begin(), args.end());
  // The resource limits are the launcher's, from its command line (containerCommand()).
  readLauncherLimits(p.init_command, &p);
  // And the paths the launcher finds masked and read-only before anything runs.
  p.masked_paths = launcherPaths(p.init_command, std::string(launcher::kFlagMasked));
  p.readonly_paths = launcherPaths(p.init_command, std::string(launcher::kFlagReadonly));

  std::map<std::string, ObjectPtr> volumes;
  for (const ObjectPtr& volume : objects(json::array(spec, "volumes"))) {
    volumes[json::string(volume, "name").value_or("")] = volume;
    if (!json::object(volume, "emptyDir")) {
      p.host_mounts.push_back("volume " + json::string(volume, "name").value_or("(unnamed)"));
    }
  }
  for (const ObjectPtr& mount : objects(json::array(container, "volumeMounts"))) {
    const std::string path = json::string(mount, "mountPath").value_or("");
    const auto it = volumes.find(json::string(mount, "name").value_or(""));
    const ObjectPtr empty_dir =
        it == volumes.end() ? nullptr : json::object(it->second, "emptyDir");
    if (!empty_dir || json::string(empty_dir, "medium") != std::string("Memory")) {
      p.host_mounts.push_back(path);  // on the node's disk, or not a scratch volume at all
      continue;
    }
    const std::int64_t size = quantity(empty_dir, "sizeLimit", 1);
    if (path == kShmPath) {
      p.shm_bytes = size;
      continue;
    }
    TmpfsMount scratch;
    scratch.path = path;
    scratch.size_bytes = static_cast<std::uint64_t>(size);
    scratch.mode = 0777;
    p.tmpfs.push_back(scratch);
  }
  for (const ObjectPtr& device : objects(json::array(container, "volumeDevices"))) {
    p.devices.push_back(json::string(device, "devicePath").value_or("(unnamed)"));
  }

  const ObjectPtr resources = json::object(container, "resources");
  const ObjectPtr limits = json::object(resources, "limits");
  const ObjectPtr requests = json::object(resources, "requests");
  for (const auto& [name, value] : json::stringMap(limits)) {
    if (name != "cpu" && name != "memory" && name != "ephemeral-storage") {
      p.devices.push_back("resource " + name);  // an extended resource: a GPU, a device plugin's
    }
  }
  p.memory_bytes = quantity(limits, "memory", 1);
  p.nano_cpus = quantity(limits, "cpu", 1'000'000'000);
  // Limits equal to requests for both: the Guaranteed class, which the kubelet never lets swap.
  const bool guaranteed = p.memory_bytes > 0 && p.nano_cpus > 0 &&
                          quantity(requests, "memory", 1) == p.memory_bytes &&
                          quantity(requests, "cpu", 1'000'000'000) == p.nano_cpus;
  p.memory_swap_bytes = guaranteed ? p.memory_bytes : 0;
  return p;
}

std::vector<std::string> podDeviations(const json::ObjectPtr& pod, const PodSettings& settings,
                                       const backend::SandboxSpec& sent,
                                       const json::ObjectPtr& runtime_class) {
  std::vector<std::string> deviations;
  const auto expect = [&](bool holds, const std::string& sentence) {
    if (!holds) {
      deviations.push_back(sentence);
    }
  };
  // Present at all is a deviation: podFor() writes none of these.
  const auto absent = [&](const ObjectPtr& object, const char* key, const std::string& where) {
    expect(!object || !object->has(key), where + " has " + key + ", which the backend never sets");
  };
  const ObjectPtr metadata = json::object(pod, "metadata");
  const ObjectPtr spec = json::object(pod, "spec");
  expect(json::string(metadata, "namespace") == settings.namespace_name,
         "the Pod is not in the namespace " + settings.namespace_name);
  for (const auto& [key, value] : json::stringMap(json::object(metadata, "annotations"))) {
    // Runtimes act on these: gVisor's flags and mounts, CRI-O's devices, AppArmor, seccomp.
    for (const char* prefix :
         {"dev.gvisor.", "io.kubernetes.cri-o.", "io.containerd.", "io.katacontainers.",
          "container.apparmor.security.", "seccomp.security."}) {
      expect(key.rfind(prefix, 0) != 0, "the Pod carries the runtime annotation " + key);
    }
  }
  expect(json::string(spec, "restartPolicy") == std::string("Never"), "restartPolicy is not Never");
  expect(json::boolean(spec, "automountServiceAccountToken") == false,
         "a service-account token may be mounted (automountServiceAccountToken is not false)");
  expect(json::boolean(spec, "enableServiceLinks") == false,
         "service links are on (enableServiceLinks is not false)");
  const std::vector<std::string> nameservers =
      json::strings(json::array(json::object(spec, "dnsConfig"), "nameservers"));
  expect(json::string(spec, "dnsPolicy") == std::string("None") &&
             nameservers == std::vector<std::string>{settings.nameserver},
         "the Pod resolves names (dnsPolicy is not None with only " + settings.nameserver + ")");
  expect(json::integer(spec, "activeDeadlineSeconds").value_or(0) > 0,
         "the Pod has no active deadline");
  const ObjectPtr pod_context = json::object(spec, "securityContext");
  for (const char* key :
       {"supplementalGroups", "fsGroup", "sysctls", "seLinuxOptions", "appArmorProfile"}) {
    absent(pod_context, key, "the Pod's securityContext");
  }
  absent(spec, "resourceClaims", "the Pod");
  // Where it runs: a webhook could steer the Pod to a node where the policies or the runtime
  // are not enforced (a virtual kubelet, a control-plane node). Only the scheduler's own
  // choice within the RuntimeClass's scheduling is accepted: its nodeSelector and tolerations,
  // which the RuntimeClass admission plugin (on by default) merges into every Pod of it, and the
  // tolerations other default admission adds (toleratedByAdmission()).
  const ObjectPtr scheduling = json::object(runtime_class, "scheduling");
  // Both ways: a webhook runs after the RuntimeClass's admission and could drop what it pinned.
  const auto pinned = json::stringMap(json::object(scheduling, "nodeSelector"));
  const auto selected = json::stringMap(json::object(spec, "nodeSelector"));
  for (const auto& entry : selected) {
    expect(std::find(pinned.begin(), pinned.end(), entry) != pinned.end(),
           "the Pod selects nodes by " + entry.first + "=" + entry.second +
               ", which its RuntimeClass does not");
  }
  for (const auto& entry : pinned) {
    expect(std::find(selected.begin(), selected.end(), entry) != selected.end(),
           "the Pod does not select nodes by " + entry.first + "=" + entry.second +
               ", as its RuntimeClass does");
  }
  absent(spec, "affinity", "the Pod");
  absent(spec, "topologySpreadConstraints", "the Pod");
  expect(json::string(spec, "schedulerName").value_or("default-scheduler") == "default-scheduler",
         "the Pod is scheduled by another scheduler");
  const std::vector<ObjectPtr> allowed = objects(json::array(scheduling, "tolerations"));
  const std::vector<ObjectPtr> tolerated = objects(json::array(spec, "tolerations"));
  for (const ObjectPtr& own : allowed) {
    expect(
        std::any_of(tolerated.begin(), tolerated.end(),
                    [&](const ObjectPtr& toleration) { return sameToleration(own, toleration); }),
        "the Pod lacks its RuntimeClass's toleration of '" + json::string(own, "key").value_or("") +
            "'");
  }
  for (const ObjectPtr& toleration : tolerated) {
    const bool runtime_class_s =
        std::any_of(allowed.begin(), allowed.end(),
                    [&](const ObjectPtr& own) { return sameToleration(own, toleration); });
    expect(runtime_class_s || toleratedByAdmission(toleration),
           "the Pod tolerates the taint '" + json::string(toleration, "key").value_or("") +
               "', which its RuntimeClass does not");
  }
  const std::vector<ObjectPtr> containers = objects(json::array(spec, "containers"));
  expect(containers.size() == 1 && sandboxContainer(spec),
         "the Pod has other containers than the sandbox (" + std::to_string(containers.size()) +
             " in all)");
  expect(objects(json::array(spec, "initContainers")).empty() &&
             objects(json::array(spec, "ephemeralContainers")).empty(),
         "the Pod has init or ephemeral containers");

  const ObjectPtr container = sandboxContainer(spec);
  // PID 1 is exactly the launcher as the core wrote it: an appended flag would be the last word
  // to its argument parser, and a command moved to args would start the image's entrypoint.
  expect(json::strings(json::array(container, "command")) == containerCommand(sent) &&
             !json::array(container, "args"),
         "the sandbox container's command is not the one sent");
  std::vector<std::string> env;
  bool env_by_value = true;
  for (const ObjectPtr& variable : objects(json::array(container, "env"))) {
    env_by_value = env_by_value && !variable->has("valueFrom");
    env.push_back(json::string(variable, "name").value_or("") + "=" +
                  json::string(variable, "value").value_or(""));
  }
  expect(env_by_value && env == sent.env && !container->has("envFrom"),
         "the sandbox container's environment is not the one sent (a webhook's secret would be "
         "the program's to print)");
  for (const char* key : {"lifecycle", "livenessProbe", "readinessProbe", "startupProbe"}) {
    absent(container, key, "the sandbox container");  // the kubelet would run them in it
  }
  for (const ObjectPtr& port : objects(json::array(container, "ports"))) {
    expect(!port->has("hostPort"), "the sandbox container binds a host port");
  }
  const ObjectPtr context = json::object(container, "securityContext");
  for (const char* key : {"seLinuxOptions", "appArmorProfile", "windowsOptions"}) {
    absent(context, key, "the sandbox container's securityContext");
  }
  expect(json::string(context, "procMount").value_or("Default") == "Default",
         "the sandbox container's /proc is not masked (procMount is not Default)");
  const ObjectPtr resources = json::object(container, "resources");
  absent(resources, "claims", "the sandbox container's resources");
  // cpu and memory only: a LimitRange may add others (ephemeral-storage) to both.
  const auto amounts = [&](const char* key) {
    const ObjectPtr map = json::object(resources, key);
    return std::pair{quantity(map, "cpu", 1000), quantity(map, "memory", 1)};
  };
  expect(amounts("limits") == amounts("requests"), "the limits differ from the requests");
  expect(json::boolean(container, "stdin") == true &&
             json::boolean(container, "stdinOnce") == true &&
             json::boolean(container, "tty") != true,
         "the sandbox container's stdin is not one stream that ends, or it has a terminal");
  return deviations;
}

std::optional<std::int64_t> quantityOf(const json::ObjectPtr& amounts, const std::string& key,
                                       std::int64_t unit) {
  const std::optional<std::string> text = json::string(amounts, key);
  return text ? parseQuantity(*text, unit) : std::nullopt;
}

std::optional<std::int64_t> parseQuantity(std::string_view text, std::int64_t unit) {
  // sign? digits [. digits] (suffix | e exponent)?; no sign is ever right for a limit.
  std::size_t i = 0;
  __int128 mantissa = 0;
  int digits = 0;
  int fraction = 0;
  bool point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (c < '0' || c > '9') {
      break;
    }
    if (++digits > 18) {
      return std::nullopt;
    }
    mantissa = mantissa * 10 + (c - '0');
    fraction += point ? 1 : 0;
  }
  if (digits == 0) {
    return std::nullopt;
  }
  const std::string_view suffix = text.substr(i);
  __int128 numerator = unit;
  __int128 denominator = 1;
  for (int k = 0; k < fraction; ++k) {
    denominator *= 10;
  }
  static const std::map<std::string_view, std::pair<int, int>> kSuffixes = {
      // suffix -> (base, power)
      {"", {10, 0}},   {"m", {10, -3}}, {"k", {10, 3}},  {"M", {10, 6}},  {"G", {10, 9}},
      {"T", {10, 12}}, {"P", {10, 15}}, {"E", {10, 18}}, {"Ki", {2, 10}}, {"Mi", {2, 20}},
      {"Gi", {2, 30}}, {"Ti", {2, 40}}, {"Pi", {2, 50}}, {"Ei", {2, 60}}};
  int base = 10;
  int power = 0;
  if (const auto it = kSuffixes.find(suffix); it != kSuffixes.end()) {
    std::tie(base, power) = it->second;
  } else if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int exponent = 0;
    const char* end = suffix.data() + suffix.size();
    if (std::from_chars(suffix.data() + 1, end, exponent).ptr != end || exponent < -18 ||
        exponent > 18) {
      return std::nullopt;
    }
    power = exponent;
  } else {
    return std::nullopt;
  }
  for (int k = 0; k < (power < 0 ? -power : power); ++k) {
    (power < 0 ? denominator : numerator) *= base;
  }
  if (mantissa > 0 && numerator > std::numeric_limits<__int128>::max() / mantissa) {
    return std::nullopt;
  }
  const __int128 scaled = mantissa * numerator;
  const __int128 value = (scaled + denominator - 1) / denominator;  // rounded up
  if (value > std::numeric_limits<std::int64_t>::max()) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(value);
}

}  // namespace scs::kubernetes
