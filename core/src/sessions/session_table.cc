#include "sessions/session_table.h"

#include <algorithm>

#include "common/ids.h"
#include "policy/files.h"

namespace scs::sessions {
namespace {

Error endedError(const Session& session) {
  return invalid("Session " + session.id + " has ended: " + session.end_reason +
                 ". Its variables and files are gone; open a new one with open_session.");
}

}  // namespace

Error unknownSession(const std::string& id) {
  return invalid("Unknown session_id \"" + id.substr(0, 64) +
                 "\": open a session with open_session first (sessions of other clients are not "
                 "visible, and ended ones are forgotten after a while).");
}

std::string durationText(std::chrono::seconds value) {
  return std::to_string(value.count()) + " s";
}

std::shared_ptr<Session> SessionTable::find(const std::string& tenant,
                                            const std::string& id) const {
  const auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->tenant != tenant) {
    return nullptr;
  }
  return it->second;
}

Result<std::shared_ptr<Session>> SessionTable::forRun(const std::string& tenant,
                                                      const std::string& id,
                                                      const RunAsk& ask) const {
  // What a run may never ask in a session comes first, known session or not.
  if (ask.sets_memory_or_cpus) {
    return overLimits(
        "In a session, memory_gb and cpus belong to the session (open_session sets them for "
        "all its runs): a run may only set timeout_seconds. Open another session to get other "
        "limits.");
  }
  if (ask.has_packages) {
    return invalid(kSessionPackagesMessage);
  }
  std::shared_ptr<Session> session = find(tenant, id);
  if (!session) {
    return unknownSession(id);
  }
  if (!session->open) {
    return endedError(*session);
  }
  if (ask.language && *ask.language != session->language) {
    const std::string own(policy::nameOf(session->language));
    const std::string asked(policy::nameOf(*ask.language));
    return invalid("This session runs " + own + ", not " + asked +
                   ": a session has one language. Open another session for " + asked +
                   ", or leave out \"language\".");
  }
  if (ask.has_stdin && session->language == policy::Language::kJavascript) {
    // The launcher's javascript sessions give each run /dev/null as stdin.
    return invalid(
        "In a javascript session a run reads no stdin: pass the input as a file in `files`.");
  }
  return session;
}

policy::Limits SessionTable::limitsOfRun(const Session& session, double timeout_seconds) {
  policy::Limits limits = session.limits;
  limits.timeout_seconds = timeout_seconds;
  return limits;
}

Result<Done> SessionTable::mayOpen(const std::string& tenant, double memory_gb,
                                   std::int64_t memory_bytes) const {
  std::size_t open = 0;
  std::size_t own = 0;
  std::int64_t held = 0;
  for (const auto& [id, other] : sessions_) {
    if (other->open) {
      ++open;
      own += other->tenant == tenant ? 1 : 0;
    }
    held += other->tenant == tenant && !other->removed ? other->memory_bytes : 0;
  }
  if (own >= settings_.max_open_per_tenant) {
    return refused("You have " + std::to_string(own) +
                   " sessions open, the most one client may have. Close one you no longer "
                   "need with close_session, or run without a session.");
  }
  if (open >= settings_.max_open) {
    return refused("The server has " + std::to_string(open) +
                   " sessions open, the most it allows. Try again later, or run without a "
                   "session.");
  }
  const std::int64_t host = limits_.host_memory_bytes;
  if (host > 0 && memory_bytes > host) {
    return overLimits("This session asks for " + policy::formatNumber(memory_gb) +
                      " GB of memory, more than sandboxes on this host can have.");
  }
  // One tenant's sessions hold at most half of the host's memory for as long as they are open,
  // so that they cannot starve everyone else's runs.
  if (host > 0 && held + memory_bytes > host / 2) {
    return refused(
        "Your open sessions would hold more than half of this host's memory with this one. "
        "Close one with close_session, or ask for less memory_gb.");
  }
  return Done{};
}

std::string SessionTable::unusedId() const { return common::unusedHexId(sessions_); }

void SessionTable::add(std::shared_ptr<Session> session) {
  const std::string id = session->id;
  sessions_.emplace(id, std::move(session));
}

Result<Placement> SessionTable::enqueue(Session& session, const std::string& run_id,
                                        std::size_t tenant_queued) {
  if (!session.open) {
    return endedError(session);
  }
  // The tenant's runs waiting in its sessions count against its queue like those in the fair
  // queue.
  std::size_t waiting = tenant_queued;
  for (const auto& [id, other] : sessions_) {
    waiting += other->tenant == session.tenant ? other->waiting.size() : 0;
  }
  if (waiting >= limits_.max_queue) {
    return refused("The queue is full: " + std::to_string(waiting) +
                   " of your runs are waiting. Try again when one has finished.");
  }
  // While its snapshot is being taken it waits in the session's queue: it wakes the session
  // once the snapshot is done.
  if (session.current.empty() && session.rest != Session::Rest::kHibernating) {
    session.current = run_id;
    return Placement::kFairQueue;
  }
  session.waiting.push_back(run_id);
  return Placement::kSessionQueue;
}

std::optional<std::string> SessionTable::runEnded(Session& session, const std::string& run_id,
                                                  common::SteadyTime now,
                                                  std::chrono::system_clock::time_point wall_now,
                                                  const RunTest& queued) {
  if (session.rest == Session::Rest::kWaking && session.current == run_id) {
    // Admitted to wake it, but ended (stopped, failed to start) before it did: it sleeps on.
    session.rest = Session::Rest::kHibernated;
  }
  if (session.current != run_id) {
    session.waiting.erase(std::remove(session.waiting.begin(), session.waiting.end(), run_id),
                          session.waiting.end());
    return std::nullopt;
  }
  session.current.clear();
  session.last_active = now;
  session.last_active_wall = wall_now;
  while (session.open && !session.waiting.empty()) {
    std::string next = session.waiting.front();
    session.waiting.pop_front();
    if (queued(next)) {
      session.current = next;
      return next;
    }
  }
  return std::nullopt;
}

std::optional<std::string> SessionTable::next(Session& session) {
  if (!session.open || !session.current.empty() || session.waiting.empty()) {
    return std::nullopt;
  }
  session.current = session.waiting.front();
  session.waiting.pop_front();
  return session.current;
}

void SessionTable::expire(common::SteadyTime now, const RunTest& executing, const End& end) {
  const SessionSettings& caps = settings_;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const std::shared_ptr<Session>& session = it->second;
    if (!session->open) {
      // The record answers "ended" for a while, then the id is forgotten.
      if (session->removed && session->ended && now - *session->ended >= limits_.retention) {
        it = sessions_.erase(it);
        continue;
      }
    } else if (session->opening) {
      // Its opener decides: it opens, or it never was.
    } else if (caps.hibernate &&
               (session->rest == Session::Rest::kHibernated ||
                session->rest == Session::Rest::kAwake) &&
               now - session->opened >= caps.max_lifetime + caps.hibernated_max) {
      // Its sandbox's own deadline (PID 1's, on a clock that runs on while it sleeps) allows
      // for this much, awake and hibernated together.
      end(*session, "it reached its sandbox's lifetime of " +
                        durationText(caps.max_lifetime + caps.hibernated_max) +
                        ", awake and hibernated together");
    } else if (session->rest == Session::Rest::kHibernated) {
      if (now - session->hibernated_at >= caps.hibernated_max) {
        end(*session, "it was hibernated for " + durationText(caps.hibernated_max));
      }
    } else if (session->rest == Session::Rest::kAwake) {
      const bool running = !session->current.empty() && executing(session->current);
      if (awake(*session, now) >= caps.max_lifetime) {
        end(*session, "it reached its maximum lifetime of " + durationText(caps.max_lifetime) +
                          (caps.hibernate ? " awake" : ""));
      } else if (!running && session->sink.hasEnded()) {
        end(*session, "its sandbox ended between runs (its interpreter exited)");
      } else if (!session->busy() && now - session->last_active >= caps.idle) {
        if (caps.hibernate) {
          session->rest = Session::Rest::kHibernating;  // the run manager snapshots it
        } else {
          end(*session, "it was idle for " + durationText(caps.idle));
        }
      }
    }
    ++it;
  }
}

std::chrono::steady_clock::duration SessionTable::awake(const Session& session,
                                                        common::SteadyTime now) const {
  const bool is_awake = session.rest == Session::Rest::kAwake;
  return session.awake_before +
         (is_awake ? now - session.awake_since : common::SteadyTime::duration::zero());
}

SessionSnapshot SessionTable::snapshot(const Session& session, common::SteadyTime now,
                                       std::chrono::system_clock::time_point wall_now) const {
  SessionSnapshot snapshot;
  snapshot.session_id = session.id;
  snapshot.language = session.language;
  snapshot.limits = session.limits;
  snapshot.packages = session.packages;
  snapshot.open = session.open;
  snapshot.end_reason = session.end_reason;
  snapshot.opened_at = session.opened_wall;
  const SessionSettings& caps = settings_;
  if (!caps.hibernate) {
    snapshot.expires_at = session.opened_wall + caps.max_lifetime;
    snapshot.idle_expires_at = std::min(snapshot.expires_at, session.last_active_wall + caps.idle);
    return snapshot;
  }
  // Its lifetime is awake time: what is left of it, counted from now while awake and from its
  // wake (at the earliest now) while hibernated.
  snapshot.hibernated = session.rest == Session::Rest::kHibernated;
  const auto left = std::chrono::duration_cast<std::chrono::system_clock::duration>(
      caps.max_lifetime - awake(session, now));
  snapshot.expires_at =
      std::min(wall_now + std::max(left, std::chrono::system_clock::duration::zero()),
               session.opened_wall + caps.max_lifetime + caps.hibernated_max);
  if (snapshot.hibernated) {
    snapshot.idle_expires_at = session.hibernated_wall + caps.hibernated_max;
  } else {
    snapshot.hibernates_at = session.last_active_wall + caps.idle;
    snapshot.idle_expires_at = *snapshot.hibernates_at + caps.hibernated_max;
  }
  return snapshot;
}

std::int64_t SessionTable::memory() const {
  std::int64_t total = 0;
  for (const auto& [id, session] : sessions_) {
    if (!session->removed && session->rest != Session::Rest::kHibernated) {
      total += session->memory_bytes;
    }
  }
  return total;
}

std::vector<std::shared_ptr<Session>> SessionTable::releasable() const {
  std::vector<std::shared_ptr<Session>> releasing;
  for (const auto& [id, session] : sessions_) {
    // Not one still coming up: its opener removes what it made.
    if (!session->open && !session->removed && !session->releasing && session->current.empty() &&
        !session->opening && session->rest != Session::Rest::kHibernating) {
      releasing.push_back(session);
    }
  }
  return releasing;
}

}  // namespace scs::sessions
