#include "runs/run_manager.h"

#include <Poco/Logger.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "runs/output.h"

namespace scs::runs {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using SteadyDuration = std::chrono::steady_clock::duration;

constexpr auto kWaitSlice = std::chrono::seconds(1);
constexpr auto kKillGrace = std::chrono::seconds(10);
constexpr long long kDeadlineLabelSlackSeconds = 60;
constexpr auto kRetryFirstBackoff = std::chrono::seconds(1);
constexpr auto kRetryMaxBackoff = std::chrono::seconds(60);
constexpr auto kMaintenanceRecheck = std::chrono::seconds(1);
// A new prepared sandbox waits this long for the run that took the last one to end, so that
// making it (the engine's create and start) does not compete with that run for the CPU.
constexpr auto kRefillDelay = std::chrono::seconds(1);
constexpr std::size_t kMaxHeldBytes = 64u << 10;

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

SteadyDuration toDuration(double seconds) {
  return std::chrono::duration_cast<SteadyDuration>(std::chrono::duration<double>(seconds));
}

double secondsBetween(SteadyTime from, SteadyTime to) {
  return std::chrono::duration<double>(to - from).count();
}

long long ceilSeconds(double seconds) { return static_cast<long long>(std::ceil(seconds)); }

std::optional<long long> parseInteger(std::string_view text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

bool parseUserIds(const std::string& user, int* uid, int* gid) {
  const auto colon = user.find(':');
  if (colon == std::string::npos) {
    return false;
  }
  const auto parsed_uid = parseInteger(std::string_view(user).substr(0, colon));
  const auto parsed_gid = parseInteger(std::string_view(user).substr(colon + 1));
  if (!parsed_uid || !parsed_gid || *parsed_uid < 0 || *parsed_gid < 0 || *parsed_uid > INT_MAX ||
      *parsed_gid > INT_MAX) {
    return false;
  }
  *uid = static_cast<int>(*parsed_uid);
  *gid = static_cast<int>(*parsed_gid);
  return true;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const auto& part : parts) {
    if (!out.empty()) {
      out.append(separator);
    }
    out.append(part);
  }
  return out;
}

std::string countOf(std::size_t count, std::string_view one, std::string_view many) {
  return std::to_string(count) + " " + std::string(count == 1 ? one : many);
}

template <typename Value>
Value valueOr(const std::map<std::string, Value>& map, const std::string& key, Value fallback) {
  const auto found = map.find(key);
  return found == map.end() ? fallback : found->second;
}

// Removes its sandbox (through the action it was given) when released or destroyed, so every
// path out of a run removes the run's sandbox exactly once.
class SandboxLease {
 public:
  explicit SandboxLease(std::function<void()> remove) : remove_(std::move(remove)) {}
  SandboxLease(const SandboxLease&) = delete;
  SandboxLease& operator=(const SandboxLease&) = delete;
  ~SandboxLease() { release(); }

  void release() {
    std::function<void()> remove = std::move(remove_);
    remove_ = nullptr;
    if (remove) {
      remove();
    }
  }

 private:
  std::function<void()> remove_;
};

// The sink a prepared sandbox is started with, before its run exists. It holds what the
// idle launcher writes (normally nothing; capped) and, once bound to the run's capture, hands
// that over first and forwards everything after it.
class DeferredSink : public backend::OutputSink {
 public:
  void write(backend::Stream stream, std::string_view bytes) override {
    std::lock_guard lock(mutex_);
    if (target_ != nullptr) {
      target_->write(stream, bytes);
      return;
    }
    const std::size_t room = kMaxHeldBytes - std::min(held_bytes_, kMaxHeldBytes);
    bytes = bytes.substr(0, room);
    if (!bytes.empty()) {
      held_.emplace_back(stream, std::string(bytes));
      held_bytes_ += bytes.size();
    }
  }

  void bind(backend::OutputSink* target) {
    std::lock_guard lock(mutex_);
    for (const auto& [stream, bytes] : held_) {
      target->write(stream, bytes);
    }
    held_.clear();
    target_ = target;
  }

 private:
  std::mutex mutex_;
  backend::OutputSink* target_ = nullptr;
  std::vector<std::pair<backend::Stream, std::string>> held_;
  std::size_t held_bytes_ = 0;
};

}  // namespace

std::string randomHexId() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string id;
  id.reserve(32);
  for (int word = 0; word < 4; ++word) {
    std::uint32_t value = device();
    for (int nibble = 0; nibble < 8; ++nibble) {
      id.push_back(kHex[value & 0xF]);
      value >>= 4;
    }
  }
  return id;
}

struct RunManager::Impl {
  // A sandbox created, posture-checked and started idle for a run that has yet to come.
  struct Prepared {
    std::string sandbox_id;
    backend::Posture posture;    // the required posture its engine record passed
    double timeout_seconds = 0;  // the longest run its watchdog allows
    std::int64_t memory_bytes = 0;
    SteadyTime ready_at;
    DeferredSink sink;  // outlives the sandbox: freed only after its removal
  };

  struct Run {
    std::string id;
    std::string tenant;
    std::uint64_t sequence = 0;  // order of arrival
    policy::Limits limits;
    std::int64_t memory_bytes = 0;
    std::vector<policy::File> files;
    std::optional<std::string> stdin_data;
    policy::RunStatus status = policy::RunStatus::kQueued;
    SteadyTime enqueued_at;
    std::optional<SteadyTime> exec_start;
    std::optional<SteadyTime> exec_end;
    std::optional<SteadyTime> finished;
    std::optional<std::chrono::system_clock::time_point> started_at;
    std::optional<std::chrono::system_clock::time_point> finished_at;
    bool stop_requested = false;
    bool stop_killed = false;  // stop() sent the kill itself
    bool timer_fired = false;
    bool started = false;            // backend start() succeeded
    bool outcome_known = false;      // evidence sealed: a later stop cannot change the verdict
    bool settled = false;            // no sandbox of this run is left: never made, or removed
    std::size_t retained_bytes = 0;  // output and files its final report holds
    std::string sandbox_id;
    std::unique_ptr<OutputCapture> capture;
    std::unique_ptr<Prepared> prepared;  // taken at admission; freed once its sandbox is removed
    bool ran_prepared = false;           // its code went to the prepared sandbox
    RunSnapshot report;                  // the final fields, once final
    std::thread thread;
  };

  struct Outcome {
    policy::Evidence evidence;
    backend::Exit exit;
    std::optional<SteadyTime> ended;
  };

  Impl(backend::RuntimeBackend& backend, const RunSettings& settings,
       const policy::SandboxSettings& sandbox, const Clock& clock)
      : backend_(backend),
        settings_(settings),
        sandbox_(sandbox),
        clock_(clock),
        instance_id_(settings.instance_id.empty() ? randomHexId() : settings.instance_id) {
    maintenance_thread_ = std::thread([this] { maintenanceThread(); });
  }

  std::variant<RunSnapshot, StartRefusal> start(StartRequest request);
  std::optional<RunSnapshot> get(const std::string& tenant, const std::string& run_id,
                                 std::chrono::milliseconds wait, const OutputOffsets& from);
  std::optional<RunSnapshot> stop(const std::string& tenant, const std::string& run_id);
  std::size_t sweepLeftovers();
  void shutdown();

  std::int64_t memoryBytes(const policy::Limits& limits) const {
    return std::llround(limits.memory_gb * static_cast<double>(policy::kBytesPerGb));
  }
  bool slotFreeLocked() const {
    return running_ < static_cast<std::size_t>(std::max(settings_.max_concurrent, 0));
  }
  // Whether `memory` more fits beside the running runs and the prepared sandboxes.
  bool memoryFitsLocked(std::int64_t memory) const {
    return settings_.host_memory_bytes == 0 ||
           running_memory_ + prepared_memory_ + memory <= settings_.host_memory_bytes;
  }
  std::shared_ptr<Run> findLocked(const std::string& tenant, const std::string& run_id);
  void enqueueLocked(const std::shared_ptr<Run>& run);
  void dequeueLocked(const std::shared_ptr<Run>& run);
  std::size_t queuedCountLocked(const std::string& tenant) const;
  const std::string* chooseTenantLocked(const std::map<std::string, std::size_t>& running,
                                        const std::map<std::string, std::uint64_t>& served,
                                        const std::map<std::string, std::size_t>& taken) const;
  std::vector<const Run*> admissionOrderLocked() const;
  void admitLocked();
  void launchLocked(const std::shared_ptr<Run>& run);
  void releaseSlotLocked(const Run& run);
  void finalizeStoppedLocked(Run& run, const std::string& reason);
  void purgeLocked();
  RunSnapshot snapshotLocked(const Run& run, const OutputOffsets& from = {}) const;
  void sealEvidenceLocked(Run& run, policy::Evidence& evidence);
  void reapThreads();

  void runThread(const std::shared_ptr<Run>& run);
  void execute(Run& run, Outcome& outcome, std::optional<SandboxLease>& lease);
  bool runInPrepared(Run& run, const std::string& archive, Outcome& outcome);
  void waitForExit(Run& run, const std::string& sandbox_id, Outcome& outcome);
  void finish(Run& run, Outcome& outcome);
  // When the in-sandbox watchdog ends a run whose server could not: the timeout and a grace.
  long long watchdogSeconds(const policy::Limits& limits) const {
    return ceilSeconds(limits.timeout_seconds) + sandbox_.deadline_grace_seconds;
  }
  backend::SandboxSpec buildSpec(const std::string& label_run_id, const policy::Limits& limits,
                                 const backend::Posture& required, bool prepared) const;
  bool stopRequested(Run& run);
  void killSandbox(const std::string& sandbox_id, const std::string& run_id);

  std::function<void()> removalOf(const std::string& sandbox_id, const std::string& run_id) {
    return [this, sandbox_id, run_id] { removeSandbox(sandbox_id, "run " + run_id); };
  }
  void removeSandbox(const std::string& sandbox_id, const std::string& whose) noexcept;
  void retryRemovals(bool last_chance, std::unique_lock<std::mutex>& lock);
  void retireEndedLocked(std::unique_lock<std::mutex>& lock);
  void removeRetiredLocked(std::unique_lock<std::mutex>& lock);

  std::deque<std::unique_ptr<Prepared>>::iterator findPreparedLocked(const Run& run);
  bool evictPreparedLocked(std::int64_t needed, const Prepared* keep);
  void retireLocked(std::unique_ptr<Prepared> prepared);
  void maintenanceThread();
  std::unique_ptr<Prepared> prepareOne();

  backend::RuntimeBackend& backend_;
  const RunSettings settings_;
  const policy::SandboxSettings sandbox_;
  const Clock& clock_;
  const std::string instance_id_;

  std::mutex mutex_;
  std::condition_variable changed_;  // a run became final, or a prepared sandbox ready
  std::map<std::string, std::shared_ptr<Run>> runs_;
  std::map<std::string, std::deque<std::shared_ptr<Run>>>
      queues_;                                            // FIFO per tenant; no empty ones
  std::map<std::string, std::size_t> running_by_tenant_;  // no zero entries
  std::map<std::string, std::uint64_t> last_served_;      // service_tick_ of its latest start
  std::uint64_t service_tick_ = 0;
  std::uint64_t next_sequence_ = 0;
  std::deque<std::string> finished_order_;
  std::size_t running_ = 0;
  std::int64_t running_memory_ = 0;
  std::size_t live_threads_ = 0;    // run threads not yet done with their sandbox
  std::size_t retained_bytes_ = 0;  // the sum of retained_bytes over the finished runs kept
  std::vector<std::thread> done_threads_;
  bool shutting_down_ = false;

  // The prepared sandboxes: ready ones oldest first, ones being made, ones to remove.
  std::deque<std::unique_ptr<Prepared>> prepared_;
  std::size_t preparing_ = 0;
  std::int64_t prepared_memory_ = 0;  // of the ready ones and the ones being made
  std::size_t prepared_running_ = 0;  // runs executing in a prepared sandbox
  SteadyTime last_claim_{};           // when a run last took a prepared sandbox
  std::vector<std::unique_ptr<Prepared>> retiring_;
  // Sandboxes whose removal failed (the engine was away), retried with a growing pause.
  std::vector<std::string> unremoved_;
  SteadyTime removal_retry_at_{};
  std::chrono::seconds removal_backoff_ = kRetryFirstBackoff;
  std::condition_variable pool_changed_;  // wakes the maintenance thread
  std::thread maintenance_thread_;
  std::mutex maintenance_join_mutex_;
};

std::variant<RunSnapshot, StartRefusal> RunManager::Impl::start(StartRequest request) {
  reapThreads();
  std::lock_guard lock(mutex_);
  if (shutting_down_) {
    return StartRefusal{"The server is shutting down."};
  }
  purgeLocked();
  const std::int64_t memory = memoryBytes(request.limits);
  if (settings_.host_memory_bytes > 0 && memory > settings_.host_memory_bytes) {
    return StartRefusal{"This run asks for " + policy::formatNumber(request.limits.memory_gb) +
                        " GB of memory, but sandboxes on this host can have at most " +
                        policy::formatNumber(static_cast<double>(settings_.host_memory_bytes) /
                                             static_cast<double>(policy::kBytesPerGb)) +
                        " GB."};
  }
  const std::size_t waiting = queuedCountLocked(request.tenant);
  auto run = std::make_shared<Run>();
  do {
    run->id = randomHexId();
  } while (runs_.count(run->id) != 0);
  run->tenant = std::move(request.tenant);
  run->sequence = ++next_sequence_;
  run->limits = request.limits;
  run->memory_bytes = memory;
  run->files = std::move(request.files);
  run->stdin_data = std::move(request.stdin_data);
  run->enqueued_at = clock_.now();
  run->report.run_id = run->id;
  run->report.limits = run->limits;
  // Queued first and admitted by the one fair rule; only this run can start here, because
  // every slot that was free before is already taken or held back by memory.
  enqueueLocked(run);
  admitLocked();
  if (run->status == policy::RunStatus::kQueued && waiting >= settings_.max_queue) {
    dequeueLocked(run);
    return StartRefusal{"The queue is full: " + countOf(waiting, "run is", "runs are") +
                        " waiting behind " + std::to_string(running_) +
                        " running. Try again when a run finishes."};
  }
  runs_.emplace(run->id, run);
  RunSnapshot snapshot = snapshotLocked(*run);
  if (snapshot.queue_position) {
    logger().information("run " + run->id + " of tenant " + run->tenant + " queued at position " +
                         std::to_string(*snapshot.queue_position));
  }
  return snapshot;
}

std::shared_ptr<RunManager::Impl::Run> RunManager::Impl::findLocked(const std::string& tenant,
                                                                    const std::string& run_id) {
  const auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second->tenant != tenant) {
    return nullptr;
  }
  return it->second;
}

std::optional<RunSnapshot> RunManager::Impl::get(const std::string& tenant,
                                                 const std::string& run_id,
                                                 std::chrono::milliseconds wait,
                                                 const OutputOffsets& from) {
  reapThreads();
  std::unique_lock lock(mutex_);
  purgeLocked();
  const std::shared_ptr<Run> run = findLocked(tenant, run_id);
  if (!run) {
    return std::nullopt;
  }
  if (wait.count() > 0 && !policy::isFinal(run->status)) {
    changed_.wait_for(lock, wait, [&] { return policy::isFinal(run->status); });
  }
  return snapshotLocked(*run, from);
}

std::optional<RunSnapshot> RunManager::Impl::stop(const std::string& tenant,
                                                  const std::string& run_id) {
  reapThreads();
  std::unique_lock lock(mutex_);
  purgeLocked();
  const std::shared_ptr<Run> run = findLocked(tenant, run_id);
  if (!run) {
    return std::nullopt;
  }
  if (run->status == policy::RunStatus::kQueued) {
    dequeueLocked(run);
    finalizeStoppedLocked(*run, "Stopped by stop_run before it started.");
    admitLocked();
    changed_.notify_all();
    return snapshotLocked(*run);
  }
  if (!policy::isFinal(run->status)) {
    std::string kill_id;
    if (!run->outcome_known && !run->timer_fired && !run->stop_requested) {
      logger().information("run " + run->id + ": stop requested");
      run->stop_requested = true;
      if (run->started) {
        run->stop_killed = true;
        kill_id = run->sandbox_id;
      }
    }
    if (!kill_id.empty()) {
      lock.unlock();
      killSandbox(kill_id, run->id);
      lock.lock();
    }
  }
  changed_.wait(lock, [&] { return policy::isFinal(run->status) && run->settled; });
  return snapshotLocked(*run);
}

std::size_t RunManager::Impl::sweepLeftovers() {
  const backend::ListReply reply = backend_.list(kLabelManaged);
  if (!reply.status.ok()) {
    logger().warning("could not list leftover sandboxes: " + reply.status.message);
    return 0;
  }
  const long long now_unix =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch()).count();
  std::size_t removed = 0;
  for (const backend::SandboxInfo& sandbox : reply.sandboxes) {
    const auto label = [&](const char* key) -> std::optional<std::string> {
      const auto found = sandbox.labels.find(key);
      if (found == sandbox.labels.end()) {
        return std::nullopt;
      }
      return found->second;
    };
    if (label(kLabelInstance) == instance_id_) {
      continue;
    }
    std::string why;
    const long long owner = parseInteger(label(kLabelOwnerPid).value_or("")).value_or(0);
    const auto deadline = parseInteger(label(kLabelDeadline).value_or(""));
    // A pid of 0 or below would make kill() address a process group, so it counts as invalid.
    if (owner <= 0 || owner > INT_MAX) {
      why = "it has no valid owner-pid label";
    } else if (::kill(static_cast<pid_t>(owner), 0) == -1 && errno == ESRCH) {
      why = "its owner process " + std::to_string(owner) + " is gone";
    } else if (deadline.has_value() && deadline.value() < now_unix) {
      why = "its deadline has passed";
    }
    if (why.empty()) {
      continue;
    }
    const backend::Status status = backend_.remove(sandbox.id);
    if (status.ok()) {
      ++removed;
      logger().information("removed leftover sandbox " + sandbox.id + ": " + why);
    } else {
      logger().warning("could not remove leftover sandbox " + sandbox.id + ": " + status.message);
    }
  }
  return removed;
}

void RunManager::Impl::shutdown() {
  std::vector<std::pair<std::string, std::string>> kills;
  {
    std::lock_guard lock(mutex_);
    shutting_down_ = true;
    for (const auto& [tenant, queue] : queues_) {
      for (const std::shared_ptr<Run>& run : queue) {
        finalizeStoppedLocked(*run, "Stopped by server shutdown before it started.");
      }
    }
    queues_.clear();
    for (auto& [id, run] : runs_) {
      if (run->status != policy::RunStatus::kRunning || run->outcome_known || run->timer_fired ||
          run->stop_requested) {
        continue;
      }
      run->stop_requested = true;
      if (run->started) {
        run->stop_killed = true;
        kills.emplace_back(run->sandbox_id, id);
      }
    }
    changed_.notify_all();
    pool_changed_.notify_all();
  }
  for (const auto& [sandbox_id, run_id] : kills) {
    killSandbox(sandbox_id, run_id);
  }
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return live_threads_ == 0; });
  }
  reapThreads();
  std::lock_guard join_lock(maintenance_join_mutex_);
  if (maintenance_thread_.joinable()) {
    maintenance_thread_.join();
  }
}

void RunManager::Impl::enqueueLocked(const std::shared_ptr<Run>& run) {
  queues_[run->tenant].push_back(run);
}

void RunManager::Impl::dequeueLocked(const std::shared_ptr<Run>& run) {
  const auto found = queues_.find(run->tenant);
  if (found == queues_.end()) {
    return;
  }
  std::deque<std::shared_ptr<Run>>& queue = found->second;
  queue.erase(std::remove(queue.begin(), queue.end(), run), queue.end());
  if (queue.empty()) {
    queues_.erase(found);
  }
}

std::size_t RunManager::Impl::queuedCountLocked(const std::string& tenant) const {
  const auto found = queues_.find(tenant);
  return found == queues_.end() ? 0 : found->second.size();
}

// The tenant whose queued run starts next, skipping the first taken[tenant] runs of each
// queue: the one with the fewest running runs, then the one served longest ago, then the one
// whose run came first. So a tenant with many queued runs cannot take every free slot while
// another tenant waits. nullptr when nothing is left.
const std::string* RunManager::Impl::chooseTenantLocked(
    const std::map<std::string, std::size_t>& running,
    const std::map<std::string, std::uint64_t>& served,
    const std::map<std::string, std::size_t>& taken) const {
  const std::string* chosen = nullptr;
  std::tuple<std::size_t, std::uint64_t, std::uint64_t> best;
  for (const auto& [tenant, queue] : queues_) {
    const std::size_t skip = valueOr<std::size_t>(taken, tenant, 0);
    if (skip >= queue.size()) {
      continue;
    }
    const std::tuple<std::size_t, std::uint64_t, std::uint64_t> rank{
        valueOr<std::size_t>(running, tenant, 0), valueOr<std::uint64_t>(served, tenant, 0),
        queue[skip]->sequence};
    if (chosen == nullptr || rank < best) {
      chosen = &tenant;
      best = rank;
    }
  }
  return chosen;
}

// The queued runs in the order admitLocked() would start them if no run ended meanwhile.
std::vector<const RunManager::Impl::Run*> RunManager::Impl::admissionOrderLocked() const {
  std::vector<const Run*> order;
  std::map<std::string, std::size_t> running = running_by_tenant_;
  std::map<std::string, std::uint64_t> served = last_served_;
  std::uint64_t tick = service_tick_;
  std::map<std::string, std::size_t> taken;
  while (const std::string* tenant = chooseTenantLocked(running, served, taken)) {
    order.push_back(queues_.at(*tenant)[taken[*tenant]++].get());
    ++running[*tenant];
    served[*tenant] = ++tick;
  }
  return order;
}

void RunManager::Impl::admitLocked() {
  while (!shutting_down_) {
    const std::string* tenant = chooseTenantLocked(running_by_tenant_, last_served_, {});
    if (tenant == nullptr) {
      return;
    }
    const auto queue = queues_.find(*tenant);
    const std::shared_ptr<Run> run = queue->second.front();
    if (!slotFreeLocked()) {
      return;
    }
    // A prepared sandbox the run can use already holds the run's memory.
    const auto prepared = findPreparedLocked(*run);
    const std::int64_t needed =
        run->memory_bytes - (prepared == prepared_.end() ? 0 : (*prepared)->memory_bytes);
    if (!memoryFitsLocked(needed)) {
      // Idle prepared sandboxes give way to a run; otherwise the chosen run waits for memory
      // rather than be overtaken, so big runs are not starved.
      const Prepared* keep = prepared == prepared_.end() ? nullptr : prepared->get();
      if (evictPreparedLocked(needed, keep)) {
        continue;
      }
      return;
    }
    queue->second.pop_front();
    if (queue->second.empty()) {
      queues_.erase(queue);
    }
    if (prepared != prepared_.end()) {
      run->prepared = std::move(*prepared);
      prepared_.erase(prepared);
      prepared_memory_ -= run->prepared->memory_bytes;
    }
    launchLocked(run);
  }
}

std::deque<std::unique_ptr<RunManager::Impl::Prepared>>::iterator
RunManager::Impl::findPreparedLocked(const Run& run) {
  if (prepared_.empty()) {
    return prepared_.end();
  }
  // The environment follows from the limits' cpus, which the posture carries (nano_cpus).
  const backend::Posture required = policy::requiredPosture(run.limits, sandbox_);
  return std::find_if(prepared_.begin(), prepared_.end(), [&](const auto& prepared) {
    return prepared->posture == required && run.limits.timeout_seconds <= prepared->timeout_seconds;
  });
}

// Retires idle prepared sandboxes, other than `keep`, until `needed` more bytes fit; does
// nothing when even all of them would not make room. True when it made room.
bool RunManager::Impl::evictPreparedLocked(std::int64_t needed, const Prepared* keep) {
  std::int64_t idle = 0;
  for (const auto& prepared : prepared_) {
    if (prepared.get() != keep) {
      idle += prepared->memory_bytes;
    }
  }
  if (idle == 0 || !memoryFitsLocked(needed - idle)) {
    return false;
  }
  for (auto it = prepared_.begin(); it != prepared_.end() && !memoryFitsLocked(needed);) {
    if (it->get() == keep) {
      ++it;
      continue;
    }
    std::unique_ptr<Prepared> evicted = std::move(*it);
    it = prepared_.erase(it);
    logger().information("prepared sandbox " + evicted->sandbox_id +
                         " gives way to a run that needs its memory");
    retireLocked(std::move(evicted));
  }
  return true;
}

void RunManager::Impl::retireLocked(std::unique_ptr<Prepared> prepared) {
  prepared_memory_ -= prepared->memory_bytes;
  retiring_.push_back(std::move(prepared));
  pool_changed_.notify_all();
}

void RunManager::Impl::releaseSlotLocked(const Run& run) {
  --running_;
  running_memory_ -= run.memory_bytes;
  const auto found = running_by_tenant_.find(run.tenant);
  if (found != running_by_tenant_.end() && --found->second == 0) {
    running_by_tenant_.erase(found);
  }
  if (run.prepared) {
    --prepared_running_;
  }
  pool_changed_.notify_all();  // the pool may refill now
}

void RunManager::Impl::launchLocked(const std::shared_ptr<Run>& run) {
  run->status = policy::RunStatus::kRunning;
  ++running_;
  running_memory_ += run->memory_bytes;
  ++running_by_tenant_[run->tenant];
  last_served_[run->tenant] = ++service_tick_;
  if (run->prepared) {
    ++prepared_running_;
    last_claim_ = clock_.now();
  }
  try {
    run->thread = std::thread([this, run] { runThread(run); });
    ++live_threads_;
  } catch (const std::system_error& e) {
    logger().error("run " + run->id + ": could not start its thread: " + e.what());
    if (run->prepared) {
      --prepared_running_;
      retiring_.push_back(std::move(run->prepared));
      pool_changed_.notify_all();
    }
    run->settled = true;
    releaseSlotLocked(*run);
    run->status = policy::RunStatus::kSandboxError;
    run->report.reason = "The server could not start a thread for this run.";
    run->finished = clock_.now();
    run->finished_at = clock_.wallNow();
    finished_order_.push_back(run->id);
    changed_.notify_all();
  }
}

void RunManager::Impl::finalizeStoppedLocked(Run& run, const std::string& reason) {
  run.status = policy::RunStatus::kStopped;
  run.settled = true;
  run.report.reason = reason;
  run.finished = clock_.now();
  run.finished_at = clock_.wallNow();
  finished_order_.push_back(run.id);
  logger().information("run " + run.id + " finished: stopped before it started");
}

void RunManager::Impl::purgeLocked() {
  const SteadyTime now = clock_.now();
  while (!finished_order_.empty()) {
    const auto it = runs_.find(finished_order_.front());
    if (it == runs_.end()) {
      finished_order_.pop_front();
      continue;
    }
    const bool expired = now - *it->second->finished > settings_.retention;
    const bool over = finished_order_.size() > settings_.max_retained;
    const bool heavy = retained_bytes_ > settings_.max_retained_bytes && finished_order_.size() > 1;
    if (!expired && !over && !heavy) {
      break;
    }
    retained_bytes_ -= it->second->retained_bytes;
    runs_.erase(it);
    finished_order_.pop_front();
  }
}

RunSnapshot RunManager::Impl::snapshotLocked(const Run& run, const OutputOffsets& from) const {
  RunSnapshot snapshot = run.report;
  if (run.capture) {
    snapshot.stdout_output = run.capture->snapshot(backend::Stream::kStdout, from.stdout_from);
    snapshot.stderr_output = run.capture->snapshot(backend::Stream::kStderr, from.stderr_from);
  }
  snapshot.status = run.status;
  snapshot.prepared_sandbox = run.ran_prepared;
  snapshot.started_at = run.started_at;
  snapshot.finished_at = run.finished_at;
  const SteadyTime now = clock_.now();
  if (run.status == policy::RunStatus::kQueued) {
    const std::vector<const Run*> order = admissionOrderLocked();
    const auto position = std::find(order.begin(), order.end(), &run);
    snapshot.queue_position = static_cast<std::size_t>(position - order.begin()) + 1;
    snapshot.queued_seconds = secondsBetween(run.enqueued_at, now);
    return snapshot;
  }
  const SteadyTime left_queue = run.exec_start ? *run.exec_start : run.finished.value_or(now);
  snapshot.queued_seconds = secondsBetween(run.enqueued_at, left_queue);
  if (run.exec_start) {
    const SteadyTime end = run.exec_end ? *run.exec_end : run.finished.value_or(now);
    snapshot.duration_seconds = secondsBetween(*run.exec_start, end);
  }
  return snapshot;
}

void RunManager::Impl::sealEvidenceLocked(Run& run, policy::Evidence& evidence) {
  if (run.outcome_known) {
    return;
  }
  run.outcome_known = true;
  evidence.stop_requested = run.stop_requested;
  evidence.timer_fired = run.timer_fired;
}

void RunManager::Impl::reapThreads() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    threads.swap(done_threads_);
  }
  for (std::thread& thread : threads) {
    if (thread.joinable()) {
      thread.join();
    }
  }
}

void RunManager::Impl::runThread(const std::shared_ptr<Run>& run) {
  Outcome outcome;
  std::optional<SandboxLease> lease;
  if (run->prepared) {
    // Taken at admission: it is removed however the run ends, even stopped before it began.
    lease.emplace(removalOf(run->prepared->sandbox_id, run->id));
  }
  try {
    execute(*run, outcome, lease);
  } catch (const std::exception& e) {
    logger().error("run " + run->id + ": unexpected error: " + e.what());
    outcome.evidence.sandbox_failure = std::string("internal error: ") + e.what();
  } catch (...) {
    logger().error("run " + run->id + ": unexpected non-standard exception");
    outcome.evidence.sandbox_failure = "internal error";
  }
  // Reported first: the evidence is complete, and removal (5 to 60 ms) need not delay it.
  finish(*run, outcome);
  lease.reset();
  std::lock_guard lock(mutex_);
  // Its sink had to outlive the sandbox; its posture (seccomp text included) need not stay.
  run->prepared.reset();
  run->settled = true;
  --live_threads_;
  done_threads_.push_back(std::move(run->thread));
  changed_.notify_all();
}

bool RunManager::Impl::stopRequested(Run& run) {
  std::lock_guard lock(mutex_);
  return run.stop_requested;
}

void RunManager::Impl::killSandbox(const std::string& sandbox_id, const std::string& run_id) {
  const backend::Status status = backend_.kill(sandbox_id);
  if (!status.ok() && status.code != backend::Code::kNotFound) {
    logger().warning("run " + run_id + ": kill failed: " + status.message);
  }
}

// A prepared sandbox's watchdog and deadline label also allow for its time idle (a sandbox
// idle longer is replaced).
backend::SandboxSpec RunManager::Impl::buildSpec(const std::string& label_run_id,
                                                 const policy::Limits& limits,
                                                 const backend::Posture& required,
                                                 bool prepared) const {
  const long long watchdog_seconds =
      watchdogSeconds(limits) +
      (prepared ? static_cast<long long>(settings_.prepared_max_idle.count()) : 0);
  const long long now_unix =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch()).count();
  const std::string threads = std::to_string(std::max(1LL, ceilSeconds(limits.cpus)));

  backend::SandboxSpec spec;
  spec.run_id = label_run_id;
  spec.labels = {
      {kLabelManaged, "true"},
      {kLabelInstance, instance_id_},
      {kLabelRunId, label_run_id},
      {kLabelOwnerPid, std::to_string(::getpid())},
      {kLabelDeadline, std::to_string(now_unix + watchdog_seconds + kDeadlineLabelSlackSeconds)},
  };
  if (prepared) {
    spec.labels.emplace(kLabelPrepared, "true");
  }
  spec.command = {
      "/usr/bin/timeout", "-s", "KILL", std::to_string(watchdog_seconds), sandbox_.python, "-I",
      sandbox_.launcher,
  };
  spec.env = {
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "HOME=/tmp",
      "LANG=C.UTF-8",
      "PYTHONDONTWRITEBYTECODE=1",
      "PYTHONUNBUFFERED=1",
      "MPLBACKEND=Agg",
      "OMP_NUM_THREADS=" + threads,
      "OPENBLAS_NUM_THREADS=" + threads,
  };
  spec.working_dir = "/workspace";
  spec.hostname = "sandbox";
  spec.posture = required;
  return spec;
}

void RunManager::Impl::execute(Run& run, Outcome& outcome, std::optional<SandboxLease>& lease) {
  policy::Evidence& evidence = outcome.evidence;
  std::vector<policy::File> files;
  std::optional<std::string> stdin_data;
  // Only the launcher learns it (in the archive), so the program cannot forge the trailer.
  const std::string nonce = randomHexId();
  {
    std::lock_guard lock(mutex_);
    if (run.stop_requested) {
      return;
    }
    files = std::move(run.files);
    run.files.clear();
    stdin_data = std::move(run.stdin_data);
    run.stdin_data.reset();
    run.exec_start = clock_.now();
    run.started_at = clock_.wallNow();
    run.capture = std::make_unique<OutputCapture>(settings_.output_cap_bytes, trailerMarker(nonce),
                                                  trailerCapBytes(settings_.out_files));
    logger().information(
        "run " + run.id + " of tenant " + run.tenant + " started after " +
        policy::formatNumber(secondsBetween(run.enqueued_at, *run.exec_start)) + " s in the queue" +
        (run.prepared ? " in prepared sandbox " + run.prepared->sandbox_id : std::string()));
  }

  int uid = 0;
  int gid = 0;
  if (!parseUserIds(sandbox_.user, &uid, &gid)) {
    evidence.sandbox_failure =
        "the sandbox user setting \"" + sandbox_.user + "\" is not a numeric uid:gid";
    return;
  }
  for (policy::File& control :
       controlFiles(nonce, settings_.out_files, watchdogSeconds(run.limits), stdin_data)) {
    files.push_back(std::move(control));
  }
  stdin_data.reset();
  std::string archive = policy::buildArchive(files, uid, gid);
  files.clear();

  if (run.prepared) {
    if (runInPrepared(run, archive, outcome)) {
      return;
    }
    lease.reset();  // the prepared sandbox ended while idle
  }

  const backend::Posture required = policy::requiredPosture(run.limits, sandbox_);
  const backend::SandboxSpec spec = buildSpec(run.id, run.limits, required, false);
  std::vector<std::string> violations = policy::assertPosture(spec.posture, required);
  if (!violations.empty()) {
    evidence.sandbox_failure =
        "the sandbox spec failed the posture check: " + join(violations, "; ");
    return;
  }
  if (stopRequested(run)) {
    return;
  }

  const backend::CreateReply created = backend_.create(spec);
  if (!created.status.ok()) {
    evidence.sandbox_failure = "create failed: " + created.status.message;
    return;
  }
  lease.emplace(removalOf(created.id, run.id));
  {
    std::lock_guard lock(mutex_);
    run.sandbox_id = created.id;
  }

  const backend::InspectReply inspected = backend_.inspect(created.id);
  if (!inspected.status.ok()) {
    evidence.sandbox_failure = "inspect failed: " + inspected.status.message;
    return;
  }
  violations = policy::assertPosture(inspected.posture, required);
  if (!violations.empty()) {
    evidence.sandbox_failure = "posture check failed: " + join(violations, "; ");
    logger().error("run " + run.id + ": " + evidence.sandbox_failure);
    return;
  }
  if (stopRequested(run)) {
    return;
  }

  const backend::Status delivered = backend_.deliver(created.id, archive);
  std::string().swap(archive);
  if (!delivered.ok()) {
    evidence.sandbox_failure = "delivery failed: " + delivered.message;
    return;
  }
  if (stopRequested(run)) {
    return;
  }

  const backend::Status started = backend_.start(created.id, run.capture.get());
  if (!started.ok()) {
    evidence.sandbox_failure = "start failed: " + started.message;
    return;
  }
  {
    std::lock_guard lock(mutex_);
    run.started = true;
  }
  waitForExit(run, created.id, outcome);
  outcome.ended = clock_.now();
}

// Runs the code in the run's prepared sandbox. False, with nothing delivered, when that
// sandbox ended while it idled: the run then takes the normal path.
bool RunManager::Impl::runInPrepared(Run& run, const std::string& archive, Outcome& outcome) {
  const std::string& sandbox_id = run.prepared->sandbox_id;
  const backend::WaitReply idle = backend_.wait(sandbox_id, std::chrono::milliseconds(0));
  if (!idle.status.ok() || idle.exit.exited) {
    logger().warning("run " + run.id + ": prepared sandbox " + sandbox_id +
                     " ended while idle; creating a fresh one");
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    if (run.stop_requested) {
      return true;
    }
    run.sandbox_id = sandbox_id;
    run.started = true;  // a stop from now on kills it
    run.ran_prepared = true;
  }
  run.prepared->sink.bind(run.capture.get());
  const backend::Status delivered = backend_.deliver(sandbox_id, archive);
  if (!delivered.ok()) {
    outcome.evidence.sandbox_failure = "delivery failed: " + delivered.message;
    return true;
  }
  waitForExit(run, sandbox_id, outcome);
  outcome.ended = clock_.now();
  return true;
}

void RunManager::Impl::waitForExit(Run& run, const std::string& sandbox_id, Outcome& outcome) {
  const SteadyTime deadline = *run.exec_start + toDuration(run.limits.timeout_seconds);
  std::optional<SteadyTime> kill_sent_at;
  while (true) {
    const SteadyTime now = clock_.now();
    if (!kill_sent_at) {
      bool kill_now = false;
      bool timer = false;
      {
        std::lock_guard lock(mutex_);
        if (run.stop_requested) {
          kill_sent_at = now;
          kill_now = !run.stop_killed;
        } else if (now >= deadline) {
          run.timer_fired = true;
          timer = true;
          kill_sent_at = now;
          kill_now = true;
        }
      }
      if (timer) {
        logger().information("run " + run.id + " reached its timeout; killing it");
      }
      if (kill_now) {
        killSandbox(sandbox_id, run.id);
      }
    } else if (now - *kill_sent_at >= kKillGrace) {
      std::lock_guard lock(mutex_);
      sealEvidenceLocked(run, outcome.evidence);
      outcome.evidence.sandbox_failure = "the sandbox did not stop after kill";
      return;
    }
    const SteadyTime until = kill_sent_at ? *kill_sent_at + kKillGrace : deadline;
    const SteadyDuration slice = std::min<SteadyDuration>(until - now, kWaitSlice);
    const auto timeout =
        std::max(std::chrono::ceil<std::chrono::milliseconds>(slice), std::chrono::milliseconds(1));
    const backend::WaitReply reply = backend_.wait(sandbox_id, timeout);
    if (!reply.status.ok()) {
      std::lock_guard lock(mutex_);
      sealEvidenceLocked(run, outcome.evidence);
      outcome.evidence.sandbox_failure = "lost the sandbox while waiting: " + reply.status.message;
      return;
    }
    if (reply.exit.exited) {
      std::lock_guard lock(mutex_);
      sealEvidenceLocked(run, outcome.evidence);
      outcome.exit = reply.exit;
      outcome.evidence.exit_code = reply.exit.exit_code;
      outcome.evidence.oom_killed = reply.exit.oom_killed;
      outcome.evidence.engine_error = reply.exit.engine_error;
      return;
    }
  }
}

void RunManager::Impl::finish(Run& run, Outcome& outcome) {
  RunResults results;
  if (run.capture) {
    run.capture->close();
    OutputCapture::Trailer trailer = run.capture->takeTrailer();
    if (trailer.overflowed) {
      logger().warning("run " + run.id + ": the launcher's trailer is over its cap; ignored");
    } else if (trailer.found) {
      // The trailer is written inside the sandbox: untrusted, so nothing in it may end the run
      // thread before the run is reported and its slot released.
      try {
        auto parsed = parseTrailer(trailer.bytes, settings_.out_files);
        if (auto* problem = std::get_if<std::string>(&parsed)) {
          logger().warning("run " + run.id + ": ignoring a malformed trailer: " + *problem);
        } else {
          results = std::move(std::get<RunResults>(parsed));
        }
      } catch (const std::exception& e) {
        logger().error("run " + run.id + ": ignoring a trailer that failed to parse: " + e.what());
      }
    }
  }
  std::string status_name;
  double duration = 0;
  {
    std::lock_guard lock(mutex_);
    sealEvidenceLocked(run, outcome.evidence);
    policy::Verdict verdict;
    try {
      verdict = policy::decide(outcome.evidence, run.limits);
    } catch (const std::exception& e) {
      logger().error("run " + run.id + ": deciding the status failed: " + e.what());
      verdict.status = policy::RunStatus::kSandboxError;
      verdict.reason = "The server could not decide how this run ended.";
    }
    run.status = verdict.status;
    run.exec_end = outcome.ended;
    run.finished = clock_.now();
    run.finished_at = clock_.wallNow();
    run.report.exit_code = verdict.exit_code;
    run.report.signal = verdict.signal;
    run.report.reason = std::move(verdict.reason);
    run.report.results = std::move(results);
    run.retained_bytes = run.capture ? run.capture->retainedCapacity() : 0;
    for (const OutFile& file : run.report.results.files) {
      run.retained_bytes += file.content.size();
    }
    retained_bytes_ += run.retained_bytes;
    run.report.peak_memory_bytes = outcome.exit.peak_memory_bytes;
    run.report.cpu_seconds = outcome.exit.cpu_seconds;
    releaseSlotLocked(run);
    finished_order_.push_back(run.id);
    admitLocked();
    status_name = std::string(policy::statusName(run.status));
    if (run.exec_start) {
      duration = secondsBetween(*run.exec_start, run.exec_end.value_or(*run.finished));
    }
    changed_.notify_all();
  }
  logger().information("run " + run.id + " finished: " + status_name + " after " +
                       policy::formatNumber(duration) + " s");
}

// Keeps settings_.prepared sandboxes ready while memory allows, replaces the ones idle too
// long, removes retired ones, retries removals that failed, and at shutdown removes what is
// left. Waits with a growing pause after a failure, so a broken engine is not hammered.
void RunManager::Impl::maintenanceThread() {
  const std::int64_t memory = memoryBytes(settings_.prepared_limits);
  std::chrono::seconds backoff = kRetryFirstBackoff;
  SteadyTime retry_at{};  // the next preparation after a failure; the clock's epoch: any time
  std::unique_lock lock(mutex_);
  while (true) {
    if (!retiring_.empty()) {
      removeRetiredLocked(lock);
      continue;
    }
    if (shutting_down_) {
      break;
    }
    const SteadyTime now = clock_.now();
    if (!unremoved_.empty() && now >= removal_retry_at_) {
      retryRemovals(false, lock);
      continue;
    }
    if (!prepared_.empty() && now - prepared_.front()->ready_at >= settings_.prepared_max_idle) {
      std::unique_ptr<Prepared> stale = std::move(prepared_.front());
      prepared_.pop_front();
      retireLocked(std::move(stale));
      continue;
    }
    const bool wanted = prepared_.size() + preparing_ < settings_.prepared && now >= retry_at &&
                        memoryFitsLocked(memory) &&
                        (prepared_running_ == 0 || now - last_claim_ >= kRefillDelay);
    if (!wanted) {
      pool_changed_.wait_for(lock, kMaintenanceRecheck);
      retireEndedLocked(lock);
      continue;
    }
    ++preparing_;
    prepared_memory_ += memory;
    lock.unlock();
    std::unique_ptr<Prepared> prepared = prepareOne();
    lock.lock();
    --preparing_;
    if (!prepared) {
      prepared_memory_ -= memory;
      retry_at = clock_.now() + backoff;
      backoff = std::min<std::chrono::seconds>(backoff * 2, kRetryMaxBackoff);
      admitLocked();
      continue;
    }
    backoff = kRetryFirstBackoff;
    retry_at = SteadyTime{};
    prepared->ready_at = clock_.now();
    logger().debug("prepared sandbox " + prepared->sandbox_id + " is ready");
    prepared_.push_back(std::move(prepared));
    changed_.notify_all();
    if (shutting_down_) {
      retireLocked(std::move(prepared_.back()));
      prepared_.pop_back();
    } else {
      admitLocked();  // a queued run may take it, or need its memory
    }
  }
  while (!prepared_.empty()) {
    retireLocked(std::move(prepared_.front()));
    prepared_.pop_front();
  }
  removeRetiredLocked(lock);
  retryRemovals(true, lock);
}

// Removes the retired prepared sandboxes; releases `lock` while it calls the backend.
void RunManager::Impl::removeRetiredLocked(std::unique_lock<std::mutex>& lock) {
  std::vector<std::unique_ptr<Prepared>> retired;
  retired.swap(retiring_);
  lock.unlock();
  for (const auto& prepared : retired) {
    removeSandbox(prepared->sandbox_id, "prepared sandbox");
  }
  lock.lock();
}

// Retires the idle prepared sandboxes that ended (say, the engine restarted), so the pool
// makes fresh ones before a run finds them dead. Releases `lock` while it asks the backend.
void RunManager::Impl::retireEndedLocked(std::unique_lock<std::mutex>& lock) {
  std::vector<std::string> idle;
  for (const auto& prepared : prepared_) {
    idle.push_back(prepared->sandbox_id);
  }
  if (idle.empty()) {
    return;
  }
  lock.unlock();
  std::vector<std::string> ended;
  for (const std::string& id : idle) {
    const backend::WaitReply reply = backend_.wait(id, std::chrono::milliseconds(0));
    if (!reply.status.ok() || reply.exit.exited) {
      ended.push_back(id);
    }
  }
  lock.lock();
  for (const std::string& id : ended) {
    const auto found = std::find_if(prepared_.begin(), prepared_.end(), [&](const auto& prepared) {
      return prepared->sandbox_id == id;
    });
    if (found != prepared_.end()) {
      logger().warning("prepared sandbox " + id + " ended while idle; replacing it");
      std::unique_ptr<Prepared> dead = std::move(*found);
      prepared_.erase(found);
      retireLocked(std::move(dead));
    }
  }
}

// Called with `lock` held; releases it while it calls the backend.
void RunManager::Impl::retryRemovals(bool last_chance, std::unique_lock<std::mutex>& lock) {
  std::vector<std::string> ids;
  ids.swap(unremoved_);
  lock.unlock();
  std::vector<std::string> failed;
  for (const std::string& id : ids) {
    const backend::Status status = backend_.remove(id);
    if (status.ok()) {
      logger().information("removed sandbox " + id + " on a later attempt");
    } else if (last_chance) {
      logger().error("could not remove sandbox " + id + " (" + status.message +
                     "); the next server's startup sweep will");
    } else {
      failed.push_back(id);
    }
  }
  lock.lock();
  if (failed.empty()) {
    removal_backoff_ = kRetryFirstBackoff;
    removal_retry_at_ = SteadyTime{};
    return;
  }
  unremoved_.insert(unremoved_.end(), failed.begin(), failed.end());
  removal_retry_at_ = clock_.now() + removal_backoff_;
  removal_backoff_ = std::min<std::chrono::seconds>(removal_backoff_ * 2, kRetryMaxBackoff);
}

void RunManager::Impl::removeSandbox(const std::string& sandbox_id,
                                     const std::string& whose) noexcept {
  std::string problem;
  try {
    const backend::Status status = backend_.remove(sandbox_id);
    if (status.ok()) {
      logger().debug("removed sandbox " + sandbox_id + " of " + whose);
      return;
    }
    problem = status.message;
  } catch (const std::exception& e) {
    problem = std::string("it threw: ") + e.what();
  } catch (...) {
    problem = "it threw a non-standard exception";
  }
  logger().error(whose + ": removing sandbox " + sandbox_id + " failed: " + problem +
                 "; will retry");
  try {
    std::lock_guard lock(mutex_);
    unremoved_.push_back(sandbox_id);
    pool_changed_.notify_all();
  } catch (const std::exception& e) {
    logger().error(whose + ": cannot queue sandbox " + sandbox_id + " for removal: " + e.what());
  }
}

// Creates a sandbox for settings_.prepared_limits, checks the engine's record of it against
// the required posture and starts it idle. nullptr, with nothing left behind, on any failure.
std::unique_ptr<RunManager::Impl::Prepared> RunManager::Impl::prepareOne() {
  auto prepared = std::make_unique<Prepared>();
  prepared->posture = policy::requiredPosture(settings_.prepared_limits, sandbox_);
  prepared->timeout_seconds = settings_.prepared_limits.timeout_seconds;
  prepared->memory_bytes = memoryBytes(settings_.prepared_limits);
  const backend::SandboxSpec spec =
      buildSpec("prepared-" + randomHexId(), settings_.prepared_limits, prepared->posture, true);
  std::vector<std::string> violations = policy::assertPosture(spec.posture, prepared->posture);
  if (!violations.empty()) {
    logger().error("cannot prepare a sandbox: its spec failed the posture check: " +
                   join(violations, "; "));
    return nullptr;
  }
  const backend::CreateReply created = backend_.create(spec);
  if (!created.status.ok()) {
    logger().warning("cannot prepare a sandbox: create failed: " + created.status.message);
    return nullptr;
  }
  prepared->sandbox_id = created.id;
  const auto fail = [&](const std::string& why) -> std::unique_ptr<Prepared> {
    logger().error("cannot prepare a sandbox: " + why);
    removeSandbox(prepared->sandbox_id, "prepared sandbox");
    return nullptr;
  };
  const backend::InspectReply inspected = backend_.inspect(created.id);
  if (!inspected.status.ok()) {
    return fail("inspect failed: " + inspected.status.message);
  }
  violations = policy::assertPosture(inspected.posture, prepared->posture);
  if (!violations.empty()) {
    return fail("posture check failed: " + join(violations, "; "));
  }
  const backend::Status started = backend_.start(created.id, &prepared->sink);
  if (!started.ok()) {
    return fail("start failed: " + started.message);
  }
  return prepared;
}

RunManager::RunManager(backend::RuntimeBackend& backend, const RunSettings& settings,
                       const policy::SandboxSettings& sandbox, const Clock& clock)
    : impl_(std::make_unique<Impl>(backend, settings, sandbox, clock)) {}

RunManager::~RunManager() { shutdown(); }

std::variant<RunSnapshot, StartRefusal> RunManager::start(StartRequest request) {
  return impl_->start(std::move(request));
}

std::optional<RunSnapshot> RunManager::get(const std::string& tenant, const std::string& run_id,
                                           std::chrono::milliseconds wait,
                                           const OutputOffsets& from) {
  return impl_->get(tenant, run_id, wait, from);
}

std::optional<RunSnapshot> RunManager::stop(const std::string& tenant, const std::string& run_id) {
  return impl_->stop(tenant, run_id);
}

std::size_t RunManager::sweepLeftovers() { return impl_->sweepLeftovers(); }

void RunManager::shutdown() { impl_->shutdown(); }

bool RunManager::awaitPrepared(std::size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex_);
  return impl_->changed_.wait_for(lock, timeout, [&] { return impl_->prepared_.size() >= count; });
}

const std::string& RunManager::instanceId() const { return impl_->instance_id_; }

}  // namespace scs::runs
