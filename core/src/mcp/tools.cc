#include "mcp/tools.h"

#include <Poco/DateTimeFormatter.h>
#include <Poco/Dynamic/Var.h>
#include <Poco/Timestamp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <sstream>
#include <string_view>
#include <variant>
#include <vector>

#include "policy/status_map.h"
#include "runs/output.h"
#include "runs/side_channel.h"

namespace scs::mcp {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

// Client text quoted back in a message is cut to this many bytes.
constexpr std::size_t kMaxQuotedBytes = 200;

constexpr policy::RunStatus kAllStatuses[] = {
    policy::RunStatus::kQueued,  policy::RunStatus::kRunning,      policy::RunStatus::kSucceeded,
    policy::RunStatus::kFailed,  policy::RunStatus::kTimedOut,     policy::RunStatus::kOutOfMemory,
    policy::RunStatus::kStopped, policy::RunStatus::kSandboxError,
};

Object::Ptr newObject() { return new Object(Poco::JSON_PRESERVE_KEY_ORDER); }

std::string compact(const Object::Ptr& object) {
  std::ostringstream out;
  object->stringify(out);
  return out.str();
}

std::string quoted(std::string_view text) {
  std::string cut = runs::toValidUtf8(text.substr(0, kMaxQuotedBytes));
  if (text.size() > kMaxQuotedBytes) {
    cut += "...";
  }
  return "\"" + cut + "\"";
}

double finite(double value) { return std::isfinite(value) ? value : 0; }

double milliRound(double value) { return std::round(finite(value) * 1000) / 1000; }

std::string formatBytes(std::size_t bytes) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  constexpr std::size_t kKiB = std::size_t{1} << 10;
  if (bytes >= kMiB && bytes % kMiB == 0) {
    return std::to_string(bytes / kMiB) + " MiB";
  }
  if (bytes >= kKiB && bytes % kKiB == 0) {
    return std::to_string(bytes / kKiB) + " KiB";
  }
  return std::to_string(bytes) + " bytes";
}

std::string formatDuration(std::chrono::seconds duration) {
  const auto count = duration.count();
  auto unit = [](long long n, const char* singular) {
    return std::to_string(n) + " " + singular + (n == 1 ? "" : "s");
  };
  if (count >= 3600 && count % 3600 == 0) {
    return unit(count / 3600, "hour");
  }
  if (count >= 60 && count % 60 == 0) {
    return unit(count / 60, "minute");
  }
  return unit(count, "second");
}

Object::Ptr toolError(const std::string& message) {
  Object::Ptr text = newObject();
  text->set("type", "text");
  text->set("text", runs::toValidUtf8(message));
  Array::Ptr content = new Array;
  content->add(text);
  Object::Ptr result = newObject();
  result->set("content", content);
  result->set("isError", true);
  return result;
}

// One image content block per returned file a client can display, after the text block.
Array::Ptr imageBlocks(const runs::RunSnapshot& snapshot) {
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

Object::Ptr toolSuccess(const Object::Ptr& structured, const Array::Ptr& images = nullptr) {
  Object::Ptr text = newObject();
  text->set("type", "text");
  text->set("text", compact(structured));
  Array::Ptr content = new Array;
  content->add(text);
  if (images) {
    for (const Var& image : *images) {
      content->add(image);
    }
  }
  Object::Ptr result = newObject();
  result->set("content", content);
  result->set("structuredContent", structured);
  result->set("isError", false);
  return result;
}

std::string unknownRunMessage(const std::string& run_id) {
  return "Unknown or expired run_id " + quoted(run_id) +
         ". Reports are kept for a limited time after a run ends; start a new run.";
}

// Empty when every key of `arguments` is allowed; otherwise a message naming the others.
std::string checkArgumentNames(const Object& arguments, std::string_view tool,
                               std::initializer_list<std::string_view> allowed) {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : arguments) {
    bool known = false;
    for (std::string_view name : allowed) {
      known = known || key == name;
    }
    if (!known) {
      unknown.push_back(quoted(key));
    }
  }
  if (unknown.empty()) {
    return {};
  }
  std::string message = unknown.size() == 1 ? "Unknown argument " : "Unknown arguments ";
  for (std::size_t i = 0; i < unknown.size(); ++i) {
    message += (i == 0 ? "" : ", ") + unknown[i];
  }
  message += " for " + std::string(tool) + ". Allowed arguments: ";
  bool first = true;
  for (std::string_view name : allowed) {
    message += (first ? "" : ", ") + std::string(name);
    first = false;
  }
  return message + ".";
}

Var argument(const Object& arguments, const std::string& key) {
  return arguments.has(key) ? arguments.get(key) : Var();
}

// Empty when `run_id` is usable; otherwise a message saying what is wrong with it.
std::string checkRunId(const Var& run_id) {
  if (run_id.isEmpty()) {
    return "Missing required argument \"run_id\": pass the run_id that start_run returned.";
  }
  if (!run_id.isString()) {
    return "\"run_id\" must be a string: pass the run_id that start_run returned.";
  }
  return {};
}

Object::Ptr limitsToJson(const policy::Limits& limits) {
  Object::Ptr object = newObject();
  object->set("memory_gb", finite(limits.memory_gb));
  object->set("timeout_seconds", finite(limits.timeout_seconds));
  object->set("cpus", finite(limits.cpus));
  object->set("processes", limits.processes);
  return object;
}

Var timestampOrNull(const std::optional<std::chrono::system_clock::time_point>& time) {
  return time ? Var(formatTimestamp(*time)) : Var();
}

Object::Ptr typed(const char* type, const std::string& description = {}) {
  Object::Ptr schema = newObject();
  schema->set("type", type);
  if (!description.empty()) {
    schema->set("description", description);
  }
  return schema;
}

Object::Ptr nullable(const char* type, const std::string& description) {
  Array::Ptr types = new Array;
  types->add(std::string(type));
  types->add(std::string("null"));
  Object::Ptr schema = newObject();
  schema->set("type", types);
  schema->set("description", description);
  return schema;
}

Array::Ptr names(std::initializer_list<const char*> list) {
  Array::Ptr array = new Array;
  for (const char* name : list) {
    array->add(std::string(name));
  }
  return array;
}

Object::Ptr objectSchema(const Object::Ptr& properties, std::initializer_list<const char*> required,
                         bool closed) {
  Object::Ptr schema = newObject();
  schema->set("type", "object");
  schema->set("properties", properties);
  if (required.size() > 0) {
    schema->set("required", names(required));
  }
  if (closed) {
    schema->set("additionalProperties", false);
  }
  return schema;
}

Object::Ptr limitSchema(const char* type, double default_value, double maximum,
                        const std::string& description) {
  Object::Ptr schema = typed(type, description);
  schema->set("exclusiveMinimum", 0);
  schema->set("maximum", maximum);
  schema->set("default", default_value);
  return schema;
}

// The one output schema of all three tools: each returns a run as snapshotToJson() shapes it.
Object::Ptr runSchema() {
  Array::Ptr statuses = new Array;
  for (policy::RunStatus status : kAllStatuses) {
    statuses->add(std::string(policy::statusName(status)));
  }
  Object::Ptr status = typed("string",
                             "queued or running: not finished, call get_result again. Final: "
                             "succeeded, failed, timed_out, out_of_memory, stopped, "
                             "sandbox_error.");
  status->set("enum", statuses);

  Object::Ptr limit_properties = newObject();
  limit_properties->set("memory_gb", typed("number"));
  limit_properties->set("timeout_seconds", typed("number"));
  limit_properties->set("cpus", typed("number"));
  limit_properties->set("processes", typed("integer"));
  Object::Ptr limits =
      objectSchema(limit_properties, {"memory_gb", "timeout_seconds", "cpus", "processes"}, false);
  limits->set("description", "The effective limits of the run, defaults filled in.");

  Object::Ptr queue_position = typed("integer", "1-based place in the queue, while queued.");
  queue_position->set("minimum", 1);
  Object::Ptr stdout_bytes = typed("integer", "Bytes the run wrote to stdout in total.");
  stdout_bytes->set("minimum", 0);
  Object::Ptr stderr_bytes = typed("integer", "Bytes the run wrote to stderr in total.");
  stderr_bytes->set("minimum", 0);

  Object::Ptr properties = newObject();
  properties->set("run_id", typed("string", "The run's identifier."));
  properties->set("status", status);
  properties->set("queue_position", queue_position);
  properties->set("exit_code",
                  nullable("integer", "Exit code of main.py; null when it never exited."));
  properties->set("signal", typed("string", "Signal that killed the program, e.g. SIGSEGV."));
  properties->set("reason", typed("string", "One sentence on why the run ended this way."));
  properties->set("stdout", typed("string",
                                  "Captured stdout (head and tail when truncated); while running, "
                                  "the output so far. Starts at stdout_offset when given."));
  properties->set("stderr", typed("string",
                                  "Captured stderr (head and tail when truncated); while running, "
                                  "the output so far. Starts at stderr_offset when given."));
  properties->set("stdout_bytes", stdout_bytes);
  properties->set("stderr_bytes", stderr_bytes);
  Object::Ptr stdout_offset = typed("integer",
                                    "Byte offset in stdout where the `stdout` text starts; present "
                                    "when get_result was called with an offset.");
  stdout_offset->set("minimum", 0);
  Object::Ptr stderr_offset = typed("integer",
                                    "Byte offset in stderr where the `stderr` text starts; present "
                                    "when get_result was called with an offset.");
  stderr_offset->set("minimum", 0);
  properties->set("stdout_offset", stdout_offset);
  properties->set("stderr_offset", stderr_offset);
  properties->set("stdout_truncated",
                  typed("boolean", "True when the middle of stdout was dropped."));
  properties->set("stderr_truncated",
                  typed("boolean", "True when the middle of stderr was dropped."));
  properties->set("duration_seconds", typed("number", "Execution time."));
  properties->set("queued_seconds", typed("number", "Time spent waiting in the queue."));
  properties->set("limits", limits);
  properties->set("started_at",
                  nullable("string", "RFC 3339 UTC time execution started; null if never."));
  properties->set("finished_at", nullable("string", "RFC 3339 UTC time the run ended."));
  properties->set("peak_memory_bytes",
                  typed("integer", "Peak memory use, where the sandbox can measure it."));
  properties->set("cpu_seconds", typed("number", "CPU time used, where it can be measured."));

  Object::Ptr exception_properties = newObject();
  exception_properties->set("type", typed("string", "Exception class, e.g. ValueError."));
  exception_properties->set("message", typed("string", "str() of the exception."));
  exception_properties->set("traceback",
                            typed("string", "The formatted traceback (its end when long)."));
  Object::Ptr exception =
      objectSchema(exception_properties, {"type", "message", "traceback"}, false);
  exception->set("description", "Present when the program died of an uncaught Python exception.");
  properties->set("exception", exception);

  Object::Ptr file_properties = newObject();
  file_properties->set("path", typed("string", "Path relative to /workspace/out."));
  Object::Ptr file_size = typed("integer", "Size in bytes.");
  file_size->set("minimum", 0);
  file_properties->set("size", file_size);
  Object::Ptr file_encoding =
      typed("string", "utf-8: `content` is the text; base64: `content` is the bytes in base64.");
  file_encoding->set("enum", names({"utf-8", "base64"}));
  file_properties->set("encoding", file_encoding);
  file_properties->set("content", typed("string", "The file's content, as `encoding` says."));
  file_properties->set("mime_type", typed("string", "e.g. image/png, text/csv."));
  Object::Ptr files = newObject();
  files->set("type", "array");
  files->set("description",
             "Files the run wrote under /workspace/out (final reports only). PNG, JPEG, GIF and "
             "SVG images also come as image content blocks.");
  files->set("items", objectSchema(file_properties,
                                   {"path", "size", "encoding", "content", "mime_type"}, false));
  properties->set("files", files);
  properties->set(
      "files_truncated",
      typed("boolean", "True when some files of /workspace/out were left out by a cap."));
  Object::Ptr files_omitted = typed("integer", "How many files were left out by a cap.");
  files_omitted->set("minimum", 0);
  properties->set("files_omitted", files_omitted);
  return objectSchema(properties, {"run_id", "status"}, false);
}

Object::Ptr annotations(bool read_only, bool destructive, bool idempotent) {
  Object::Ptr object = newObject();
  object->set("readOnlyHint", read_only);
  if (!read_only) {
    object->set("destructiveHint", destructive);
  }
  object->set("idempotentHint", idempotent);
  object->set("openWorldHint", false);
  return object;
}

Object::Ptr tool(const char* name, const char* title, const std::string& description,
                 const Object::Ptr& input_schema, const Object::Ptr& tool_annotations) {
  Object::Ptr object = newObject();
  object->set("name", name);
  object->set("title", title);
  object->set("description", description);
  object->set("inputSchema", input_schema);
  object->set("outputSchema", runSchema());
  object->set("annotations", tool_annotations);
  return object;
}

}  // namespace

Tools::Tools(runs::RunManager& runs, const policy::LimitPolicy& limits,
             const policy::FileSettings& files, std::chrono::seconds retention)
    : runs_(runs), limits_(limits), files_(files), retention_(retention) {}

Poco::JSON::Array::Ptr Tools::definitions() const {
  using policy::formatNumber;
  const policy::Limits& defaults = limits_.defaults();
  const policy::Limits& maxima = limits_.maxima();
  const std::string kept = formatDuration(retention_);

  const std::string limits_text =
      "Limits (optional argument `limits`): memory_gb default " + formatNumber(defaults.memory_gb) +
      ", max " + formatNumber(maxima.memory_gb) + "; timeout_seconds default " +
      formatNumber(defaults.timeout_seconds) + ", max " + formatNumber(maxima.timeout_seconds) +
      " (wall clock, counted from when the run starts executing); cpus default " +
      formatNumber(defaults.cpus) + ", max " + formatNumber(maxima.cpus) +
      ". The process count is fixed at " + std::to_string(defaults.processes) +
      " and cannot be requested. A value above its max is rejected, not lowered: ask for at "
      "most the max.";

  const std::string start_description =
      "Run Python 3 code in a locked-down, throwaway sandbox. Returns at once with a run_id "
      "while the code runs in the background.\n"
      "Workflow: start_run -> get_result with the run_id and wait_seconds (repeat while the "
      "status is queued or running) -> read the report. Call stop_run to cancel a run you no "
      "longer need.\n"
      "Environment: `code` is saved as /workspace/main.py and run as `python3 -I main.py` in "
      "/workspace. Besides the Python 3 standard library, the default image includes numpy, "
      "pandas, scipy, matplotlib (headless Agg backend), sympy, scikit-learn, statsmodels, "
      "seaborn, Pillow, networkx, beautifulsoup4, lxml, openpyxl, PyYAML, tabulate, "
      "python-dateutil, pytz and jinja2; an operator may choose a minimal image with the "
      "standard library only (an ImportError then tells you). There is no network access and no "
      "pip or package installs.\n"
      "Input: optional `files` ([{path, content, encoding}], encoding \"utf-8\" (default) or "
      "\"base64\" for binary data) are written into /workspace next to main.py; paths are "
      "relative, without \"..\"; main.py and .scs/ are reserved. At most " +
      std::to_string(files_.max_files) + " files and " + formatBytes(files_.max_total_bytes) +
      " in total including the code. `python3 -I` leaves /workspace off sys.path: to import a "
      "module you sent in `files`, first run `import sys; sys.path.insert(0, \"/workspace\")`. "
      "Optional `stdin` (a string, at most " +
      formatBytes(files_.max_stdin_bytes) +
      ") is what the program reads from standard input; without it stdin is empty.\n"
      "Output: what the program prints comes back as stdout and stderr. Files it writes under "
      "/workspace/out (the directory exists) come back in the final report's `files`: text "
      "inline, binary as base64; count and size are capped by the operator (files_truncated "
      "says when some were left out). PNG, JPEG, GIF and SVG images there are also returned as "
      "images you can see, so save a chart with e.g. "
      "plt.savefig(\"/workspace/out/plot.png\"). An uncaught exception is reported as "
      "`exception` {type, message, traceback}. Only /workspace and /tmp are writable; nothing "
      "survives the run.\n" +
      limits_text +
      "\nRuns beyond the concurrency cap wait in a queue (status queued, with queue_position). "
      "Returns {run_id, status, limits, queue_position when queued}.";

  const std::string get_description =
      "Get the state or the final report of a run started with start_run. With wait_seconds "
      "(0 to " +
      formatNumber(kMaxWaitSeconds) +
      ", default 0) the call waits and returns as soon as the run ends or the wait is over; "
      "while the status is queued or running, call again. Many clients give up on a call "
      "after 60 s, so a wait of 30 or less is safest.\n"
      "Final statuses and what to do: succeeded (exit code 0): use stdout. failed (non-zero "
      "exit, or killed by a crash signal such as SIGSEGV): read stderr and fix the code. "
      "timed_out (hit timeout_seconds): make it faster or start it again with a larger "
      "timeout_seconds, up to " +
      formatNumber(maxima.timeout_seconds) +
      ". out_of_memory (hit memory_gb): use less memory or start it again with a larger "
      "memory_gb, up to " +
      formatNumber(maxima.memory_gb) +
      ". stopped: stop_run ended it. sandbox_error: the sandbox itself failed, not your code; "
      "it needs a human, so do not retry in a loop.\n"
      "The report has exit_code (null when there is none), signal, reason, stdout, stderr, "
      "their total byte counts, duration_seconds, queued_seconds, limits, started_at, "
      "finished_at, and peak_memory_bytes and cpu_seconds where the sandbox measures them. "
      "When the program died of an uncaught Python exception, `exception` has its type, "
      "message and traceback. `files` lists what the program wrote under /workspace/out "
      "({path, size, encoding, content, mime_type}; encoding utf-8 for text, base64 for "
      "binary); images among them also come as image content. stdout and stderr are capped: "
      "when *_truncated is true the head and the tail are kept and the middle is dropped.\n"
      "Live output: while the status is running, the answer also has stdout, stderr and their "
      "byte counts so far (print() is line-buffered, so each printed line shows up at once). "
      "To get only what is new, pass stdout_offset and stderr_offset set "
      "to the stdout_bytes and stderr_bytes of the previous answer; the text then starts at "
      "that byte, and the answer's stdout_offset and stderr_offset say where it really starts "
      "(later, when that part was dropped from the middle). Reports are kept for " +
      kept + " after a run ends.";

  const std::string stop_description =
      "Stop a queued or running run: kills its processes, removes its sandbox and returns the "
      "final report (status stopped, with the output so far). Stopping a run that already "
      "ended changes nothing and returns its report, so repeating the call is safe. Reports "
      "are kept for " +
      kept + " after a run ends.";

  Object::Ptr file_properties = newObject();
  Object::Ptr path = typed("string",
                           "Relative path under /workspace, e.g. \"data/input.csv\". No \"..\", "
                           "no leading \"/\", no backslash; main.py is reserved.");
  path->set("minLength", 1);
  path->set("maxLength", static_cast<std::uint64_t>(files_.max_path_bytes));
  file_properties->set("path", path);
  file_properties->set("content",
                       typed("string", "The file's content, encoded as `encoding` says."));
  Object::Ptr encoding = typed("string", "utf-8 (default) for text, base64 for binary data.");
  encoding->set("enum", names({"utf-8", "base64"}));
  encoding->set("default", "utf-8");
  file_properties->set("encoding", encoding);
  Object::Ptr files = newObject();
  files->set("type", "array");
  files->set("description", "Extra files written into /workspace next to main.py.");
  files->set("maxItems", static_cast<std::uint64_t>(files_.max_files));
  files->set("items", objectSchema(file_properties, {"path", "content"}, true));

  Object::Ptr limit_properties = newObject();
  limit_properties->set("memory_gb", limitSchema("number", defaults.memory_gb, maxima.memory_gb,
                                                 "Memory cap in GB (GiB), swap included."));
  limit_properties->set("timeout_seconds",
                        limitSchema("number", defaults.timeout_seconds, maxima.timeout_seconds,
                                    "Wall-clock limit in seconds, from the start of execution."));
  limit_properties->set(
      "cpus", limitSchema("number", defaults.cpus, maxima.cpus, "CPU cores the run may use."));
  Object::Ptr limits = objectSchema(limit_properties, {}, true);
  limits->set("description", "Resource limits; omitted ones take their defaults.");

  Object::Ptr stdin_schema =
      typed("string", "Text the program reads from standard input; without it stdin is empty.");
  stdin_schema->set("maxLength", static_cast<std::uint64_t>(files_.max_stdin_bytes));

  Object::Ptr start_properties = newObject();
  start_properties->set("code", typed("string", "Python 3 source, run as main.py."));
  start_properties->set("files", files);
  start_properties->set("limits", limits);
  start_properties->set("stdin", stdin_schema);

  Object::Ptr run_id = typed("string", "The run_id start_run returned.");
  run_id->set("minLength", 1);
  Object::Ptr wait = typed("number",
                           "Seconds to wait for the run to end before answering (0 answers at "
                           "once).");
  wait->set("minimum", 0);
  wait->set("maximum", kMaxWaitSeconds);
  wait->set("default", 0);
  Object::Ptr get_properties = newObject();
  get_properties->set("run_id", run_id);
  get_properties->set("wait_seconds", wait);
  for (const char* stream : {"stdout", "stderr"}) {
    Object::Ptr offset = typed("integer", "Return " + std::string(stream) +
                                              " from this byte on: pass the previous answer's " +
                                              stream + "_bytes to get only what is new.");
    offset->set("minimum", 0);
    offset->set("default", 0);
    get_properties->set(std::string(stream) + "_offset", offset);
  }

  Object::Ptr stop_properties = newObject();
  stop_properties->set("run_id", run_id);

  Array::Ptr tools = new Array;
  tools->add(tool(kStartRun, "Start a sandboxed Python run", start_description,
                  objectSchema(start_properties, {"code"}, true),
                  annotations(false, false, false)));
  tools->add(tool(kGetResult, "Get a run's status or report", get_description,
                  objectSchema(get_properties, {"run_id"}, true), annotations(true, false, true)));
  tools->add(tool(kStopRun, "Stop a run", stop_description,
                  objectSchema(stop_properties, {"run_id"}, true), annotations(false, true, true)));
  return tools;
}

bool Tools::has(const std::string& name) const {
  return name == kStartRun || name == kGetResult || name == kStopRun;
}

Poco::JSON::Object::Ptr Tools::call(const std::string& name,
                                    const Poco::JSON::Object::Ptr& arguments,
                                    const CallContext& context) const {
  const Object empty;
  const Object& args = arguments ? *arguments : empty;
  if (name == kStartRun) {
    return startRun(args, context);
  }
  if (name == kGetResult) {
    return getResult(args, context);
  }
  return stopRun(args, context);
}

Poco::JSON::Object::Ptr Tools::startRun(const Object& arguments, const CallContext& context) const {
  if (std::string message =
          checkArgumentNames(arguments, kStartRun, {"code", "files", "limits", "stdin"});
      !message.empty()) {
    return toolError(message);
  }
  const Var code = argument(arguments, "code");
  if (code.isEmpty()) {
    return toolError(
        "Missing required argument \"code\": pass the Python source to run as main.py.");
  }
  if (!code.isString()) {
    return toolError("\"code\" must be a string holding the Python source to run as main.py.");
  }

  auto limits = limits_.resolve(argument(arguments, "limits"));
  if (auto* rejection = std::get_if<policy::LimitRejection>(&limits)) {
    return toolError(rejection->message);
  }
  auto files = policy::resolveFiles(code.toString(), argument(arguments, "files"), files_);
  if (auto* rejection = std::get_if<policy::FilesRejection>(&files)) {
    return toolError(rejection->message);
  }
  std::optional<std::string> stdin_data;
  if (const Var stdin_text = argument(arguments, "stdin"); !stdin_text.isEmpty()) {
    if (!stdin_text.isString()) {
      return toolError("\"stdin\" must be a string: the text the program reads from stdin.");
    }
    stdin_data = stdin_text.toString();
    if (stdin_data->size() > files_.max_stdin_bytes) {
      return toolError("\"stdin\" is too large: " + std::to_string(stdin_data->size()) +
                       " bytes, max is " + std::to_string(files_.max_stdin_bytes) +
                       " bytes. Send large input as a file in `files` instead.");
    }
  }

  runs::StartRequest request;
  request.files = std::move(std::get<std::vector<policy::File>>(files));
  request.limits = std::get<policy::Limits>(limits);
  request.tenant = context.tenant;
  request.stdin_data = std::move(stdin_data);
  auto started = runs_.start(std::move(request));
  if (auto* refusal = std::get_if<runs::StartRefusal>(&started)) {
    return toolError(refusal->message);
  }
  return toolSuccess(snapshotToJson(std::get<runs::RunSnapshot>(started)));
}

Poco::JSON::Object::Ptr Tools::getResult(const Object& arguments,
                                         const CallContext& context) const {
  if (std::string message = checkArgumentNames(
          arguments, kGetResult, {"run_id", "wait_seconds", "stdout_offset", "stderr_offset"});
      !message.empty()) {
    return toolError(message);
  }
  const Var run_id = argument(arguments, "run_id");
  if (std::string message = checkRunId(run_id); !message.empty()) {
    return toolError(message);
  }

  std::chrono::milliseconds wait{0};
  const Var wait_seconds = argument(arguments, "wait_seconds");
  if (!wait_seconds.isEmpty()) {
    const double seconds = wait_seconds.isNumeric() && !wait_seconds.isBoolean()
                               ? wait_seconds.convert<double>()
                               : std::nan("");
    if (!(seconds >= 0 && seconds <= kMaxWaitSeconds)) {
      return toolError("\"wait_seconds\" must be a number from 0 to " +
                       policy::formatNumber(kMaxWaitSeconds) +
                       ". Call get_result again if the run is still going.");
    }
    wait = std::chrono::milliseconds(std::llround(seconds * 1000));
  }

  runs::OutputOffsets from;
  bool with_offsets = false;
  for (const auto& [key, target] : {std::pair{"stdout_offset", &from.stdout_from},
                                    std::pair{"stderr_offset", &from.stderr_from}}) {
    const Var offset = argument(arguments, key);
    if (offset.isEmpty()) {
      continue;
    }
    const double value =
        offset.isNumeric() && !offset.isBoolean() ? offset.convert<double>() : std::nan("");
    if (!(value >= 0 && value <= 9.0e15 && value == std::floor(value))) {
      return toolError("\"" + std::string(key) +
                       "\" must be a whole number of bytes, 0 or more: pass the previous "
                       "report's " +
                       std::string(key).substr(0, 6) + "_bytes to get only what is new.");
    }
    *target = static_cast<std::uint64_t>(value);
    with_offsets = true;
  }

  const std::string id = run_id.toString();
  // Without on_wait the whole wait is one slice.
  const std::chrono::milliseconds slice =
      context.on_wait ? std::max(context.progress_interval, std::chrono::milliseconds(1)) : wait;
  std::chrono::milliseconds waited{0};
  while (true) {
    const std::chrono::milliseconds next = std::min(slice, wait - waited);
    std::optional<runs::RunSnapshot> snapshot = runs_.get(context.tenant, id, next, from);
    if (!snapshot) {
      return toolError(unknownRunMessage(id));
    }
    waited += next;
    if (policy::isFinal(snapshot->status) || waited >= wait) {
      return toolSuccess(snapshotToJson(*snapshot, with_offsets), imageBlocks(*snapshot));
    }
    context.on_wait(
        static_cast<double>(waited.count()) / 1000, static_cast<double>(wait.count()) / 1000,
        "Run " + id + " is still " + std::string(policy::statusName(snapshot->status)) + ".");
  }
}

Poco::JSON::Object::Ptr Tools::stopRun(const Object& arguments, const CallContext& context) const {
  if (std::string message = checkArgumentNames(arguments, kStopRun, {"run_id"}); !message.empty()) {
    return toolError(message);
  }
  const Var run_id = argument(arguments, "run_id");
  if (std::string message = checkRunId(run_id); !message.empty()) {
    return toolError(message);
  }
  const std::string id = run_id.toString();
  std::optional<runs::RunSnapshot> snapshot = runs_.stop(context.tenant, id);
  if (!snapshot) {
    return toolError(unknownRunMessage(id));
  }
  return toolSuccess(snapshotToJson(*snapshot), imageBlocks(*snapshot));
}

namespace {

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

Poco::JSON::Object::Ptr snapshotToJson(const runs::RunSnapshot& snapshot, bool with_offsets) {
  Object::Ptr object = newObject();
  object->set("run_id", runs::toValidUtf8(snapshot.run_id));
  object->set("status", std::string(policy::statusName(snapshot.status)));
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
  return object;
}

std::string formatTimestamp(std::chrono::system_clock::time_point time) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  // The same layout as the log lines (logging.cc).
  return Poco::DateTimeFormatter::format(Poco::Timestamp(micros), "%Y-%m-%dT%H:%M:%S.%iZ");
}

}  // namespace scs::mcp
