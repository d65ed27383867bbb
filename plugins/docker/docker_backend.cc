// DockerBackend's startup (operator settings, API negotiation, engine traits, the watcher
// threads) and shutdown, and its container calls: create and the read-back of the engine's
// record, kill, remove and list.
#include "docker_backend.h"

#include <charconv>
#include <fstream>
#include <utility>
#include <vector>

#include "docker_backend_sandbox.h"

namespace scs::docker {

using backend::Code;
using backend::LogLevel;
using backend::Status;

std::optional<DockerSettings> parseSettings(const std::map<std::string, std::string>& options,
                                            std::string* error) {
  DockerSettings settings;
  for (const auto& [key, value] : options) {
    if (key == "engine") {
      settings.engine = value;
    } else if (key == "api_timeout_ms") {
      long long ms = 0;
      const auto parsed = std::from_chars(value.data(), value.data() + value.size(), ms);
      if (parsed.ec != std::errc() || parsed.ptr != value.data() + value.size() || ms <= 0 ||
          ms > 3600 * 1000) {
        *error = "api_timeout_ms must be a whole number of milliseconds from 1 to 3600000, not '" +
                 value + "'";
        return std::nullopt;
      }
      settings.api_timeout = std::chrono::milliseconds(ms);
    } else {
      *error =
          "unknown option '" + key + "' for the docker backend (known: engine, api_timeout_ms)";
      return std::nullopt;
    }
  }
  return settings;
}

DockerBackend::DockerBackend(EngineSocketPtr transport, const DockerSettings& settings,
                             backend::LogSink* log)
    : transport_(std::move(transport)),
      settings_(settings),
      log_(log),
      client_(*transport_, settings.api_timeout),
      created_at_(std::chrono::system_clock::now()) {}

std::unique_ptr<DockerBackend> DockerBackend::connect(EngineSocketPtr transport,
                                                      const DockerSettings& settings,
                                                      backend::LogSink* log, std::string* error) {
  std::unique_ptr<DockerBackend> backend(new DockerBackend(std::move(transport), settings, log));
  const std::string where = "the Docker engine at " + settings.engine;
  if (const Status status = backend->client_.negotiate(); !status.ok()) {
    const bool unreachable = status.code == Code::kUnavailable || status.code == Code::kTimeout;
    *error =
        (unreachable ? "cannot reach " + where : where + " cannot serve") + ": " + status.message;
    return nullptr;
  }
  const EngineReply<EngineInfo> info = backend->client_.info();
  if (!info.status.ok()) {
    *error = "cannot read the host's capacity from " + where + ": " + info.status.message;
    return nullptr;
  }
  backend->traits_.cgroup_version = info.value.cgroup_version;
  backend->traits_.default_seccomp = info.value.default_seccomp;
  backend->sample_cgroups_ =
      !settings.cgroup_root.empty() && info.value.cgroup_version == 1 &&
      std::ifstream(settings.cgroup_root + "/memory/docker/memory.max_usage_in_bytes").good();
  backend->log(LogLevel::kInfo, "docker: " + where + " speaks API " + backend->apiVersion().text() +
                                    ", cgroup v" + std::to_string(info.value.cgroup_version) +
                                    (backend->sample_cgroups_ ? ", cgroup counters readable" : ""));
  if (settings.watch_events) {
    backend->events_thread_ = std::thread(&DockerBackend::watchEvents, backend.get());
  }
  if (backend->sample_cgroups_) {
    backend->sampler_thread_ = std::thread(&DockerBackend::sampleCgroups, backend.get());
  }
  return backend;
}

DockerBackend::~DockerBackend() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (events_connection_) {
      events_connection_->abort();
    }
    for (auto& [id, sandbox] : sandboxes_) {
      sandbox->removing = true;
      if (sandbox->attach) {
        sandbox->attach->abort();
      }
      if (sandbox->wait) {
        sandbox->wait->abort();
      }
      if (sandbox->thread.joinable()) {
        threads.push_back(std::move(sandbox->thread));
      }
    }
  }
  cv_.notify_all();
  for (auto& thread : threads) {
    thread.join();
  }
  if (events_thread_.joinable()) {
    events_thread_.join();
  }
  if (sampler_thread_.joinable()) {
    sampler_thread_.join();
  }
}

void DockerBackend::log(LogLevel level, const std::string& message) const {
  if (log_ != nullptr) {
    log_->log(level, message);
  }
}

backend::Status DockerBackend::supports(const backend::Posture&) { return {}; }

backend::CapacityReply DockerBackend::capacity() {
  return guarded<backend::CapacityReply>("capacity", [&] {
    backend::CapacityReply reply;
    const EngineReply<EngineInfo> info = client_.info();
    reply.status = info.status;
    reply.capacity.cores = info.value.cpus;
    reply.capacity.memory_bytes = info.value.memory_bytes;
    reply.versions = info.value.versions;
    return reply;
  });
}

backend::CreateReply DockerBackend::create(const backend::SandboxSpec& spec) {
  return guarded<backend::CreateReply>("create", [&] {
    backend::CreateReply reply;
    const CreateBody body = createBody(spec, traits_);
    if (!body.status.ok()) {
      reply.status = body.status;
      return reply;
    }
    const std::string name = spec.run_id.empty() ? "" : "scs-" + spec.run_id;
    std::vector<std::string> warnings;
    const auto began = SteadyClock::now();
    EngineReply<std::string> created = client_.create(name, body.body, &warnings);
    log(LogLevel::kDebug, "docker: create " + name + " took " + millisSince(began));
    if (!created.status.ok()) {
      // The engine may have created it before the reply was lost; the name finds it.
      if (!name.empty() && created.status.code != Code::kRejected &&
          created.status.code != Code::kNotFound) {
        if (const Status removed = client_.remove(name); !removed.ok()) {
          log(LogLevel::kWarning,
              "docker: could not remove a half-created " + name + ": " + removed.message);
        }
      }
      reply.status = created.status;
      return reply;
    }
    if (!warnings.empty()) {
      // A warning means the engine dropped or changed a control; never run such a sandbox.
      if (const Status removed = client_.remove(created.value); !removed.ok()) {
        log(LogLevel::kWarning,
            "docker: could not remove " + shortId(created.value) + ": " + removed.message);
      }
      reply.status = {Code::kUnsupported,
                      "the engine warned while creating the sandbox: " + warnings.front()};
      return reply;
    }
    auto sandbox = std::make_shared<Sandbox>();
    sandbox->id = created.value;
    sandbox->container = created.value;
    sandbox->name = name;
    sandbox->create_body = body.body;
    sandbox->memory_limit = spec.posture.memory_bytes;
    sandbox->session = spec.session;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sandboxes_[sandbox->id] = sandbox;
    }
    reply.id = created.value;
    return reply;
  });
}

std::string DockerBackend::containerOf(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto found = sandboxes_.find(id);
  return found == sandboxes_.end() ? id : found->second->container;
}

backend::InspectReply DockerBackend::inspect(const std::string& id) {
  return guarded<backend::InspectReply>("inspect", [&] {
    backend::InspectReply reply;
    const auto began = SteadyClock::now();
    const EngineReply<json::ObjectPtr> record = client_.inspect(containerOf(id));
    log(LogLevel::kDebug, "docker: inspect " + shortId(id) + " took " + millisSince(began));
    reply.status = record.status;
    if (!record.status.ok()) {
      return reply;
    }
    reply.posture = postureFromRecord(record.value, traits_);
    const std::vector<std::string> deviations = constantDeviations(record.value, traits_);
    if (!deviations.empty()) {
      std::string message = "the engine's record of " + shortId(id) + " weakens a control:";
      for (const auto& deviation : deviations) {
        message += " " + deviation + ";";
      }
      message.back() = '.';
      reply.status = {Code::kUnsupported, message};
    }
    return reply;
  });
}

Status DockerBackend::kill(const std::string& id) {
  return guardedStatus("kill", [&] {
    {
      // Before the request, so its "kill" event is known for ours when it comes.
      std::lock_guard<std::mutex> lock(mu_);
      if (const auto found = sandboxes_.find(id); found != sandboxes_.end()) {
        found->second->kill_requested = true;
      }
    }
    return client_.kill(containerOf(id));
  });
}

Status DockerBackend::remove(const std::string& id) {
  return guardedStatus("remove", [&] {
    std::shared_ptr<Sandbox> sandbox;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (const auto found = sandboxes_.find(id); found != sandboxes_.end()) {
        sandbox = found->second;
        sandbox->removing = true;
      }
    }
    cv_.notify_all();
    const auto began = SteadyClock::now();
    const Status removed = client_.remove(containerOf(id));
    log(LogLevel::kDebug, "docker: remove " + shortId(id) + " took " + millisSince(began));
    if (sandbox) {
      std::thread thread;
      {
        std::lock_guard<std::mutex> lock(mu_);
        // The engine has killed it; aborting only frees a thread still blocked on a stream.
        if (sandbox->attach) {
          sandbox->attach->abort();
        }
        if (sandbox->wait) {
          sandbox->wait->abort();
        }
        thread = std::move(sandbox->thread);
      }
      if (thread.joinable()) {
        thread.join();
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (removed.ok()) {
        sandboxes_.erase(id);
      }
    }
    return removed;
  });
}

backend::ListReply DockerBackend::list(const std::string& label_key) {
  return guarded<backend::ListReply>("list", [&] {
    backend::ListReply reply;
    EngineReply<std::vector<ContainerSummary>> listed = client_.list(label_key);
    reply.status = listed.status;
    for (auto& container : listed.value) {
      reply.sandboxes.push_back({std::move(container.id), std::move(container.labels)});
    }
    return reply;
  });
}

}  // namespace scs::docker
