// A session's runs: they wait in the session's own queue and go to the fair queue one at a
// time; each run's code is a frame on the sandbox's stdin, its output goes to the run through
// the session's sink, and its timeout or a stop interrupts it (KeyboardInterrupt). A run whose
// code does not come back in time ends its session.

#include <Poco/Logger.h>
#include <scs/backend/launcher_frames.h>

#include <algorithm>

#include "launcher/side_channel.h"
#include "runs/run_manager_impl.h"
#include "sessions/session_store.h"

namespace scs::runs {
namespace {

// How long an interrupted run's code has to come back from KeyboardInterrupt.
constexpr auto kInterruptGrace = std::chrono::seconds(3);

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

void RunManager::Impl::sessionRunEndedLocked(Run& run) {
  const std::optional<std::string> next = sessions_.runEnded(
      *run.session, run.id, clock_.now(), clock_.wallNow(), [this](const std::string& id) {
        const auto it = runs_.find(id);
        return it != runs_.end() && it->second->phase == Phase::kQueued;
      });
  if (next) {
    admission_.queue().push(run.tenant, *next);
  }
  pool_changed_.notify_all();  // an ended session's sandbox may go now
}

bool RunManager::Impl::wakeSession(Run& run, Outcome& outcome) {
  Session& session = *run.session;
  std::string sandbox_id;
  {
    std::lock_guard lock(mutex_);
    if (session.rest != Session::Rest::kWaking) {
      return true;
    }
    sandbox_id = session.sandbox_id;
  }
  const common::SteadyTime began = clock_.now();
  // A restored sandbox is a sandbox like any other: the engine's record of it is checked
  // against the posture it came up with before anything in it runs again.
  std::string failure = bring_up_.checkReadBack(sandbox_id, session.posture);
  if (failure.empty()) {
    if (const backend::Status resumed = backend_.resume(sandbox_id, session.outerSink());
        !resumed.ok()) {
      failure = "resume failed: " + resumed.message;
    }
  }
  std::lock_guard lock(mutex_);
  const common::SteadyTime now = clock_.now();
  session.rest = Session::Rest::kAwake;
  session.awake_since = now;
  if (!failure.empty()) {
    logger().error("session " + session.id + " could not be woken: " + failure);
    outcome.evidence.sandbox_failure =
        "its session could not be woken from hibernation: " + failure;
    outcome.session_end = "it could not be woken from hibernation (" + failure + ")";
    return false;
  }
  if (settings_.sessions.store != nullptr) {
    settings_.sessions.store->remove(session.id);  // it lives in its sandbox again
  }
  run.report.woke_seconds = secondsBetween(began, now);
  // Waking is the server's time, not the code's: its timeout and duration count from now.
  run.exec_start = now;
  run.started_at = clock_.wallNow();
  logger().information("session " + session.id + " woke for run " + run.id + " in " +
                       policy::formatNumber(*run.report.woke_seconds) + " s");
  return true;
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
  }
  if (!wakeSession(run, outcome)) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    if (run.cause != Cause::kNone) {
      return;
    }
    run.phase = Phase::kExecuting;  // a stop from now on interrupts it
  }
  // The OOM killer may end a process the session's code left running, during this run: the
  // run's report says so, as a one-shot run's does for its children.
  const backend::ProgressReply before = backend_.progress(sandbox_id);
  session.sink.bind(run.capture.get());
  const backend::Status delivered = backend_.deliver(
      sandbox_id,
      backend::launcher::runFrame(policy::buildArchive(files, kArchiveOwner, kArchiveOwner)));
  files.clear();
  if (!delivered.ok()) {
    session.sink.bind(nullptr);
    outcome.evidence.sandbox_failure = "delivery to the session failed: " + delivered.message;
    outcome.session_end = "its sandbox could not take the run: " + delivered.message;
    return;
  }

  const common::SteadyTime deadline = run.timeoutAt();
  std::optional<common::SteadyTime> interrupted_at;
  std::unique_lock lock(mutex_);
  while (true) {
    const bool ended = run.capture->hasEnded();
    if (!outcome.trailer_considered && run.capture->outputComplete()) {
      outcome.trailer_considered = true;
      launcher::RunResults& results = launcherResults(run, outcome);
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
    const common::SteadyTime now = clock_.now();
    if (run.cause == Cause::kNone && now >= deadline) {
      run.cause = Cause::kTimeout;
      logger().information("run " + run.id + " reached its timeout; interrupting it");
    }
    if (run.cause != Cause::kNone && !interrupted_at && !run.kill_sent_at) {
      if (run.cause == Cause::kSessionEnded || (run.cause == Cause::kShutdown && !session.kept)) {
        run.kill_sent_at = now;  // the session goes: nothing to come back to
      } else {
        interrupted_at = now;
        lock.unlock();
        const backend::Status sent =
            backend_.deliver(sandbox_id, backend::launcher::interruptFrame());
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
    common::SteadyTime until = now + kWaitSlice;
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
