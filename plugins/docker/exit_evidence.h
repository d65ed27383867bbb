#pragma once

// How a sandbox ended, from everything the plugin saw: the attach stream, the wait body, the
// engine's record read after the end, the event stream and the cgroup counters. One pure
// function merges them into the Exit the core decides from, so the rules are in one place and
// tested as a table.

#include <scs/backend/backend.h>

#include <cstdint>
#include <optional>
#include <string>

#include "engine_client.h"
#include "json_access.h"

namespace scs::docker {

struct ExitFacts {
  // The attach stream.
  std::string system_error;  // the engine's system-error frames (capped)
  bool stream_broke = false;
  bool stream_malformed = false;
  // remove() had begun: the stream was cut and the record is gone on purpose.
  bool removing = false;
  // The wait connection's body; wait_broke when the connection broke before it ended.
  std::string wait_body;
  bool wait_broke = false;
  // The engine's record read after the end (not read, and empty, when removing).
  EngineReply<json::ObjectPtr> record;
  // Who else ended it: a "kill" on the event stream, or a record gone (404) while this backend
  // neither killed nor removed it, is an operator's or the engine's doing.
  bool kill_event = false;
  bool kill_requested = false;  // this backend's kill() was called
  // Other OOM evidence.
  bool oom_event = false;   // an "oom" on the event stream
  bool cgroup_oom = false;  // the cgroup v1 oom_kill counter moved
  // Usage sampled while it ran.
  std::optional<std::int64_t> peak_memory_bytes;
  std::int64_t memory_limit_bytes = 0;
  std::optional<double> cpu_seconds;
};

// The reply to wait() for a sandbox that ended with these facts: its exit code from the wait
// body, or from the record when the wait broke; every engine error joined (capped); OOM from
// the record, the event or the cgroup; the peak memory raised to the limit after an OOM kill
// (samples miss the final spike). A sandbox with neither a wait body nor an exited record did
// not end as far as the engine says: the status says why.
backend::WaitReply mergeExitEvidence(const ExitFacts& facts);

}  // namespace scs::docker
