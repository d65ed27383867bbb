// Admission: what a run holds while it executes (a slot and its memory limit, beside open
// sessions and idle prepared sandboxes), the queue's room per tenant, and the step that moves
// the fair queue on: the next run that fits takes a slot, and a prepared sandbox when one of its
// posture is ready.

#include <Poco/Logger.h>

#include <cmath>
#include <system_error>

#include "common/tenant_share.h"
#include "runs/run_manager_impl.h"

namespace scs::runs {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

std::int64_t RunManager::Impl::memoryBytes(const policy::Limits& limits) const {
  return std::llround(limits.memory_gb * static_cast<double>(policy::kBytesPerGb));
}

std::int64_t RunManager::Impl::executingMemoryLocked() const {
  std::int64_t total = 0;
  for (const auto& [id, run] : runs_) {
    if (run->holdsSlot()) {
      total += run->memory_bytes;
    }
  }
  return total;
}

bool RunManager::Impl::memoryFitsLocked(std::int64_t more) const {
  return settings_.host_memory_bytes == 0 ||
         executingMemoryLocked() + pools_.memory() + sessions_.memory() + more <=
             settings_.host_memory_bytes;
}

Result<Done> RunManager::Impl::makeRoomInQueueLocked(const std::string& tenant) {
  std::map<std::string, std::uint64_t> held = queue_.queuedPerTenant();
  const std::string giving_way = tenantToGiveWay(held, tenant);
  if (giving_way == tenant) {
    return refused(
        "The server's queue is full: " + countOf(queue_.queued() - 1, "run is", "runs are") +
        " waiting, " + std::to_string(held[tenant] - 1) +
        " of them yours, the most of anyone's. Try again when one of your runs finishes.");
  }
  const std::string pushed_out = *queue_.newest(giving_way);
  queue_.remove(giving_way, pushed_out);
  Run& run = *runs_.at(pushed_out);
  logger().information("run " + run.id + " of tenant " + run.tenant +
                       " leaves the full queue for a run of a tenant with fewer queued runs");
  finalizeLocked(run,
                 stoppedVerdict("Stopped before it started: the server's queue was full and your "
                                "runs were the most of those waiting. Start it again when fewer "
                                "of your runs wait."),
                 {}, {});
  run.phase = Phase::kSettled;
  return Done{};
}

void RunManager::Impl::admitLocked() {
  while (!shutting_down_) {
    const std::optional<FairQueue::Entry> next = queue_.next();
    if (!next ||
        queue_.executing() >= static_cast<std::size_t>(std::max(settings_.max_concurrent, 0))) {
      return;
    }
    const std::shared_ptr<Run> run = runs_.at(next->id);
    // A prepared sandbox the run can use (of its image: the operator's, or its packages'
    // layer's) already holds part of the run's memory. Not for a session's run.
    PreparedPool* pool = run->session ? nullptr : pools_.of(run->image);
    const PreparedSandbox* prepared = pool == nullptr || pool->ready() == 0
                                          ? nullptr
                                          : pool->find(run->limits, sandbox_, clock_.now());
    // A hibernated session holds no memory: the run that wakes it needs the session's.
    const bool wakes = run->session && run->session->rest == Session::Rest::kHibernated;
    const std::int64_t needed = (wakes ? run->session->memory_bytes : run->memory_bytes) -
                                (prepared ? pool->idleHold() : 0);
    if (!memoryFitsLocked(needed)) {
      // Idle prepared sandboxes give way to a run; otherwise the chosen run waits for memory
      // rather than be overtaken, so big runs are not starved.
      if (pools_.evictFor(needed, prepared,
                          [this](std::int64_t more) { return memoryFitsLocked(more); })) {
        pool_changed_.notify_all();
        continue;
      }
      return;
    }
    queue_.pop();
    if (wakes) {
      run->session->rest = Session::Rest::kWaking;  // counted against the host's memory again
    }
    if (run->pool_demand) {
      events_.preparedTaken(prepared != nullptr);
    }
    if (prepared != nullptr) {
      run->prepared = pool->claim(prepared, clock_.now());
    }
    launchLocked(run);
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
      PreparedPool& pool = *pools_.of(run->image);
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
