#pragma once

// The startup sweep: removes the sandboxes that earlier server instances left behind, those
// whose owner process is gone (or whose owner label is invalid or missing) and those whose
// deadline has passed. Sandboxes of a live instance within their deadline are left alone.

#include <scs/backend/backend.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace scs::sandbox {

struct SweepResult {
  std::size_t removed = 0;
  // The host uids of the sandboxes it left alive (a live instance's, or one it could not
  // remove): no sandbox of this instance may take them while they live.
  std::vector<std::uint32_t> kept_uids;
};

// Removes the leftovers `backend` lists that do not belong to `instance_id` (empty: a server
// that has made none yet). Those in `kept_session_uids` stay whoever made them, until their
// deadline: the sandboxes of sessions an earlier server kept for this one (--state-dir), which
// run as those uids.
SweepResult sweepLeftovers(backend::RuntimeBackend& backend, const std::string& instance_id,
                           std::chrono::system_clock::time_point now,
                           const std::set<std::uint32_t>& kept_session_uids = {});

}  // namespace scs::sandbox
