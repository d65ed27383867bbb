// The fake's saved() text: what a later process's fake needs to play a snapshotted session's
// sandbox again, as a real engine keeps a container and its checkpoint: the spec it was created
// with (its posture above all, which inspect() reads back) and the session's names.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include "fake_backend.h"
#include "json_access.h"

namespace scs::fake {
namespace {

json::ArrayPtr arrayOf(const std::vector<std::string>& items) { return json::arrayOf(items); }

std::vector<std::string> stringsOf(const json::ObjectPtr& object, const std::string& key) {
  return json::strings(json::array(object, key));
}

json::ObjectPtr postureObject(const backend::Posture& posture) {
  json::ObjectPtr object = json::newObject();
  object->set("image", posture.image);
  object->set("runtime", posture.runtime);
  object->set("user", posture.user);
  object->set("network_disabled", posture.network_disabled);
  object->set("read_only_root", posture.read_only_root);
  object->set("privileged", posture.privileged);
  object->set("all_capabilities_dropped", posture.all_capabilities_dropped);
  object->set("added_capabilities", arrayOf(posture.added_capabilities));
  object->set("no_new_privileges", posture.no_new_privileges);
  object->set("seccomp_enabled", posture.seccomp_enabled);
  object->set("seccomp_profile", posture.seccomp_profile);
  object->set("engine_init", posture.engine_init);
  object->set("init_command", arrayOf(posture.init_command));
  object->set("host_namespaces", arrayOf(posture.host_namespaces));
  object->set("host_mounts", arrayOf(posture.host_mounts));
  object->set("devices", arrayOf(posture.devices));
  json::ArrayPtr tmpfs = json::emptyArray();
  for (const backend::TmpfsMount& mount : posture.tmpfs) {
    json::ObjectPtr item = json::newObject();
    item->set("path", mount.path);
    item->set("size_bytes", static_cast<std::int64_t>(mount.size_bytes));
    item->set("max_inodes", static_cast<std::int64_t>(mount.max_inodes));
    item->set("noexec", mount.noexec);
    item->set("nosuid", mount.nosuid);
    item->set("nodev", mount.nodev);
    item->set("owner", mount.owner);
    item->set("mode", static_cast<std::int64_t>(mount.mode));
    tmpfs->add(item);
  }
  object->set("tmpfs", tmpfs);
  object->set("shm_bytes", posture.shm_bytes);
  object->set("memory_bytes", posture.memory_bytes);
  object->set("memory_swap_bytes", posture.memory_swap_bytes);
  object->set("nano_cpus", posture.nano_cpus);
  object->set("pids_limit", posture.pids_limit);
  object->set("processes_limit", posture.processes_limit);
  object->set("open_files_limit", posture.open_files_limit);
  object->set("file_size_limit_bytes", posture.file_size_limit_bytes);
  object->set("core_dumps_disabled", posture.core_dumps_disabled);
  object->set("masked_paths", arrayOf(posture.masked_paths));
  object->set("readonly_paths", arrayOf(posture.readonly_paths));
  return object;
}

// A field missing or of the wrong type reads as the weak default: the core's read-back check
// then refuses the sandbox, as it would a real engine's record.
backend::Posture postureOf(const json::ObjectPtr& object) {
  backend::Posture posture;
  posture.image = json::string(object, "image").value_or("");
  posture.runtime = json::string(object, "runtime").value_or("");
  posture.user = json::string(object, "user").value_or("");
  posture.network_disabled = json::boolean(object, "network_disabled").value_or(false);
  posture.read_only_root = json::boolean(object, "read_only_root").value_or(false);
  posture.privileged = json::boolean(object, "privileged").value_or(true);
  posture.all_capabilities_dropped =
      json::boolean(object, "all_capabilities_dropped").value_or(false);
  posture.added_capabilities = stringsOf(object, "added_capabilities");
  posture.no_new_privileges = json::boolean(object, "no_new_privileges").value_or(false);
  posture.seccomp_enabled = json::boolean(object, "seccomp_enabled").value_or(false);
  posture.seccomp_profile = json::string(object, "seccomp_profile").value_or("");
  posture.engine_init = json::boolean(object, "engine_init").value_or(true);
  posture.init_command = stringsOf(object, "init_command");
  posture.host_namespaces = stringsOf(object, "host_namespaces");
  posture.host_mounts = stringsOf(object, "host_mounts");
  posture.devices = stringsOf(object, "devices");
  for (const json::ObjectPtr& item : json::objects(json::array(object, "tmpfs"))) {
    backend::TmpfsMount mount;
    mount.path = json::string(item, "path").value_or("");
    mount.size_bytes = static_cast<std::uint64_t>(json::integer(item, "size_bytes").value_or(0));
    mount.max_inodes = static_cast<std::uint64_t>(json::integer(item, "max_inodes").value_or(0));
    mount.noexec = json::boolean(item, "noexec").value_or(false);
    mount.nosuid = json::boolean(item, "nosuid").value_or(false);
    mount.nodev = json::boolean(item, "nodev").value_or(false);
    mount.owner = json::string(item, "owner").value_or("");
    mount.mode = static_cast<std::uint32_t>(json::integer(item, "mode").value_or(01777));
    posture.tmpfs.push_back(std::move(mount));
  }
  posture.shm_bytes = json::integer(object, "shm_bytes").value_or(0);
  posture.memory_bytes = json::integer(object, "memory_bytes").value_or(0);
  posture.memory_swap_bytes = json::integer(object, "memory_swap_bytes").value_or(0);
  posture.nano_cpus = json::integer(object, "nano_cpus").value_or(0);
  posture.pids_limit = json::integer(object, "pids_limit").value_or(0);
  posture.processes_limit = json::integer(object, "processes_limit").value_or(0);
  posture.open_files_limit = json::integer(object, "open_files_limit").value_or(0);
  posture.file_size_limit_bytes = json::integer(object, "file_size_limit_bytes").value_or(0);
  posture.core_dumps_disabled = json::boolean(object, "core_dumps_disabled").value_or(false);
  posture.masked_paths = stringsOf(object, "masked_paths");
  posture.readonly_paths = stringsOf(object, "readonly_paths");
  return posture;
}

}  // namespace

std::string FakeBackend::savedText(const Sandbox& sandbox) {
  json::ObjectPtr spec = json::newObject();
  spec->set("run_id", sandbox.spec.run_id);
  json::ObjectPtr labels = json::newObject();
  for (const auto& [key, value] : sandbox.spec.labels) {
    labels->set(key, value);
  }
  spec->set("labels", labels);
  spec->set("command", arrayOf(sandbox.spec.command));
  spec->set("working_dir", sandbox.spec.working_dir);
  spec->set("hostname", sandbox.spec.hostname);
  spec->set("session", sandbox.spec.session);
  spec->set("posture", postureObject(sandbox.spec.posture));
  json::ObjectPtr names = json::newObject();
  for (const auto& [name, value] : sandbox.names) {
    names->set(name, value);
  }
  json::ObjectPtr saved = json::newObject();
  saved->set("fake_snapshot", sandbox.id);
  saved->set("spec", spec);
  saved->set("names", names);
  saved->set("oom_kills", sandbox.oom_kills);
  return json::stringify(saved);
}

std::shared_ptr<FakeBackend::Sandbox> FakeBackend::fromSaved(const std::string& id,
                                                             const std::string& text) {
  const json::ObjectPtr saved = json::parseObject(text);
  const json::ObjectPtr spec = json::object(saved, "spec");
  if (!saved || !spec || json::string(saved, "fake_snapshot").value_or("") != id) {
    return nullptr;
  }
  auto sandbox = std::make_shared<Sandbox>();
  sandbox->id = id;
  sandbox->spec.run_id = json::string(spec, "run_id").value_or("");
  for (auto& [key, value] : json::stringMap(json::object(spec, "labels"))) {
    sandbox->spec.labels[key] = value;
  }
  sandbox->spec.command = stringsOf(spec, "command");
  sandbox->spec.working_dir = json::string(spec, "working_dir").value_or("");
  sandbox->spec.hostname = json::string(spec, "hostname").value_or("");
  sandbox->spec.session = json::boolean(spec, "session").value_or(false);
  sandbox->spec.posture = postureOf(json::object(spec, "posture"));
  for (auto& [name, value] : json::stringMap(json::object(saved, "names"))) {
    sandbox->names[name] = value;
  }
  sandbox->oom_kills = json::integer(saved, "oom_kills").value_or(0);
  sandbox->serves_session = true;
  sandbox->delivered = true;
  sandbox->state = State::kSnapshotted;
  return sandbox;
}

}  // namespace scs::fake
