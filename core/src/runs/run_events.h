#pragma once

// What the run manager, and the tools in front of it, tell an observer as runs come and go:
// the counters behind GET /metrics (metrics/metrics.h). The run manager calls it with its lock
// held, so an implementation only counts: it never blocks and never calls back.

#include <cstddef>
#include <optional>
#include <string>

#include "admission/refusal.h"
#include "policy/status_map.h"

namespace scs::runs {

class RunEvents {
 public:
  // Why a start_run was refused before it became a run (admission/refusal.h).
  using Refusal = admission::Refusal;

  virtual ~RunEvents() = default;

  virtual void refused(const std::string& tenant, Refusal why) = 0;
  // The run was accepted (queued, or started at once).
  virtual void accepted(const std::string& tenant) = 0;
  // The run was reported final: for a run that began executing, `latency_seconds` from
  // acceptance to the report, of which `queued_seconds` waiting for a slot (none for one that
  // ended queued: stopped, pushed out of a full queue, or ended by shutdown).
  virtual void finished(const std::string& tenant, policy::RunStatus status,
                        std::optional<double> latency_seconds,
                        std::optional<double> queued_seconds) = 0;
  // A run a prepared sandbox could serve was admitted: with one (`hit`) or without.
  virtual void preparedTaken(bool hit) = 0;
};

// An observer that counts nothing, for a manager given none.
RunEvents& noRunEvents();

}  // namespace scs::runs
