// Running a created sandbox: its code delivered to the attached stdin, the start (attach and
// wait registered first), the thread that drains its output and gathers the exit evidence, and
// wait() and progress() reading what that thread found.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "docker_backend.h"
#include "docker_backend_sandbox.h"
#include "exit_evidence.h"
#include "sandbox_io.h"

namespace scs::docker {

using backend::Code;
using backend::LogLevel;
using backend::Status;

namespace {

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

}  // namespace

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
      if (sandbox->started || sandbox->removing || sandbox->snapshot) {
        return {Code::kRejected, "start: " + shortId(id) + " has already started"};
      }
    }
    return launch(sandbox, sink, {});
  });
}

Status DockerBackend::launch(const std::shared_ptr<Sandbox>& sandbox, backend::OutputSink* sink,
                             const std::string& checkpoint) {
  const std::string id = sandbox->container;
  // Attach before start so no output is lost, and register the wait before start: a wait
  // on a created container returns at once (F5).
  const auto began = SteadyClock::now();
  EngineReply<ConnectionPtr> attach = client_.attach(id);
  const std::string attach_took = millisSince(began);
  if (!attach.status.ok()) {
    return attach.status;
  }
  std::shared_ptr<Connection> attached(std::move(attach.value));
  const auto wait_began = SteadyClock::now();
  EngineReply<ConnectionPtr> waiting = client_.openWait(id, "next-exit");
  const std::string wait_took = millisSince(wait_began);
  if (!waiting.status.ok()) {
    attached->abort();
    return waiting.status;
  }
  std::shared_ptr<Connection> wait_connection(std::move(waiting.value));
  const auto start_began = SteadyClock::now();
  if (const Status started =
          client_.start(id, checkpoint,
                        checkpoint.empty() ? std::chrono::milliseconds{}
                                           : std::chrono::milliseconds(kSnapshotTimeout));
      !started.ok()) {
    attached->abort();
    wait_connection->abort();
    return started;
  }
  log(LogLevel::kDebug, "docker: start " + shortId(id) +
                            (checkpoint.empty() ? "" : " from its checkpoint") + ": attach " +
                            attach_took + ", wait " + wait_took + ", start " +
                            millisSince(start_began));
  std::lock_guard<std::mutex> lock(mu_);
  if (sandbox->removing) {
    attached->abort();
    wait_connection->abort();
    return {Code::kNotFound, "start: " + shortId(id) + " was removed while starting"};
  }
  sandbox->attach = attached;
  sandbox->wait = wait_connection;
  sandbox->started = true;
  // Running again: an end of this thread is the sandbox's (not a checkpoint's), and deliveries
  // held for the snapshot go to this container.
  sandbox->snapshot = false;
  sandbox->holding = false;
  sandbox->writer_idle = false;
  sandbox->thread = std::thread(&DockerBackend::runSandbox, this, sandbox, sink);
  cv_.notify_all();  // wakes the cgroup sampler
  return {};
}

backend::Status DockerBackend::snapshots(const backend::Posture& posture) {
  return guardedStatus("snapshots", [&]() -> Status {
    if (posture.runtime != "runsc") {
      return {Code::kUnsupported,
              "runtime " + posture.runtime +
                  " keeps no snapshots here: the Docker backend snapshots only gVisor sandboxes "
                  "(--runtime runsc), whose checkpoints need no CRIU"};
    }
    const EngineReply<EngineInfo> info = client_.info();
    if (!info.status.ok()) {
      return info.status;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      root_dir_ = info.value.root_dir;
    }
    if (!info.value.experimental) {
      return {Code::kUnsupported,
              "the Docker engine's checkpoints are off: set \"experimental\": true in "
              "/etc/docker/daemon.json and restart the engine (scripts/setup.sh does so where "
              "runsc is installed)"};
    }
    return {};
  });
}

// Debian's runsc (20221219) restores a container from a checkpoint once: a restored container
// checkpointed again cannot be restored ("id already in use", its state left behind), and the
// engine starts a container only from its own checkpoint directory. So every snapshot goes into
// the directory of a fresh container made from the same create body, which the next resume
// starts: each wake is a new container's first start, and the core's handle stays the same.
backend::Status DockerBackend::snapshot(const std::string& id) {
  return guardedStatus("snapshot", [&]() -> Status {
    std::shared_ptr<Sandbox> sandbox;
    std::string name;
    std::string old;
    std::string root;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto found = sandboxes_.find(id);
      if (found == sandboxes_.end()) {
        return {Code::kNotFound, "snapshot: " + shortId(id) + " was not created by this server"};
      }
      sandbox = found->second;
      if (!sandbox->session || !sandbox->started || sandbox->done || sandbox->removing ||
          sandbox->snapshot || !sandbox->create_body) {
        return {Code::kRejected, "snapshot: " + shortId(id) + " is not a running session"};
      }
      ++sandbox->generation;
      old = sandbox->container;
      root = root_dir_;
      name = sandbox->name.empty() ? std::string()
                                   : sandbox->name + "-" + std::to_string(sandbox->generation);
    }
    const auto began = SteadyClock::now();
    if (root.empty()) {
      const EngineReply<EngineInfo> info = client_.info();
      if (!info.status.ok() || info.value.root_dir.empty()) {
        return {Code::kUnavailable, "snapshot: the engine did not tell its root directory"};
      }
      root = info.value.root_dir;
    }
    std::vector<std::string> warnings;
    EngineReply<std::string> fresh = client_.create(name, sandbox->create_body, &warnings);
    if (!fresh.status.ok()) {
      // The engine may have made it before the reply was lost; the name finds it.
      if (!name.empty() && fresh.status.code != Code::kRejected &&
          fresh.status.code != Code::kNotFound) {
        if (const Status removed = client_.remove(name); !removed.ok()) {
          log(LogLevel::kWarning, "docker: could not remove " + name + ": " + removed.message);
        }
      }
      return fresh.status;
    }
    const auto discard = [&](const std::string& why) -> Status {
      if (const Status removed = client_.remove(fresh.value); !removed.ok()) {
        log(LogLevel::kWarning,
            "docker: could not remove " + shortId(fresh.value) + ": " + removed.message);
      }
      return {Code::kUnavailable, "snapshot: " + why};
    };
    if (!warnings.empty()) {
      return discard("the engine warned while creating its next container: " + warnings.front());
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      // No frame may be cut by the checkpoint: deliveries wait, and the one being written ends.
      sandbox->holding = true;
      if (!cv_.wait_for(lock, settings_.api_timeout, [&] {
            return sandbox->writer_idle || sandbox->output_ended || sandbox->removing;
          })) {
        sandbox->holding = false;
        cv_.notify_all();
        lock.unlock();
        return discard("its stdin did not drain");
      }
      // From here its output thread's end is the checkpoint's, not the sandbox's.
      sandbox->snapshot = true;
    }
    if (const Status saved = client_.checkpoint(
            old, kCheckpointName, root + "/containers/" + fresh.value + "/checkpoints",
            kSnapshotTimeout);
        !saved.ok()) {
      {
        // It may still run: its end is its own again, and nothing waits for a resume.
        std::lock_guard<std::mutex> lock(mu_);
        sandbox->snapshot = false;
        sandbox->holding = false;
      }
      cv_.notify_all();
      discard(saved.message);
      return saved;  // it may have stopped: the core removes it
    }
    const std::string took = millisSince(began);
    std::thread thread;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // The container has stopped, so its attach stream and wait end and the thread with them.
      if (!cv_.wait_for(lock, settings_.api_timeout,
                        [&] { return sandbox->paused || sandbox->removing; })) {
        lock.unlock();
        discard("the output thread did not end with the checkpoint");
        return {Code::kInternal, "snapshot: the output thread of " + shortId(id) +
                                     " did not end with its checkpoint"};
      }
      if (sandbox->removing) {
        lock.unlock();
        discard("it was removed meanwhile");
        return {Code::kNotFound, "snapshot: " + shortId(id) + " was removed meanwhile"};
      }
      thread = std::move(sandbox->thread);
      sandbox->attach.reset();
      sandbox->wait.reset();
      sandbox->started = false;
      sandbox->output_ended = false;
      sandbox->die_event = false;
      sandbox->kill_event = false;
      sandbox->paused = false;
      sandbox->container = fresh.value;
      // The fresh container's cgroup counts from zero.
      sandbox->oom_kills_before = sandbox->cgroup_oom_kills;
      sandbox->cpu_seconds_before = sandbox->cpu_seconds.value_or(0);
    }
    thread.join();
    if (const Status removed = client_.remove(old); !removed.ok()) {
      log(LogLevel::kWarning,
          "docker: could not remove " + shortId(old) + " after its checkpoint: " + removed.message);
    }
    log(LogLevel::kDebug, "docker: checkpoint of " + shortId(id) + " took " + took + ", into " +
                              shortId(fresh.value));
    return {};
  });
}

backend::Status DockerBackend::resume(const std::string& id, backend::OutputSink* sink) {
  return guardedStatus("resume", [&]() -> Status {
    std::shared_ptr<Sandbox> sandbox;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto found = sandboxes_.find(id);
      if (found == sandboxes_.end()) {
        return {Code::kNotFound, "resume: " + shortId(id) + " was not created by this server"};
      }
      sandbox = found->second;
      if (!sandbox->snapshot || sandbox->started || sandbox->removing) {
        return {Code::kRejected, "resume: " + shortId(id) + " has no snapshot to resume from"};
      }
    }
    if (const Status started = launch(sandbox, sink, kCheckpointName); !started.ok()) {
      return started;
    }
    // Its memory is running again: the copy on disk only takes room.
    if (const Status deleted = client_.deleteCheckpoint(sandbox->container, kCheckpointName);
        !deleted.ok()) {
      log(LogLevel::kWarning, "docker: could not delete the checkpoint of " + shortId(id) +
                                  " (it goes with the container): " + deleted.message);
    }
    return {};
  });
}

backend::SavedReply DockerBackend::saved(const std::string& id) {
  return guarded<backend::SavedReply>("saved", [&]() -> backend::SavedReply {
    std::lock_guard<std::mutex> lock(mu_);
    const auto found = sandboxes_.find(id);
    if (found == sandboxes_.end()) {
      return {{Code::kNotFound, "saved: " + shortId(id) + " was not created by this server"}, {}};
    }
    const Sandbox& sandbox = *found->second;
    if (!sandbox.snapshot || sandbox.started || sandbox.removing || !sandbox.create_body) {
      return {{Code::kRejected, "saved: " + shortId(id) + " is not snapshotted"}, {}};
    }
    json::ObjectPtr record = json::newObject();
    record->set("container", sandbox.container);
    record->set("name", sandbox.name);
    record->set("generation", sandbox.generation);
    record->set("create_body", sandbox.create_body);
    record->set("memory_limit", sandbox.memory_limit);
    record->set("oom_kills_before", sandbox.oom_kills_before);
    record->set("cpu_seconds_before", sandbox.cpu_seconds_before);
    return {{}, json::stringify(record)};
  });
}

backend::Status DockerBackend::adopt(const std::string& id, const std::string& saved) {
  return guardedStatus("adopt", [&]() -> Status {
    const json::ObjectPtr record = json::parseObject(saved);
    const auto container = json::string(record, "container");
    const auto name = json::string(record, "name");
    const auto generation = json::integer(record, "generation");
    json::ObjectPtr body = json::object(record, "create_body");
    if (!record || !container || !name || !generation || !body || container->empty()) {
      return {Code::kRejected, "adopt: the saved record of " + shortId(id) + " is not one of ours"};
    }
    // Only a container of ours that stands stopped is taken back; its checkpoint is its own.
    const EngineReply<json::ObjectPtr> inspected = client_.inspect(*container);
    if (!inspected.status.ok()) {
      return {inspected.status.code, "adopt: container " + shortId(*container) + " of " +
                                         shortId(id) + ": " + inspected.status.message};
    }
    const json::ObjectPtr labels = json::object(json::object(inspected.value, "Config"), "Labels");
    const json::ObjectPtr state = json::object(inspected.value, "State");
    const std::string status = json::string(state, "Status").value_or("");
    if (json::string(labels, kManagedLabel).value_or("") != "true") {
      return {Code::kRejected, "adopt: container " + shortId(*container) + " is not managed"};
    }
    // Made from this create body (its labels name the run and the uid), and never started: a
    // snapshot's container holds the checkpoint until its first start.
    for (const auto& [key, value] : json::stringMap(json::object(body, "Labels"))) {
      if (json::string(labels, key) != value) {
        return {Code::kRejected, "adopt: container " + shortId(*container) +
                                     " was not made from the saved create body (label " + key +
                                     ")"};
      }
    }
    if (status != "created") {
      return {Code::kRejected, "adopt: container " + shortId(*container) + " is " + status +
                                   ", not stopped with a checkpoint"};
    }
    auto sandbox = std::make_shared<Sandbox>();
    sandbox->id = id;
    sandbox->container = *container;
    sandbox->name = *name;
    sandbox->generation = static_cast<int>(*generation);
    sandbox->create_body = body;
    sandbox->memory_limit = json::integer(record, "memory_limit").value_or(0);
    sandbox->oom_kills_before = json::integer(record, "oom_kills_before").value_or(0);
    if (record->has("cpu_seconds_before") && record->get("cpu_seconds_before").isNumeric()) {
      sandbox->cpu_seconds_before = record->getValue<double>("cpu_seconds_before");
    }
    sandbox->cgroup_oom_kills = sandbox->oom_kills_before;
    sandbox->cpu_seconds = sandbox->cpu_seconds_before;
    sandbox->session = true;
    sandbox->delivered = true;
    sandbox->snapshot = true;
    std::lock_guard<std::mutex> lock(mu_);
    if (sandboxes_.count(id) != 0) {
      return {Code::kRejected, "adopt: " + shortId(id) + " is a sandbox of this server already"};
    }
    sandboxes_[id] = sandbox;
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
          sandbox->writer_idle = true;  // nothing in flight: a snapshot may be taken now
          cv_.notify_all();
          cv_.wait(lock,
                   [&] { return (!sandbox->archive.empty() && !sandbox->holding) || over(); });
          sandbox->writer_idle = false;
          // Held for a snapshot: what waits goes to the container that resumes it.
          if (sandbox->archive.empty() || sandbox->holding) {
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
      facts.record = client_.inspect(sandbox->container);
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
  bool paused = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Stopped by its checkpoint: the sandbox has not ended, and resume() starts a new thread.
    paused = sandbox->snapshot;
    if (paused) {
      sandbox->paused = true;
    } else {
      sandbox->result = std::move(result);
      sandbox->done = true;
    }
  }
  cv_.notify_all();
  if (!paused) {
    sink->ended();
  }
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

}  // namespace scs::docker
