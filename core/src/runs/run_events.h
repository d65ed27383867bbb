#pragma once

// What the run manager, and the tools in front of it, tell an observer as runs come and go:
// the counters behind GET /metrics (metrics/metrics.h). The run manager calls it with its lock
// held, so an implementation only counts: it never blocks and never calls back.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "policy/status_map.h"
#include "result.h"

namespace scs::runs {

class RunEvents {
 public:
  // Why a start_run was refused before it became a run.
  enum class Refusal {
    kInvalid,       // bad arguments (code, files, stdin, packages), or a session's rules
    kLimits,        // the limits are refused (by the policy, or more memory than the host has)
    kQueueFull,     // the tenant's queue, or the server's, is full
    kShuttingDown,  // the server is stopping
  };

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

// The one map from why a start_run failed to the category it is counted in: a refusal site
// names its Error's kind, and this the category (kInvalid and kInternal: invalid). The tools
// count a `packages` refusal as invalid at its site instead, whatever its kind: a package
// layer's "no room now" is not a full queue.
RunEvents::Refusal refusalOf(const Error& error);

// "invalid", "limits", "queue_full", "shutting_down".
std::string_view refusalName(RunEvents::Refusal why);

}  // namespace scs::runs
