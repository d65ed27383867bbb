#pragma once

// A run's snapshot as the tools return it: the JSON of structuredContent (and of the text
// block), and the content blocks of the files it returned.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <string>

#include "policy/limits.h"
#include "runs/run_manager.h"

namespace scs::mcp {

// A JSON object that keeps its keys in the order they are set, as every answer the server
// writes does.
inline Poco::JSON::Object::Ptr newObject() {
  return new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
}

// What a report leaves out. A compact report (the default) carries only what tells the agent
// something: no empty stream, no false flag, no byte counts it could not use, no limits equal
// to the defaults (nor a session run's, which are its session's), no timestamps, and an exception's traceback only when stderr does not
// already end with it. `verbose` (get_result's argument) gives every field.
struct ReportOptions {
  bool with_offsets = false;  // stdout_offset and stderr_offset (and the byte counts)
  bool verbose = false;
  // The limits a run gets when it asks for none; nullptr: the limits are always shown.
  const policy::Limits* defaults = nullptr;
};

// {run_id, status, queue_position?} while queued, plus the output so far while running; the
// report once final (with exception and files when the launcher reported them). A file is
// listed by path, size, media type and SHA-256; its bytes travel once, in its content block.
Poco::JSON::Object::Ptr snapshotToJson(const runs::RunSnapshot& snapshot,
                                       const ReportOptions& options = {});

// {session_id, status (open or ended), reason once ended, limits, opened_at, idle_expires_at,
// expires_at}.
// `packages`: whether to tell the session's packages (open_session does; close_session, which
// the model calls when it knows them, does not).
Poco::JSON::Object::Ptr sessionToJson(const sessions::SessionSnapshot& session, bool packages = true);

// The effective limits: {memory_gb, timeout_seconds, cpus, processes}.
Poco::JSON::Object::Ptr limitsToJson(const policy::Limits& limits);

// The content blocks of a final report's files, in file order: an image block for each raster
// image a client can display, an embedded resource (text or base64 blob, at
// scs://runs/<run_id>/out/<path>) for every other file. Each carries its path in
// _meta["io.scs/path"].
Poco::JSON::Array::Ptr fileBlocks(const runs::RunSnapshot& snapshot);

// RFC 3339 in UTC with milliseconds: "2026-11-30T12:34:56.789Z".
std::string formatTimestamp(std::chrono::system_clock::time_point time);

}  // namespace scs::mcp
