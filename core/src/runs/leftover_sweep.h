#pragma once

// The startup sweep: removes the sandboxes that earlier server instances left behind, those
// whose owner process is gone (or whose owner label is invalid or missing) and those whose
// deadline has passed. Sandboxes of a live instance within their deadline are left alone.

#include <scs/backend/backend.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace scs::runs {

// Removes the leftovers `backend` lists that do not belong to `instance_id`. Returns how many
// were removed.
std::size_t sweepLeftovers(backend::RuntimeBackend& backend, const std::string& instance_id,
                           std::chrono::system_clock::time_point now);

}  // namespace scs::runs
