// The Docker backend: its operator settings and DockerBackend, the RuntimeBackend over the
// Engine API (docker_backend.cc: startup and container calls; docker_backend_run.cc: running a
// sandbox; docker_backend_watch.cc: the event stream and cgroup sampler).
#pragma once

#include <scs/backend/backend.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine_client.h"
#include "engine_socket.h"
#include "spec_translation.h"

namespace scs::docker {

// The OOM event stream is filtered by the ABI's managed label.
using backend::kManagedLabel;

struct DockerSettings {
  std::string engine = "unix:///var/run/docker.sock";  // DOCKER_HOST is never consulted
  std::chrono::milliseconds api_timeout{30000};
  // One long-lived GET /events stream for OOM evidence that the inspect record can miss.
  bool watch_events = true;
  // Where cgroup v1 controllers are mounted; empty: never read peak memory, CPU or oom_kill.
  std::string cgroup_root = "/sys/fs/cgroup";
  // Peak memory and CPU are sampled this often while a sandbox runs (the cgroup is gone by
  // the time its exit is known), so a spike in the last interval can be missed.
  std::chrono::milliseconds sample_interval{50};
  // How long an ended sandbox waits for the event stream to report its "die" (by which time
  // any "oom" before it has been seen).
  std::chrono::milliseconds die_event_grace{2000};
};

// Reads the operator options ("engine", "api_timeout_ms"). nullopt with *error set for an
// unknown option or a bad value.
std::optional<DockerSettings> parseSettings(const std::map<std::string, std::string>& options,
                                            std::string* error);

// RuntimeBackend over the Docker Engine API. Code reaches the sandbox over the attached stdin
// (the root stays read-only); output is demultiplexed and drained at full speed by one thread
// per started sandbox. A sandbox started before deliver() idles with its stdin open; its
// thread writes the archive the moment deliver() hands it over, then closes stdin. The archive
// lives only in memory, until it has been written. Thread-safe, as the interface requires; no
// method throws.
class DockerBackend : public backend::RuntimeBackend {
 public:
  // Negotiates the API version and reads the engine's traits. nullptr with *error set when
  // the engine cannot be reached or cannot serve.
  static std::unique_ptr<DockerBackend> connect(EngineSocketPtr transport,
                                                const DockerSettings& settings,
                                                backend::LogSink* log, std::string* error);

  ~DockerBackend() override;
  DockerBackend(const DockerBackend&) = delete;
  DockerBackend& operator=(const DockerBackend&) = delete;

  backend::CapacityReply capacity() override;
  // The Engine API carries every control of a posture.
  backend::Status supports(const backend::Posture& posture) override;
  backend::CreateReply create(const backend::SandboxSpec& spec) override;
  backend::InspectReply inspect(const std::string& id) override;
  backend::Status deliver(const std::string& id, const std::string& archive) override;
  backend::Status start(const std::string& id, backend::OutputSink* sink) override;
  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override;
  backend::ProgressReply progress(const std::string& id) override;
  backend::Status kill(const std::string& id) override;
  backend::Status remove(const std::string& id) override;
  backend::ListReply list(const std::string& label_key) override;
  // A container of the base image, never started, takes the layer's files and is committed
  // with the base image's own configuration and the layer's labels (docker_backend_images.cc).
  backend::Status buildImage(backend::ImageLayer layer) override;
  backend::Status removeImage(const std::string& image) override;
  backend::ImageListReply listImages(const std::string& label_key) override;
  backend::Status snapshots(const backend::Posture& posture) override;
  backend::Status snapshot(const std::string& id) override;
  backend::Status resume(const std::string& id, backend::OutputSink* sink) override;
  // The container that holds the checkpoint now, the create body its next one is made from, and
  // the counters carried over; adopt() checks the container against the engine's record.
  backend::SavedReply saved(const std::string& id) override;
  backend::Status adopt(const std::string& id, const std::string& saved) override;

  const ApiVersion& apiVersion() const { return client_.version(); }
  const EngineTraits& traits() const { return traits_; }

 private:
  struct Sandbox;

  DockerBackend(EngineSocketPtr transport, const DockerSettings& settings, backend::LogSink* log);

  void log(backend::LogLevel level, const std::string& message) const;
  void runSandbox(std::shared_ptr<Sandbox> sandbox, backend::OutputSink* sink);
  // The container that holds sandbox `id` now (Sandbox::container); `id` itself for one this
  // server does not know.
  std::string containerOf(const std::string& id);
  std::string root_dir_;  // the engine's DockerRootDir, read by snapshots(); guarded by mu_
  // Attaches, registers the wait and starts the container (from `checkpoint` when named), then
  // runs runSandbox on a thread of its own.
  backend::Status launch(const std::shared_ptr<Sandbox>& sandbox, backend::OutputSink* sink,
                         const std::string& checkpoint);
  // The one checkpoint a session's sandbox has while it is snapshotted, and how long writing or
  // reading it may take.
  static constexpr const char* kCheckpointName = "scs-session";
  static constexpr std::chrono::minutes kSnapshotTimeout{5};
  void watchEvents();
  void handleEvent(const std::string& line, std::string* since);
  void sampleCgroups();
  // Reads the sandbox's cgroup counters; true when its OOM-kill counter could be read.
  bool sampleOne(Sandbox& sandbox);

  EngineSocketPtr transport_;
  DockerSettings settings_;
  backend::LogSink* log_;
  EngineClient client_;
  EngineTraits traits_;
  std::chrono::system_clock::time_point created_at_;
  bool sample_cgroups_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  bool stopping_ = false;
  bool events_connected_ = false;
  std::shared_ptr<Connection> events_connection_;
  std::thread events_thread_;
  std::thread sampler_thread_;
};

}  // namespace scs::docker
