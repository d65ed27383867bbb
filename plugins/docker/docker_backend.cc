#include "docker_backend.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "exit_evidence.h"
#include "sandbox_io.h"

namespace scs::docker {

using backend::Code;
using backend::LogLevel;
using backend::Status;

struct DockerBackend::Sandbox {
  std::string id;
  std::string archive;     // held from deliver() until the stdin writer takes it
  bool delivered = false;  // deliver() succeeded; a second one is refused unless a session's
  bool session = false;    // takes any number of deliveries; stdin stays open
  std::chrono::steady_clock::time_point delivered_at;
  bool started = false;
  bool output_ended = false;    // the attach stream ended: nothing reads stdin any more
  bool done = false;            // the run ended and `result` is final
  bool removing = false;        // remove() has begun; no new thread may start
  bool die_event = false;       // the event stream reported the container's exit
  bool oom_event = false;       // the event stream reported an OOM kill
  std::int64_t oom_events = 0;  // how many
  bool kill_event = false;      // the event stream reported a kill (ours or anyone's)
  bool kill_requested = false;  // kill() was called for it
  bool cgroup_oom = false;
  std::int64_t cgroup_oom_kills = 0;  // the cgroup's oom_kill counter, as last read
  std::int64_t memory_limit = 0;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<double> cpu_seconds;
  std::shared_ptr<Connection> attach;
  std::shared_ptr<Connection> wait;
  std::thread thread;
  backend::WaitReply result;
};

namespace {

constexpr std::size_t kMaxEventLine = 1u << 20;
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{5000};

// Runs `body`, turning an escaping exception into kInternal: nothing crosses the ABI.
template <typename Reply, typename Body>
Reply guarded(const char* operation, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    Reply reply{};
    reply.status = {Code::kInternal, std::string(operation) + " failed: " + e.what()};
    return reply;
  } catch (...) {
    Reply reply{};
    reply.status = {Code::kInternal, std::string(operation) + " failed: unknown exception"};
    return reply;
  }
}

template <typename Body>
Status guardedStatus(const char* operation, Body&& body) {
  struct Holder {
    Status status;
  };
  return guarded<Holder>(operation, [&] { return Holder{body()}; }).status;
}

std::string shortId(const std::string& id) { return id.substr(0, 12); }

using SteadyClock = std::chrono::steady_clock;

std::string millisBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms",
                std::chrono::duration<double, std::milli>(to - from).count());
  return text;
}

std::string millisSince(SteadyClock::time_point since) {
  return millisBetween(since, SteadyClock::now());
}

using Steps = std::vector<std::pair<const char*, SteadyClock::time_point>>;

// "code delivered 812.0 ms after start; from delivery: written 0.2 ms, output ended 24.9 ms":
// each step is timed from the later of the start and the delivery, so a sandbox that idled
// before its run reads like one that was started for it.
std::string timeline(SteadyClock::time_point started,
                     std::optional<SteadyClock::time_point> delivered, const Steps& steps) {
  std::string text;
  SteadyClock::time_point from = started;
  if (!delivered) {
    text = "no code delivered; from start:";
  } else if (*delivered <= started) {
    text = "code delivered before start; from start:";
  } else {
    text = "code delivered " + millisBetween(started, *delivered) + " after start; from delivery:";
    from = *delivered;
  }
  const char* separator = " ";
  for (const auto& [step, at] : steps) {
    text += separator;
    text += step;
    text += " " + millisBetween(from, at);
    separator = ", ";
  }
  return text;
}

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

DockerBackend::DockerBackend(HttpTransportPtr transport, const DockerSettings& settings,
                             backend::LogSink* log)
    : transport_(std::move(transport)),
      settings_(settings),
      log_(log),
      client_(*transport_, settings.api_timeout),
      created_at_(std::chrono::system_clock::now()) {}

std::unique_ptr<DockerBackend> DockerBackend::connect(HttpTransportPtr transport,
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
  const Result<EngineInfo> info = backend->client_.info();
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
    const Result<EngineInfo> info = client_.info();
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
    Result<std::string> created = client_.create(name, body.body, &warnings);
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

backend::InspectReply DockerBackend::inspect(const std::string& id) {
  return guarded<backend::InspectReply>("inspect", [&] {
    backend::InspectReply reply;
    const auto began = SteadyClock::now();
    const Result<json::ObjectPtr> record = client_.inspect(id);
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

Status DockerBackend::deliver(const std::string& id, const std::string& archive) {
  return guardedStatus("deliver", [&]() -> Status {
    std::string held = archive;  // in memory only, never on disk; copied outside the lock
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto found = sandboxes_.find(id);
      if (found == sandboxes_.end()) {
        return {Code::kNotFound, "deliver: " + shortId(id) + " was not created by this server"};
      }
      Sandbox& sandbox = *found->second;
      if (sandbox.delivered && !sandbox.session) {
        return {Code::kRejected, "deliver: " + shortId(id) + " has already been given its code"};
      }
      if (sandbox.removing) {
        return {Code::kNotFound, "deliver: " + shortId(id) + " is being removed"};
      }
      if (sandbox.output_ended || sandbox.done) {
        return {Code::kUnavailable,
                "deliver: " + shortId(id) + " has already ended and cannot take code"};
      }
      if (sandbox.archive.empty()) {
        sandbox.archive.swap(held);
      } else {
        sandbox.archive += held;  // a session's bytes the writer has not taken yet, in order
      }
      if (!sandbox.delivered) {
        sandbox.delivered = true;
        sandbox.delivered_at = SteadyClock::now();
      }
    }
    // Wakes the stdin writer of a started sandbox, and the cgroup sampler.
    cv_.notify_all();
    return {};
  });
}

Status DockerBackend::start(const std::string& id, backend::OutputSink* sink) {
  return guardedStatus("start", [&]() -> Status {
    std::shared_ptr<Sandbox> sandbox;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto found = sandboxes_.find(id);
      if (found == sandboxes_.end()) {
        return {Code::kNotFound, "start: " + shortId(id) + " was not created by this server"};
      }
      sandbox = found->second;
      if (sandbox->started || sandbox->removing) {
        return {Code::kRejected, "start: " + shortId(id) + " has already started"};
      }
    }
    // Attach before start so no output is lost, and register the wait before start: a wait
    // on a created container returns at once (F5).
    const auto began = SteadyClock::now();
    Result<ConnectionPtr> attach = client_.attach(id);
    const std::string attach_took = millisSince(began);
    if (!attach.status.ok()) {
      return attach.status;
    }
    std::shared_ptr<Connection> attached(std::move(attach.value));
    const auto wait_began = SteadyClock::now();
    Result<ConnectionPtr> waiting = client_.openWait(id, "next-exit");
    const std::string wait_took = millisSince(wait_began);
    if (!waiting.status.ok()) {
      attached->abort();
      return waiting.status;
    }
    std::shared_ptr<Connection> wait_connection(std::move(waiting.value));
    const auto start_began = SteadyClock::now();
    if (const Status started = client_.start(id); !started.ok()) {
      attached->abort();
      wait_connection->abort();
      return started;
    }
    log(LogLevel::kDebug, "docker: start " + shortId(id) + ": attach " + attach_took + ", wait " +
                              wait_took + ", start " + millisSince(start_began));
    std::lock_guard<std::mutex> lock(mu_);
    if (sandbox->removing) {
      attached->abort();
      wait_connection->abort();
      return {Code::kNotFound, "start: " + shortId(id) + " was removed while starting"};
    }
    sandbox->attach = attached;
    sandbox->wait = wait_connection;
    sandbox->started = true;
    sandbox->thread = std::thread(&DockerBackend::runSandbox, this, sandbox, sink);
    cv_.notify_all();  // wakes the cgroup sampler
    return {};
  });
}

void DockerBackend::runSandbox(std::shared_ptr<Sandbox> sandbox, backend::OutputSink* sink) {
  std::shared_ptr<Connection> attach;
  std::shared_ptr<Connection> wait_connection;
  {
    std::lock_guard<std::mutex> lock(mu_);
    attach = sandbox->attach;
    wait_connection = sandbox->wait;
  }
  backend::WaitReply result;
  const auto began = SteadyClock::now();
  std::optional<SteadyClock::time_point> delivered_at;
  Steps steps;
  try {
    // A sandbox started idle keeps its stdin open until deliver() hands over its code; a
    // session's, until it ends.
    StdinWriter writer(
        *attach,
        [&]() -> std::optional<StdinWriter::Delivery> {
          std::unique_lock<std::mutex> lock(mu_);
          const auto over = [&] { return sandbox->removing || stopping_ || sandbox->output_ended; };
          cv_.wait(lock, [&] { return !sandbox->archive.empty() || over(); });
          if (sandbox->archive.empty()) {
            return std::nullopt;
          }
          StdinWriter::Delivery delivery;
          delivery.archive.swap(sandbox->archive);
          delivery.delivered_at = sandbox->delivered_at;
          delivery.write = !over();
          delivery.last = !sandbox->session;
          return delivery;
        },
        [&] {
          {
            std::lock_guard<std::mutex> lock(mu_);
            sandbox->output_ended = true;
          }
          cv_.notify_all();
        });
    ExitFacts facts;
    const PumpResult pumped = pumpOutput(*attach, *sink);
    const auto output_ended = SteadyClock::now();
    writer.finish();
    delivered_at = writer.deliveredAt();
    if (const auto written = writer.writtenAt()) {
      steps.emplace_back("written", *written);
    }
    steps.emplace_back("output ended", output_ended);
    sampleOne(*sandbox);
    facts.system_error = pumped.system_error;
    facts.stream_broke = pumped.broke;
    facts.stream_malformed = pumped.malformed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      facts.removing = sandbox->removing;
    }
    if (!facts.removing && !delivered_at) {
      log(LogLevel::kDebug, "docker: " + shortId(sandbox->id) + " ended before it had its code");
    } else if (!facts.removing && !writer.written()) {
      log(LogLevel::kDebug, "docker: " + shortId(sandbox->id) + " did not read all of its code");
    }

    std::vector<char> buffer(64u << 10);
    std::ptrdiff_t read = 0;
    while (facts.wait_body.size() < (64u << 10) &&
           (read = wait_connection->read(buffer.data(), buffer.size())) > 0) {
      facts.wait_body.append(buffer.data(), static_cast<std::size_t>(read));
    }
    facts.wait_broke = read < 0;
    steps.emplace_back("wait body", SteadyClock::now());
    {
      std::lock_guard<std::mutex> lock(mu_);
      facts.removing = sandbox->removing;
    }
    // A removed sandbox has no record left to read.
    if (!facts.removing) {
      facts.record = client_.inspect(sandbox->id);
    }
    steps.emplace_back("inspect", SteadyClock::now());

    const bool exited = mergeExitEvidence(facts).exit.exited;
    std::unique_lock<std::mutex> lock(mu_);
    if (exited && events_connected_) {
      // The engine emits "oom" before "die"; once "die" is seen, any OOM has been recorded.
      cv_.wait_for(lock, settings_.die_event_grace, [&] {
        return sandbox->die_event || !events_connected_ || sandbox->removing || stopping_;
      });
    }
    steps.emplace_back("die event", SteadyClock::now());
    facts.oom_event = sandbox->oom_event;
    facts.kill_event = sandbox->kill_event;
    facts.kill_requested = sandbox->kill_requested;
    facts.cgroup_oom = sandbox->cgroup_oom;
    facts.peak_memory_bytes = sandbox->peak_memory_bytes;
    facts.memory_limit_bytes = sandbox->memory_limit;
    facts.cpu_seconds = sandbox->cpu_seconds;
    lock.unlock();
    result = mergeExitEvidence(facts);
  } catch (const std::exception& e) {
    result = backend::WaitReply{};
    result.status = {Code::kInternal,
                     std::string("the sandbox's output thread failed: ") + e.what()};
  }
  log(LogLevel::kDebug,
      "docker: " + shortId(sandbox->id) + ": " + timeline(began, delivered_at, steps));
  {
    std::lock_guard<std::mutex> lock(mu_);
    sandbox->result = std::move(result);
    sandbox->done = true;
  }
  cv_.notify_all();
  sink->ended();
}

backend::WaitReply DockerBackend::wait(const std::string& id, std::chrono::milliseconds timeout) {
  return guarded<backend::WaitReply>("wait", [&] {
    std::unique_lock<std::mutex> lock(mu_);
    const auto found = sandboxes_.find(id);
    if (found == sandboxes_.end()) {
      backend::WaitReply reply;
      reply.status = {Code::kNotFound, "wait: " + shortId(id) + " is not a sandbox of this server"};
      return reply;
    }
    const std::shared_ptr<Sandbox> sandbox = found->second;
    if (cv_.wait_for(lock, timeout, [&] { return sandbox->done; })) {
      return sandbox->result;
    }
    return backend::WaitReply{};  // still running: exited stays false
  });
}

backend::ProgressReply DockerBackend::progress(const std::string& id) {
  return guarded<backend::ProgressReply>("progress", [&] {
    backend::ProgressReply reply;
    std::shared_ptr<Sandbox> sandbox;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto found = sandboxes_.find(id);
      if (found == sandboxes_.end()) {
        reply.status = {Code::kNotFound,
                        "progress: " + shortId(id) + " is not a sandbox of this server"};
        return reply;
      }
      sandbox = found->second;
    }
    // The kernel counts an OOM kill in the cgroup before the killed process is gone, so a
    // read after the launcher has seen every process end has seen any OOM kill of the run.
    const bool read = sampleOne(*sandbox);
    std::lock_guard<std::mutex> lock(mu_);
    reply.oom_known = read;
    reply.oom_killed = sandbox->cgroup_oom || sandbox->oom_event;
    reply.oom_kills = std::max(sandbox->cgroup_oom_kills, sandbox->oom_events);
    reply.peak_memory_bytes = sandbox->peak_memory_bytes;
    reply.cpu_seconds = sandbox->cpu_seconds;
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
    return client_.kill(id);
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
    const Status removed = client_.remove(id);
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
    Result<std::vector<ContainerSummary>> listed = client_.list(label_key);
    reply.status = listed.status;
    for (auto& container : listed.value) {
      reply.sandboxes.push_back({std::move(container.id), std::move(container.labels)});
    }
    return reply;
  });
}

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
    Result<ConnectionPtr> stream;
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
    const auto found = sandboxes_.find(id);
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
  // The directories vanish when the container exits: the last sample stands.
  const std::string memory = settings_.cgroup_root + "/memory/docker/" + sandbox.id;
  const auto peak = readNumber(memory + "/memory.max_usage_in_bytes");
  const auto oom_kills = readOomKills(memory + "/memory.oom_control");
  const auto cpu_nanos =
      readNumber(settings_.cgroup_root + "/cpuacct/docker/" + sandbox.id + "/cpuacct.usage");
  std::lock_guard<std::mutex> lock(mu_);
  if (peak && *peak > sandbox.peak_memory_bytes.value_or(0)) {
    sandbox.peak_memory_bytes = peak;
  }
  if (oom_kills && *oom_kills > 0) {
    sandbox.cgroup_oom = true;
    sandbox.cgroup_oom_kills = std::max(sandbox.cgroup_oom_kills, *oom_kills);
  }
  if (cpu_nanos) {
    sandbox.cpu_seconds = static_cast<double>(*cpu_nanos) / 1e9;
  }
  return oom_kills.has_value();
}

}  // namespace scs::docker
