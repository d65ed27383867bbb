// A session's life: a sandbox with one long-lived interpreter whose runs share its namespace and
// files. Opening one admits it (caps, memory, a uid) and brings its sandbox up as any run's
// (spec, posture check, engine read-back) with the launcher in session mode, or turns a prepared
// sandbox into it. A session ends when it is closed, idles or lives too long, when its
// interpreter dies, or when an interrupted run does not come back in time; its sandbox is
// removed once no run executes in it. Its runs are in session_runs.cc.

#include <Poco/Logger.h>

#include <algorithm>

#include "runs/run_manager_impl.h"
#include "sessions/session_store.h"

namespace scs::runs {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

sessions::SessionSnapshot RunManager::Impl::sessionSnapshotLocked(const Session& session) const {
  return sessions_.snapshot(session, clock_.now(), clock_.wallNow());
}

Result<sessions::SessionSnapshot> RunManager::Impl::openSession(OpenSessionRequest request) {
  reapThreads();
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    if (shutting_down_) {
      return stopping("The server is shutting down.");
    }
    const std::int64_t memory = admission::memoryBytes(request.limits);
    if (Result<Done> may = sessions_.mayOpen(request.tenant, request.limits.memory_gb, memory);
        std::holds_alternative<Error>(may)) {
      return std::get<Error>(may);
    }
    // Its image's pool: the operator's, or its packages' layer's.
    const std::string image = request.packages ? request.packages->image : std::string();
    sandbox::PreparedPool* pool = pools_.demandedFor(image, request.limits, sandbox_, clock_.now());
    if (pool != nullptr) {
      // An arrival the pool could serve: the rate it keeps sandboxes ready for counts it.
      pool->demanded(clock_.now());
      pool->demandEnded();
    }
    // A prepared sandbox of the session's posture already holds part of its memory and a uid
    // of its own, and becomes the session's once its launcher is told so.
    const sandbox::PreparedSandbox* prepared =
        pool ? pool->find(request.limits, sandbox_, clock_.now(), /*for_session=*/true) : nullptr;
    const std::int64_t needed = memory - (prepared ? pool->idleHold() : 0);
    if (!admission_.fitsOrEvicts(needed, prepared)) {
      return refused("Not enough of the host's memory is free for a session of " +
                     policy::formatNumber(request.limits.memory_gb) +
                     " GB now: running runs and open sessions hold it. Try again when "
                     "some have finished, or ask for less memory_gb.");
    }
    pool_changed_.notify_all();  // evicted prepared sandboxes are removed
    const std::string id = sessions_.unusedId();
    std::optional<sandbox::SandboxLease> lease;
    if (!prepared) {
      lease = source_.takeUid("session " + id);
      if (!lease) {
        return refused(
            "The server cannot start another sandbox now: every uid of its "
            "sandbox range is in use. Try again later.");
      }
    }
    session = std::make_shared<Session>();
    if (prepared) {
      // Its lease only once the pool has let go of it, so that the two never both remove it.
      session->prepared = pool->claim(prepared, clock_.now());
      session->sandbox_id = session->prepared->sandbox_id;
      session->lease = source_.adopt(session->prepared->uid, session->sandbox_id, "session " + id);
      pool->claimEnded();  // a session is no run the pool's refill should wait for
    } else {
      session->lease = std::move(*lease);
    }
    session->id = id;
    session->tenant = std::move(request.tenant);
    session->limits = request.limits;
    session->language = request.language;
    session->memory_bytes = memory;
    session->files = std::move(request.files);
    session->packages = std::move(request.packages);
    session->packages_hold = std::move(request.packages_hold);
    session->opened = session->last_active = session->awake_since = clock_.now();
    session->opened_wall = session->last_active_wall = clock_.wallNow();
    if (settings_.egress != nullptr && settings_.egress->enabledFor(session->tenant)) {
      session->egress = settings_.egress->open(session->tenant, "session " + id);
      session->egress_sink = std::make_unique<egress::EgressSink>(session->egress, &session->sink);
    }
    listenForEnd(*session);
    session->opening = true;
    sessions_.add(session);
  }

  const sandbox::SandboxBringUp::Outcome brought =
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
    sessions_.forget(session->id);  // it never opened: no record of it is kept
    return internal("The session's sandbox could not be started: " + why +
                    ". This is not caused by your code; do not retry in a loop.");
  }
  logger().information("session " + session->id + " of tenant " + session->tenant + " opened in " +
                       (session->prepared ? "prepared " : "") + "sandbox " + session->sandbox_id);
  return sessionSnapshotLocked(*session);
}

sandbox::SandboxBringUp::Outcome RunManager::Impl::openInPrepared(Session& session) {
  const std::string& sandbox_id = session.prepared->sandbox_id;
  backend::Status delivered = stillIdle(sandbox_id);
  if (delivered.ok()) {
    delivered = backend_.deliver(sandbox_id, bring_up_.sessionFrame());
  }
  sandbox::SandboxBringUp::Outcome outcome;
  if (delivered.ok()) {
    // What the idle launcher wrote is dropped (no run is bound to the session's sink), and
    // an end from now on is the session's.
    session.posture = session.prepared->posture;
    attachEgress(session.egress, sandbox_id);
    session.prepared->sink.bind(session.outerSink());
    outcome.sandbox_id = sandbox_id;
    return outcome;
  }
  const std::string why = "prepared sandbox " + sandbox_id + " could not become the session's (" +
                          delivered.message + ")";
  sandbox::PreparedPtr failed;  // its sink outlives its removal
  sandbox::SandboxLease failed_lease;
  {
    std::lock_guard lock(mutex_);
    std::optional<sandbox::SandboxLease> fresh = source_.takeUid("session " + session.id);
    if (!fresh) {  // the session ends, and that sandbox goes with it
      outcome.failure = why + ", and every uid of the sandbox range is in use";
      return outcome;
    }
    // A fresh sandbox never shares the uid of one not yet removed.
    failed_lease = std::move(session.lease);
    session.lease = std::move(*fresh);
    session.sandbox_id.clear();
    failed = std::move(session.prepared);
  }
  logger().warning("session " + session.id + ": " + why + "; starting a fresh one");
  failed_lease.release();
  return bringUpSession(session);
}

sandbox::SandboxBringUp::Outcome RunManager::Impl::bringUpSession(Session& session) {
  sandbox::SandboxBringUp::Steps steps;
  steps.sink = session.outerSink();
  steps.created = [&](const std::string& sandbox_id) {
    attachEgress(session.egress, sandbox_id);
    std::lock_guard lock(mutex_);
    session.sandbox_id = sandbox_id;
  };
  steps.stopped = [&] {
    std::lock_guard lock(mutex_);
    return shutting_down_;
  };
  sandbox::SandboxSource::Brought brought = source_.bringUp(
      sandbox::SandboxKind::kSession, "session-" + session.id, session.limits,
      session.packages ? session.packages->image : std::string(), session.lease, steps);
  std::lock_guard lock(mutex_);
  session.posture = std::move(brought.posture);
  return brought.outcome;
}

Result<SessionTicket> RunManager::Impl::sessionForRun(const std::string& tenant,
                                                      const std::string& session_id,
                                                      const sessions::RunAsk& ask) {
  std::lock_guard lock(mutex_);
  if (shutting_down_) {  // its sessions end: said as start() says it
    return refusedLocked(tenant, stopping("The server is shutting down."));
  }
  Result<std::shared_ptr<Session>> found = sessions_.forRun(tenant, session_id, ask);
  if (const Error* refusal = std::get_if<Error>(&found)) {
    return refusedLocked(tenant, *refusal);
  }
  std::shared_ptr<Session>& session = std::get<std::shared_ptr<Session>>(found);
  const policy::Language language = session->language;
  return SessionTicket{std::move(session), language};
}

std::optional<sessions::SessionSnapshot> RunManager::Impl::closeSession(
    const std::string& tenant, const std::string& session_id) {
  reapThreads();
  std::unique_lock lock(mutex_);
  const std::shared_ptr<Session> session = sessions_.find(tenant, session_id);
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

void RunManager::Impl::listenForEnd(Session& session) {
  session.sink.setListener([this] {
    std::lock_guard wake(mutex_);
    changed_.notify_all();
    pool_changed_.notify_all();  // the maintenance thread ends a session whose sandbox ended
  });
}

void RunManager::Impl::stopWaitingLocked(Session& session, const std::string& reason) {
  for (const std::string& id : std::deque<std::string>(session.waiting)) {
    Run& run = *runs_.at(id);
    finalizeLocked(run, stoppedVerdict(reason), {}, {});
    run.phase = Phase::kSettled;
  }
  session.waiting.clear();
}

void RunManager::Impl::endSessionLocked(Session& session, const std::string& reason) {
  if (!session.open) {
    return;
  }
  session.open = false;
  session.kept = false;
  session.end_reason = reason;
  if (settings_.sessions.store != nullptr) {
    settings_.sessions.store->remove(session.id);  // its snapshot goes with its sandbox
  }
  session.ended = clock_.now();
  logger().information("session " + session.id + " of tenant " + session.tenant +
                       " ended: " + reason);
  const std::string stop_reason = "Stopped before it started: its session ended (" + reason + ").";
  stopWaitingLocked(session, stop_reason);
  if (!session.current.empty()) {
    Run& run = *runs_.at(session.current);
    if (run.phase == Phase::kQueued) {
      admission_.queue().remove(run.tenant, run.id);
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
  const std::vector<std::shared_ptr<Session>> releasing = sessions_.releasable();
  if (releasing.empty()) {
    return;
  }
  std::vector<sandbox::SandboxLease> leases;
  for (const auto& session : releasing) {
    leases.push_back(std::move(session->lease));
    leases.back().keepUntilRemoved(session);  // its sink; at shutdown removed alongside others
    session->releasing = true;                // claimed: no other thread removes it too
  }
  lock.unlock();
  for (const auto& session : releasing) {
    if (session->egress) {
      session->egress->close();
    }
  }
  for (sandbox::SandboxLease& lease : leases) {
    lease.release();
  }
  lock.lock();
  for (const auto& session : releasing) {
    session->removed = true;
    session->packages_hold.reset();
  }
  changed_.notify_all();
  admitLocked();  // its memory is free
}

void RunManager::Impl::expireSessionsLocked(common::SteadyTime now) {
  const auto executing = [this](const std::string& run_id) {
    return runs_.at(run_id)->phase != Phase::kQueued;
  };
  sessions_.expire(now, executing, [this](Session& session, const std::string& reason) {
    endSessionLocked(session, reason);
  });
}

backend::Status RunManager::Impl::snapshotSessionLocked(std::unique_lock<std::mutex>& lock,
                                                        Session& session,
                                                        const std::string& occasion) {
  const std::string sandbox_id = session.sandbox_id;
  const common::SteadyTime began = clock_.now();
  lock.unlock();
  // Between runs its sink is bound to no run: nothing the snapshot stops is lost.
  const backend::Status saved = backend_.snapshot(sandbox_id);
  lock.lock();
  const common::SteadyTime now = clock_.now();
  if (!saved.ok()) {
    session.rest = Session::Rest::kAwake;
    return saved;
  }
  session.awake_before += now - session.awake_since;
  session.rest = Session::Rest::kHibernated;
  session.hibernated_at = now;
  session.hibernated_wall = clock_.wallNow();
  logger().information("session " + session.id + " of tenant " + session.tenant + " hibernated " +
                       occasion + "; its snapshot took " +
                       policy::formatNumber(secondsBetween(began, now)) + " s");
  return saved;
}

void RunManager::Impl::hibernateSessionsLocked(std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<Session>> due;
  for (const auto& [id, session] : sessions_.all()) {
    if (session->rest == Session::Rest::kHibernating) {
      due.push_back(session);
    }
  }
  for (const std::shared_ptr<Session>& session : due) {
    if (!session->open || shutting_down_) {  // closed meanwhile, or shutdown keeps it
      session->rest = Session::Rest::kAwake;
      continue;
    }
    const backend::Status saved = snapshotSessionLocked(
        lock, *session, "after " + sessions::durationText(settings_.sessions.idle) + " idle");
    if (!saved.ok()) {
      if (saved.code == backend::Code::kUnsupported) {  // refused before anything was saved
        endSessionLocked(*session, "it was idle for " +
                                       sessions::durationText(settings_.sessions.idle) +
                                       " and could not hibernate: " + saved.message);
        continue;
      }
      logger().error("session " + session->id + " could not be hibernated: " + saved.message);
      endSessionLocked(*session, "it could not be hibernated (" + saved.message + ")");
      continue;
    }
    if (keepsAcrossRestartLocked(*session)) {
      recordSessionLocked(lock, *session);  // a later server may take it back
    }
    // A run that arrived meanwhile waited in the session's queue: it goes on now, and wakes it.
    if (const std::optional<std::string> next = sessions_.next(*session)) {
      admission_.queue().push(session->tenant, *next);
    }
  }
  if (!due.empty()) {
    changed_.notify_all();
    admitLocked();  // its memory is free
  }
}

}  // namespace scs::runs
