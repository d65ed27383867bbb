#include "pod_translation.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

namespace scs::kubernetes {
namespace {

using backend::Code;
using backend::Posture;
using backend::TmpfsMount;
using json::ArrayPtr;
using json::ObjectPtr;
using json::objects;

constexpr const char* kContainer = kSandboxContainer;
constexpr const char* kShmPath = "/dev/shm";

struct Owner {
  std::int64_t uid = -1;
  std::int64_t gid = -1;
};

// "uid:gid", both numeric; nullopt otherwise.
std::optional<Owner> parseOwner(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  Owner owner;
  const auto number = [](std::string_view digits, std::int64_t* out) {
    const char* end = digits.data() + digits.size();
    return !digits.empty() && std::from_chars(digits.data(), end, *out).ptr == end && *out >= 0;
  };
  if (!number(text.substr(0, colon), &owner.uid) || !number(text.substr(colon + 1), &owner.gid)) {
    return std::nullopt;
  }
  return owner;
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

// The first reason `spec` cannot be carried by a Pod exactly; empty when it can.
std::string unsupportedReason(const backend::SandboxSpec& spec, const PodSettings& settings) {
  const Posture& p = spec.posture;
  if (p.image.empty()) {
    return "the spec names no image";
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
  if (p.init_command != spec.command || spec.command.empty()) {
    return "the launcher must be the container's command (PID 1)";
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

// The sandbox container of a stored Pod: the one named kContainer.
ObjectPtr sandboxContainer(const ObjectPtr& spec) {
  for (const ObjectPtr& container : objects(json::array(spec, "containers"))) {
    if (json::string(container, "name") == std::string(kContainer)) {
      return container;
    }
  }
  return nullptr;
}

std::int64_t quantity(const ObjectPtr& amounts, const char* key, std::int64_t unit) {
  const std::optional<std::string> text = json::string(amounts, key);
  return text ? parseQuantity(*text, unit).value_or(0) : 0;
}

}  // namespace

std::string podName(const std::string& run_id) { return "scs-" + run_id; }

PodManifest podFor(const backend::SandboxSpec& spec, const PodSettings& settings,
                   std::int64_t active_deadline_seconds) {
  if (const std::string reason = unsupportedReason(spec, settings); !reason.empty()) {
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
  container->set("name", kContainer);
  container->set("image", p.image);
  container->set("imagePullPolicy", "IfNotPresent");
  container->set("command", json::arrayOf(spec.command));
  container->set("env", env);
  container->set("workingDir", spec.working_dir);
  container->set("stdin", true);
  container->set("stdinOnce", true);  // stdin ends with the first attach that closes it
  container->set("tty", false);
  container->set("securityContext", context);
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

std::vector<std::string> inexpressible(const backend::Posture& posture) {
  std::vector<std::string> missing;
  for (const TmpfsMount& mount : posture.tmpfs) {
    const std::string where = "scratch " + mount.path + ": ";
    if (mount.noexec || mount.nosuid || mount.nodev) {
      missing.push_back(where +
                        "an emptyDir takes no mount options, so noexec, nosuid and nodev "
                        "cannot be asked for (KEP-5855 would add them)");
    }
    if (mount.max_inodes > 0) {
      missing.push_back(where + "an emptyDir has no inode cap");
    }
    if (!mount.owner.empty() || mount.mode != 0777) {
      missing.push_back(where +
                        "an emptyDir's root is mode 0777 and owned by root (fsGroup sets only "
                        "its group), so its owner and mode cannot be asked for");
    }
  }
  if (posture.pids_limit > 0) {
    missing.push_back(
        "pids: the pids limit is the node's (the kubelet's podPidsLimit), not one Pod's");
  }
  if (posture.processes_limit > 0 || posture.open_files_limit > 0 ||
      posture.file_size_limit_bytes > 0 || posture.core_dumps_disabled) {
    missing.push_back(
        "rlimits: a Pod has no resource limits of its process (RLIMIT_NPROC, NOFILE, FSIZE, "
        "CORE)");
  }
  missing.push_back(
      "termination log: the kubelet mounts a writable file of the node's disk at "
      "/dev/termination-log in every container, and no field turns it off");
  if (!posture.masked_paths.empty() || !posture.readonly_paths.empty()) {
    missing.push_back(
        "/proc: a Pod asks only for the runtime's default masking (procMount Default), and "
        "the API server does not record which paths that masks");
  }
  return missing;
}

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
  p.network_disabled = network_isolated && !shared("hostNetwork");

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
                                       const backend::SandboxSpec& sent) {
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
  expect(json::strings(json::array(container, "command")) == sent.command &&
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
