#pragma once

// The run manager's private state, shared by its source files: run_manager.cc (the registry:
// start, get, stop, finalisation, shutdown), admission.cc (what a run admitted by
// admission/ gets: its prepared sandbox, its session woken, its thread), run_thread.cc (what a
// run's own thread does, from its sandbox's bring-up to its evidence), sessions.cc and
// session_runs.cc (a session's life and its runs) and maintenance.cc (the thread that keeps the
// prepared pool filled and retries removals). Every sandbox comes from sandbox_source.h.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "admission/admission.h"
#include "common/ids.h"
#include "launcher/output.h"
#include "policy/status_map.h"
#include "runs/report_retention.h"
#include "runs/run_manager.h"
#include "sandbox/bring_up.h"
#include "sandbox/prepared_pool.h"
#include "sandbox/removal_queue.h"
#include "sandbox/sandbox_source.h"
#include "sandbox/uid_pool.h"
#include "sessions/session.h"
#include "sessions/session_table.h"

namespace scs::runs {

using sessions::Session;

// How often a run's thread looks at its sandbox while it waits, and how long a sandbox has to
// end after the server's kill before it is given up.
inline constexpr auto kWaitSlice = std::chrono::seconds(1);
inline constexpr auto kKillGrace = std::chrono::seconds(10);
// The owner the archive's headers name: nobody. The launcher never applies a header's owner or
// mode (every file it writes belongs to the sandbox's uid), and a sandbox uid can be larger than
// ustar's 7 octal digits hold.
inline constexpr int kArchiveOwner = 65534;

inline common::SteadyDuration toDuration(double seconds) {
  return std::chrono::duration_cast<common::SteadyDuration>(std::chrono::duration<double>(seconds));
}

inline double secondsBetween(common::SteadyTime from, common::SteadyTime to) {
  return std::chrono::duration<double>(to - from).count();
}

inline policy::Verdict stoppedVerdict(std::string reason) {
  policy::Verdict verdict;
  verdict.status = policy::RunStatus::kStopped;
  verdict.reason = std::move(reason);
  return verdict;
}

// Where a run is in its life; it only moves forward.
enum class Phase {
  kQueued,     // waiting for a slot (and for memory)
  kStarting,   // it holds a slot; its thread brings its sandbox up; no code runs yet
  kExecuting,  // its code may be running: stopping it means killing its sandbox
  kEnded,      // its evidence is sealed: a later stop cannot change the verdict
  kFinal,      // reported; its sandbox may still be being removed
  kSettled,    // reported, and no sandbox of it is left (never made, or removed)
};

// Why the server itself ended a run, if it did; the first cause set wins.
enum class Cause { kNone, kStopRun, kShutdown, kTimeout, kSessionEnded };

struct Run {
  std::string id;
  std::string tenant;
  policy::Limits limits;
  std::int64_t memory_bytes = 0;
  policy::Language language = policy::Language::kPython;
  // Until the run starts: then they go into its archive.
  std::vector<policy::File> files;
  std::optional<std::string> stdin_data;
  std::string image;                    // the packages' derived image; empty: the operator's
  std::shared_ptr<void> packages_hold;  // keeps that image until the run is final

  Phase phase = Phase::kQueued;
  Cause cause = Cause::kNone;
  bool pool_demand = false;  // counted in flight in the prepared pool's demand until final
  std::optional<common::SteadyTime> kill_sent_at;  // the server's kill for `cause`

  common::SteadyTime enqueued_at;
  std::optional<common::SteadyTime> exec_start;
  std::optional<common::SteadyTime> exec_end;
  std::optional<common::SteadyTime> finished;
  std::optional<std::chrono::system_clock::time_point> started_at;
  std::optional<std::chrono::system_clock::time_point> finished_at;

  std::string sandbox_id;
  std::unique_ptr<launcher::OutputCapture> capture;
  // A run of a tenant with egress, in a sandbox of its own: its sandbox's channel, and the sink
  // in front of `capture` that takes the channel's frames out (it outlives the sandbox too).
  std::shared_ptr<egress::EgressChannel> egress;
  std::unique_ptr<egress::EgressSink> egress_sink;
  bool egress_probe = false;  // StartRequest::egress_probe
  // The sink its own sandbox writes to.
  backend::OutputSink* outerSink() {
    return egress_sink ? static_cast<backend::OutputSink*>(egress_sink.get()) : capture.get();
  }
  sandbox::PreparedPtr prepared;  // taken at admission; freed once its sandbox is removed
  bool ran_prepared = false;      // its code went to the prepared sandbox
  // The engine's peak memory of that sandbox before the code arrived: its idle footprint.
  std::optional<std::int64_t> idle_peak_bytes;
  RunSnapshot report;  // the final fields, once final
  std::thread thread;
  std::shared_ptr<Session> session;  // a run in a session

  bool holdsSlot() const { return phase >= Phase::kStarting && phase <= Phase::kEnded; }
  // When the server's timer ends it: its timeout after it began executing.
  common::SteadyTime timeoutAt() const { return *exec_start + toDuration(limits.timeout_seconds); }
  policy::RunStatus status() const {
    if (phase == Phase::kQueued) {
      return policy::RunStatus::kQueued;
    }
    return phase < Phase::kFinal ? policy::RunStatus::kRunning : report.status;
  }
};

// What a run's thread learned about how the run ended.
struct Outcome {
  policy::Evidence evidence;
  backend::Exit exit;
  std::optional<common::SteadyTime> ended;
  std::optional<launcher::RunResults> results;  // the launcher's trailer, once parsed
  bool trailer_considered = false;              // whether it could report the run early was decided
  std::optional<common::SteadyTime> reported_early;  // reported from the trailer, before the end
  // A run in a session: its code came back from KeyboardInterrupt; why the session ends with
  // this run (empty: it lives on).
  bool interrupted = false;
  std::string session_end;
};

struct RunManager::Impl {
  Impl(backend::RuntimeBackend& backend, const RunSettings& settings,
       const policy::SandboxSettings& sandbox, const common::Clock& clock, RunEvents& events);

  // The public operations (run_manager.cc).
  Result<RunSnapshot> start(StartRequest request);
  std::optional<RunSnapshot> get(const std::string& tenant, const std::string& run_id,
                                 std::chrono::milliseconds wait, const OutputOffsets& from);
  std::optional<RunSnapshot> stop(const std::string& tenant, const std::string& run_id);
  void shutdown(std::optional<std::chrono::milliseconds> removals_within);
  bool awaitPrepared(std::size_t count, std::chrono::milliseconds timeout);
  RunLoad load();
  bool preparedHealthy();

  // The registry (run_manager.cc). *Locked: called with mutex_ held.
  // `refusal`, once counted (refusalOf) as a start_run of `tenant` refused.
  Error refusedLocked(const std::string& tenant, Error refusal);
  // The run `run_id` of `tenant`, once the reports past their retention are forgotten; null for
  // none (or another tenant's).
  std::shared_ptr<Run> findLocked(const std::string& tenant, const std::string& run_id);
  // Moves the fair queue on (admission/admission.h): each run admitted takes its prepared
  // sandbox, wakes its hibernated session, and gets its thread.
  void admitLocked();
  void launchLocked(const std::shared_ptr<Run>& run);
  // The one place a run becomes final: status, reason, times and results; its slot is freed,
  // its report counted for retention, and the queue moves on.
  void finalizeLocked(Run& run, policy::Verdict verdict, launcher::RunResults results,
                      const backend::Exit& exit);
  void forgetExpiredLocked();
  RunSnapshot snapshotLocked(const Run& run, const OutputOffsets& from = {}) const;
  void reapThreads();

  // A run's own thread (run_thread.cc).
  void runThread(const std::shared_ptr<Run>& run);
  void execute(Run& run, Outcome& outcome, sandbox::SandboxLease& lease);
  bool runInPrepared(Run& run, const std::string& archive, Outcome& outcome);
  void waitForExit(Run& run, const std::string& sandbox_id, Outcome& outcome);
  void sealEvidenceLocked(Run& run, policy::Evidence& evidence);
  // The launcher's trailer, parsed once (empty results when there is none or it is bad).
  launcher::RunResults& launcherResults(Run& run, Outcome& outcome);
  // Reports the run from its complete trailer before the sandbox has ended, when that is
  // safe (see the definition); otherwise leaves it to finish().
  void reportEarly(Run& run, const std::string& sandbox_id, Outcome& outcome);
  void decideLocked(Run& run, Outcome& outcome, launcher::RunResults results);
  void finish(Run& run, Outcome& outcome);
  // Egress: the nonce the run's control file carries (its sandbox's channel's), and a channel
  // given the way to its sandbox's stdin.
  std::optional<egress::LauncherEgress> egressOf(const Run& run) const;
  void attachEgress(const std::shared_ptr<egress::EgressChannel>& channel,
                    const std::string& sandbox_id);
  bool causeSet(const Run& run);
  void killSandbox(const std::string& sandbox_id, const std::string& run_id);

  // Sessions (sessions.cc).
  Result<sessions::SessionSnapshot> openSession(OpenSessionRequest request);
  // The session's sandbox brought up afresh; or the prepared sandbox it took told to become
  // the session's, and when that fails, removed and a fresh one brought up in another uid.
  sandbox::SandboxBringUp::Outcome bringUpSession(Session& session);
  sandbox::SandboxBringUp::Outcome openInPrepared(Session& session);
  // Whether a prepared sandbox still idles (run_thread.cc): not OK when it ended or the
  // backend cannot tell.
  backend::Status stillIdle(const std::string& sandbox_id);
  Result<SessionTicket> sessionForRun(const std::string& tenant, const std::string& session_id,
                                      const sessions::RunAsk& ask);
  std::optional<sessions::SessionSnapshot> closeSession(const std::string& tenant,
                                                        const std::string& session_id);
  sessions::SessionSnapshot sessionSnapshotLocked(const Session& session) const;
  // A run of a session became final: the session's next run goes to the fair queue.
  void sessionRunEndedLocked(Run& run);
  // The session's sandbox ending wakes the waiters and the maintenance thread (which ends it).
  void listenForEnd(Session& session);
  // Stops the runs waiting in the session's own queue with `reason`.
  void stopWaitingLocked(Session& session, const std::string& reason);
  // Ends a session: its waiting runs are stopped, its run in progress is told to stop; the
  // sandbox is removed once no run executes in it (releaseSessions). Idempotent.
  void endSessionLocked(Session& session, const std::string& reason);
  // Removes the sandboxes of ended sessions in which no run executes; releases `lock` while
  // it calls the backend.
  void releaseSessionsLocked(std::unique_lock<std::mutex>& lock);
  // Ends the sessions past their idle timeout or lifetime, or whose sandbox ended between runs.
  void expireSessionsLocked(common::SteadyTime now);
  // Snapshots the sessions expireSessionsLocked marked kHibernating; releases `lock` while the
  // backend takes each snapshot. One that fails ends its session.
  void hibernateSessionsLocked(std::unique_lock<std::mutex>& lock);
  // Snapshots one awake session, releasing `lock` meanwhile: kHibernated on success, kAwake
  // with the backend's failure otherwise. `occasion` ends "hibernated " in the log.
  backend::Status snapshotSessionLocked(std::unique_lock<std::mutex>& lock, Session& session,
                                        const std::string& occasion);
  // Resumes the hibernated session of `run` (marked kWaking when the run was admitted) and
  // checks its sandbox's posture again; false, with the failure in `outcome`, when it cannot.
  bool wakeSession(Run& run, Outcome& outcome);
  // Restarts (SessionSettings::store, session_keeping.cc). Whether shutdown keeps `session`.
  bool keepsAcrossRestartLocked(const Session& session) const;
  // Writes the record of a hibernated session; releases `lock` while it does. An Error (logged)
  // says why it could not.
  Result<Done> recordSessionLocked(std::unique_lock<std::mutex>& lock, Session& session);
  // shutdown(): hibernates the kept sessions and records them; one that cannot be kept ends.
  void keepSessionsLocked(std::unique_lock<std::mutex>& lock);
  TakenBack takeBack(std::vector<sessions::SavedSession> sessions);
  // A run's code in its session's sandbox: delivered as a frame, interrupted at its timeout or
  // stop, and given up (the session ends) when the interpreter does not come back in time.
  void runInSession(Run& run, std::vector<policy::File> files, Outcome& outcome);

  // The maintenance thread (maintenance.cc).
  void maintenanceThread();
  sandbox::PreparedPtr prepareOne(const sandbox::PoolSettings& pool);
  void removeRetiredLocked(std::unique_lock<std::mutex>& lock);
  void retireEndedLocked(std::unique_lock<std::mutex>& lock);

  backend::RuntimeBackend& backend_;
  const RunSettings settings_;
  const policy::SandboxSettings sandbox_;
  const common::Clock& clock_;
  RunEvents& events_;
  const std::string instance_id_;
  sandbox::SandboxBringUp bring_up_;
  sandbox::UidPool uids_;
  sandbox::RemovalQueue removals_;
  sandbox::SandboxSource source_;

  std::mutex mutex_;
  std::condition_variable changed_;       // a run became final or settled; a sandbox is ready
  std::condition_variable pool_changed_;  // wakes the maintenance thread
  std::map<std::string, std::shared_ptr<Run>> runs_;
  sessions::SessionTable sessions_;  // every session rule
  ReportRetention retention_;
  sandbox::PreparedPools pools_;
  admission::Admission admission_;  // the fair queue, slots and the host's memory
  std::size_t live_threads_ = 0;    // run threads not yet done with their sandbox
  std::vector<std::thread> done_threads_;
  bool shutting_down_ = false;
  std::thread maintenance_thread_;
  std::mutex maintenance_join_mutex_;
};

}  // namespace scs::runs
