#pragma once

// Every session a server knows, and every rule of a session's life in one place: who may open
// one, what a run in one may ask, where a session's run waits, which run goes next, and when
// the clock ends or hibernates a session. The table holds no lock, no backend and no clock of
// its own: the run manager calls it with its mutex held and hands it the time, and acts on the
// sandboxes (bring-up, snapshots, removal) itself. So every rule here is tested without a
// thread (session_table_test.cc).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/language.h"
#include "policy/limits.h"
#include "result.h"
#include "sessions/session.h"
#include "sessions/session_settings.h"

namespace scs::sessions {

// What the table is told of the server beside its sessions' own settings.
struct TableLimits {
  std::chrono::seconds retention{3600};  // an ended session's id answers "ended" this long
  std::size_t max_queue = 64;            // a tenant's waiting runs, in sessions or not
  std::int64_t host_memory_bytes = 0;    // 0: memory is not admitted
};

inline constexpr const char* kSessionPackagesMessage =
    "A session's packages are the session's: open_session takes \"packages\" for all its runs. "
    "Leave \"packages\" out of this start_run, or open another session with them.";

// Where a session's new run waits: in the fair queue (the session has nothing queued or in
// progress) or in the session's own queue, behind its run in progress.
enum class Placement { kFairQueue, kSessionQueue };

// The refusal of a run whose session_id names no session of its tenant's.
Error unknownSession(const std::string& id);

// "600 s": how the session's messages say a duration.
std::string durationText(std::chrono::seconds value);

class SessionTable {
 public:
  using Map = std::map<std::string, std::shared_ptr<Session>>;
  using RunTest = std::function<bool(const std::string& run_id)>;
  using End = std::function<void(Session& session, const std::string& reason)>;

  SessionTable(const SessionSettings& settings, const TableLimits& limits)
      : settings_(settings), limits_(limits) {}

  // The session `id` of `tenant`; null for none (or another tenant's).
  std::shared_ptr<Session> find(const std::string& tenant, const std::string& id) const;
  // Every rule of a run asked for in a session, in one call: the run may set neither memory nor
  // cpus (kLimits) nor packages, and the session must be the tenant's, open, of the run's
  // language, and not javascript when the run has stdin. Invalid, each with its own message.
  Result<std::shared_ptr<Session>> forRun(const std::string& tenant, const std::string& id,
                                          const RunAsk& ask) const;
  // A run's limits in `session`: the session's, with the run's timeout.
  static policy::Limits limitsOfRun(const Session& session, double timeout_seconds);
  // Whether `tenant` may open a session holding `memory_bytes` (of `memory_gb`): the caps on
  // open sessions, and at most half the host's memory for one tenant's sessions.
  Result<Done> mayOpen(const std::string& tenant, double memory_gb,
                       std::int64_t memory_bytes) const;

  // An id no session has; a session added under its id, or forgotten.
  std::string unusedId() const;
  void add(std::shared_ptr<Session> session);
  void forget(const std::string& id) { sessions_.erase(id); }
  bool knows(const std::string& id) const { return sessions_.count(id) != 0; }
  const Map& all() const { return sessions_; }

  // A new run of `session`: refused when the tenant's queue (`tenant_queued` of its runs in
  // the fair queue, and those waiting in its sessions) is full, invalid when the session has
  // ended. A session being snapshotted takes its run once the snapshot is done (next()).
  Result<Placement> enqueue(Session& session, const std::string& run_id, std::size_t tenant_queued);
  // The session's run `run_id` ended at `now`: the next of its runs `queued` still holds, to go
  // to the fair queue, if any.
  std::optional<std::string> runEnded(Session& session, const std::string& run_id,
                                      common::SteadyTime now,
                                      std::chrono::system_clock::time_point wall_now,
                                      const RunTest& queued);
  // Its snapshot done, the run that waited meanwhile, to go to the fair queue, if any.
  std::optional<std::string> next(Session& session);

  // Ends, through `end`, each session the clock ends at `now` (past its lifetime, hibernated too
  // long, idle without hibernation, or whose sandbox ended between runs; `executing` tells a run
  // in progress from a queued one), as it comes to it: an ending may admit another session's run
  // before that one is looked at. An idle one is marked kHibernating instead when sessions
  // hibernate. Ended sessions removed longer than the retention ago are forgotten.
  void expire(common::SteadyTime now, const RunTest& executing, const End& end);
  // How long `session` has been awake in all (its lifetime counts only that).
  std::chrono::steady_clock::duration awake(const Session& session, common::SteadyTime now) const;
  SessionSnapshot snapshot(const Session& session, common::SteadyTime now,
                           std::chrono::system_clock::time_point wall_now) const;
  // Memory the sessions hold: those whose sandbox is up and not hibernated.
  std::int64_t memory() const;
  // Ended sessions whose sandbox can go now: no run of them holds it, and it is not coming up
  // or being snapshotted.
  std::vector<std::shared_ptr<Session>> releasable() const;

 private:
  const SessionSettings settings_;
  const TableLimits limits_;
  Map sessions_;
};

}  // namespace scs::sessions
