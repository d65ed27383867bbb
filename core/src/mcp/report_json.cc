// A run's snapshot and a session's as JSON: the compact or verbose report (streams, results,
// exception, files listed with their SHA-256), the files' content blocks and the timestamps.

#include "mcp/report_json.h"

#include <Poco/DateTimeFormatter.h>
#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>
#include <Poco/Timestamp.h>
#include <Poco/URI.h>

#include <cmath>
#include <cstdint>

#include "common/utf8.h"
#include "launcher/output.h"
#include "policy/files.h"
#include "policy/language.h"
#include "policy/status_map.h"

namespace scs::mcp {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

double finite(double value) { return std::isfinite(value) ? value : 0; }

double milliRound(double value) { return std::round(finite(value) * 1000) / 1000; }

Var timestampOrNull(const std::optional<std::chrono::system_clock::time_point>& time) {
  return time ? Var(formatTimestamp(*time)) : Var();
}

bool sameLimits(const policy::Limits& a, const policy::Limits& b) {
  return a.memory_gb == b.memory_gb && a.timeout_seconds == b.timeout_seconds && a.cpus == b.cpus &&
         a.processes == b.processes;
}

void setStream(Object& object, const std::string& name, const launcher::CapturedOutput& stream,
               bool running, const ReportOptions& options) {
  // Asked from an offset, an empty text says that nothing is new.
  if (options.verbose || options.with_offsets || !stream.text.empty()) {
    object.set(name, common::toValidUtf8(stream.text));
  }
  // The count tells the agent something while a run runs (the next offset), when the text is
  // only a part, or when it asked for offsets.
  if (options.verbose || running || stream.truncated || options.with_offsets) {
    object.set(name + "_bytes", stream.bytes);
  }
  if (options.with_offsets) {
    object.set(name + "_offset", stream.offset);
  }
  if (options.verbose || stream.truncated) {
    object.set(name + "_truncated", stream.truncated);
  }
}

void setOutput(Object& object, const runs::RunSnapshot& snapshot, const ReportOptions& options) {
  const bool running = snapshot.status == policy::RunStatus::kRunning;
  setStream(object, "stdout", snapshot.stdout_output, running, options);
  setStream(object, "stderr", snapshot.stderr_output, running, options);
}

std::string sha256Hex(const std::string& bytes) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(bytes);
  return Poco::DigestEngine::digestToHex(engine.digest());
}

void setResults(Object& object, const runs::RunSnapshot& snapshot, const ReportOptions& options) {
  const launcher::RunResults& results = snapshot.results;
  if (results.exception) {
    Object::Ptr exception = newObject();
    exception->set("type", common::toValidUtf8(results.exception->type));
    exception->set("message", common::toValidUtf8(results.exception->message));
    // Python prints the traceback to stderr too; a second copy only costs the agent tokens.
    const std::string traceback = common::toValidUtf8(results.exception->traceback);
    const std::string stderr_text = common::toValidUtf8(snapshot.stderr_output.text);
    if (options.verbose || stderr_text.find(traceback) == std::string::npos) {
      exception->set("traceback", traceback);
    }
    object.set("exception", exception);
  }
  if (results.files.empty() && !results.files_truncated) {
    return;
  }
  Array::Ptr files = new Array;
  for (const launcher::OutFile& file : results.files) {
    Object::Ptr entry = newObject();
    entry->set("path", common::toValidUtf8(file.path));
    entry->set("size", static_cast<std::uint64_t>(file.content.size()));
    entry->set("mime_type", launcher::mimeTypeOf(file.path, file.content));
    entry->set("sha256", sha256Hex(file.content));
    files->add(entry);
  }
  object.set("files", files);
  if (options.verbose || results.files_truncated) {
    object.set("files_truncated", results.files_truncated);
  }
  if (results.files_omitted > 0) {
    object.set("files_omitted", results.files_omitted);
  }
}

// A session run's limits are its session's, which open_session reported, and the timeout the
// run asked for: shown only when verbose.
void setLimits(Object& object, const runs::RunSnapshot& snapshot, const ReportOptions& options) {
  const bool told = !snapshot.session_id.empty() ||
                    (options.defaults && sameLimits(snapshot.limits, *options.defaults));
  if (options.verbose || !told) {
    object.set("limits", limitsToJson(snapshot.limits));
  }
}

std::string fileUri(const std::string& run_id, const std::string& path) {
  std::string encoded;
  Poco::URI::encode(path, "?#[]@!$&'()*+,;=%", encoded);
  return "scs://runs/" + run_id + "/out/" + encoded;
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

Poco::JSON::Array::Ptr fileBlocks(const runs::RunSnapshot& snapshot) {
  Array::Ptr blocks = new Array;
  for (const launcher::OutFile& file : snapshot.results.files) {
    const std::string mime = launcher::mimeTypeOf(file.path, file.content);
    const std::string path = common::toValidUtf8(file.path);
    Object::Ptr meta = newObject();
    meta->set("io.scs/path", path);
    Object::Ptr block = newObject();
    if (launcher::isDisplayableImage(mime, file.content)) {
      block->set("type", "image");
      block->set("data", policy::encodeBase64(file.content));
      block->set("mimeType", mime);
    } else {
      Object::Ptr resource = newObject();
      resource->set("uri", fileUri(snapshot.run_id, path));
      resource->set("mimeType", mime);
      const bool text = common::toValidUtf8(file.content) == file.content;
      resource->set(text ? "text" : "blob",
                    text ? file.content : policy::encodeBase64(file.content));
      block->set("type", "resource");
      block->set("resource", resource);
      // Vector images and binary files are for the user's client to show or save; a model
      // reads neither well.
      if (!text || mime == "image/svg+xml") {
        Object::Ptr annotations = newObject();
        Array::Ptr audience = new Array;
        audience->add("user");
        annotations->set("audience", audience);
        block->set("annotations", annotations);
      }
    }
    block->set("_meta", meta);
    blocks->add(block);
  }
  return blocks;
}

namespace {

// What was installed always; whether this call made the layer and how long it took only when it
// did, unless `verbose` (a cached set's few milliseconds tell a model nothing).
// The report's network part (egress, issue 44): each host reached with its bytes, and each
// refusal with its reason, so that a model learns why a host failed without guessing.
Object::Ptr networkToJson(const egress::NetworkReport& network) {
  Object::Ptr object = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  if (!network.reached.empty()) {
    Poco::JSON::Array::Ptr reached = new Poco::JSON::Array;
    for (const egress::NetworkReport::Host& host : network.reached) {
      Object::Ptr entry = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      entry->set("host", host.target);
      entry->set("connections", host.streams);
      entry->set("bytes_sent", host.bytes_up);
      entry->set("bytes_received", host.bytes_down);
      if (host.credential_requests > 0) {  // brokered (issue 48): that it happened, never what
        entry->set("credential", "added by the server to " +
                                     std::to_string(host.credential_requests) +
                                     (host.credential_requests == 1 ? " request" : " requests") +
                                     "; TLS to this host ends at the server, whose CA the "
                                     "sandbox trusts");
      }
      reached->add(entry);
    }
    object->set("reached", reached);
  }
  if (!network.refused.empty()) {
    Poco::JSON::Array::Ptr refused = new Poco::JSON::Array;
    for (const egress::NetworkReport::Refusal& refusal : network.refused) {
      Object::Ptr entry = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      if (!refusal.target.empty()) {
        entry->set("host", refusal.target);
      }
      entry->set("reason", refusal.reason);
      if (refusal.count > 1) {
        entry->set("times", refusal.count);
      }
      refused->add(entry);
    }
    object->set("refused", refused);
  }
  // Past the report's caps (NetworkReport::kMaxEntries): counted, not listed.
  if (network.more_reached > 0) {
    object->set("more_connections", network.more_reached);
  }
  if (network.more_refused > 0) {
    object->set("more_refusals", network.more_refused);
  }
  return object;
}

Object::Ptr packagesToJson(const runs::PackageLayerUse& packages, bool verbose) {
  Object::Ptr object = newObject();
  Poco::JSON::Array::Ptr installed = new Poco::JSON::Array();
  for (const std::string& name : packages.installed) {
    installed->add(name);
  }
  object->set("installed", installed);
  if (packages.built || verbose) {
    object->set("built", packages.built);
    object->set("prepare_seconds", milliRound(packages.prepare_seconds));
  }
  return object;
}

}  // namespace

Poco::JSON::Object::Ptr snapshotToJson(const runs::RunSnapshot& snapshot,
                                       const ReportOptions& options) {
  Object::Ptr object = newObject();
  object->set("run_id", common::toValidUtf8(snapshot.run_id));
  object->set("status", std::string(policy::statusName(snapshot.status)));
  if (!snapshot.session_id.empty()) {
    object->set("session_id", snapshot.session_id);
    object->set("session_alive", snapshot.session_alive);
  }
  if (!policy::isFinal(snapshot.status)) {
    if (snapshot.queue_position) {
      object->set("queue_position", static_cast<std::uint64_t>(*snapshot.queue_position));
    }
    setLimits(*object, snapshot, options);
    if (snapshot.status == policy::RunStatus::kRunning) {
      setOutput(*object, snapshot, options);
    }
    return object;
  }
  object->set("exit_code", snapshot.exit_code ? Var(*snapshot.exit_code) : Var());
  if (snapshot.signal) {
    object->set("signal", common::toValidUtf8(*snapshot.signal));
  }
  object->set("reason", common::toValidUtf8(snapshot.reason));
  setOutput(*object, snapshot, options);
  object->set("duration_seconds", milliRound(snapshot.duration_seconds));
  if (options.verbose || milliRound(snapshot.queued_seconds) > 0) {
    object->set("queued_seconds", milliRound(snapshot.queued_seconds));
  }
  if (snapshot.woke_seconds) {
    object->set("session_woke_seconds", milliRound(*snapshot.woke_seconds));
  }
  setLimits(*object, snapshot, options);
  if (options.verbose) {
    object->set("started_at", timestampOrNull(snapshot.started_at));
    object->set("finished_at", timestampOrNull(snapshot.finished_at));
  }
  if (snapshot.peak_memory_bytes) {
    object->set("peak_memory_bytes", *snapshot.peak_memory_bytes);
  }
  if (snapshot.cpu_seconds) {
    object->set("cpu_seconds", milliRound(*snapshot.cpu_seconds));
  }
  setResults(*object, snapshot, options);
  if (snapshot.results.result) {
    object->set("result", *snapshot.results.result);
  }
  if (!snapshot.network.empty()) {
    object->set("network", networkToJson(snapshot.network));
  }
  // Told once: in a run's final report, and for a session when it opens.
  if (snapshot.packages && (snapshot.session_id.empty() || options.verbose)) {
    object->set("packages", packagesToJson(*snapshot.packages, options.verbose));
  }
  return object;
}

Poco::JSON::Object::Ptr sessionToJson(const sessions::SessionSnapshot& session, bool packages) {
  Object::Ptr object = newObject();
  object->set("session_id", session.session_id);
  object->set("language", std::string(policy::nameOf(session.language)));
  object->set("status", session.open ? "open" : "ended");
  if (!session.open) {
    object->set("reason", common::toValidUtf8(session.end_reason));
  }
  object->set("limits", limitsToJson(session.limits));
  object->set("opened_at", formatTimestamp(session.opened_at));
  if (session.hibernated) {
    object->set("hibernated", true);
  }
  if (session.hibernates_at) {
    object->set("hibernates_at", formatTimestamp(*session.hibernates_at));
  }
  object->set("idle_expires_at", formatTimestamp(session.idle_expires_at));
  object->set("expires_at", formatTimestamp(session.expires_at));
  if (packages && session.packages) {
    object->set("packages", packagesToJson(*session.packages, true));
  }
  return object;
}

std::string formatTimestamp(std::chrono::system_clock::time_point time) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  // The same layout as the log lines (logging.cc).
  return Poco::DateTimeFormatter::format(Poco::Timestamp(micros), "%Y-%m-%dT%H:%M:%S.%iZ");
}

}  // namespace scs::mcp
