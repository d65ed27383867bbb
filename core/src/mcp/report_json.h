#pragma once

// A run's snapshot as the tools return it: the JSON of structuredContent (and of the text
// block), and the image content blocks of the files it returned.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <string>

#include "policy/limits.h"
#include "runs/run_manager.h"

namespace scs::mcp {

// {run_id, status, limits, queue_position?} while queued, plus the output so far while
// running; the full report once final (with exception and files when the launcher reported
// them). `with_offsets` adds stdout_offset and stderr_offset.
Poco::JSON::Object::Ptr snapshotToJson(const runs::RunSnapshot& snapshot,
                                       bool with_offsets = false);

// {session_id, status (open or ended), reason once ended, limits, opened_at, idle_expires_at,
// expires_at}.
Poco::JSON::Object::Ptr sessionToJson(const runs::SessionSnapshot& session);

// The effective limits: {memory_gb, timeout_seconds, cpus, processes}.
Poco::JSON::Object::Ptr limitsToJson(const policy::Limits& limits);

// One image content block per returned file a client can display, in file order.
Poco::JSON::Array::Ptr imageBlocks(const runs::RunSnapshot& snapshot);

// RFC 3339 in UTC with milliseconds: "2026-11-30T12:34:56.789Z".
std::string formatTimestamp(std::chrono::system_clock::time_point time);

}  // namespace scs::mcp
