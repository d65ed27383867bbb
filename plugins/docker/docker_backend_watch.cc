// DockerBackend's two watcher threads: the engine's event stream (oom, kill and die of managed
// containers, replayed from the backend's creation and reconnected with backoff), and the
// cgroup v1 sampler (peak memory, CPU time, OOM kills) of running sandboxes.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "docker_backend.h"
#include "docker_backend_sandbox.h"

namespace scs::docker {

using backend::Code;
using backend::LogLevel;

namespace {

constexpr std::size_t kMaxEventLine = 1u << 20;
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{5000};

std::optional<std::int64_t> readNumber(const std::string& path) {
  std::ifstream in(path);
  std::int64_t value = 0;
  if (in >> value) {
    return value;
  }
  return std::nullopt;
}

std::optional<std::int64_t> readOomKills(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  std::int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") {
      return value;
    }
  }
  return std::nullopt;
}

}  // namespace

void DockerBackend::watchEvents() {
  json::ObjectPtr filters = new Poco::JSON::Object();
  const auto one = [](const char* value) {
    Poco::JSON::Array::Ptr list = new Poco::JSON::Array();
    list->add(value);
    return list;
  };
  Poco::JSON::Array::Ptr actions = new Poco::JSON::Array();
  actions->add("oom");
  actions->add("kill");
  actions->add("die");
  filters->set("type", one("container"));
  filters->set("event", actions);
  filters->set("label", one(kManagedLabel));
  const std::string filters_json = json::stringify(filters);
  // Replays from this backend's creation, so a late first connection misses nothing.
  std::string since = std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(created_at_.time_since_epoch()).count());
  auto backoff = kFirstBackoff;
  bool warned = false;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        return;
      }
    }
    EngineReply<ConnectionPtr> stream;
    try {
      stream = client_.events(filters_json, since);
    } catch (const std::exception& e) {
      stream.status = {Code::kInternal, e.what()};
    }
    if (stream.status.ok()) {
      std::shared_ptr<Connection> connection(std::move(stream.value));
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) {
          return;
        }
        events_connection_ = connection;
        events_connected_ = true;
      }
      if (warned) {
        log(LogLevel::kInfo, "docker: the engine's event stream is back");
        warned = false;
      }
      backoff = kFirstBackoff;
      std::string line;
      std::vector<char> buffer(16384);
      std::ptrdiff_t got = 0;
      while ((got = connection->read(buffer.data(), buffer.size())) > 0) {
        for (std::ptrdiff_t i = 0; i < got; ++i) {
          if (buffer[static_cast<std::size_t>(i)] == '\n') {
            handleEvent(line, &since);
            line.clear();
          } else if (line.size() < kMaxEventLine) {
            line.push_back(buffer[static_cast<std::size_t>(i)]);
          }
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        events_connection_.reset();
        events_connected_ = false;
        if (stopping_) {
          return;
        }
      }
      cv_.notify_all();
    } else if (!warned) {
      log(LogLevel::kWarning,
          "docker: no event stream (OOM evidence relies on inspect): " + stream.status.message);
      warned = true;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, backoff, [&] { return stopping_; });
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

void DockerBackend::handleEvent(const std::string& line, std::string* since) {
  const json::ObjectPtr event = json::parseObject(line);
  if (event.isNull()) {
    return;
  }
  const std::string action = json::string(event, "Action").value_or("");
  std::string id = json::string(json::object(event, "Actor"), "ID").value_or("");
  if (id.empty()) {
    id = json::string(event, "id").value_or("");
  }
  if (const auto nanos = json::integer(event, "timeNano"); nanos && *nanos > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%lld.%09lld", static_cast<long long>(*nanos / 1000000000),
                  static_cast<long long>(*nanos % 1000000000));
    *since = text;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Events name the container, which a snapshot may have moved the sandbox into.
    const auto found = std::find_if(sandboxes_.begin(), sandboxes_.end(), [&](const auto& entry) {
      return entry.second->container == id;
    });
    if (found == sandboxes_.end()) {
      return;
    }
    if (action == "oom") {
      found->second->oom_event = true;
      ++found->second->oom_events;
    } else if (action == "kill") {
      found->second->kill_event = true;
    } else if (action == "die") {
      found->second->die_event = true;
    }
  }
  cv_.notify_all();
}

void DockerBackend::sampleCgroups() {
  while (true) {
    std::vector<std::shared_ptr<Sandbox>> running;
    {
      const auto collect = [&] {
        running.clear();
        for (const auto& [id, sandbox] : sandboxes_) {
          // An idle sandbox is not sampled: the counters are cumulative or high-water marks,
          // so the first sample after delivery still covers its idle time.
          if (sandbox->started && sandbox->delivered && !sandbox->done) {
            running.push_back(sandbox);
          }
        }
        return !running.empty();
      };
      std::unique_lock<std::mutex> lock(mu_);
      // Idle until start() or deliver() wakes it: no timer runs while no code does.
      cv_.wait(lock, [&] { return stopping_ || collect(); });
      cv_.wait_for(lock, settings_.sample_interval, [&] { return stopping_; });
      if (stopping_) {
        return;
      }
      collect();
    }
    for (const auto& sandbox : running) {
      sampleOne(*sandbox);
    }
  }
}

bool DockerBackend::sampleOne(Sandbox& sandbox) {
  if (!sample_cgroups_) {
    return false;
  }
  std::string container;
  {
    std::lock_guard<std::mutex> lock(mu_);  // a snapshot moves the sandbox (Sandbox::container)
    container = sandbox.container;
  }
  // The directories vanish when the container exits: the last sample stands.
  const std::string memory = settings_.cgroup_root + "/memory/docker/" + container;
  const auto peak = readNumber(memory + "/memory.max_usage_in_bytes");
  const auto oom_kills = readOomKills(memory + "/memory.oom_control");
  const auto cpu_nanos =
      readNumber(settings_.cgroup_root + "/cpuacct/docker/" + container + "/cpuacct.usage");
  std::lock_guard<std::mutex> lock(mu_);
  if (sandbox.container != container) {
    return false;  // a snapshot moved it meanwhile: this sample is of a container gone
  }
  if (peak && *peak > sandbox.peak_memory_bytes.value_or(0)) {
    sandbox.peak_memory_bytes = peak;
  }
  // Counters of the containers a snapshot left behind come first (Sandbox::oom_kills_before).
  if (oom_kills && *oom_kills > 0) {
    sandbox.cgroup_oom = true;
    sandbox.cgroup_oom_kills =
        std::max(sandbox.cgroup_oom_kills, sandbox.oom_kills_before + *oom_kills);
  }
  if (cpu_nanos) {
    sandbox.cpu_seconds = sandbox.cpu_seconds_before + static_cast<double>(*cpu_nanos) / 1e9;
  }
  return oom_kills.has_value();
}

}  // namespace scs::docker
