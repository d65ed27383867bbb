#pragma once

#include <scs/backend/backend.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "policy/files.h"
#include "policy/limits.h"
#include "policy/posture.h"
#include "policy/status_map.h"
#include "runs/clock.h"

namespace scs::runs {

// Labels every sandbox carries; the startup sweep finds leftovers by kLabelManaged.
inline constexpr const char* kLabelManaged = "io.scs.managed";
inline constexpr const char* kLabelInstance = "io.scs.instance";
inline constexpr const char* kLabelRunId = "io.scs.run-id";
inline constexpr const char* kLabelOwnerPid = "io.scs.owner-pid";
inline constexpr const char* kLabelDeadline = "io.scs.deadline";  // unix seconds

struct RunSettings {
  int max_concurrent = 4;
  std::size_t max_queue = 64;
  std::chrono::seconds retention{3600};
  std::size_t max_retained = 1000;            // oldest finished reports are forgotten first
  std::size_t output_cap_bytes = 1u << 20;    // per stream, head and tail kept
  std::int64_t host_memory_bytes = 0;         // admission: running memory limits must fit; 0 = off
  std::string instance_id;                    // this server instance; random when empty
};

struct CapturedOutput {
  std::string text;            // valid UTF-8 (invalid bytes replaced), head and tail when cut
  std::uint64_t bytes = 0;     // everything the run wrote to the stream
  bool truncated = false;
};

// What get_result, start_run and stop_run report about a run at one moment.
struct RunSnapshot {
  std::string run_id;
  policy::RunStatus status = policy::RunStatus::kQueued;
  policy::Limits limits;
  std::optional<std::size_t> queue_position;  // 1-based, while queued
  // Set once final:
  std::optional<int> exit_code;
  std::optional<std::string> signal;
  std::string reason;
  CapturedOutput stdout_output;
  CapturedOutput stderr_output;
  double duration_seconds = 0;  // execution time, from start to end
  double queued_seconds = 0;
  std::optional<std::chrono::system_clock::time_point> started_at;
  std::optional<std::chrono::system_clock::time_point> finished_at;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<double> cpu_seconds;
};

struct StartRequest {
  std::vector<policy::File> files;  // validated; main.py first
  policy::Limits limits;            // resolved by LimitPolicy
};

struct StartRefusal {
  std::string message;  // e.g. the queue is full
};

// Owns every run: the FIFO queue, the concurrency cap, deadlines, the registry of reports,
// and the order of backend calls for each run. Thread-safe.
class RunManager {
 public:
  RunManager(backend::RuntimeBackend& backend, const RunSettings& settings,
             const policy::SandboxSettings& sandbox, const Clock& clock);
  ~RunManager();  // shutdown()

  RunManager(const RunManager&) = delete;
  RunManager& operator=(const RunManager&) = delete;

  // Queues the run, or starts it at once when a slot is free. Never blocks on the backend.
  std::variant<RunSnapshot, StartRefusal> start(StartRequest request);

  // The run's state now, or after waiting up to `wait` for it to finish. nullopt for an
  // unknown or expired id.
  std::optional<RunSnapshot> get(const std::string& run_id,
                                 std::chrono::milliseconds wait = std::chrono::milliseconds(0));

  // Stops a queued or running run (status stopped) and waits until its sandbox is removed;
  // a finished run is reported unchanged. nullopt for an unknown or expired id.
  std::optional<RunSnapshot> stop(const std::string& run_id);

  // Removes sandboxes left by earlier server instances (their owner process is gone or
  // their deadline has passed). Returns how many were removed.
  std::size_t sweepLeftovers();

  // Stops every run, removes every sandbox, joins every thread. Idempotent.
  void shutdown();

  const std::string& instanceId() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scs::runs
