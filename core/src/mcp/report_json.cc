#include "mcp/report_json.h"

#include <Poco/DateTimeFormatter.h>
#include <Poco/Timestamp.h>

#include <cmath>
#include <cstdint>

#include "policy/files.h"
#include "policy/status_map.h"
#include "runs/output.h"

namespace scs::mcp {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

Object::Ptr newObject() { return new Object(Poco::JSON_PRESERVE_KEY_ORDER); }

double finite(double value) { return std::isfinite(value) ? value : 0; }

double milliRound(double value) { return std::round(finite(value) * 1000) / 1000; }

Var timestampOrNull(const std::optional<std::chrono::system_clock::time_point>& time) {
  return time ? Var(formatTimestamp(*time)) : Var();
}

void setOutput(Object& object, const runs::RunSnapshot& snapshot, bool with_offsets) {
  object.set("stdout", runs::toValidUtf8(snapshot.stdout_output.text));
  object.set("stderr", runs::toValidUtf8(snapshot.stderr_output.text));
  object.set("stdout_bytes", snapshot.stdout_output.bytes);
  object.set("stderr_bytes", snapshot.stderr_output.bytes);
  object.set("stdout_truncated", snapshot.stdout_output.truncated);
  object.set("stderr_truncated", snapshot.stderr_output.truncated);
  if (with_offsets) {
    object.set("stdout_offset", snapshot.stdout_output.offset);
    object.set("stderr_offset", snapshot.stderr_output.offset);
  }
}

void setResults(Object& object, const runs::RunResults& results) {
  if (results.exception) {
    Object::Ptr exception = newObject();
    exception->set("type", runs::toValidUtf8(results.exception->type));
    exception->set("message", runs::toValidUtf8(results.exception->message));
    exception->set("traceback", runs::toValidUtf8(results.exception->traceback));
    object.set("exception", exception);
  }
  if (results.files.empty() && !results.files_truncated) {
    return;
  }
  Array::Ptr files = new Array;
  for (const runs::OutFile& file : results.files) {
    Object::Ptr entry = newObject();
    entry->set("path", runs::toValidUtf8(file.path));
    entry->set("size", static_cast<std::uint64_t>(file.content.size()));
    const bool text = runs::toValidUtf8(file.content) == file.content;
    entry->set("encoding", text ? "utf-8" : "base64");
    entry->set("content", text ? file.content : policy::encodeBase64(file.content));
    entry->set("mime_type", runs::mimeTypeOf(file.path, file.content));
    files->add(entry);
  }
  object.set("files", files);
  object.set("files_truncated", results.files_truncated);
  if (results.files_omitted > 0) {
    object.set("files_omitted", results.files_omitted);
  }
}

}  // namespace

Poco::JSON::Object::Ptr limitsToJson(const policy::Limits& limits) {
  Object::Ptr object = newObject();
  object->set("memory_gb", finite(limits.memory_gb));
  object->set("timeout_seconds", finite(limits.timeout_seconds));
  object->set("cpus", finite(limits.cpus));
  object->set("processes", limits.processes);
  return object;
}

Poco::JSON::Array::Ptr imageBlocks(const runs::RunSnapshot& snapshot) {
  Array::Ptr blocks = new Array;
  for (const runs::OutFile& file : snapshot.results.files) {
    const std::string mime = runs::mimeTypeOf(file.path, file.content);
    if (!runs::isDisplayableImage(mime, file.content)) {
      continue;
    }
    Object::Ptr block = newObject();
    block->set("type", "image");
    block->set("data", policy::encodeBase64(file.content));
    block->set("mimeType", mime);
    blocks->add(block);
  }
  return blocks;
}

Poco::JSON::Object::Ptr snapshotToJson(const runs::RunSnapshot& snapshot, bool with_offsets) {
  Object::Ptr object = newObject();
  object->set("run_id", runs::toValidUtf8(snapshot.run_id));
  object->set("status", std::string(policy::statusName(snapshot.status)));
  if (!snapshot.session_id.empty()) {
    object->set("session_id", snapshot.session_id);
    object->set("session_alive", snapshot.session_alive);
  }
  if (!policy::isFinal(snapshot.status)) {
    if (snapshot.queue_position) {
      object->set("queue_position", static_cast<std::uint64_t>(*snapshot.queue_position));
    }
    object->set("limits", limitsToJson(snapshot.limits));
    if (snapshot.status == policy::RunStatus::kRunning) {
      setOutput(*object, snapshot, with_offsets);
    }
    return object;
  }
  object->set("exit_code", snapshot.exit_code ? Var(*snapshot.exit_code) : Var());
  if (snapshot.signal) {
    object->set("signal", runs::toValidUtf8(*snapshot.signal));
  }
  object->set("reason", runs::toValidUtf8(snapshot.reason));
  setOutput(*object, snapshot, with_offsets);
  object->set("duration_seconds", milliRound(snapshot.duration_seconds));
  object->set("queued_seconds", milliRound(snapshot.queued_seconds));
  object->set("limits", limitsToJson(snapshot.limits));
  object->set("started_at", timestampOrNull(snapshot.started_at));
  object->set("finished_at", timestampOrNull(snapshot.finished_at));
  if (snapshot.peak_memory_bytes) {
    object->set("peak_memory_bytes", *snapshot.peak_memory_bytes);
  }
  if (snapshot.cpu_seconds) {
    object->set("cpu_seconds", milliRound(*snapshot.cpu_seconds));
  }
  setResults(*object, snapshot.results);
  if (snapshot.results.result) {
    object->set("result", *snapshot.results.result);
  }
  return object;
}

Poco::JSON::Object::Ptr sessionToJson(const runs::SessionSnapshot& session) {
  Object::Ptr object = newObject();
  object->set("session_id", session.session_id);
  object->set("status", session.open ? "open" : "ended");
  if (!session.open) {
    object->set("reason", runs::toValidUtf8(session.end_reason));
  }
  object->set("limits", limitsToJson(session.limits));
  object->set("opened_at", formatTimestamp(session.opened_at));
  object->set("idle_expires_at", formatTimestamp(session.idle_expires_at));
  object->set("expires_at", formatTimestamp(session.expires_at));
  return object;
}

std::string formatTimestamp(std::chrono::system_clock::time_point time) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  // The same layout as the log lines (logging.cc).
  return Poco::DateTimeFormatter::format(Poco::Timestamp(micros), "%Y-%m-%dT%H:%M:%S.%iZ");
}

}  // namespace scs::mcp
