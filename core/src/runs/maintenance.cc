// The run manager's maintenance thread: keeps the prepared pool filled while memory allows,
// replaces sandboxes that idled too long or ended while idle, removes retired ones, retries
// removals that failed, and at shutdown starts the removal of what is left.

#include <Poco/Logger.h>

#include <algorithm>

#include "runs/run_manager_impl.h"

namespace scs::runs {
namespace {

constexpr auto kRecheck = std::chrono::seconds(1);

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

void RunManager::Impl::maintenanceThread() {
  std::unique_lock lock(mutex_);
  while (true) {
    if (pools_.hasRetired()) {
      removeRetiredLocked(lock);
      continue;
    }
    if (shutting_down_) {
      break;
    }
    const common::SteadyTime now = clock_.now();
    expireSessionsLocked(now);
    hibernateSessionsLocked(lock);
    releaseSessionsLocked(lock);
    if (shutting_down_) {
      break;
    }
    const std::optional<common::SteadyTime> retry_at = removals_.nextRetry();
    if (retry_at && now >= *retry_at) {
      lock.unlock();
      removals_.retry();
      lock.lock();
      continue;
    }
    if (pools_.retireStale(now)) {
      continue;
    }
    sandbox::PreparedPool* pool = pools_.wantingAnother(
        now, [this](std::int64_t more) { return admission_.memoryFits(more); },
        admission_.queue().next().has_value());
    if (pool == nullptr) {
      clock_.waitUntil(pool_changed_, lock,
                       std::min(now + kRecheck, retry_at.value_or(now + kRecheck)));
      retireEndedLocked(lock);
      continue;
    }
    // Pools are dropped only when they hold nothing: this one lives while it makes one.
    pool->making(clock_.now());
    const sandbox::PoolSettings settings = pool->settings();
    lock.unlock();
    sandbox::PreparedPtr prepared = prepareOne(settings);
    lock.lock();
    if (!prepared) {
      pool->failed(clock_.now());
      admitLocked();
      continue;
    }
    pool->made(std::move(prepared), clock_.now());
    changed_.notify_all();
    admitLocked();  // a queued run may take it, or need its memory
  }
  releaseSessionsLocked(lock);  // one ended at shutdown while its snapshot was being taken
  pools_.retireAll();
  removeRetiredLocked(lock);  // at once, each on a thread of its own: removals_ is closed
}

// Removes the retired prepared sandboxes; releases `lock` while it calls the backend.
void RunManager::Impl::removeRetiredLocked(std::unique_lock<std::mutex>& lock) {
  std::vector<sandbox::PreparedPtr> retired = pools_.takeRetired();
  lock.unlock();
  for (sandbox::PreparedPtr& prepared : retired) {
    sandbox::SandboxLease lease =
        source_.adopt(prepared->uid, prepared->sandbox_id, "prepared sandbox");
    lease.keepUntilRemoved(std::shared_ptr<const sandbox::PreparedSandbox>(std::move(prepared)));
    lease.release();
  }
  lock.lock();
}

// Retires the idle prepared sandboxes that ended (say, the engine restarted), so the pool
// makes fresh ones before a run finds them dead. Releases `lock` while it asks the backend.
void RunManager::Impl::retireEndedLocked(std::unique_lock<std::mutex>& lock) {
  const std::vector<std::string> idle = pools_.idleIds();
  if (idle.empty()) {
    return;
  }
  lock.unlock();
  std::vector<std::string> ended;
  for (const std::string& id : idle) {
    const backend::WaitReply reply = backend_.wait(id, std::chrono::milliseconds(0));
    if (!reply.status.ok() || reply.exit.exited) {
      ended.push_back(id);
    }
  }
  lock.lock();
  pools_.retireEnded(ended);
}

// Creates a sandbox for a pool's limits in its image, checks the engine's record of it against
// the required posture and starts it idle. nullptr, with nothing left behind, on any failure.
sandbox::PreparedPtr RunManager::Impl::prepareOne(const sandbox::PoolSettings& pool) {
  // Declared first so that its sink outlives a removal the lease makes on failure.
  auto prepared = std::make_unique<sandbox::PreparedSandbox>();
  std::optional<sandbox::SandboxLease> lease = source_.takeUid("prepared sandbox");
  if (!lease) {
    logger().error("cannot prepare a sandbox: every uid of the sandbox range is in use");
    return nullptr;
  }
  sandbox::SandboxBringUp::Steps steps;
  steps.sink = &prepared->sink;
  sandbox::SandboxSource::Brought brought =
      source_.bringUp(sandbox::SandboxKind::kPrepared, "prepared-" + common::randomHexId(),
                      pool.limits, pool.image, *lease, steps);
  if (!brought.outcome.failure.empty()) {
    logger().error("cannot prepare a sandbox: " + brought.outcome.failure);
    return nullptr;  // the lease removes what was made
  }
  prepared->uid = lease->uid();
  prepared->sandbox_id = brought.outcome.sandbox_id;
  prepared->posture = std::move(brought.posture);
  prepared->timeout_seconds = pool.limits.timeout_seconds;
  lease->handOver();
  return prepared;
}

}  // namespace scs::runs
