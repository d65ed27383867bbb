// Sessions: a sandbox with one long-lived interpreter whose runs share its namespace and files.
// Opening one brings its sandbox up as any run's (spec, posture check, engine read-back) with
// the launcher in session mode; its runs wait in the session's own queue and go to the fair
// queue one at a time; each run's code is a frame on the sandbox's stdin, and its timeout or a
// stop interrupts it (KeyboardInterrupt). A session ends when it is closed, idles or lives too
// long, when its interpreter dies, or when an interrupted run does not come back in time; its
// sandbox is removed once no run executes in it.

#include <Poco/Logger.h>

#include <algorithm>

#include "runs/run_manager_impl.h"
#include "runs/side_channel.h"

namespace scs::runs {
namespace {

// How long an interrupted run's code has to come back from KeyboardInterrupt.
constexpr auto kInterruptGrace = std::chrono::seconds(3);

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

std::string seconds(std::chrono::seconds value) { return std::to_string(value.count()) + " s"; }

}  // namespace

void SessionSink::write(backend::Stream stream, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  if (target_ != nullptr) {
    target_->write(stream, bytes);
  }
}

void SessionSink::ended() {
  backend::OutputSink* target = nullptr;
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
    target = target_;
  }
  if (target != nullptr) {
    target->ended();
  }
  if (listener_) {
    listener_();
  }
}

void SessionSink::bind(backend::OutputSink* target) {
  bool ended = false;
  {
    std::lock_guard lock(mutex_);
    target_ = target;
    ended = ended_;
  }
  if (target != nullptr && ended) {
    target->ended();
  }
}

bool SessionSink::hasEnded() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

std::int64_t RunManager::Impl::sessionMemoryLocked() const {
  std::int64_t total = 0;
  for (const auto& [id, session] : sessions_) {
    if (!session->removed) {
      total += session->memory_bytes;
    }
  }
  return total;
}

std::shared_ptr<Session> RunManager::Impl::findSessionLocked(const std::string& tenant,
                                                             const std::string& id) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->tenant != tenant) {
    return nullptr;
  }
  return it->second;
}

SessionSnapshot RunManager::Impl::sessionSnapshotLocked(const Session& session) const {
  SessionSnapshot snapshot;
  snapshot.session_id = session.id;
  snapshot.limits = session.limits;
  snapshot.open = session.open;
  snapshot.end_reason = session.end_reason;
  snapshot.opened_at = session.opened_wall;
  snapshot.expires_at = session.opened_wall + settings_.sessions.max_lifetime;
  snapshot.idle_expires_at =
      std::min(snapshot.expires_at, session.last_active_wall + settings_.sessions.idle);
  return snapshot;
}

std::variant<SessionSnapshot, StartRefusal> RunManager::Impl::openSession(
    OpenSessionRequest request) {
  reapThreads();
  const SessionSettings& caps = settings_.sessions;
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    if (shutting_down_) {
      return StartRefusal{"The server is shutting down."};
    }
    std::size_t open = 0;
    std::size_t own = 0;
    for (const auto& [id, other] : sessions_) {
      if (other->open) {
        ++open;
        own += other->tenant == request.tenant ? 1 : 0;
      }
    }
    if (own >= caps.max_open_per_tenant) {
      return StartRefusal{"You have " + std::to_string(own) +
                          " sessions open, the most one client may have. Close one you no "
                          "longer need with close_session, or run without a session."};
    }
    if (open >= caps.max_open) {
      return StartRefusal{"The server has " + std::to_string(open) +
                          " sessions open, the most it allows. Try again later, or run "
                          "without a session."};
    }
    const std::int64_t memory = memoryBytes(request.limits);
    if (settings_.host_memory_bytes > 0 && memory > settings_.host_memory_bytes) {
      return StartRefusal{"This session asks for " +
                          policy::formatNumber(request.limits.memory_gb) +
                          " GB of memory, more than sandboxes on this host can have."};
    }
    // One tenant's sessions hold at most half of the host's memory for as long as they are
    // open, so that they cannot starve everyone else's runs.
    std::int64_t held = 0;
    for (const auto& [id, other] : sessions_) {
      held += other->tenant == request.tenant && !other->removed ? other->memory_bytes : 0;
    }
    if (settings_.host_memory_bytes > 0 && held + memory > settings_.host_memory_bytes / 2) {
      return StartRefusal{
          "Your open sessions would hold more than half of this host's memory "
          "with this one. Close one with close_session, or ask for less "
          "memory_gb."};
    }
    if (pool_.serves(request.limits, sandbox_)) {
      // An arrival the pool could serve: the rate it keeps sandboxes ready for counts it.
      pool_.demanded(clock_.now());
      pool_.demandEnded();
    }
    // A prepared sandbox of the session's posture already holds part of its memory and a uid
    // of its own, and becomes the session's once its launcher is told so.
    const PreparedSandbox* prepared =
        pool_.find(request.limits, sandbox_, clock_.now(), /*for_session=*/true);
    const std::int64_t needed = memory - (prepared ? pool_.idleHold() : 0);
    if (!memoryFitsLocked(needed) && !pool_.evictFor(needed, prepared, [this](std::int64_t more) {
          return memoryFitsLocked(more);
        })) {
      return StartRefusal{"Not enough of the host's memory is free for a session of " +
                          policy::formatNumber(request.limits.memory_gb) +
                          " GB now: running runs and open sessions hold it. Try again when "
                          "some have finished, or ask for less memory_gb."};
    }
    pool_changed_.notify_all();  // evicted prepared sandboxes are removed
    const std::optional<std::uint32_t> uid =
        prepared ? std::optional<std::uint32_t>(prepared->uid) : uids_.take();
    if (!uid) {
      return StartRefusal{
          "The server cannot start another sandbox now: every uid of its "
          "sandbox range is in use. Try again later."};
    }
    session = std::make_shared<Session>();
    if (prepared) {
      session->prepared = pool_.claim(prepared, clock_.now());
      session->sandbox_id = session->prepared->sandbox_id;
      pool_.claimEnded();  // a session is no run the pool's refill should wait for
    }
    session->id = unusedHexId(sessions_);
    session->tenant = std::move(request.tenant);
    session->limits = request.limits;
    session->memory_bytes = memory;
    session->files = std::move(request.files);
    session->uid = *uid;
    session->opened = session->last_active = clock_.now();
    session->opened_wall = session->last_active_wall = clock_.wallNow();
    session->sink.setListener([this] {
      std::lock_guard wake(mutex_);
      changed_.notify_all();
      pool_changed_.notify_all();  // the maintenance thread ends a session whose sandbox ended
    });
    session->opening = true;
    sessions_.emplace(session->id, session);
  }

  const SandboxBringUp::Outcome brought =
      session->prepared ? openInPrepared(*session) : bringUpSession(*session);

  std::unique_lock lock(mutex_);
  session->opening = false;
  changed_.notify_all();                       // shutdown waits for openings
  if (!brought.started() || !session->open) {  // failed, or shutdown ended it meanwhile
    const std::string why =
        brought.failure.empty() ? std::string("the server is shutting down") : brought.failure;
    logger().error("session " + session->id + " of tenant " + session->tenant +
                   " could not start: " + why);
    endSessionLocked(*session, why);
    releaseSessionsLocked(lock);
    sessions_.erase(session->id);  // it never opened: no record of it is kept
    return StartRefusal{"The session's sandbox could not be started: " + why +
                        ". This is not caused by your code; do not retry in a loop."};
  }
  logger().information("session " + session->id + " of tenant " + session->tenant + " opened in " +
                       (session->prepared ? "prepared " : "") + "sandbox " + session->sandbox_id);
  return sessionSnapshotLocked(*session);
}

SandboxBringUp::Outcome RunManager::Impl::openInPrepared(Session& session) {
  const std::string& sandbox_id = session.prepared->sandbox_id;
  backend::Status delivered = stillIdle(sandbox_id);
  if (delivered.ok()) {
    delivered = backend_.deliver(sandbox_id, bring_up_.sessionFrame());
  }
  SandboxBringUp::Outcome outcome;
  if (delivered.ok()) {
    // What the idle launcher wrote is dropped (no run is bound to the session's sink), and
    // an end from now on is the session's.
    session.prepared->sink.bind(&session.sink);
    outcome.sandbox_id = sandbox_id;
    return outcome;
  }
  const std::string why = "prepared sandbox " + sandbox_id + " could not become the session's (" +
                          delivered.message + ")";
  PreparedPtr failed;
  {
    std::lock_guard lock(mutex_);
    const std::optional<std::uint32_t> uid = uids_.take();
    if (!uid) {  // the session ends, and that sandbox goes with it
      outcome.failure = why + ", and every uid of the sandbox range is in use";
      return outcome;
    }
    session.uid = *uid;  // a fresh sandbox never shares the uid of one not yet removed
    session.sandbox_id.clear();
    failed = std::move(session.prepared);
  }
  logger().warning("session " + session.id + ": " + why + "; starting a fresh one");
  removeSandbox(failed->sandbox_id, failed->uid, "prepared sandbox");
  return bringUpSession(session);
}

SandboxBringUp::Outcome RunManager::Impl::bringUpSession(Session& session) {
  const backend::Posture required = policy::requiredPosture(session.limits, sandbox_, session.uid);
  const backend::SandboxSpec spec =
      bring_up_.sessionSpec("session-" + session.id, session.limits, required);
  SandboxBringUp::Steps steps;
  steps.sink = &session.sink;
  steps.created = [&](const std::string& sandbox_id) {
    std::lock_guard lock(mutex_);
    session.sandbox_id = sandbox_id;
  };
  steps.stopped = [&] {
    std::lock_guard lock(mutex_);
    return shutting_down_;
  };
  return bring_up_.bringUp(spec, required, steps);
}

std::optional<SessionSnapshot> RunManager::Impl::closeSession(const std::string& tenant,
                                                              const std::string& session_id) {
  reapThreads();
  std::unique_lock lock(mutex_);
  const std::shared_ptr<Session> session = findSessionLocked(tenant, session_id);
  if (!session) {
    return std::nullopt;
  }
  endSessionLocked(*session, "it was closed by close_session");
  // Its run in progress, if any, ends first (its thread removes nothing); then the sandbox goes.
  while (!session->removed) {
    releaseSessionsLocked(lock);
    if (!session->removed) {
      changed_.wait(lock);
    }
  }
  return sessionSnapshotLocked(*session);
}

std::optional<std::string> RunManager::Impl::enqueueInSessionLocked(Session& session, Run& run) {
  if (!session.open) {
    return "Session " + session.id + " has ended: " + session.end_reason +
           ". Its variables and files are gone; open a new one with open_session.";
  }
  // The tenant's runs waiting in its sessions count against its queue like those in the fair
  // queue.
  std::size_t waiting = queue_.queued(run.tenant);
  for (const auto& [id, other] : sessions_) {
    waiting += other->tenant == run.tenant ? other->waiting.size() : 0;
  }
  if (waiting >= settings_.max_queue) {
    return "The queue is full: " + std::to_string(waiting) +
           " of your runs are waiting. Try again when one has finished.";
  }
  if (session.current.empty()) {
    session.current = run.id;
    queue_.push(run.tenant, run.id);
  } else {
    session.waiting.push_back(run.id);
  }
  return std::nullopt;
}

void RunManager::Impl::sessionRunEndedLocked(Run& run) {
  Session& session = *run.session;
  if (session.current != run.id) {
    session.waiting.erase(std::remove(session.waiting.begin(), session.waiting.end(), run.id),
                          session.waiting.end());
    return;
  }
  session.current.clear();
  session.last_active = clock_.now();
  session.last_active_wall = clock_.wallNow();
  while (session.open && !session.waiting.empty()) {
    const std::string next = session.waiting.front();
    session.waiting.pop_front();
    const auto it = runs_.find(next);
    if (it != runs_.end() && it->second->phase == Phase::kQueued) {
      session.current = next;
      queue_.push(it->second->tenant, next);
      break;
    }
  }
  pool_changed_.notify_all();  // an ended session's sandbox may go now
}

void RunManager::Impl::endSessionLocked(Session& session, const std::string& reason) {
  if (!session.open) {
    return;
  }
  session.open = false;
  session.end_reason = reason;
  session.ended = clock_.now();
  logger().information("session " + session.id + " of tenant " + session.tenant +
                       " ended: " + reason);
  const std::string stop_reason = "Stopped before it started: its session ended (" + reason + ").";
  for (const std::string& id : std::deque<std::string>(session.waiting)) {
    Run& run = *runs_.at(id);
    finalizeLocked(run, stoppedVerdict(stop_reason), {}, {});
    run.phase = Phase::kSettled;
  }
  session.waiting.clear();
  if (!session.current.empty()) {
    Run& run = *runs_.at(session.current);
    if (run.phase == Phase::kQueued) {
      queue_.remove(run.tenant, run.id);
      finalizeLocked(run, stoppedVerdict(stop_reason), {}, {});
      run.phase = Phase::kSettled;
    } else if (run.phase < Phase::kEnded && run.cause == Cause::kNone) {
      run.cause = Cause::kSessionEnded;  // its thread ends it and the sandbox at once
    }
  }
  changed_.notify_all();
  pool_changed_.notify_all();
}

void RunManager::Impl::releaseSessionsLocked(std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<Session>> releasing;
  for (const auto& [id, session] : sessions_) {
    // Not one still coming up: its opener removes what it made.
    if (!session->open && !session->removed && !session->releasing && session->current.empty() &&
        !session->opening) {
      releasing.push_back(session);
    }
  }
  if (releasing.empty()) {
    return;
  }
  std::vector<std::string> sandboxes;
  for (const auto& session : releasing) {
    sandboxes.push_back(session->sandbox_id);
    session->releasing = true;  // claimed: no other thread removes it too
  }
  lock.unlock();
  for (std::size_t i = 0; i < releasing.size(); ++i) {
    const std::uint32_t uid = releasing[i]->uid;
    if (sandboxes[i].empty()) {
      uids_.give(uid);  // no sandbox was made with it
    } else {
      removals_.remove(sandboxes[i], "session " + releasing[i]->id,
                       [this, uid] { uids_.give(uid); });
    }
  }
  lock.lock();
  for (const auto& session : releasing) {
    session->removed = true;
  }
  changed_.notify_all();
  admitLocked();  // its memory is free
}

void RunManager::Impl::expireSessionsLocked(SteadyTime now) {
  const SessionSettings& caps = settings_.sessions;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Session& session = *it->second;
    if (!session.open) {
      // The record answers "ended" for a while, then the id is forgotten.
      if (session.removed && session.ended && now - *session.ended >= settings_.retention) {
        it = sessions_.erase(it);
        continue;
      }
    } else if (!session.opening) {
      const bool executing =
          !session.current.empty() && runs_.at(session.current)->phase != Phase::kQueued;
      if (now - session.opened >= caps.max_lifetime) {
        endSessionLocked(session,
                         "it reached its maximum lifetime of " + seconds(caps.max_lifetime));
      } else if (!session.busy() && now - session.last_active >= caps.idle) {
        endSessionLocked(session, "it was idle for " + seconds(caps.idle));
      } else if (!executing && session.sink.hasEnded()) {
        endSessionLocked(session, "its sandbox ended between runs (its interpreter exited)");
      }
    }
    ++it;
  }
}

void RunManager::Impl::runInSession(Run& run, std::vector<policy::File> files, Outcome& outcome) {
  Session& session = *run.session;
  std::string sandbox_id;
  {
    std::lock_guard lock(mutex_);
    if (run.cause != Cause::kNone) {
      return;
    }
    if (!session.open) {
      outcome.evidence.sandbox_failure = "its session ended before the run began";
      return;
    }
    // The session's own files come with its first run; the run's files replace any of the
    // same path.
    for (policy::File& file : session.files) {
      const bool replaced = std::any_of(files.begin(), files.end(),
                                        [&](const policy::File& f) { return f.path == file.path; });
      if (!replaced) {
        files.push_back(std::move(file));
      }
    }
    session.files.clear();
    sandbox_id = session.sandbox_id;
    run.sandbox_id = sandbox_id;
    run.phase = Phase::kExecuting;  // a stop from now on interrupts it
  }
  // The OOM killer may end a process the session's code left running, during this run: the
  // run's report says so, as a one-shot run's does for its children.
  const backend::ProgressReply before = backend_.progress(sandbox_id);
  session.sink.bind(run.capture.get());
  const backend::Status delivered = backend_.deliver(
      sandbox_id, sessionRunFrame(policy::buildArchive(files, kArchiveOwner, kArchiveOwner)));
  files.clear();
  if (!delivered.ok()) {
    session.sink.bind(nullptr);
    outcome.evidence.sandbox_failure = "delivery to the session failed: " + delivered.message;
    outcome.session_end = "its sandbox could not take the run: " + delivered.message;
    return;
  }

  const SteadyTime deadline = run.timeoutAt();
  std::optional<SteadyTime> interrupted_at;
  std::unique_lock lock(mutex_);
  while (true) {
    const bool ended = run.capture->hasEnded();
    if (!outcome.trailer_considered && run.capture->outputComplete()) {
      outcome.trailer_considered = true;
      RunResults& results = launcherResults(run, outcome);
      if (results.refused && !results.session_over) {
        // Nothing ran; the interpreter waits for the next run.
        sealEvidenceLocked(run, outcome.evidence);
        break;
      }
      if (results.exit && results.exit->code && !results.session_over) {
        // The interpreter is back and waits for the next run.
        outcome.evidence.exit_code = results.exit->code;
        outcome.interrupted = interrupted_at.has_value();
        sealEvidenceLocked(run, outcome.evidence);
        break;
      }
      // Killed by a signal (the launcher ends the sandbox after it), or no account at all:
      // the sandbox's end says how.
    }
    if (ended) {
      lock.unlock();
      const backend::WaitReply reply = backend_.wait(sandbox_id, std::chrono::milliseconds(0));
      lock.lock();
      sealEvidenceLocked(run, outcome.evidence);
      outcome.exit = reply.exit;
      if (!reply.status.ok() || !reply.exit.exited) {
        outcome.evidence.sandbox_failure =
            "lost the session's sandbox: " +
            (reply.status.ok() ? std::string("it ended without an exit") : reply.status.message);
      } else {
        outcome.evidence.exit_code = reply.exit.exit_code;
        outcome.evidence.oom_killed = reply.exit.oom_killed;
        outcome.evidence.engine_error = reply.exit.engine_error;
      }
      // A session the server ends (closed, expired, shut down) already has its reason.
      if (outcome.session_end.empty() && run.cause != Cause::kSessionEnded &&
          run.cause != Cause::kShutdown) {
        outcome.session_end = reply.exit.oom_killed ? "its interpreter was killed by the OOM killer"
                                                    : "its interpreter ended during a run";
      }
      break;
    }
    const SteadyTime now = clock_.now();
    if (run.cause == Cause::kNone && now >= deadline) {
      run.cause = Cause::kTimeout;
      logger().information("run " + run.id + " reached its timeout; interrupting it");
    }
    if (run.cause != Cause::kNone && !interrupted_at && !run.kill_sent_at) {
      if (run.cause == Cause::kSessionEnded || run.cause == Cause::kShutdown) {
        run.kill_sent_at = now;  // the session goes: nothing to come back to
      } else {
        interrupted_at = now;
        lock.unlock();
        const backend::Status sent = backend_.deliver(sandbox_id, std::string(kSessionInterrupt));
        lock.lock();
        if (!sent.ok()) {
          logger().warning("run " + run.id + ": could not interrupt it: " + sent.message);
          outcome.session_end = "the server could not interrupt a run: " + sent.message;
          run.kill_sent_at = now;
        }
      }
      if (run.kill_sent_at) {
        lock.unlock();
        killSandbox(sandbox_id, run.id);
        lock.lock();
      }
      continue;
    }
    if (interrupted_at && !run.kill_sent_at && now - *interrupted_at >= kInterruptGrace) {
      logger().information("run " + run.id +
                           ": its code did not come back from "
                           "KeyboardInterrupt; ending its session");
      outcome.session_end = "a run's code did not stop within " +
                            std::to_string(kInterruptGrace.count()) + " s of KeyboardInterrupt";
      run.kill_sent_at = now;
      lock.unlock();
      killSandbox(sandbox_id, run.id);
      lock.lock();
      continue;
    }
    if (run.kill_sent_at && now - *run.kill_sent_at >= kKillGrace) {
      sealEvidenceLocked(run, outcome.evidence);
      outcome.evidence.sandbox_failure = "the session's sandbox did not stop after kill";
      break;
    }
    SteadyTime until = now + kWaitSlice;
    if (!run.kill_sent_at && !interrupted_at) {
      until = std::min(until, deadline);
    } else if (!run.kill_sent_at) {
      until = std::min(until, *interrupted_at + kInterruptGrace);
    }
    clock_.waitUntil(changed_, lock, until, [&] {
      return run.capture->hasEnded() ||
             (!outcome.trailer_considered && run.capture->outputComplete()) ||
             (!interrupted_at && !run.kill_sent_at && run.cause != Cause::kNone);
    });
  }
  const bool answered = !run.capture->hasEnded() && outcome.evidence.exit_code.has_value();
  lock.unlock();
  session.sink.bind(nullptr);
  run.capture->close();
  outcome.ended = clock_.now();
  if (answered && before.status.ok() && before.oom_known) {
    const backend::ProgressReply after = backend_.progress(sandbox_id);
    if (after.status.ok() && after.oom_known && after.oom_kills > before.oom_kills) {
      outcome.evidence.oom_killed = true;
    }
  }
}

}  // namespace scs::runs
