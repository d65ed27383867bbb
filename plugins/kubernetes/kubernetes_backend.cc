// KubernetesBackend: options parsed, the cluster reached and checked, and each sandbox's life
// around PodApi: stdin over attach, a pump thread per sandbox, the exit read from the Pod.

#include "kubernetes_backend.h"

#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "cluster_access.h"
#include "text.h"

namespace scs::kubernetes {
namespace {

using backend::Code;
using backend::Status;

std::map<std::string, std::string> serviceEnvironment() {
  std::map<std::string, std::string> environment;
  for (const char* name : {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
    if (const char* value = std::getenv(name)) {
      environment[name] = value;
    }
  }
  return environment;
}

Status notFound(const std::string& id) { return {Code::kNotFound, "kubernetes: no sandbox " + id}; }

}  // namespace

std::optional<std::string> parseOptions(const std::map<std::string, std::string>& raw,
                                        Options* options) {
  for (const auto& [key, value] : raw) {
    const auto milliseconds = [&](std::chrono::milliseconds* out) -> std::optional<std::string> {
      const auto number = text::wholeNumber(value, 1, 3'600'000);
      if (!number) {
        return "kubernetes: " + key + " must be a whole number of milliseconds in 1..3600000";
      }
      *out = std::chrono::milliseconds(*number);
      return std::nullopt;
    };
    if (key == "kube-config") {
      options->kube_config = value;
    } else if (key == "kube-context") {
      options->kube_context = value;
    } else if (key == "namespace") {
      options->namespace_name = value;
    } else if (key == "nameserver") {
      options->nameserver = value;
    } else if (key == "seccomp-localhost") {
      options->seccomp_localhost = value;
    } else if (key == "seccomp-localhost-file") {
      options->seccomp_localhost_file = value;
    } else if (key == "service-account-dir") {
      options->service_account_dir = value;
    } else if (key == "api-timeout-ms") {
      if (auto problem = milliseconds(&options->api_timeout)) {
        return problem;
      }
    } else if (key == "start-timeout-ms") {
      if (auto problem = milliseconds(&options->start_timeout)) {
        return problem;
      }
    } else {
      return "kubernetes: unknown backend option '" + key +
             "' (known: kube-config, kube-context, namespace, nameserver, seccomp-localhost, "
             "seccomp-localhost-file, service-account-dir, api-timeout-ms, start-timeout-ms)";
    }
  }
  // The API server validates a localhostProfile as a path beneath the kubelet's seccomp
  // directory: an absolute one, or one with "..", would fail every Pod's create with 422.
  const std::string& profile = options->seccomp_localhost;
  const std::vector<std::string_view> steps = text::split(profile, '/');
  if (!profile.empty() &&
      (profile.front() == '/' || std::find(steps.begin(), steps.end(), "..") != steps.end())) {
    return "kubernetes: seccomp-localhost is a path relative to the kubelet's seccomp directory "
           "(its --root-dir's seccomp/, e.g. profiles/scs.json), without '..', got '" +
           profile + "'";
  }
  if (options->seccomp_localhost.empty() != options->seccomp_localhost_file.empty()) {
    return "kubernetes: seccomp-localhost and seccomp-localhost-file go together: the "
           "profile's path beneath the kubelet's seccomp directory and a file here with the text "
           "the nodes hold there";
  }
  return std::nullopt;
}

std::unique_ptr<KubernetesBackend> KubernetesBackend::connect(const Options& options,
                                                              backend::LogSink* log,
                                                              std::string* error) {
  const AccessReply access =
      options.kube_config.empty()
          ? inClusterAccess(options.service_account_dir, serviceEnvironment())
          : kubeconfigAccess(options.kube_config, options.kube_context);
  if (!access.error.empty()) {
    *error = "kubernetes: " + access.error;
    return nullptr;
  }
  PodSettings settings;
  settings.namespace_name =
      options.namespace_name.empty() ? access.access.namespace_name : options.namespace_name;
  if (settings.namespace_name.empty()) {
    *error = "kubernetes: name the namespace of sandbox Pods (backend option namespace)";
    return nullptr;
  }
  settings.nameserver = options.nameserver;
  settings.seccomp_localhost = options.seccomp_localhost;
  if (!options.seccomp_localhost_file.empty()) {
    const auto profile = text::readFile(options.seccomp_localhost_file);
    if (!profile) {
      *error = "kubernetes: cannot read seccomp-localhost-file " + options.seccomp_localhost_file;
      return nullptr;
    }
    settings.seccomp_localhost_text = *profile;
  }
  auto client = std::make_unique<KubeClient>(
      access.access, options.api_timeout, kTokenReread,
      options.clock != nullptr ? *options.clock : systemClock());
  if (!client->error().empty()) {
    *error = "kubernetes: " + client->error();
    return nullptr;
  }
  std::unique_ptr<KubernetesBackend> backend(
      new KubernetesBackend(options, std::move(client), settings, log));
  const std::string problems = text::join(backend->pods_.clusterProblems(), "; ");
  if (!problems.empty()) {
    *error =
        "kubernetes: namespace " + settings.namespace_name + " cannot hold sandboxes: " + problems;
    return nullptr;
  }
  return backend;
}

KubernetesBackend::KubernetesBackend(const Options& options, std::unique_ptr<KubeClient> client,
                                     PodSettings settings, backend::LogSink* log)
    : options_(options),
      client_(std::move(client)),
      pods_(*client_, std::move(settings)),
      log_(log) {}

KubernetesBackend::~KubernetesBackend() {
  std::map<std::string, std::shared_ptr<Sandbox>> left;
  {
    std::lock_guard lock(mu_);
    left.swap(sandboxes_);
    for (auto& [id, sandbox] : left) {
      sandbox->removed = true;  // its worker makes no more API calls
    }
  }
  for (auto& [id, sandbox] : left) {
    if (sandbox->stream) {
      sandbox->stream->abort();
    }
    if (sandbox->worker.joinable()) {
      sandbox->worker.join();
    }
  }
}

void KubernetesBackend::log(backend::LogLevel level, const std::string& message) {
  if (log_ != nullptr) {
    log_->log(level, message);
  }
}

std::shared_ptr<KubernetesBackend::Sandbox> KubernetesBackend::find(const std::string& id) {
  const auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

backend::CapacityReply KubernetesBackend::capacity() {
  return pods_.capacity([this](const std::string& name) {
    std::lock_guard lock(mu_);
    return sandboxes_.count(name) != 0;
  });
}

Status KubernetesBackend::supports(const backend::Posture& posture) {
  if (const std::string reason = unsupportedReason(posture, pods_.settings()); !reason.empty()) {
    return {Code::kUnsupported, "kubernetes: " + reason};
  }
  // Without it every Pod is refused at admission; its scheduling is what the read-back accepts.
  if (const auto runtime = pods_.runtimeClass(posture.runtime); !runtime.status.ok()) {
    return {Code::kUnsupported, "kubernetes: the cluster's RuntimeClass " + posture.runtime +
                                    " cannot be read (" + runtime.status.message +
                                    "): sandbox Pods run under it (docs/SCALING.md)"};
  }
  return {};
}

backend::CreateReply KubernetesBackend::create(const backend::SandboxSpec& spec) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch());
  backend::CreateReply reply =
      pods_.create(spec, now.count(), client_->clock().now() + options_.start_timeout);
  if (reply.status.ok()) {
    auto sandbox = std::make_shared<Sandbox>();
    sandbox->session = spec.session;
    std::lock_guard lock(mu_);
    sandboxes_[reply.id] = sandbox;
  }
  return reply;
}

backend::InspectReply KubernetesBackend::inspect(const std::string& id) {
  return pods_.inspect(id);
}

Status KubernetesBackend::deliver(const std::string& id, const std::string& archive) {
  std::shared_ptr<Sandbox> sandbox;
  std::shared_ptr<AttachStream> stream;
  {
    std::lock_guard lock(mu_);
    sandbox = find(id);
    if (!sandbox || sandbox->removed) {
      return notFound(id);
    }
    if (sandbox->delivered && !sandbox->session) {
      return {Code::kRejected, "kubernetes: the sandbox " + id + " has its code already"};
    }
    if (sandbox->ended) {
      return {Code::kUnavailable, "kubernetes: the sandbox " + id + " has ended"};
    }
    sandbox->delivered = true;
    if (!sandbox->stream) {
      sandbox->held += archive;  // start() writes it once attached
      return {};
    }
    stream = sandbox->stream;
  }
  std::lock_guard in_order(sandbox->stdin_order);
  return writeStdin(*stream, sandbox->session, id, archive);
}

Status KubernetesBackend::writeStdin(AttachStream& stream, bool session, const std::string& id,
                                     const std::string& bytes) {
  if (!stream.write(bytes) || (!session && !stream.closeStdin())) {
    return {Code::kUnavailable, "kubernetes: the sandbox " + id + "'s stdin broke"};
  }
  return {};
}

bool KubernetesBackend::removed(const Sandbox& sandbox) {
  std::lock_guard lock(mu_);
  return sandbox.removed;
}

Status KubernetesBackend::awaitRunning(const std::string& id, const Sandbox& sandbox) {
  const PodApi::State state = pods_.awaitState(
      id, [](const PodApi::State& s) { return s.running || s.exit.exited; },
      client_->clock().now() + options_.start_timeout, [&] { return removed(sandbox); });
  if (state.status.code == Code::kTimeout) {
    return {Code::kTimeout, "kubernetes: the Pod " + id + " did not run within " +
                                std::to_string(options_.start_timeout.count()) + " ms (" +
                                state.status.message + ")"};
  }
  if (!state.status.ok() || state.running) {
    return state.status;
  }
  if (!state.exit.engine_error.empty()) {
    return {Code::kUnavailable, state.exit.engine_error};
  }
  // Nothing ran yet, so what the container wrote is the launcher's alone (a refusal): containerd
  // replays no output to a later attach, and the kubelet keeps its tail as the message.
  return {Code::kUnavailable, "kubernetes: the Pod " + id + " ended before it was attached" +
                                  (state.refusal.empty() ? "" : ": " + state.refusal)};
}

Status KubernetesBackend::start(const std::string& id, backend::OutputSink* sink) {
  std::shared_ptr<Sandbox> sandbox;
  {
    std::lock_guard lock(mu_);
    sandbox = find(id);
    if (!sandbox || sandbox->removed) {
      return notFound(id);
    }
    if (sandbox->started) {
      return {Code::kRejected, "kubernetes: the sandbox " + id + " was started already"};
    }
    sandbox->started = true;
  }
  if (Status running = awaitRunning(id, *sandbox); !running.ok()) {
    return running;
  }
  std::string error;
  std::shared_ptr<AttachStream> stream =
      AttachStream::open(*client_, pods_.attachPath(id), options_.heartbeat, &error);
  if (!stream) {
    return {Code::kUnavailable, error};
  }
  std::string held;
  bool write_held = false;
  std::unique_lock in_order(sandbox->stdin_order, std::defer_lock);
  {
    std::lock_guard lock(mu_);
    if (sandbox->removed) {
      stream->abort();
      return notFound(id);
    }
    in_order.lock();  // a session's deliver() after this waits until what was held is written
    sandbox->stream = stream;
    held.swap(sandbox->held);
    write_held = sandbox->delivered;
    try {
      sandbox->worker = std::thread([this, id, sandbox, sink] { pump(id, sandbox, sink); });
    } catch (const std::system_error& failure) {
      stream->abort();
      sandbox->stream = nullptr;
      return {Code::kInternal,
              std::string("kubernetes: no thread for the sandbox: ") + failure.what()};
    }
  }
  if (write_held) {
    // A write that fails means the attach has ended, or is ending: the worker reads how (a
    // Failure Status, a broken connection) and the Pod's end, which the run reports as the
    // reason; "stdin broke" would say less.
    writeStdin(*stream, sandbox->session, id, held);
  }
  return {};
}

void KubernetesBackend::pump(const std::string& id, std::shared_ptr<Sandbox> sandbox,
                             backend::OutputSink* sink) {
  const AttachEnd end = sandbox->stream->pump(*sink);
  backend::Exit exit = exitAfterOutput(id, *sandbox, end);
  {
    std::lock_guard lock(mu_);
    sandbox->exit = exit;
    sandbox->ended = true;
  }
  cv_.notify_all();
  sink->ended();
}

backend::Exit KubernetesBackend::exitAfterOutput(const std::string& id, const Sandbox& sandbox,
                                                 const AttachEnd& end) {
  // A Failure Status on the error channel: the kubelet could not attach, or lost the container.
  const std::string failure = attachFailure(end);
  const bool cut = end.broke || !failure.empty();
  const PodApi::State state = pods_.awaitState(
      id, [](const PodApi::State& s) { return s.exit.exited; },
      client_->clock().now() + (cut ? options_.broken_attach_patience : options_.exit_patience),
      [&] { return removed(sandbox); });
  const std::string silence = std::to_string(options_.heartbeat.read_deadline.count());
  const std::string how = !failure.empty() ? "the attach to " + id + " failed (" + failure + ")"
                          : end.silent
                              ? "the attach connection to " + id + " fell silent (no frame for " +
                                    silence + " ms, not even a pong)"
                              : "the attach connection to " + id + " broke";
  backend::Exit exit;
  exit.exited = true;
  bool killed = false;
  {
    std::lock_guard lock(mu_);
    if (sandbox.removed) {
      return exit;  // no one reads it, and remove() deletes the Pod
    }
    killed = sandbox.killed;
  }
  if (state.status.code == Code::kNotFound) {  // deleted, and its record with it
    exit.killed_outside = !killed;
    if (exit.killed_outside) {
      exit.engine_error = "kubernetes: the Pod " + id + " was deleted while it ran";
    }
    return exit;
  }
  if (state.status.ok()) {
    exit = state.exit;
    if (killed) {
      exit.killed_outside = false;  // the deletion was this backend's
    }
    if (exit.engine_error.empty() && end.output_bytes == 0 && !end.broke &&
        exit.exit_code == backend::launcher::kRejectedExit && !state.refusal.empty()) {
      // The launcher refused between the container's start and the attach, whose whole output,
      // to its end, was nothing: so no code ran (after a run the launcher writes its record),
      // and the container's log holds the launcher's words alone (FallbackToLogsOnError).
      exit.engine_error =
          "kubernetes: the sandbox's launcher ended it before any code ran (its log: " +
          state.refusal + ")";
    } else if (cut && exit.engine_error.empty()) {
      exit.engine_error = "kubernetes: " + how + " before the end of its output, which may be cut";
    }
    return exit;
  }
  exit.engine_error = cut ? "kubernetes: " + how + ": its output may be cut"
                          : "kubernetes: the Pod " + id +
                                "'s output ended but its status never said how (" +
                                state.status.message + ")";
  pods_.kill(id);  // it may run on: never leave it running unseen
  return exit;
}

backend::WaitReply KubernetesBackend::wait(const std::string& id,
                                           std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const auto sandbox = find(id);
  if (!sandbox) {
    return {notFound(id), {}};
  }
  cv_.wait_for(lock, timeout, [&] { return sandbox->ended; });
  backend::WaitReply reply;
  if (sandbox->ended) {
    reply.exit = sandbox->exit;
  }
  return reply;
}

backend::ProgressReply KubernetesBackend::progress(const std::string& id) {
  std::lock_guard lock(mu_);
  backend::ProgressReply reply;
  if (!find(id)) {
    reply.status = notFound(id);
  }
  return reply;  // the API shows no OOM before the container's end: only wait() can tell
}

Status KubernetesBackend::kill(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    const auto sandbox = find(id);
    if (!sandbox) {
      return notFound(id);
    }
    sandbox->killed = true;
  }
  return pods_.kill(id);
}

Status KubernetesBackend::remove(const std::string& id) {
  std::shared_ptr<Sandbox> sandbox;
  {
    std::lock_guard lock(mu_);
    sandbox = find(id);
    if (sandbox) {
      sandbox->removed = true;  // for good: start() and the worker stop at it
      sandbox->killed = true;
    }
  }
  if (!sandbox) {
    return pods_.remove(id);  // not this backend's (a leftover), or removed already
  }
  // One removal at a time: a second waits until the first has joined the worker, so neither
  // returns while the sink may still be called.
  std::lock_guard one_removal(sandbox->removal);
  std::shared_ptr<AttachStream> stream;
  {
    std::lock_guard lock(mu_);
    stream = sandbox->stream;
  }
  if (stream) {
    stream->abort();
  }
  const Status status = pods_.remove(id);
  if (sandbox->worker.joinable()) {
    sandbox->worker.join();
  }
  if (status.ok()) {
    std::lock_guard lock(mu_);
    if (find(id) == sandbox) {
      sandboxes_.erase(id);
    }
  }
  return status;  // on failure it stays known, removed: the core retries
}

backend::ListReply KubernetesBackend::list(const std::string& label_key) {
  return pods_.list(label_key);
}

}  // namespace scs::kubernetes
