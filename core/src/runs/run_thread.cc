// What a run's own thread does: build its archive, bring its sandbox up (or hand the code to the
// prepared sandbox it took), wait for it to end while the server's deadline runs, gather the
// evidence and the launcher's trailer, and have the registry finalise the run. Its sandbox is
// removed after the run is reported, on every path.

#include <Poco/Logger.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <exception>
#include <variant>

#include "launcher/side_channel.h"
#include "runs/run_manager_impl.h"

namespace scs::runs {
namespace {

// How long a sandbox reported early (from its launcher's record) may take to end by itself
// before its removal ends it.
constexpr auto kEndAfterReport = std::chrono::seconds(2);

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

// The trailer's exit record is evidence from inside the sandbox; its exception is the
// program's own account, kept only for a run that failed as an uncaught exception fails
// (exit code 1, or SIGINT for KeyboardInterrupt), never for one that exited 0.
void keepOnlyTheLaunchersWord(launcher::RunResults& results, Outcome& outcome) {
  policy::Evidence& evidence = outcome.evidence;
  evidence.killed_outside = outcome.exit.killed_outside;
  if (results.refused) {
    evidence.launcher_refusal = "the session's sandbox could not take its files (" +
                                *results.refused + "); the code of an earlier run made it so";
  }
  if (results.exit) {
    evidence.program_reported = true;
    evidence.program_exit_code = results.exit->code;
    evidence.program_signal = results.exit->signal;
  }
  const bool failed_as_uncaught = results.exit
                                      ? (results.exit->code == 1 || results.exit->signal == SIGINT)
                                      : outcome.exit.exit_code.value_or(0) != 0;
  if (!failed_as_uncaught) {
    results.exception.reset();
  }
}

// A session run's verdict says what happened to its code and to its session: an interrupted
// run's code was interrupted, not killed, and its session lives on.
void sessionVerdict(const Run& run, const Outcome& outcome, policy::Verdict& verdict) {
  if (outcome.interrupted) {
    verdict.signal.reset();
    if (verdict.status == policy::RunStatus::kTimedOut) {
      verdict.reason = "Timed out: the " + policy::formatNumber(run.limits.timeout_seconds) +
                       "-second limit was reached and the run's code was interrupted "
                       "(KeyboardInterrupt).";
    } else if (verdict.status == policy::RunStatus::kStopped) {
      verdict.reason = "Stopped by stop_run; the run's code was interrupted (KeyboardInterrupt).";
    }
  }
  if (run.cause == Cause::kSessionEnded) {
    verdict.reason = "Stopped: its session ended.";
  }
  const std::string& ended =
      outcome.session_end.empty() ? run.session->end_reason : outcome.session_end;
  verdict.reason += outcome.session_end.empty() && run.session->open
                        ? " The session is still open."
                        : " The session has ended: " + ended + ".";
}

}  // namespace

void RunManager::Impl::runThread(const std::shared_ptr<Run>& run) {
  Outcome outcome;
  sandbox::SandboxLease lease;
  if (run->prepared) {
    // Taken at admission: it is removed however the run ends, even stopped before it began.
    lease = source_.adopt(run->prepared->uid, run->prepared->sandbox_id, "run " + run->id);
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
  if (run->egress) {
    run->egress->close();  // its streams, should the sandbox not have said it ended
  }
  // Its sinks (the capture, the egress sink, a prepared sandbox's) outlive the sandbox: at
  // shutdown its removal goes on on a thread of its own, which holds the run until then.
  lease.keepUntilRemoved(run);
  const bool removed_here = lease.release();
  std::unique_lock lock(mutex_);
  if (run->session) {
    releaseSessionsLocked(lock);  // a session this run ended goes with it
  }
  if (removed_here) {
    run->prepared.reset();  // its posture (seccomp text included) need not stay
  }
  run->phase = Phase::kSettled;
  --live_threads_;
  done_threads_.push_back(std::move(run->thread));
  changed_.notify_all();
}

std::optional<egress::LauncherEgress> RunManager::Impl::egressOf(const Run& run) const {
  const std::shared_ptr<egress::EgressChannel>& channel =
      run.session ? run.session->egress : run.egress;
  return channel ? std::optional<egress::LauncherEgress>(channel->launcherEgress()) : std::nullopt;
}

void RunManager::Impl::attachEgress(const std::shared_ptr<egress::EgressChannel>& channel,
                                    const std::string& sandbox_id) {
  if (channel) {
    channel->attach([&backend = backend_, sandbox_id](const std::string& bytes) {
      return backend.deliver(sandbox_id, bytes).ok();
    });
  }
}

bool RunManager::Impl::causeSet(const Run& run) {
  std::lock_guard lock(mutex_);
  return run.cause != Cause::kNone;
}

void RunManager::Impl::killSandbox(const std::string& sandbox_id, const std::string& run_id) {
  const backend::Status status = backend_.kill(sandbox_id);
  if (!status.ok() && status.code != backend::Code::kNotFound) {
    logger().warning("run " + run_id + ": kill failed: " + status.message);
  }
}

void RunManager::Impl::execute(Run& run, Outcome& outcome, sandbox::SandboxLease& lease) {
  policy::Evidence& evidence = outcome.evidence;
  std::vector<policy::File> files;
  std::optional<std::string> stdin_data;
  // Only the launcher learns it (in the archive), so the program cannot forge the trailer.
  const std::string nonce = common::randomHexId();
  {
    std::lock_guard lock(mutex_);
    if (run.cause != Cause::kNone) {
      return;
    }
    files = std::move(run.files);
    run.files.clear();
    stdin_data = std::move(run.stdin_data);
    run.stdin_data.reset();
    run.exec_start = clock_.now();
    run.started_at = clock_.wallNow();
    run.capture = std::make_unique<launcher::OutputCapture>(
        settings_.output_cap_bytes, launcher::trailerMarker(nonce),
        launcher::trailerCapBytes(settings_.out_files), launcher::stderrEndMarker(nonce));
    // Wakes this thread in waitForExit: the launcher has said all, or the sandbox has ended.
    run.capture->setListener([this] {
      std::lock_guard wake(mutex_);
      changed_.notify_all();
    });
    if (!run.session && settings_.egress != nullptr &&
        (run.egress_probe || settings_.egress->enabledFor(run.tenant))) {
      run.egress = settings_.egress->open(run.tenant, "run " + run.id);
      run.egress_sink = std::make_unique<egress::EgressSink>(run.egress, run.capture.get());
    }
    logger().information(
        "run " + run.id + " of tenant " + run.tenant + " started after " +
        policy::formatNumber(secondsBetween(run.enqueued_at, *run.exec_start)) + " s in the queue" +
        (run.prepared ? " in prepared sandbox " + run.prepared->sandbox_id : std::string()));
  }

  for (policy::File& control :
       launcher::controlFiles(nonce, settings_.out_files, bring_up_.watchdogSeconds(run.limits),
                              stdin_data, run.language, egressOf(run))) {
    files.push_back(std::move(control));
  }
  stdin_data.reset();

  if (run.session) {
    runInSession(run, std::move(files), outcome);
    return;
  }

  if (run.prepared) {
    if (runInPrepared(run, policy::buildArchive(files, kArchiveOwner, kArchiveOwner), outcome)) {
      return;
    }
    lease.release();  // the prepared sandbox ended while idle
  }

  std::optional<sandbox::SandboxLease> fresh = source_.takeUid("run " + run.id);
  if (!fresh) {
    evidence.sandbox_failure = "every uid of the sandbox range is in use";
    return;
  }
  lease = std::move(*fresh);
  std::string archive = policy::buildArchive(files, kArchiveOwner, kArchiveOwner);
  files.clear();
  sandbox::SandboxBringUp::Steps steps;
  steps.archive = &archive;
  steps.sink = run.outerSink();
  steps.stdin_open = run.egress != nullptr;
  steps.created = [&](const std::string& sandbox_id) {
    attachEgress(run.egress, sandbox_id);
    std::lock_guard lock(mutex_);
    run.sandbox_id = sandbox_id;
  };
  steps.stopped = [&] { return causeSet(run); };
  const sandbox::SandboxBringUp::Outcome brought =
      source_.bringUp(sandbox::SandboxKind::kRun, run.id, run.limits, run.image, lease, steps)
          .outcome;
  std::string().swap(archive);
  if (brought.sandbox_id.empty()) {
    lease.release();  // its uid is free again at once: no sandbox was made with it
  }
  if (!brought.failure.empty()) {
    evidence.sandbox_failure = brought.failure;
    logger().error("run " + run.id + ": " + brought.failure);
    return;
  }
  if (brought.stopped) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    run.phase = Phase::kExecuting;  // a stop from now on kills it
  }
  waitForExit(run, brought.sandbox_id, outcome);
  outcome.ended = clock_.now();
}

backend::Status RunManager::Impl::stillIdle(const std::string& sandbox_id) {
  const backend::WaitReply idle = backend_.wait(sandbox_id, std::chrono::milliseconds(0));
  if (idle.status.ok() && idle.exit.exited) {
    return {backend::Code::kUnavailable, "it ended while idle"};
  }
  return idle.status;
}

// Runs the code in the run's prepared sandbox. False, with nothing delivered, when that
// sandbox ended while it idled: the run then takes the normal path.
bool RunManager::Impl::runInPrepared(Run& run, const std::string& archive, Outcome& outcome) {
  const std::string& sandbox_id = run.prepared->sandbox_id;
  if (!stillIdle(sandbox_id).ok()) {
    logger().warning("run " + run.id + ": prepared sandbox " + sandbox_id +
                     " ended while idle; creating a fresh one");
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    if (run.cause != Cause::kNone) {
      return true;
    }
    run.sandbox_id = sandbox_id;
    run.phase = Phase::kExecuting;  // a stop from now on kills it
    run.ran_prepared = true;
  }
  const backend::ProgressReply idle_progress = backend_.progress(sandbox_id);
  if (idle_progress.status.ok() && idle_progress.peak_memory_bytes.value_or(0) > 0) {
    std::lock_guard lock(mutex_);
    run.idle_peak_bytes = idle_progress.peak_memory_bytes;
  }
  attachEgress(run.egress, sandbox_id);
  run.prepared->sink.bind(run.outerSink());
  const backend::Status delivered = backend_.deliver(sandbox_id, archive);
  if (!delivered.ok()) {
    outcome.evidence.sandbox_failure = "delivery failed: " + delivered.message;
    return true;
  }
  waitForExit(run, sandbox_id, outcome);
  outcome.ended = clock_.now();
  return true;
}

// Waits for the sandbox to end, woken by the capture when the backend says it has ended or
// when the launcher's trailer is complete (then the run may be reported at once). The server's
// own timer kills it at the run's timeout, and a stop (stop_run or shutdown) kills it if stop()
// could not; a sandbox that has not ended kKillGrace after its kill is given up, and one that
// has not ended kEndAfterReport after an early report is left to its removal.
void RunManager::Impl::waitForExit(Run& run, const std::string& sandbox_id, Outcome& outcome) {
  const common::SteadyTime deadline = run.timeoutAt();
  std::unique_lock lock(mutex_);
  while (true) {
    // The backend calls ended() only once wait() has the exit: ended without one is a loss.
    const bool ended = run.capture->hasEnded();
    lock.unlock();
    const backend::WaitReply reply = backend_.wait(sandbox_id, std::chrono::milliseconds(0));
    lock.lock();
    if (!reply.status.ok() || (ended && !reply.exit.exited)) {
      sealEvidenceLocked(run, outcome.evidence);
      outcome.evidence.sandbox_failure =
          "lost the sandbox while waiting: " +
          (reply.status.ok() ? std::string("it ended without an exit") : reply.status.message);
      return;
    }
    if (reply.exit.exited) {
      sealEvidenceLocked(run, outcome.evidence);
      outcome.exit = reply.exit;
      if (!outcome.reported_early) {
        outcome.evidence.exit_code = reply.exit.exit_code;
        outcome.evidence.oom_killed = reply.exit.oom_killed;
        outcome.evidence.engine_error = reply.exit.engine_error;
      }
      return;
    }

    const common::SteadyTime now = clock_.now();
    common::SteadyTime until = deadline;
    if (outcome.reported_early) {
      until = *outcome.reported_early + kEndAfterReport;
      if (now >= until) {
        logger().warning("run " + run.id + ": its sandbox had not ended " +
                         std::to_string(kEndAfterReport.count()) +
                         " s after the launcher's report; removing it");
        return;
      }
    } else if (!run.kill_sent_at) {
      if (run.cause == Cause::kNone && now >= deadline) {
        run.cause = Cause::kTimeout;
        logger().information("run " + run.id + " reached its timeout; killing it");
      }
      if (run.cause != Cause::kNone) {
        run.kill_sent_at = now;
        lock.unlock();
        killSandbox(sandbox_id, run.id);
        lock.lock();
      }
    } else if (now - *run.kill_sent_at >= kKillGrace) {
      sealEvidenceLocked(run, outcome.evidence);
      outcome.evidence.sandbox_failure = "the sandbox did not stop after kill";
      return;
    }
    if (run.kill_sent_at && !outcome.reported_early) {
      until = *run.kill_sent_at + kKillGrace;
    }
    clock_.waitUntil(changed_, lock, std::min<common::SteadyTime>(until, now + kWaitSlice), [&] {
      return run.capture->hasEnded() ||
             (!outcome.trailer_considered && run.capture->outputComplete()) ||
             (!run.kill_sent_at && run.cause != Cause::kNone);
    });
    if (!outcome.trailer_considered && run.capture->outputComplete()) {
      outcome.trailer_considered = true;
      lock.unlock();
      reportEarly(run, sandbox_id, outcome);
      lock.lock();
    }
  }
}

// A run whose launcher has reported may be reported before its sandbox has ended: the engine's
// end adds nothing when the record holds the program's own exit code (not a signal, which may
// be the OOM killer's), no stop or timeout of the server's has begun nor is due, and the backend
// can tell that no OOM kill happened (the launcher reports only after every process has ended,
// so any OOM kill has been counted). Otherwise the run waits for the engine's evidence as before.
void RunManager::Impl::reportEarly(Run& run, const std::string& sandbox_id, Outcome& outcome) {
  const auto waitForTheEngine = [&](const std::string& why) {
    logger().debug("run " + run.id + ": its launcher has reported, but " + why +
                   "; waiting for the sandbox's end");
  };
  launcher::RunResults& results = launcherResults(run, outcome);
  if (!results.exit) {
    waitForTheEngine("its record holds no exit");
    return;
  }
  if (!results.exit->code) {
    waitForTheEngine("its program was killed by a signal");
    return;
  }
  const backend::ProgressReply progress = backend_.progress(sandbox_id);
  if (!progress.status.ok() || !progress.oom_known || progress.oom_killed) {
    waitForTheEngine(progress.oom_killed ? "the OOM killer has fired"
                                         : "the backend cannot rule out an OOM kill yet");
    return;
  }
  std::lock_guard lock(mutex_);
  if (run.cause != Cause::kNone || run.phase >= Phase::kEnded) {
    waitForTheEngine("the server is ending the run");
    return;
  }
  // The server's timer wins: a program that ended after its deadline is timed out.
  if (clock_.now() >= run.timeoutAt()) {
    waitForTheEngine("its timeout has passed");
    return;
  }
  outcome.ended = clock_.now();
  outcome.exit.exit_code = results.exit->code;
  outcome.exit.peak_memory_bytes = progress.peak_memory_bytes;
  outcome.exit.cpu_seconds = progress.cpu_seconds;
  outcome.evidence.exit_code = results.exit->code;
  run.capture->close();  // both streams have ended at their markers
  sealEvidenceLocked(run, outcome.evidence);
  decideLocked(run, outcome, std::move(results));
  outcome.reported_early = outcome.ended;  // only once it is reported, so finish() cannot skip it
  logger().debug("run " + run.id +
                 ": reported from its launcher's record, before its sandbox ended");
}

void RunManager::Impl::sealEvidenceLocked(Run& run, policy::Evidence& evidence) {
  if (run.phase >= Phase::kEnded) {
    return;
  }
  run.phase = Phase::kEnded;
  evidence.stop_requested = run.cause == Cause::kStopRun || run.cause == Cause::kShutdown ||
                            run.cause == Cause::kSessionEnded;
  evidence.by_shutdown = run.cause == Cause::kShutdown;
  evidence.timer_fired = run.cause == Cause::kTimeout;
}

launcher::RunResults& RunManager::Impl::launcherResults(Run& run, Outcome& outcome) {
  if (outcome.results) {
    return *outcome.results;
  }
  outcome.results.emplace();
  if (!run.capture) {
    return *outcome.results;
  }
  launcher::OutputCapture::Trailer trailer = run.capture->takeTrailer();
  if (trailer.overflowed) {
    logger().warning("run " + run.id + ": the launcher's trailer is over its cap; ignored");
  } else if (trailer.found) {
    // The trailer is written inside the sandbox: untrusted, so nothing in it may end the run
    // thread before the run is reported and its slot released.
    try {
      auto parsed = launcher::parseTrailer(trailer.bytes, settings_.out_files);
      if (auto* problem = std::get_if<Error>(&parsed)) {
        logger().warning("run " + run.id + ": ignoring a malformed trailer: " + problem->message);
      } else {
        *outcome.results = std::move(std::get<launcher::RunResults>(parsed));
      }
    } catch (const std::exception& e) {
      logger().error("run " + run.id + ": ignoring a trailer that failed to parse: " + e.what());
    }
  }
  return *outcome.results;
}

void RunManager::Impl::decideLocked(Run& run, Outcome& outcome, launcher::RunResults results) {
  keepOnlyTheLaunchersWord(results, outcome);
  // What the program did through the relay up to now: PID 1 ends its streams before its
  // trailer, and a session's run takes what happened since the session's last run.
  if (const auto& channel = run.session ? run.session->egress : run.egress) {
    run.report.network = channel->takeReport();
  }
  const bool launcher_failed = results.launcher_error.has_value();
  if (launcher_failed) {
    // The launcher's own traceback: the operator's to read, never the program's output.
    logger().error("run " + run.id + ": the sandbox's launcher failed: " + *results.launcher_error);
    results.launcher_error.reset();
  }
  policy::Verdict verdict;
  try {
    verdict = policy::decide(outcome.evidence, run.limits);
  } catch (const std::exception& e) {
    logger().error("run " + run.id + ": deciding the status failed: " + e.what());
    verdict.status = policy::RunStatus::kSandboxError;
    verdict.reason = "The server could not decide how this run ended.";
  }
  if (launcher_failed && verdict.status == policy::RunStatus::kSandboxError) {
    verdict.reason =
        "Sandbox error: the sandbox's launcher failed (the server's log has its error); this "
        "is not caused by your code.";
  }
  if (run.session) {
    sessionVerdict(run, outcome, verdict);
    if (!outcome.session_end.empty()) {
      endSessionLocked(*run.session, outcome.session_end);  // before the report says it lives
    }
  }
  run.exec_end = outcome.ended;
  finalizeLocked(run, std::move(verdict), std::move(results), outcome.exit);
}

void RunManager::Impl::finish(Run& run, Outcome& outcome) {
  if (run.capture) {
    run.capture->close();
  }
  if (outcome.reported_early) {
    // Reported from the launcher's record; the engine's end, when it came, should agree.
    const backend::Exit& exit = outcome.exit;
    if (!outcome.evidence.sandbox_failure.empty()) {
      logger().warning("run " + run.id + ", already reported from the launcher's record: " +
                       outcome.evidence.sandbox_failure);
    } else if (exit.exited && (exit.oom_killed || !exit.engine_error.empty() ||
                               exit.exit_code != outcome.evidence.exit_code)) {
      logger().warning("run " + run.id + ": the engine's end (exit code " +
                       (exit.exit_code ? std::to_string(*exit.exit_code) : std::string("none")) +
                       (exit.oom_killed ? ", OOM" : "") +
                       ") differs from the launcher's report, already given");
    }
    return;
  }
  launcher::RunResults results = std::move(launcherResults(run, outcome));
  std::lock_guard lock(mutex_);
  sealEvidenceLocked(run, outcome.evidence);
  decideLocked(run, outcome, std::move(results));
}

}  // namespace scs::runs
