// The run manager's registry: start, get, stop and shutdown, and the one place a run becomes
// final. Admission is in admission.cc, what a run's own thread does in run_thread.cc, sessions
// in sessions.cc and session_runs.cc, the maintenance thread in maintenance.cc.

#include "runs/run_manager.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <system_error>
#include <tuple>

#include "runs/run_manager_impl.h"
#include "sessions/session_store.h"

namespace scs::runs {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

RunManager::Impl::Impl(backend::RuntimeBackend& backend, const RunSettings& settings,
                       const policy::SandboxSettings& sandbox, const common::Clock& clock,
                       RunEvents& events)
    : backend_(backend),
      settings_(settings),
      sandbox_(sandbox),
      clock_(clock),
      events_(events),
      instance_id_(settings.instance_id.empty() ? common::randomHexId() : settings.instance_id),
      // A session's in-sandbox deadline is a backstop for a server that hangs: a sandbox's
      // clock runs on while it is hibernated (gVisor's monotonic time counts the time saved),
      // so it allows for a hibernation beside the awake lifetime.
      bring_up_(backend, sandbox_, instance_id_, settings.prepared_max_idle,
                settings.sessions.max_lifetime + (settings.sessions.hibernate
                                                      ? settings.sessions.hibernated_max
                                                      : std::chrono::seconds(0)),
                settings.prepared_warm_modules, clock),
      uids_(sandbox.uids, settings.reserved_uids),
      removals_(backend, clock,
                [this] {
                  std::lock_guard lock(mutex_);
                  pool_changed_.notify_all();
                }),
      source_(bring_up_, uids_, removals_, sandbox_),
      sessions_(settings.sessions,
                {settings.retention, settings.max_queue, settings.host_memory_bytes}),
      retention_({settings.retention, settings.max_retained, settings.max_retained_bytes,
                  settings.max_retained_per_tenant, settings.max_retained_bytes_per_tenant}),
      pools_({settings.prepared, settings.prepared_max, settings.prepared_limits,
              admission::memoryBytes(settings.prepared_limits), settings.prepared_max_idle, ""},
             settings.prepared_package_sets),
      admission_({settings.max_concurrent, settings.max_queue, settings.max_queue_total,
                  settings.host_memory_bytes},
                 sandbox_, pools_, [this] { return sessions_.memory(); }) {
  maintenance_thread_ = std::thread([this] { maintenanceThread(); });
}

Result<RunSnapshot> RunManager::Impl::start(StartRequest request) {
  reapThreads();
  std::lock_guard lock(mutex_);
  if (shutting_down_) {
    return refusedLocked(request.tenant, stopping("The server is shutting down."));
  }
  forgetExpiredLocked();
  const std::shared_ptr<Session> session = std::move(request.session);
  if (session && session->tenant != request.tenant) {  // a ticket is its tenant's alone
    return refusedLocked(request.tenant, sessions::unknownSession(session->id));
  }
  if (session) {  // its language and limits but the timeout are the session's
    request.language = session->language;
    request.limits = sessions::SessionTable::limitsOfRun(*session, request.limits.timeout_seconds);
  }
  // A session's run holds no memory of its own: its session's is counted already.
  const std::int64_t memory = session ? 0 : admission::memoryBytes(request.limits);
  if (settings_.host_memory_bytes > 0 && memory > settings_.host_memory_bytes) {
    return refusedLocked(
        request.tenant,
        overLimits("This run asks for " + policy::formatNumber(request.limits.memory_gb) +
                   " GB of memory, but sandboxes on this host can have at most " +
                   policy::formatNumber(static_cast<double>(settings_.host_memory_bytes) /
                                        static_cast<double>(policy::kBytesPerGb)) +
                   " GB."));
  }
  const std::size_t waiting = admission_.queue().queued(request.tenant);
  auto run = std::make_shared<Run>();
  run->id = common::unusedHexId(runs_);
  run->tenant = std::move(request.tenant);
  run->limits = request.limits;
  run->memory_bytes = memory;
  run->files = std::move(request.files);
  run->language = request.language;
  run->egress_probe = request.egress_probe;
  run->stdin_data = std::move(request.stdin_data);
  if (session) {
    request.packages = session->packages;  // its sandbox runs them already
  } else if (request.packages) {
    run->image = request.packages->image;
    run->packages_hold = std::move(request.packages_hold);
  }
  run->report.packages = std::move(request.packages);
  run->enqueued_at = clock_.now();
  run->report.submitted_at = clock_.wallNow();
  run->report.run_id = run->id;
  run->report.limits = run->limits;
  // Queued first and admitted by the one fair rule; only this run can start here, because
  // every slot that was free before is already taken or held back by memory.
  runs_.emplace(run->id, run);
  if (session) {
    run->session = session;
    run->report.session_id = session->id;
    const Result<sessions::Placement> placed =
        sessions_.enqueue(*session, run->id, admission_.queue().queued(run->tenant));
    if (const Error* refusal = std::get_if<Error>(&placed)) {
      runs_.erase(run->id);
      return refusedLocked(run->tenant, *refusal);
    }
    if (std::get<sessions::Placement>(placed) == sessions::Placement::kSessionQueue) {
      events_.accepted(run->tenant);
      return snapshotLocked(*run);  // it waits in its session's queue
    }
    admission_.queue().push(run->tenant, run->id);
  } else {
    admission_.queue().push(run->tenant, run->id);
  }
  // Counted before admission, which may end the run at once (its thread failed to start).
  if (sandbox::PreparedPool* pool =
          session ? nullptr
                  : pools_.demandedFor(run->image, run->limits, sandbox_, run->enqueued_at)) {
    run->pool_demand = true;
    pool->demanded(run->enqueued_at);
    pool_changed_.notify_all();
  }
  admitLocked();
  if (run->phase == Phase::kQueued && !session) {
    Result<std::optional<std::string>> room = admission_.room(run->tenant, run->id, waiting);
    if (Error* refusal = std::get_if<Error>(&room)) {
      if (run->pool_demand) {
        pools_.of(run->image)->demandEnded();
      }
      runs_.erase(run->id);
      return refusedLocked(run->tenant, std::move(*refusal));
    }
    if (const std::optional<std::string>& pushed_out = std::get<std::optional<std::string>>(room)) {
      Run& other = *runs_.at(*pushed_out);
      logger().information("run " + other.id + " of tenant " + other.tenant +
                           " leaves the full queue for a run of a tenant with fewer queued runs");
      finalizeLocked(other,
                     stoppedVerdict("Stopped before it started: the server's queue was full and "
                                    "your runs were the most of those waiting. Start it again "
                                    "when fewer of your runs wait."),
                     {}, {});
      other.phase = Phase::kSettled;
    }
  }
  events_.accepted(run->tenant);
  RunSnapshot snapshot = snapshotLocked(*run);
  if (snapshot.queue_position) {
    logger().information("run " + run->id + " of tenant " + run->tenant + " queued at position " +
                         std::to_string(*snapshot.queue_position));
  }
  return snapshot;
}

Error RunManager::Impl::refusedLocked(const std::string& tenant, Error refusal) {
  events_.refused(tenant, admission::refusalOf(refusal));
  return refusal;
}

std::shared_ptr<Run> RunManager::Impl::findLocked(const std::string& tenant,
                                                  const std::string& run_id) {
  forgetExpiredLocked();
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
  const std::shared_ptr<Run> run = findLocked(tenant, run_id);
  if (!run) {
    return std::nullopt;
  }
  if (wait.count() > 0) {
    clock_.waitFor(changed_, lock, wait, [&] { return run->phase >= Phase::kFinal; });
  }
  return snapshotLocked(*run, from);
}

std::optional<RunSnapshot> RunManager::Impl::stop(const std::string& tenant,
                                                  const std::string& run_id) {
  reapThreads();
  std::unique_lock lock(mutex_);
  const std::shared_ptr<Run> run = findLocked(tenant, run_id);
  if (!run) {
    return std::nullopt;
  }
  if (run->phase == Phase::kQueued) {
    admission_.queue().remove(run->tenant, run->id);  // or it waits in its session's queue
    finalizeLocked(*run, stoppedVerdict("Stopped by stop_run before it started."), {}, {});
    run->phase = Phase::kSettled;
    return snapshotLocked(*run);
  }
  std::string kill_id;
  if (run->phase < Phase::kEnded && run->cause == Cause::kNone) {
    logger().information("run " + run->id + ": stop requested");
    run->cause = Cause::kStopRun;
    if (run->phase == Phase::kExecuting && !run->session) {
      run->kill_sent_at = clock_.now();
      kill_id = run->sandbox_id;
    }
    changed_.notify_all();  // a session's run is interrupted by its own thread
  }
  if (!kill_id.empty()) {
    lock.unlock();
    killSandbox(kill_id, run->id);
    lock.lock();
  }
  changed_.wait(lock, [&] { return run->phase == Phase::kSettled; });
  return snapshotLocked(*run);
}

void RunManager::Impl::shutdown(std::optional<std::chrono::milliseconds> removals_within) {
  std::optional<common::SteadyTime> removals_by;
  if (removals_within) {
    removals_by = clock_.now() + *removals_within;
  }
  removals_.close();  // every sandbox from now on is removed at once, on a thread of its own
  std::vector<std::pair<std::string, std::string>> kills;
  {
    std::lock_guard lock(mutex_);
    shutting_down_ = true;
    // Sessions the next server takes back (SessionSettings::store): their waiting runs are
    // stopped, their run in progress interrupted; they are hibernated below.
    for (auto& [id, session] : sessions_.all()) {
      if (keepsAcrossRestartLocked(*session)) {
        session->kept = true;
        stopWaitingLocked(*session, "Stopped by server shutdown before it started.");
      }
    }
    for (const admission::FairQueue::Entry& entry : admission_.queue().clear()) {
      Run& run = *runs_.at(entry.id);
      finalizeLocked(run, stoppedVerdict("Stopped by server shutdown before it started."), {}, {});
      run.phase = Phase::kSettled;
    }
    for (auto& [id, session] : sessions_.all()) {
      // Its waiting runs are stopped; its run in progress is left to the loop below.
      std::shared_ptr<Run> current =
          session->current.empty() ? nullptr : runs_.at(session->current);
      if (current && current->phase != Phase::kQueued && current->cause == Cause::kNone) {
        current->cause = Cause::kShutdown;
      }
      if (!session->kept) {
        endSessionLocked(*session, "the server shut down");
      }
    }
    for (auto& [id, run] : runs_) {
      if (run->phase < Phase::kStarting || run->phase >= Phase::kEnded ||
          (run->cause != Cause::kNone && !(run->session && run->cause == Cause::kShutdown))) {
        continue;
      }
      run->cause = Cause::kShutdown;
      // A kept session's run is interrupted by its own thread (runInSession).
      if (run->phase == Phase::kExecuting && !(run->session && run->session->kept)) {
        run->kill_sent_at = clock_.now();
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
    changed_.wait(lock, [&] {
      return live_threads_ == 0 &&
             std::none_of(sessions_.all().begin(), sessions_.all().end(), [](const auto& entry) {
               return entry.second->opening || entry.second->rest == Session::Rest::kHibernating;
             });
    });
    keepSessionsLocked(lock);
    releaseSessionsLocked(lock);
  }
  reapThreads();
  {
    std::lock_guard join_lock(maintenance_join_mutex_);
    if (maintenance_thread_.joinable()) {
      maintenance_thread_.join();
    }
  }
  removals_.finish(removals_by);
}

bool RunManager::Impl::awaitPrepared(std::size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return clock_.waitFor(changed_, lock, timeout, [&] { return pools_.main().ready() >= count; });
}

bool RunManager::Impl::preparedHealthy() {
  std::lock_guard lock(mutex_);
  return pools_.main().healthy();
}

RunLoad RunManager::Impl::load() {
  std::lock_guard lock(mutex_);
  RunLoad load;
  load.queued = admission_.queue().queued();
  load.executing = admission_.queue().executing();
  load.prepared_ready = pools_.ready();
  load.runs_known = runs_.size();
  load.reports_retained = retention_.count();
  load.report_bytes_retained = retention_.bytes();
  load.sessions_known = sessions_.all().size();
  return load;
}

void RunManager::Impl::finalizeLocked(Run& run, policy::Verdict verdict,
                                      launcher::RunResults results, const backend::Exit& exit) {
  const bool held_slot = run.holdsSlot();
  if (run.session) {
    run.report.session_id = run.session->id;
    sessionRunEndedLocked(run);
  }
  if (run.pool_demand) {
    run.pool_demand = false;
    pools_.of(run.image)->demandEnded();
  }
  run.phase = Phase::kFinal;
  run.packages_hold.reset();  // its sandbox, if made, keeps the image itself now
  run.finished = clock_.now();
  run.finished_at = clock_.wallNow();
  run.report.status = verdict.status;
  run.report.exit_code = verdict.exit_code;
  run.report.signal = std::move(verdict.signal);
  run.report.reason = std::move(verdict.reason);
  run.report.results = std::move(results);
  run.report.peak_memory_bytes = exit.peak_memory_bytes;
  run.report.cpu_seconds = exit.cpu_seconds;
  std::size_t retained = run.capture ? run.capture->retainedCapacity() : 0;
  for (const launcher::OutFile& file : run.report.results.files) {
    retained += file.content.size();
  }
  retention_.add(run.id, run.tenant, retained, *run.finished);
  if (held_slot) {
    admission_.ended(run.tenant, run.id);
    if (run.prepared) {
      sandbox::PreparedPool& pool = *pools_.of(run.image);
      const std::optional<double>& warm_seconds = run.report.results.warm_seconds;
      pool.claimEnded(warm_seconds);
      // Its footprint idle is the whole of one only if its imports had finished.
      if (run.idle_peak_bytes && (warm_seconds || settings_.prepared_warm_modules.empty())) {
        pool.measuredIdle(*run.idle_peak_bytes);
      }
    }
    pool_changed_.notify_all();  // the pool may refill now
  }
  admitLocked();
  changed_.notify_all();
  events_.finished(
      run.tenant, run.report.status,
      run.exec_start ? std::optional<double>(secondsBetween(run.enqueued_at, *run.finished))
                     : std::nullopt,
      run.exec_start ? std::optional<double>(secondsBetween(run.enqueued_at, *run.exec_start))
                     : std::nullopt);
  const double duration =
      run.exec_start ? secondsBetween(*run.exec_start, run.exec_end.value_or(*run.finished)) : 0;
  logger().information("run " + run.id +
                       " finished: " + std::string(policy::statusName(run.report.status)) +
                       (run.exec_start ? " after " + policy::formatNumber(duration) + " s"
                                       : std::string(" before it started")));
}

void RunManager::Impl::forgetExpiredLocked() {
  for (const std::string& id : retention_.expire(clock_.now())) {
    runs_.erase(id);
  }
}

RunSnapshot RunManager::Impl::snapshotLocked(const Run& run, const OutputOffsets& from) const {
  RunSnapshot snapshot = run.report;
  if (run.capture) {
    std::tie(snapshot.stdout_output, snapshot.stderr_output) =
        run.capture->report(from.stdout_from, from.stderr_from, settings_.output_window_chars);
  }
  snapshot.status = run.status();
  snapshot.prepared_sandbox = run.ran_prepared;
  if (run.session) {
    snapshot.session_id = run.session->id;
    snapshot.session_alive = run.session->open;
  }
  snapshot.started_at = run.started_at;
  snapshot.finished_at = run.finished_at;
  const common::SteadyTime now = clock_.now();
  if (run.phase == Phase::kQueued) {
    const std::vector<admission::FairQueue::Entry> order = admission_.queue().order();
    const auto position =
        std::find_if(order.begin(), order.end(),
                     [&](const admission::FairQueue::Entry& e) { return e.id == run.id; });
    if (position != order.end()) {
      snapshot.queue_position = static_cast<std::size_t>(position - order.begin()) + 1;
    } else if (run.session) {
      // Behind its session's run in progress and those before it in the session's queue.
      const std::deque<std::string>& waiting = run.session->waiting;
      snapshot.queue_position =
          static_cast<std::size_t>(std::find(waiting.begin(), waiting.end(), run.id) -
                                   waiting.begin()) +
          2;
    }
    snapshot.queued_seconds = secondsBetween(run.enqueued_at, now);
    return snapshot;
  }
  const common::SteadyTime left_queue =
      run.exec_start ? *run.exec_start : run.finished.value_or(now);
  snapshot.queued_seconds = secondsBetween(run.enqueued_at, left_queue);
  if (run.exec_start) {
    const common::SteadyTime end = run.exec_end ? *run.exec_end : run.finished.value_or(now);
    snapshot.duration_seconds = secondsBetween(*run.exec_start, end);
  }
  return snapshot;
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

RunManager::RunManager(backend::RuntimeBackend& backend, const RunSettings& settings,
                       const policy::SandboxSettings& sandbox, const common::Clock& clock,
                       RunEvents* events)
    : impl_(std::make_unique<Impl>(backend, settings, sandbox, clock,
                                   events ? *events : noRunEvents())) {}

RunManager::~RunManager() { shutdown(); }

Result<RunSnapshot> RunManager::start(StartRequest request) {
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

void RunManager::shutdown(std::optional<std::chrono::milliseconds> removals_within) {
  impl_->shutdown(removals_within);
}

TakenBack RunManager::takeBack(std::vector<sessions::SavedSession> sessions) {
  return impl_->takeBack(std::move(sessions));
}

bool RunManager::awaitPrepared(std::size_t count, std::chrono::milliseconds timeout) {
  return impl_->awaitPrepared(count, timeout);
}

RunLoad RunManager::load() const { return impl_->load(); }

Result<sessions::SessionSnapshot> RunManager::openSession(OpenSessionRequest request) {
  return impl_->openSession(std::move(request));
}

Result<SessionTicket> RunManager::sessionForRun(const std::string& tenant,
                                                const std::string& session_id,
                                                const sessions::RunAsk& ask) {
  return impl_->sessionForRun(tenant, session_id, ask);
}

std::optional<sessions::SessionSnapshot> RunManager::closeSession(const std::string& tenant,
                                                                  const std::string& session_id) {
  return impl_->closeSession(tenant, session_id);
}

bool RunManager::preparedHealthy() const { return impl_->preparedHealthy(); }

RunEvents& RunManager::events() const { return impl_->events_; }

const std::string& RunManager::instanceId() const { return impl_->instance_id_; }

}  // namespace scs::runs
