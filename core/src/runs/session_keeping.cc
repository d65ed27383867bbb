// Sessions that outlive the server (SessionSettings::store, --state-dir): a hibernated
// session's record is written while it sleeps; shutdown() hibernates the sessions it keeps
// instead of closing them; a later server takes them back (takeBack) and their next run wakes
// them as after any hibernation. A session of a tenant with egress is never kept: its channel's
// nonce and its brokering CA are one server's.

#include <Poco/Logger.h>

#include "runs/run_manager_impl.h"
#include "sessions/session_store.h"

namespace scs::runs {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

bool RunManager::Impl::keepsAcrossRestartLocked(const Session& session) const {
  return settings_.sessions.store != nullptr && settings_.sessions.hibernate && session.open &&
         !session.opening && !session.egress && !session.sandbox_id.empty();
}

Result<Done> RunManager::Impl::recordSessionLocked(std::unique_lock<std::mutex>& lock,
                                                   Session& session) {
  sessions::SavedSession saved;
  saved.id = session.id;
  saved.tenant = session.tenant;
  saved.language = session.language;
  saved.limits = session.limits;
  saved.packages = session.packages;
  saved.uid = session.lease.uid();
  saved.sandbox_id = session.sandbox_id;
  saved.opened = session.opened_wall;
  saved.last_active = session.last_active_wall;
  saved.hibernated = session.hibernated_wall;
  saved.awake = std::chrono::duration_cast<std::chrono::milliseconds>(session.awake_before);
  lock.unlock();
  std::string failure;
  const backend::SavedReply reply = backend_.saved(saved.sandbox_id);
  if (!reply.status.ok()) {
    failure = reply.status.message;
  } else {
    saved.backend_saved = reply.text;
    const Result<Done> written = settings_.sessions.store->write(saved);
    if (const Error* problem = std::get_if<Error>(&written)) {
      failure = problem->message;
    }
  }
  lock.lock();
  if (failure.empty() && (!session.open || session.rest != Session::Rest::kHibernated)) {
    // Woken or ended while it was written: the record would describe a sandbox that runs.
    settings_.sessions.store->remove(session.id);
    failure = "it woke or ended meanwhile";
  }
  if (failure.empty()) {
    return Done{};
  }
  logger().warning("session " + session.id +
                   " could not be recorded for a later server: " + failure);
  return internal(std::move(failure));
}

void RunManager::Impl::keepSessionsLocked(std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<Session>> kept;
  for (const auto& [id, session] : sessions_.all()) {
    if (session->kept && session->open && !session->removed) {  // not handed over already
      kept.push_back(session);
    }
  }
  for (const std::shared_ptr<Session>& session : kept) {
    std::string failure;
    if (session->rest == Session::Rest::kAwake) {
      if (session->sink.hasEnded()) {
        failure = "its interpreter had exited";
      } else if (const backend::Status saved =
                     snapshotSessionLocked(lock, *session, "for the next server");
                 !saved.ok()) {
        failure = saved.message;
      }
    }
    if (failure.empty() && session->rest != Session::Rest::kHibernated) {
      failure = "it was not at rest";
    }
    if (failure.empty()) {
      const Result<Done> recorded = recordSessionLocked(lock, *session);
      if (const Error* problem = std::get_if<Error>(&recorded)) {
        failure = problem->message;
      }
    }
    if (failure.empty()) {
      // Its sandbox stays with the engine, snapshotted, for the server that takes it back.
      session->lease.handOver();
      session->removed = true;
      logger().information("session " + session->id + " of tenant " + session->tenant +
                           " is kept for the next server");
      continue;
    }
    session->kept = false;
    endSessionLocked(*session, "the server shut down, and it could not be kept: " + failure);
  }
}

TakenBack RunManager::Impl::takeBack(std::vector<sessions::SavedSession> sessions) {
  const sessions::SessionStore* store = settings_.sessions.store;
  TakenBack taken;
  for (sessions::SavedSession& saved : sessions) {
    const auto drop = [&](const std::string& why) {
      logger().warning("session " + saved.id + " of tenant " + saved.tenant +
                       " kept by an earlier server is dropped: " + why);
      if (store != nullptr) {
        store->remove(saved.id);
      }
    };
    if (store == nullptr || !settings_.sessions.hibernate) {
      drop("this server does not hibernate sessions");
      continue;
    }
    const policy::UidRange& range = sandbox_.uids;
    if (saved.uid < range.first || saved.uid > range.last) {
      drop("its uid " + std::to_string(saved.uid) + " is outside this server's sandbox range");
      continue;
    }
    if (taken.uids.count(saved.uid) != 0) {
      drop("another kept session has its uid " + std::to_string(saved.uid));
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      if (sessions_.knows(saved.id)) {
        drop("a session of that id exists");
        continue;
      }
    }
    if (const backend::Status adopted = backend_.adopt(saved.sandbox_id, saved.backend_saved);
        !adopted.ok()) {
      if (adopted.code == backend::Code::kUnavailable || adopted.code == backend::Code::kTimeout) {
        // The engine did not answer: the record and its sandbox wait for the next start.
        logger().warning("session " + saved.id + " kept by an earlier server is not taken back " +
                         "now (its record stays for the next start): " + adopted.message);
        taken.uids.insert(saved.uid);
        continue;
      }
      drop("the backend could not take its sandbox back: " + adopted.message);
      continue;
    }
    auto session = std::make_shared<Session>();
    session->id = saved.id;
    session->tenant = saved.tenant;
    session->limits = saved.limits;
    session->language = saved.language;
    session->memory_bytes = admission::memoryBytes(saved.limits);  // by this server's rule
    session->packages = saved.packages;
    session->sandbox_id = saved.sandbox_id;
    session->lease = source_.adopt(saved.uid, saved.sandbox_id, "session " + saved.id);
    // Checked against what this server requires before its code runs again (wakeSession).
    session->posture = policy::requiredPosture(
        saved.limits, sandbox_, saved.uid, saved.packages ? saved.packages->image : std::string());
    session->rest = Session::Rest::kHibernated;
    session->awake_before = saved.awake;
    // Its times on this server's steady clock, from the wall-clock times it was kept with.
    const common::SteadyTime now = clock_.now();
    const auto wall_now = clock_.wallNow();
    const auto ago = [&](std::chrono::system_clock::time_point at) {
      return now - std::chrono::duration_cast<common::SteadyDuration>(
                       std::max(wall_now - at, std::chrono::system_clock::duration::zero()));
    };
    session->opened = ago(saved.opened);
    session->opened_wall = saved.opened;
    session->last_active = ago(saved.last_active);
    session->last_active_wall = saved.last_active;
    session->hibernated_at = ago(saved.hibernated);
    session->hibernated_wall = saved.hibernated;
    listenForEnd(*session);
    logger().information("session " + saved.id + " of tenant " + saved.tenant +
                         " taken back hibernated, in sandbox " + saved.sandbox_id);
    taken.uids.insert(saved.uid);
    ++taken.sessions;
    std::lock_guard lock(mutex_);
    sessions_.add(std::move(session));
  }
  std::lock_guard lock(mutex_);
  pool_changed_.notify_all();  // the maintenance thread ends those hibernated too long
  return taken;
}

}  // namespace scs::runs
