#pragma once

// Why a start_run was refused before it became a run, and the one map from an Error's kind to
// that category (counted in GET /metrics).

#include <string_view>

#include "result.h"

namespace scs::admission {

enum class Refusal {
  kInvalid,       // bad arguments (code, files, stdin, packages), or a session's rules
  kLimits,        // the limits are refused (by the policy, or more memory than the host has)
  kQueueFull,     // the tenant's queue, or the server's, is full
  kShuttingDown,  // the server is stopping
};

// A refusal site names its Error's kind, and this the category (kInvalid and kInternal:
// invalid). The tools count a `packages` refusal as invalid at its site instead, whatever its
// kind: a package layer's "no room now" is not a full queue.
Refusal refusalOf(const Error& error);

// "invalid", "limits", "queue_full", "shutting_down".
std::string_view refusalName(Refusal why);

}  // namespace scs::admission
