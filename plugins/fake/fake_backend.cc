// FakeBackend's registry of sandboxes and the engine calls on it: create, inspect, deliver (a
// run's archive, or a session's frames), wait, progress, kill, remove and list.
#include "fake_backend.h"

#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "fake_backend_internal.h"
#include "launcher_side.h"

namespace scs::fake {
namespace {

namespace launcher = backend::launcher;

using backend::Code;
using backend::Status;

constexpr std::int64_t kBytesPerGb = std::int64_t{1} << 30;

Status endedStatus(const std::string& id) {
  return Status{Code::kUnavailable, "fake: sandbox " + id + " has already ended"};
}

}  // namespace

FakeBackend::FakeBackend(Options options, backend::LogSink* log, const Clock* clock)
    : options_(std::move(options)), log_(log), clock_(clock) {}

FakeBackend::~FakeBackend() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_removals_ = false;
    for (auto& [id, sandbox] : sandboxes_) {
      sandbox->killed = true;
      sandbox->removed = true;
      if (sandbox->worker.joinable()) {
        workers.push_back(std::move(sandbox->worker));
      }
    }
    cv_.notify_all();
  }
  for (auto& worker : workers) {
    worker.join();
  }
}

void FakeBackend::log(backend::LogLevel level, const std::string& message) {
  if (log_ != nullptr) {
    log_->log(level, message);
  }
}

std::shared_ptr<FakeBackend::Sandbox> FakeBackend::find(const std::string& id) {
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

backend::Status FakeBackend::supports(const backend::Posture&) {
  if (options_.fail.count("supports") != 0) {
    return {Code::kUnsupported, "fake: every control of the posture, as scripted"};
  }
  return {};
}

backend::CapacityReply FakeBackend::capacity() {
  return guardReply<backend::CapacityReply>(options_.fail, "capacity", [&] {
    backend::CapacityReply reply;
    reply.capacity.cores = options_.cores;
    reply.capacity.memory_bytes =
        static_cast<std::int64_t>(options_.memory_gb * static_cast<double>(kBytesPerGb));
    return reply;
  });
}

backend::CreateReply FakeBackend::create(const backend::SandboxSpec& spec) {
  return guardReply<backend::CreateReply>(options_.fail, "create", [&] {
    backend::CreateReply reply;
    auto sandbox = std::make_shared<Sandbox>();
    sandbox->spec = spec;
    sandbox->serves_session = std::find(spec.command.begin(), spec.command.end(),
                                        std::string(launcher::kFlagSession)) != spec.command.end();
    {
      std::lock_guard<std::mutex> lock(mu_);
      sandbox->id = "fake-" + std::to_string(next_id_++);
      sandboxes_[sandbox->id] = sandbox;
      if (options_.keep_removed) {
        history_.push_back(sandbox);
      }
      cv_.notify_all();
    }
    reply.id = sandbox->id;
    log(backend::LogLevel::kDebug, "fake: created " + reply.id);
    return reply;
  });
}

backend::InspectReply FakeBackend::inspect(const std::string& id) {
  return guardReply<backend::InspectReply>(options_.fail, "inspect", [&] {
    std::lock_guard<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return failedReply<backend::InspectReply>(notFound(id));
    }
    backend::InspectReply reply;
    reply.posture = sandbox->spec.posture;
    if (!options_.posture_field.empty()) {
      alterPosture(options_.posture_field, &reply.posture);
    }
    return reply;
  });
}

bool FakeBackend::hasEnded(const Sandbox& sandbox) {
  return sandbox.state == State::kExited || (sandbox.state != State::kCreated && sandbox.killed);
}

Status FakeBackend::deliverToSession(Sandbox& sandbox, const std::string& bytes) {
  if (hasEnded(sandbox)) {
    return endedStatus(sandbox.id);
  }
  std::optional<launcher::StdinFrame> frame = oneFrame(bytes);
  if (frame && frame->kind == launcher::FrameKind::kInterrupt) {
    (sandbox.runs.empty() ? sandbox.interrupt : sandbox.runs.back().interrupted) = true;
  } else {
    if (!frame || frame->kind != launcher::FrameKind::kRun) {
      return Status{Code::kRejected, "fake: a session delivery must be one whole frame"};
    }
    sandbox.archive = std::move(frame->payload);
    sandbox.runs.push_back({sandbox.archive, false});
    sandbox.delivered = true;
  }
  cv_.notify_all();
  return Status{};
}

Status FakeBackend::becomeSession(Sandbox& sandbox, const std::string& frame) {
  const std::optional<launcher::StdinFrame> parsed = oneFrame(frame);
  if (!parsed || parsed->kind != launcher::FrameKind::kSession) {
    return Status{Code::kRejected, "fake: a malformed session frame"};
  }
  if (hasEnded(sandbox)) {
    return endedStatus(sandbox.id);
  }
  sandbox.serves_session = true;
  sandbox.archive = frame;
  cv_.notify_all();  // wakes a sandbox started idle
  return Status{};
}

Status FakeBackend::deliver(const std::string& id, const std::string& archive) {
  return guardStatus([&] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto sandbox = find(id);
      if (sandbox && !sandbox->removed && sandbox->serves_session) {
        return deliverToSession(*sandbox, archive);
      }
      // A run's sandbox with egress keeps its stdin open after the code: the server's frames.
      if (sandbox && !sandbox->removed && sandbox->delivered &&
          archive.rfind(std::string(launcher::kEgressStdinFrame) + " ", 0) == 0) {
        if (!sandbox->egress_reader.feed(archive, sandbox->egress_in)) {
          return Status{Code::kRejected, "fake: " + sandbox->egress_reader.error()};
        }
        cv_.notify_all();
        return Status{};
      }
      if (sandbox && !sandbox->removed && !sandbox->delivered && opensSession(archive)) {
        return becomeSession(*sandbox, archive);
      }
    }
    std::string control;
    std::string nonce;
    std::string stdin_data;
    if (!extractFile(archive, controlPath(launcher::kControlFile), &control)) {
      nonce = nonceOf(control);
      extractFile(archive, controlPath(launcher::kStdinFile), &stdin_data);
    }
    std::string code;
    if (auto problem = extractFile(archive, codeFileOf(control), &code)) {
      return Status{Code::kRejected, "fake: " + *problem};
    }
    Script script;
    if (auto problem = parseScript(code, &script)) {
      return Status{Code::kRejected, "fake: " + *problem};
    }
    if (script.fail.count("deliver") != 0) {
      return scripted("deliver");
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox || sandbox->removed) {
      return notFound(id);
    }
    if (sandbox->delivered) {
      return Status{Code::kRejected, "fake: sandbox " + id + " already has its code"};
    }
    if (hasEnded(*sandbox)) {
      return endedStatus(id);
    }
    sandbox->script = std::move(script);
    sandbox->archive = archive;
    sandbox->nonce = std::move(nonce);
    sandbox->egress_nonce = stringOf(control, launcher::kControlEgress);
    sandbox->stdin_data = std::move(stdin_data);
    sandbox->delivered = true;
    cv_.notify_all();  // wakes a sandbox started idle
    return Status{};
  });
}

backend::WaitReply FakeBackend::wait(const std::string& id, std::chrono::milliseconds timeout) {
  return guardReply<backend::WaitReply>([&] {
    std::unique_lock<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return failedReply<backend::WaitReply>(notFound(id));
    }
    if (sandbox->script.fail.count("wait") != 0) {
      return failedReply<backend::WaitReply>(scripted("wait"));
    }
    backend::WaitReply reply;
    if (sandbox->delivered) {
      ++sandbox->waits;
      cv_.notify_all();
    }
    waitFor(lock, timeout, [&] { return sandbox->state == State::kExited || sandbox->removed; });
    if (sandbox->state == State::kExited) {
      reply.exit = sandbox->exit;
    } else if (sandbox->removed) {
      reply.status = notFound(id);
    }
    return reply;
  });
}

// The script says what the cgroup counters would: an OOM kill once the code has arrived.
backend::ProgressReply FakeBackend::progress(const std::string& id) {
  return guardReply<backend::ProgressReply>([&] {
    std::lock_guard<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return failedReply<backend::ProgressReply>(notFound(id));
    }
    backend::ProgressReply reply;
    reply.oom_known = true;
    reply.oom_killed = sandbox->delivered && (sandbox->script.oom || sandbox->script.child_oom);
    reply.oom_kills = sandbox->serves_session ? sandbox->oom_kills : (reply.oom_killed ? 1 : 0);
    reply.oom_killed = reply.oom_killed || sandbox->oom_kills > 0;
    reply.peak_memory_bytes =
        sandbox->delivered ? sandbox->script.peak_memory_bytes : options_.idle_peak_bytes;
    reply.cpu_seconds = sandbox->script.cpu_seconds;
    return reply;
  });
}

Status FakeBackend::kill(const std::string& id) {
  std::unique_lock<std::mutex> lock(mu_);
  if (throw_on_next_kill_) {
    throw_on_next_kill_ = false;
    throw std::runtime_error("fake kill exploded");
  }
  lock.unlock();
  return guardStatus([&] {
    std::lock_guard<std::mutex> guard(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return notFound(id);
    }
    sandbox->kill_seen = true;
    if (!(sandbox->delivered && sandbox->script.ignore_kill)) {
      sandbox->killed = true;
    }
    cv_.notify_all();
    return Status{};
  });
}

Status FakeBackend::remove(const std::string& id) {
  return guardStatus([&] {
    std::thread worker;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (options_.remove_delay.count() > 0 && find(id)) {
        waitFor(lock, options_.remove_delay, [] { return false; });
      }
      auto held = find(id);
      if (held && hold_removals_) {
        held->removing = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !hold_removals_; });
      }
      auto sandbox = find(id);
      if (!sandbox) {
        return Status{};
      }
      sandbox->killed = true;
      sandbox->removed = true;
      worker = std::move(sandbox->worker);
      sandboxes_.erase(id);
      cv_.notify_all();
    }
    if (worker.joinable()) {
      worker.join();
    }
    log(backend::LogLevel::kDebug, "fake: removed " + id);
    return Status{};
  });
}

backend::ListReply FakeBackend::list(const std::string& label_key) {
  return guardReply<backend::ListReply>(options_.fail, "list", [&] {
    backend::ListReply reply;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, sandbox] : sandboxes_) {
      if (sandbox->spec.labels.count(label_key) != 0) {
        reply.sandboxes.push_back(backend::SandboxInfo{id, sandbox->spec.labels});
      }
    }
    return reply;
  });
}

backend::Status FakeBackend::buildImage(backend::ImageLayer layer) {
  return guardStatus([&] {
    if (layer.archive.size() % 512 != 0 || layer.image.empty()) {
      return Status{Code::kRejected, "fake: build image: the layer is not a ustar archive"};
    }
    std::lock_guard<std::mutex> lock(mu_);
    images_.insert_or_assign(layer.image,
                             backend::ImageInfo{layer.image, layer.base_image, true, layer.labels});
    return Status{};
  });
}

backend::Status FakeBackend::removeImage(const std::string& image) {
  return guardStatus([&] {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, sandbox] : sandboxes_) {
      if (sandbox->spec.posture.image == image) {
        return Status{Code::kRejected, "fake: remove image: sandbox " + id + " uses " + image};
      }
    }
    images_.erase(image);
    return Status{};
  });
}

backend::ImageListReply FakeBackend::listImages(const std::string& label_key) {
  return guardReply<backend::ImageListReply>([&] {
    backend::ImageListReply reply;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, info] : images_) {
      if (info.labels.count(label_key) != 0) {
        reply.images.push_back(info);
      }
    }
    return reply;
  });
}

}  // namespace scs::fake
