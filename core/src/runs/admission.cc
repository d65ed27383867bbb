// What a run admitted by admission/ (the fair queue within the slots and the host's memory)
// gets from the run manager: its prepared sandbox, its hibernated session woken, its thread.

#include <Poco/Logger.h>

#include <system_error>

#include "runs/run_manager_impl.h"

namespace scs::runs {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

void RunManager::Impl::admitLocked() {
  if (shutting_down_) {
    return;
  }
  const auto describe = [this](const std::string& run_id) {
    const Run& run = *runs_.at(run_id);
    admission::Candidate candidate;
    candidate.image = run.image;
    candidate.limits = run.limits;
    candidate.holds = run.memory_bytes;
    // A hibernated session holds no memory: the run that wakes it needs the session's.
    const bool wakes = run.session && run.session->rest == Session::Rest::kHibernated;
    candidate.needs = wakes ? run.session->memory_bytes : run.memory_bytes;
    candidate.may_take_prepared = !run.session;
    return candidate;
  };
  const auto launch = [this](const admission::FairQueue::Entry& entry,
                             sandbox::PreparedPtr prepared) {
    const std::shared_ptr<Run> run = runs_.at(entry.id);
    if (run->session && run->session->rest == Session::Rest::kHibernated) {
      run->session->rest = Session::Rest::kWaking;  // counted against the host's memory again
    }
    if (run->pool_demand) {
      events_.preparedTaken(prepared != nullptr);
    }
    run->prepared = std::move(prepared);
    launchLocked(run);
  };
  if (admission_.admit(clock_.now(), describe, launch)) {
    pool_changed_.notify_all();  // the idle prepared sandboxes that gave way are removed
  }
}

void RunManager::Impl::launchLocked(const std::shared_ptr<Run>& run) {
  run->phase = Phase::kStarting;
  try {
    run->thread = std::thread([this, run] { runThread(run); });
    ++live_threads_;
  } catch (const std::system_error& e) {
    logger().error("run " + run->id + ": could not start its thread: " + e.what());
    if (run->prepared) {
      sandbox::PreparedPool& pool = *pools_.of(run->image);
      pool.claimEnded();  // it never ran: the pool's count of runs in its sandboxes goes down
      pool.retire(std::move(run->prepared));
    }
    policy::Verdict verdict;
    verdict.status = policy::RunStatus::kSandboxError;
    verdict.reason = "The server could not start a thread for this run.";
    finalizeLocked(*run, verdict, {}, {});
    run->phase = Phase::kSettled;
  }
}

}  // namespace scs::runs
