// Admission: the fair queue moved on within the slots and the host's memory, a prepared sandbox
// taken where one serves, and the queue's room per tenant and in all.

#include "admission/admission.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "common/tenant_share.h"

namespace scs::admission {
namespace {

// "1 run is", "2 runs are".
std::string countOf(std::size_t count, std::string_view one, std::string_view many) {
  return std::to_string(count) + " " + std::string(count == 1 ? one : many);
}

}  // namespace

std::int64_t memoryBytes(const policy::Limits& limits) {
  return std::llround(limits.memory_gb * static_cast<double>(policy::kBytesPerGb));
}

Admission::Admission(AdmissionSettings settings, const policy::SandboxSettings& sandbox,
                     sandbox::PreparedPools& pools, std::function<std::int64_t()> sessions_memory)
    : settings_(settings),
      sandbox_(sandbox),
      pools_(pools),
      sessions_memory_(std::move(sessions_memory)) {}

std::int64_t Admission::executingMemory() const {
  std::int64_t total = 0;
  for (const auto& [id, bytes] : holding_) {
    total += bytes;
  }
  return total;
}

bool Admission::memoryFits(std::int64_t more) const {
  return settings_.host_memory_bytes == 0 ||
         executingMemory() + pools_.memory() + sessions_memory_() + more <=
             settings_.host_memory_bytes;
}

bool Admission::fitsOrEvicts(std::int64_t needed, const sandbox::PreparedSandbox* keep) {
  return memoryFits(needed) ||
         pools_.evictFor(needed, keep, [this](std::int64_t more) { return memoryFits(more); });
}

bool Admission::admit(common::SteadyTime now, const Describe& describe, const Launch& launch) {
  bool evicted = false;
  while (true) {
    const std::optional<FairQueue::Entry> next = queue_.next();
    if (!next ||
        queue_.executing() >= static_cast<std::size_t>(std::max(settings_.max_concurrent, 0))) {
      return evicted;
    }
    const Candidate run = describe(next->id);
    // A prepared sandbox the run can use (of its image) already holds part of its memory.
    sandbox::PreparedPool* pool = run.may_take_prepared ? pools_.of(run.image) : nullptr;
    const sandbox::PreparedSandbox* prepared =
        pool == nullptr || pool->ready() == 0 ? nullptr : pool->find(run.limits, sandbox_, now);
    const std::int64_t needed = run.needs - (prepared ? pool->idleHold() : 0);
    if (!memoryFits(needed)) {
      // Idle prepared sandboxes give way to a run; otherwise the chosen run waits for memory
      // rather than be overtaken, so big runs are not starved.
      if (fitsOrEvicts(needed, prepared)) {
        evicted = true;
        continue;
      }
      return evicted;
    }
    queue_.pop();
    holding_[next->id] = run.holds;
    launch(*next, prepared != nullptr ? pool->claim(prepared, now) : nullptr);
  }
}

void Admission::ended(const std::string& tenant, const std::string& run_id) {
  queue_.ended(tenant);
  holding_.erase(run_id);
}

Result<std::optional<std::string>> Admission::room(const std::string& tenant,
                                                   const std::string& run_id, std::size_t waiting) {
  if (waiting >= settings_.max_queue) {
    Error full = refused("The queue is full: " + countOf(waiting, "run is", "runs are") +
                         " waiting behind " + std::to_string(queue_.executing()) +
                         " running. Try again when a run finishes.");
    queue_.remove(tenant, run_id);
    return full;
  }
  if (queue_.queued() <= settings_.max_queue_total) {
    return std::optional<std::string>();
  }
  std::map<std::string, std::uint64_t> held = queue_.queuedPerTenant();
  const std::string giving_way = common::tenantToGiveWay(held, tenant);
  if (giving_way == tenant) {
    Error full = refused(
        "The server's queue is full: " + countOf(queue_.queued() - 1, "run is", "runs are") +
        " waiting, " + std::to_string(held[tenant] - 1) +
        " of them yours, the most of anyone's. Try again when one of your runs finishes.");
    queue_.remove(tenant, run_id);
    return full;
  }
  std::optional<std::string> pushed_out = queue_.newest(giving_way);
  queue_.remove(giving_way, *pushed_out);
  return pushed_out;
}

}  // namespace scs::admission
