// The spec's translation: what this backend refuses to create, the HostConfig written field by
// field, tmpfs options both ways, and the posture and plugin constants read from the record.

#include "spec_translation.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <set>
#include <string_view>

#include "rlimits.h"

namespace scs::docker {
namespace {

using backend::Code;
using backend::Posture;
using backend::TmpfsMount;
using json::ArrayPtr;
using json::ObjectPtr;

using json::arrayOf;
using json::emptyArray;
using json::newObject;

bool isDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

// "uid:gid", both numeric: no lookup in the image's /etc/passwd can change who runs.
bool isNumericOwner(std::string_view owner) {
  const std::size_t colon = owner.find(':');
  return colon != std::string_view::npos && isDigits(owner.substr(0, colon)) &&
         isDigits(owner.substr(colon + 1));
}

ObjectPtr ulimit(const char* name, std::int64_t value) {
  ObjectPtr limit = newObject();
  limit->set("Name", name);
  limit->set("Soft", static_cast<Poco::Int64>(value));
  limit->set("Hard", static_cast<Poco::Int64>(value));
  return limit;
}

// The first reason this backend cannot create `spec` exactly; empty when it can.
std::string unsupportedReason(const backend::SandboxSpec& spec) {
  const Posture& p = spec.posture;
  if (p.image.empty()) {
    return "the spec names no image";
  }
  if (p.runtime.empty()) {
    return "the spec names no runtime";
  }
  if (!isNumericOwner(p.user)) {
    return "the sandbox user must be a numeric uid:gid, not '" + p.user + "'";
  }
  if (spec.command.empty()) {
    return "the spec has no command (the image's own would run)";
  }
  if (p.init_command != spec.command) {
    return "the posture's init_command is not the spec's command";
  }
  if (!p.network_disabled) {
    return "this backend only creates sandboxes without a network";
  }
  if (p.privileged) {
    return "this backend never creates privileged sandboxes";
  }
  if (!p.all_capabilities_dropped || !p.added_capabilities.empty()) {
    return "this backend only creates sandboxes with every capability dropped";
  }
  if (!p.no_new_privileges) {
    return "this backend always sets no-new-privileges";
  }
  if (!p.seccomp_enabled) {
    return "this backend never turns seccomp off";
  }
  if (!p.host_namespaces.empty()) {
    return "this backend never shares a host namespace";
  }
  if (!p.host_mounts.empty()) {
    return "this backend never mounts a host path or volume";
  }
  if (!p.devices.empty()) {
    return "this backend never adds a device";
  }
  // The engine reads zero or negative limits as "unlimited".
  if (p.memory_bytes <= 0 || p.memory_swap_bytes < p.memory_bytes) {
    return "the memory limit must be positive and swap included in it at least once";
  }
  if (p.nano_cpus <= 0) {
    return "the CPU limit must be positive";
  }
  if (p.pids_limit <= 0 || p.processes_limit <= 0) {
    return "the process limits must be positive";
  }
  if (p.open_files_limit <= 0 || p.file_size_limit_bytes <= 0) {
    return "the open-files and file-size limits must be positive";
  }
  // ShmSize 0 means the engine's default size (--default-shm-size), not ours.
  if (p.shm_bytes <= 0) {
    return "/dev/shm needs a size cap";
  }
  // The engine reads an empty list as "mask nothing".
  if (p.masked_paths.empty() || p.readonly_paths.empty()) {
    return "the masked and read-only path lists must not be empty";
  }
  std::set<std::string> paths;
  for (const auto& mount : p.tmpfs) {
    if (mount.path.empty() || mount.path.front() != '/' ||
        mount.path.find(',') != std::string::npos || !paths.insert(mount.path).second) {
      return "the tmpfs path '" + mount.path + "' is not a unique absolute path";
    }
    // size=0 and nr_inodes=0 mean "unlimited" to the kernel.
    if (mount.size_bytes == 0 || mount.max_inodes == 0) {
      return "the tmpfs at " + mount.path + " needs a size and an inode cap";
    }
    if (!mount.owner.empty() && !isNumericOwner(mount.owner)) {
      return "the tmpfs at " + mount.path + " needs a numeric uid:gid owner";
    }
    if (mount.mode > 07777) {
      return "the tmpfs at " + mount.path + " has an invalid mode";
    }
  }
  return "";
}

std::optional<std::uint64_t> parseSize(std::string_view text) {
  std::uint64_t value = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), value);
  if (parsed.ec != std::errc() || parsed.ptr == text.data()) {
    return std::nullopt;
  }
  const std::string_view suffix(parsed.ptr,
                                static_cast<std::size_t>(text.data() + text.size() - parsed.ptr));
  std::uint64_t scale = 1;
  if (suffix == "k" || suffix == "K") {
    scale = 1ull << 10;
  } else if (suffix == "m" || suffix == "M") {
    scale = 1ull << 20;
  } else if (suffix == "g" || suffix == "G") {
    scale = 1ull << 30;
  } else if (!suffix.empty()) {
    return std::nullopt;  // e.g. a percentage of RAM: no fixed cap we can name
  }
  return value * scale;
}

std::string_view afterPrefix(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix ? text.substr(prefix.size()) : std::string_view();
}

}  // namespace

std::string tmpfsOptions(const TmpfsMount& mount) {
  char mode[16];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(mount.mode));
  std::string options = "rw";
  options += mount.noexec ? ",noexec" : ",exec";
  options += mount.nosuid ? ",nosuid" : ",suid";
  options += mount.nodev ? ",nodev" : ",dev";
  options += ",size=" + std::to_string(mount.size_bytes);
  options += ",nr_inodes=" + std::to_string(mount.max_inodes);
  options += std::string(",mode=") + mode;
  if (!mount.owner.empty()) {
    const std::size_t colon = mount.owner.find(':');
    options += ",uid=" + mount.owner.substr(0, colon) + ",gid=" + mount.owner.substr(colon + 1);
  }
  return options;
}

TmpfsMount parseTmpfs(const std::string& path, const std::string& options) {
  TmpfsMount mount;
  mount.path = path;
  std::string uid;
  std::string gid;
  std::string_view rest = options;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view option = rest.substr(0, comma);
    rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    // Later options override earlier ones, as in mount(8).
    if (option == "noexec" || option == "exec") {
      mount.noexec = option == "noexec";
    } else if (option == "nosuid" || option == "suid") {
      mount.nosuid = option == "nosuid";
    } else if (option == "nodev" || option == "dev") {
      mount.nodev = option == "nodev";
    } else if (const auto size = afterPrefix(option, "size="); !size.empty()) {
      mount.size_bytes = parseSize(size).value_or(0);
    } else if (const auto inodes = afterPrefix(option, "nr_inodes="); !inodes.empty()) {
      mount.max_inodes = parseSize(inodes).value_or(0);
    } else if (const auto mode = afterPrefix(option, "mode="); !mode.empty()) {
      unsigned bits = 0;
      const auto parsed = std::from_chars(mode.data(), mode.data() + mode.size(), bits, 8);
      mount.mode =
          parsed.ec == std::errc() && parsed.ptr == mode.data() + mode.size() ? bits : 01777;
    } else if (const auto id = afterPrefix(option, "uid="); !id.empty()) {
      uid = std::string(id);
    } else if (const auto group = afterPrefix(option, "gid="); !group.empty()) {
      gid = std::string(group);
    }
  }
  if (!uid.empty() || !gid.empty()) {
    mount.owner = uid + ":" + gid;
  }
  return mount;
}

CreateBody createBody(const backend::SandboxSpec& spec, const EngineTraits& traits) {
  if (const std::string reason = unsupportedReason(spec); !reason.empty()) {
    return {{Code::kUnsupported, reason}, {}};
  }
  const Posture& p = spec.posture;

  ObjectPtr labels = newObject();
  for (const auto& [key, value] : spec.labels) {
    labels->set(key, value);
  }

  ObjectPtr body = newObject();
  body->set("Image", p.image);
  // An empty list (unlike null) keeps any image ENTRYPOINT from wrapping the command.
  body->set("Entrypoint", emptyArray());
  body->set("Cmd", arrayOf(spec.command));
  body->set("User", p.user);
  body->set("WorkingDir", spec.working_dir);
  body->set("Hostname", spec.hostname);
  body->set("Env", arrayOf(spec.env));
  body->set("Labels", labels);
  body->set("NetworkDisabled", true);
  body->set("StopSignal", "SIGKILL");
  body->set("StopTimeout", static_cast<Poco::Int64>(kStopTimeoutSeconds));
  body->set("Tty", false);
  body->set("OpenStdin", true);
  body->set("StdinOnce", true);
  body->set("AttachStdin", true);
  body->set("AttachStdout", true);
  body->set("AttachStderr", true);

  std::vector<std::string> security{"no-new-privileges:true"};
  if (!p.seccomp_profile.empty()) {
    security.push_back("seccomp=" + p.seccomp_profile);
  }
  ObjectPtr tmpfs = newObject();
  for (const auto& mount : p.tmpfs) {
    tmpfs->set(mount.path, tmpfsOptions(mount));
  }
  ArrayPtr ulimits = new Poco::JSON::Array();
  for (const rlimits::Rlimit& limit : rlimits::of(p)) {
    ulimits->add(ulimit(limit.name.c_str(), limit.value));
  }
  ObjectPtr restart = newObject();
  restart->set("Name", "no");
  restart->set("MaximumRetryCount", 0);
  ObjectPtr log_config = newObject();
  log_config->set("Type", "none");
  log_config->set("Config", newObject());

  ObjectPtr host = newObject();
  host->set("NetworkMode", "none");
  host->set("Privileged", false);
  host->set("CapDrop", arrayOf({"ALL"}));
  host->set("CapAdd", emptyArray());
  host->set("SecurityOpt", arrayOf(security));
  host->set("ReadonlyRootfs", p.read_only_root);
  host->set("Tmpfs", tmpfs);
  host->set("Memory", static_cast<Poco::Int64>(p.memory_bytes));
  host->set("MemorySwap", static_cast<Poco::Int64>(p.memory_swap_bytes));
  if (traits.cgroup_version < 2) {
    host->set("MemorySwappiness", 0);  // cgroup v2 has no such knob; the engine warns
  }
  host->set("OomKillDisable", false);
  host->set("OomScoreAdj", static_cast<Poco::Int64>(kOomScoreAdj));
  host->set("NanoCpus", static_cast<Poco::Int64>(p.nano_cpus));
  host->set("PidsLimit", static_cast<Poco::Int64>(p.pids_limit));
  host->set("Ulimits", ulimits);
  host->set("IpcMode", "private");
  host->set("ShmSize", static_cast<Poco::Int64>(p.shm_bytes));
  host->set("PidMode", "");
  host->set("UTSMode", "");
  host->set("UsernsMode", "");
  host->set("CgroupnsMode", "private");
  host->set("Init", p.engine_init);
  host->set("AutoRemove", false);
  host->set("RestartPolicy", restart);
  host->set("Runtime", p.runtime);
  host->set("Devices", emptyArray());
  host->set("DeviceRequests", emptyArray());
  host->set("DeviceCgroupRules", emptyArray());
  host->set("Binds", emptyArray());
  host->set("Mounts", emptyArray());
  host->set("VolumesFrom", emptyArray());
  host->set("PortBindings", newObject());
  host->set("PublishAllPorts", false);
  host->set("Dns", emptyArray());
  host->set("DnsOptions", emptyArray());
  host->set("DnsSearch", emptyArray());
  host->set("ExtraHosts", emptyArray());
  host->set("GroupAdd", emptyArray());
  host->set("Sysctls", newObject());
  host->set("LogConfig", log_config);
  // Sent in full: an omitted or empty list would fall back to (or remove) the engine's own.
  host->set("MaskedPaths", arrayOf(p.masked_paths));
  host->set("ReadonlyPaths", arrayOf(p.readonly_paths));
  body->set("HostConfig", host);

  ObjectPtr networking = newObject();
  networking->set("EndpointsConfig", newObject());
  body->set("NetworkingConfig", networking);
  return {{}, body};
}

Posture postureFromRecord(const ObjectPtr& record, const EngineTraits& traits) {
  Posture p;
  const ObjectPtr config = json::object(record, "Config");
  const ObjectPtr host = json::object(record, "HostConfig");

  p.image = json::string(config, "Image").value_or("");
  p.user = json::string(config, "User").value_or("");
  p.runtime = json::string(host, "Runtime").value_or("");

  const std::string network_mode = json::string(host, "NetworkMode").value_or("");
  bool only_none_network = true;
  if (const ObjectPtr networks =
          json::object(json::object(record, "NetworkSettings"), "Networks")) {
    for (const auto& name : networks->getNames()) {
      only_none_network = only_none_network && name == "none";
    }
  }
  p.network_disabled = network_mode == "none" &&
                       json::boolean(config, "NetworkDisabled").value_or(false) &&
                       only_none_network;
  p.read_only_root = json::boolean(host, "ReadonlyRootfs").value_or(false);
  p.privileged = json::boolean(host, "Privileged").value_or(true);

  for (const auto& cap : json::strings(json::array(host, "CapDrop"))) {
    std::string upper = cap;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    p.all_capabilities_dropped = p.all_capabilities_dropped || upper == "ALL" || upper == "CAP_ALL";
  }
  p.added_capabilities = json::strings(json::array(host, "CapAdd"));
  for (const auto& cap : json::strings(json::array(host, "Capabilities"))) {
    p.added_capabilities.push_back(cap);  // the pre-1.40 field replaces the whole set
  }

  bool unconfined = false;
  std::string profile;
  for (const auto& option : json::strings(json::array(host, "SecurityOpt"))) {
    // The engine splits on '=' first and falls back to ':' (daemon parseSecurityOpt).
    std::size_t split = option.find('=');
    if (split == std::string::npos) {
      split = option.find(':');
    }
    const std::string key = option.substr(0, split);
    const std::string value = split == std::string::npos ? "" : option.substr(split + 1);
    if (key == "no-new-privileges") {
      p.no_new_privileges = split == std::string::npos || value == "true" || value == "1";
    } else if (key == "seccomp") {
      unconfined = value == "unconfined";
      profile = unconfined ? "" : value;
    }
  }
  p.seccomp_enabled = !unconfined && (!profile.empty() || traits.default_seccomp);
  p.seccomp_profile = profile;
  p.engine_init = json::boolean(host, "Init").value_or(true);
  if (const std::optional<std::string> path = json::string(record, "Path")) {
    p.init_command.push_back(*path);
    for (const auto& arg : json::strings(json::array(record, "Args"))) {
      p.init_command.push_back(arg);
    }
  }

  const auto private_unless = [&](const char* field, const char* ns,
                                  std::initializer_list<std::string_view> safe) {
    const std::optional<std::string> mode = json::string(host, field);
    if (!mode || std::find(safe.begin(), safe.end(), *mode) == safe.end()) {
      p.host_namespaces.push_back(std::string(ns) + ":" + mode.value_or("(unset)"));
    }
  };
  private_unless("PidMode", "pid", {""});
  private_unless("IpcMode", "ipc", {"private", "none"});
  private_unless("UTSMode", "uts", {""});
  private_unless("UsernsMode", "userns", {""});
  private_unless("CgroupnsMode", "cgroup", {"private"});
  if (network_mode == "host" || network_mode.rfind("container:", 0) == 0) {
    p.host_namespaces.push_back("net:" + network_mode);
  }

  for (const auto& bind : json::strings(json::array(host, "Binds"))) {
    p.host_mounts.push_back("bind:" + bind);
  }
  for (const auto& from : json::strings(json::array(host, "VolumesFrom"))) {
    p.host_mounts.push_back("volumes-from:" + from);
  }
  const auto add_mounts = [&](const ArrayPtr& mounts, const char* target_key) {
    if (mounts.isNull()) {
      return;
    }
    for (std::size_t i = 0; i < mounts->size(); ++i) {
      const ObjectPtr mount = mounts->getObject(static_cast<unsigned>(i));
      p.host_mounts.push_back(json::string(mount, "Type").value_or("mount") + ":" +
                              json::string(mount, "Source").value_or("") + ":" +
                              json::string(mount, target_key).value_or(""));
    }
  };
  add_mounts(json::array(host, "Mounts"), "Target");
  add_mounts(json::array(record, "Mounts"), "Destination");

  if (const ArrayPtr devices = json::array(host, "Devices")) {
    for (std::size_t i = 0; i < devices->size(); ++i) {
      const ObjectPtr device = devices->getObject(static_cast<unsigned>(i));
      p.devices.push_back(json::string(device, "PathOnHost").value_or("device") + ":" +
                          json::string(device, "PathInContainer").value_or(""));
    }
  }
  if (const ArrayPtr requests = json::array(host, "DeviceRequests")) {
    for (std::size_t i = 0; i < requests->size(); ++i) {
      p.devices.push_back(
          "request:" +
          json::string(requests->getObject(static_cast<unsigned>(i)), "Driver").value_or(""));
    }
  }
  for (const auto& rule : json::strings(json::array(host, "DeviceCgroupRules"))) {
    p.devices.push_back("rule:" + rule);
  }

  for (const auto& [path, options] : json::stringMap(json::object(host, "Tmpfs"))) {
    p.tmpfs.push_back(parseTmpfs(path, options));
  }
  std::sort(p.tmpfs.begin(), p.tmpfs.end(),
            [](const TmpfsMount& a, const TmpfsMount& b) { return a.path < b.path; });
  p.shm_bytes = json::integer(host, "ShmSize").value_or(0);

  p.memory_bytes = json::integer(host, "Memory").value_or(0);
  p.memory_swap_bytes = json::integer(host, "MemorySwap").value_or(0);
  p.nano_cpus = json::integer(host, "NanoCpus").value_or(0);
  p.pids_limit = json::integer(host, "PidsLimit").value_or(0);

  // The hard limit is the cap: a process may raise its soft limit up to it. -1: unlimited.
  p.open_files_limit = -1;
  p.file_size_limit_bytes = -1;
  p.processes_limit = -1;
  if (const ArrayPtr ulimits = json::array(host, "Ulimits")) {
    for (std::size_t i = 0; i < ulimits->size(); ++i) {
      const ObjectPtr limit = ulimits->getObject(static_cast<unsigned>(i));
      rlimits::set(&p, json::string(limit, "Name").value_or(""),
                   json::integer(limit, "Hard").value_or(-1));
    }
  }
  p.masked_paths = json::strings(json::array(host, "MaskedPaths"));
  p.readonly_paths = json::strings(json::array(host, "ReadonlyPaths"));
  return p;
}

std::vector<std::string> constantDeviations(const ObjectPtr& record, const EngineTraits&) {
  std::vector<std::string> found;
  const ObjectPtr config = json::object(record, "Config");
  const ObjectPtr host = json::object(record, "HostConfig");
  if (config.isNull() || host.isNull()) {
    return {"the engine's record has no Config or HostConfig"};
  }
  if (json::boolean(host, "OomKillDisable") != false) {
    found.push_back("the OOM killer is not enabled");
  }
  if (json::integer(host, "OomScoreAdj") != kOomScoreAdj) {
    found.push_back("the OOM score adjustment is not " + std::to_string(kOomScoreAdj));
  }
  if (json::boolean(host, "AutoRemove") != false) {
    found.push_back("auto-remove is not off (the exit record would vanish)");
  }
  const std::string restart =
      json::string(json::object(host, "RestartPolicy"), "Name").value_or("(unset)");
  if (restart != "no" && restart != "") {
    found.push_back("the restart policy is '" + restart + "', not 'no'");
  }
  if (json::string(json::object(host, "LogConfig"), "Type") != "none") {
    found.push_back("the log driver is not 'none' (output would reach the host's disk)");
  }
  if (const ObjectPtr sysctls = json::object(host, "Sysctls"); sysctls && sysctls->size() > 0) {
    found.push_back("sysctls are set");
  }
  if (const ObjectPtr ports = json::object(host, "PortBindings"); ports && ports->size() > 0) {
    found.push_back("ports are published");
  }
  if (json::boolean(host, "PublishAllPorts") != false) {
    found.push_back("publish-all-ports is not off");
  }
  if (const ArrayPtr entrypoint = json::array(config, "Entrypoint");
      entrypoint && entrypoint->size() > 0) {
    found.push_back("an entrypoint wraps the sandbox command");
  }
  return found;
}

}  // namespace scs::docker
