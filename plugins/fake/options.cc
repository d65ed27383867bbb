// The fake's backend options (`--backend-option KEY=VALUE`), and the posture alterations that
// `posture=FIELD` makes inspect() read back.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "fake_backend.h"

namespace scs::fake {
namespace {

void differ(std::int64_t* value) { *value = *value > 0 ? *value * 2 : 1; }

void differ(std::vector<std::string>* values, const char* extra) {
  if (values->empty()) {
    values->push_back(extra);
  } else {
    values->pop_back();
  }
}

const std::map<std::string, std::function<void(backend::Posture&)>>& alterations() {
  using P = backend::Posture;
  static const std::map<std::string, std::function<void(P&)>> table = {
      {"image", [](P& p) { p.image += "-substituted"; }},
      {"runtime", [](P& p) { p.runtime = p.runtime == "runc" ? "runsc" : "runc"; }},
      {"user", [](P& p) { p.user = p.user == "0:0" ? "10001:10001" : "0:0"; }},
      {"network_disabled", [](P& p) { p.network_disabled = !p.network_disabled; }},
      {"read_only_root", [](P& p) { p.read_only_root = !p.read_only_root; }},
      {"privileged", [](P& p) { p.privileged = !p.privileged; }},
      {"all_capabilities_dropped",
       [](P& p) { p.all_capabilities_dropped = !p.all_capabilities_dropped; }},
      {"added_capabilities", [](P& p) { p.added_capabilities.push_back("SYS_ADMIN"); }},
      {"no_new_privileges", [](P& p) { p.no_new_privileges = !p.no_new_privileges; }},
      {"seccomp_enabled", [](P& p) { p.seccomp_enabled = !p.seccomp_enabled; }},
      {"seccomp_profile",
       [](P& p) {
         p.seccomp_profile =
             p.seccomp_profile.empty() ? R"({"defaultAction":"SCMP_ACT_ALLOW"})" : "";
       }},
      {"engine_init", [](P& p) { p.engine_init = !p.engine_init; }},
      {"init_command",
       [](P& p) {
         p.init_command.insert(p.init_command.begin(), "/usr/bin/timeout");  // PID 1 no longer
       }},
      {"host_namespaces", [](P& p) { p.host_namespaces.push_back("pid"); }},
      {"host_mounts", [](P& p) { p.host_mounts.push_back("/:/host"); }},
      {"devices", [](P& p) { p.devices.push_back("/dev/kvm"); }},
      {"tmpfs",
       [](P& p) {
         if (p.tmpfs.empty()) {
           backend::TmpfsMount extra;
           extra.path = "/scratch";
           extra.size_bytes = 1 << 20;
           p.tmpfs.push_back(extra);
         } else {
           p.tmpfs.front().noexec = !p.tmpfs.front().noexec;
         }
       }},
      {"shm_bytes", [](P& p) { differ(&p.shm_bytes); }},
      {"memory_bytes", [](P& p) { differ(&p.memory_bytes); }},
      {"memory_swap_bytes", [](P& p) { differ(&p.memory_swap_bytes); }},
      {"nano_cpus", [](P& p) { differ(&p.nano_cpus); }},
      {"pids_limit", [](P& p) { differ(&p.pids_limit); }},
      {"processes_limit", [](P& p) { differ(&p.processes_limit); }},
      {"open_files_limit", [](P& p) { differ(&p.open_files_limit); }},
      {"file_size_limit_bytes", [](P& p) { differ(&p.file_size_limit_bytes); }},
      {"core_dumps_disabled", [](P& p) { p.core_dumps_disabled = !p.core_dumps_disabled; }},
      {"masked_paths", [](P& p) { differ(&p.masked_paths, "/proc/kcore"); }},
      {"readonly_paths", [](P& p) { differ(&p.readonly_paths, "/proc/sys"); }},
  };
  return table;
}

}  // namespace

std::optional<std::string> parseOptions(const std::map<std::string, std::string>& raw,
                                        Options* options) {
  for (const auto& [key, value] : raw) {
    if (key == "cores") {
      auto cores = parseInteger(value, 1, 4096);
      if (!cores) {
        return "fake backend option cores=" + value + " is not a whole number from 1 to 4096";
      }
      options->cores = static_cast<int>(*cores);
    } else if (key == "memory_gb") {
      char* end = nullptr;
      const double gb = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(gb) || gb <= 0 || gb > 1 << 20) {
        return "fake backend option memory_gb=" + value + " is not a positive number";
      }
      options->memory_gb = gb;
    } else if (key == "fail") {
      std::string_view rest = value;
      while (true) {
        const auto comma = rest.find(',');
        const std::string call(rest.substr(0, comma));
        if (call != "create" && call != "inspect" && call != "list" && call != "capacity" &&
            call != "supports" && call != "snapshot" && call != "resume" && call != "saved" &&
            call != "adopt") {
          return "fake backend option fail=" + value +
                 " names an unknown call; use create, inspect, list, capacity, supports, "
                 "snapshot, resume, saved or adopt";
        }
        options->fail.insert(call);
        if (comma == std::string_view::npos) {
          break;
        }
        rest.remove_prefix(comma + 1);
      }
    } else if (key == "posture") {
      if (alterations().count(value) == 0) {
        return "fake backend option posture=" + value + " names no posture field";
      }
      options->posture_field = value;
    } else if (key == "snapshots") {
      if (value != "on" && value != "off") {
        return "fake backend option snapshots=" + value + " is neither on nor off";
      }
      options->snapshots = value == "on";
    } else if (key == "remove_ms") {
      auto ms = parseInteger(value, 0, 600'000);
      if (!ms) {
        return "fake backend option remove_ms=" + value +
               " is not a whole number of milliseconds from 0 to 600000";
      }
      options->remove_delay = std::chrono::milliseconds(*ms);
    } else if (key == "engine") {
      // Every backend receives --engine; the fake has no engine to reach.
    } else {
      return "unknown fake backend option '" + key +
             "'; known: cores, memory_gb, fail, posture, snapshots, remove_ms, engine";
    }
  }
  return std::nullopt;
}

bool alterPosture(const std::string& field, backend::Posture* posture) {
  auto it = alterations().find(field);
  if (it == alterations().end()) {
    return false;
  }
  it->second(*posture);
  return true;
}

}  // namespace scs::fake
