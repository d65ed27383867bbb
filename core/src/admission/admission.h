#pragma once

// Admission: which queued run takes a slot next, and whether the host's memory lets it. It
// holds the fair queue, what each executing run holds of the host's memory, and the queue's
// room per tenant and in all; it takes a prepared sandbox from the pools for a run that can use
// one, and asks idle ones to give way when memory is short. Pure bookkeeping, as the session
// table is: no lock (the run manager calls it under its own), no backend, no clock (it is
// handed the time), so it is tested without threads.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "admission/fair_queue.h"
#include "common/clock.h"
#include "policy/limits.h"
#include "result.h"
#include "sandbox/prepared_pool.h"

namespace scs::admission {

struct AdmissionSettings {
  int max_concurrent = 0;              // runs that hold a slot at once
  std::size_t max_queue = 0;           // queued runs per tenant
  std::size_t max_queue_total = 0;     // queued runs in all
  std::int64_t host_memory_bytes = 0;  // what sandboxes may hold together; 0: not counted
};

// What a limit of `limits.memory_gb` holds, in bytes.
std::int64_t memoryBytes(const policy::Limits& limits);

// A queued run, as admission needs to see it.
struct Candidate {
  std::string image;  // the image its sandbox runs: a packages layer's; empty: the operator's
  policy::Limits limits;
  std::int64_t holds = 0;  // bytes it holds while it has a slot (0: its session's are counted)
  std::int64_t needs = 0;  // bytes that must fit to admit it: `holds`, or those of the
                           // hibernated session it wakes
  bool may_take_prepared = true;  // false for a session's run
};

class Admission {
 public:
  // `sessions_memory` is asked each time memory is counted: a session's memory counts from the
  // moment a run is admitted to wake it.
  Admission(AdmissionSettings settings, const policy::SandboxSettings& sandbox,
            sandbox::PreparedPools& pools, std::function<std::int64_t()> sessions_memory);

  FairQueue& queue() { return queue_; }
  const FairQueue& queue() const { return queue_; }

  // Whether `more` bytes fit beside the executing runs, the prepared sandboxes and the sessions.
  bool memoryFits(std::int64_t more) const;
  // Whether `needed` bytes fit, or idle prepared sandboxes but `keep` gave way so that they do
  // (the pools should then refill).
  bool fitsOrEvicts(std::int64_t needed, const sandbox::PreparedSandbox* keep);

  // Moves the queue on at `now`: while a slot is free, the run the fair queue chooses takes it
  // if its memory fits (with a prepared sandbox of its image when one is ready, which holds
  // part of it already); idle prepared sandboxes give way to it, and otherwise it waits rather
  // than be overtaken. Each admitted run is taken out of the queue, counted, and handed to
  // `launch` with its prepared sandbox (or none); `launch` may end it and call admit() again.
  // True when idle prepared sandboxes gave way.
  using Describe = std::function<Candidate(const std::string& run_id)>;
  using Launch = std::function<void(const FairQueue::Entry& run, sandbox::PreparedPtr prepared)>;
  bool admit(common::SteadyTime now, const Describe& describe, const Launch& launch);

  // The admitted run `run_id` of `tenant` holds its slot no longer.
  void ended(const std::string& tenant, const std::string& run_id);

  // The queue's room for `run_id`, still queued after admission, whose tenant had `waiting`
  // runs queued before it. An Error (a full queue; the run is taken out of it), nothing, or
  // the run of another tenant that gives way (tenant_share.h), taken out of the queue: the
  // caller stops it.
  Result<std::optional<std::string>> room(const std::string& tenant, const std::string& run_id,
                                          std::size_t waiting);

  // Bytes the admitted runs hold.
  std::int64_t executingMemory() const;

 private:
  const AdmissionSettings settings_;
  const policy::SandboxSettings& sandbox_;
  sandbox::PreparedPools& pools_;
  const std::function<std::int64_t()> sessions_memory_;
  FairQueue queue_;
  std::map<std::string, std::int64_t> holding_;  // admitted run id → the bytes it holds
};

}  // namespace scs::admission
