#include "config.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iomanip>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>
#include <variant>

#if !defined(SCS_VERSION) || !defined(SCS_DEFAULT_SECCOMP_PROFILE) ||   \
    !defined(SCS_INSTALL_BINDIR) || !defined(SCS_INSTALL_PLUGIN_DIR) || \
    !defined(SCS_INSTALL_SECCOMP_PROFILE)
#error \
    "the build defines SCS_VERSION, SCS_DEFAULT_SECCOMP_PROFILE and SCS_INSTALL_* (core/CMakeLists.txt)"
#endif

namespace scs::config {
namespace {

namespace fs = std::filesystem;
using Problem = std::optional<std::string>;

struct Flag {
  const char* name;     // the long flag without dashes; also the config file key
  const char* metavar;  // empty: takes no value
  const char* help;
  std::function<std::string(const Config&)> shown_default;  // nullptr: no default to show
  std::function<Problem(Config&, const std::string&)> apply;
};

std::string flagName(const std::string& name) { return "--" + name; }

Problem parseDouble(const std::string& flag, const std::string& text, double max, double* out) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return flagName(flag) + ": '" + text + "' is not a number";
  }
  if (value <= 0 || value > max) {
    return flagName(flag) + ": " + text + " is out of range; give a number above 0 and at most " +
           policy::formatNumber(max);
  }
  *out = value;
  return std::nullopt;
}

Problem parseInt(const std::string& flag, const std::string& text, std::int64_t min,
                 std::int64_t max, std::int64_t* out) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return flagName(flag) + ": '" + text + "' is not a whole number";
  }
  if (value < min || value > max) {
    return flagName(flag) + ": " + text + " is out of range; give a whole number from " +
           std::to_string(min) + " to " + std::to_string(max);
  }
  *out = value;
  return std::nullopt;
}

template <typename T>
std::function<Problem(Config&, const std::string&)> intSetter(const char* flag, std::int64_t min,
                                                              std::int64_t max,
                                                              std::function<T&(Config&)> field) {
  return [=](Config& c, const std::string& v) -> Problem {
    std::int64_t parsed = 0;
    if (auto problem = parseInt(flag, v, min, max, &parsed)) {
      return problem;
    }
    field(c) = static_cast<T>(parsed);
    return std::nullopt;
  };
}

std::function<Problem(Config&, const std::string&)> doubleSetter(
    const char* flag, double max, std::function<double&(Config&)> field) {
  return [=](Config& c, const std::string& v) -> Problem {
    return parseDouble(flag, v, max, &field(c));
  };
}

bool isBackendName(const std::string& name) {
  return !name.empty() &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
}

Problem requireValue(const std::string& flag, const std::string& value) {
  if (value.empty()) {
    return flagName(flag) + " needs a non-empty value";
  }
  return std::nullopt;
}

// A setter for a flag whose value may be any text but the empty one.
std::function<Problem(Config&, const std::string&)> nonEmptySetter(
    const char* flag, std::function<void(Config&, const std::string&)> set) {
  return [=](Config& c, const std::string& v) -> Problem {
    if (auto problem = requireValue(flag, v)) {
      return problem;
    }
    set(c, v);
    return std::nullopt;
  };
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"config", "FILE",
       "Read settings from a JSON object whose keys are these flag names without the dashes, "
       "e.g. {\"backend\": \"fake\", \"max-memory-gb\": 8, \"backend-option\": "
       "{\"cores\": \"2\"}}. Flags given on the command line override the file.",
       nullptr, nullptr},
      {"backend", "NAME",
       "Runtime backend plugin to load: libscs_backend_NAME.so from the plugin directory "
       "(docker: the Docker Engine; fake: the in-memory test double; kubernetes: one Pod per "
       "sandbox, see docs/SCALING.md). There is no fallback: "
       "if it cannot be loaded the server does not start.",
       [](const Config& c) { return c.backend; },
       [](Config& c, const std::string& v) -> Problem {
         if (!isBackendName(v)) {
           return "--backend: '" + v + "' is not a backend name (lower-case letters, digits, _)";
         }
         c.backend = v;
         return std::nullopt;
       }},
      {"backend-path", "FILE",
       "Load this plugin file instead of the one --backend names. Must be an absolute path "
       "to a file writable only by its owner.",
       nullptr,
       nonEmptySetter("backend-path",
                      [](Config& c, const std::string& v) { c.backend_path = v; })},
      {"plugin-dir", "DIR",
       "Directory holding the backend plugins; by default the plugins folder beside this "
       "executable, or the package's plugin directory for the installed one.",
       [](const Config& c) { return c.plugin_dir.string(); },
       nonEmptySetter("plugin-dir",
                      [](Config& c, const std::string& v) { c.plugin_dir = v; })},
      {"backend-option", "KEY=VALUE",
       "A setting addressed to the backend; repeat for several. The fake backend knows cores, "
       "memory_gb, fail=create|inspect|list|capacity|supports and posture=<field>; the "
       "kubernetes backend kube-config, kube-context, namespace and the others docs/SCALING.md "
       "lists.",
       nullptr,
       [](Config& c, const std::string& v) -> Problem {
         const auto eq = v.find('=');
         if (eq == std::string::npos || eq == 0) {
           return "--backend-option: '" + v + "' is not KEY=VALUE";
         }
         c.backend_options[v.substr(0, eq)] = v.substr(eq + 1);
         return std::nullopt;
       }},
      {"engine", "ADDR",
       "Address of the container engine, passed to the backend as its option \"engine\" "
       "(docker: e.g. unix:///var/run/docker.sock). Default: the backend's own default.",
       nullptr,
       nonEmptySetter("engine",
                      [](Config& c, const std::string& v) { c.backend_options["engine"] = v; })},
      {"image", "NAME", "Container image every sandbox runs. The model can never choose it.",
       [](const Config& c) { return c.sandbox.image; },
       [](Config& c, const std::string& v) -> Problem {
         if (v.empty() || v.find_first_of(" \t\r\n") != std::string::npos) {
           return "--image: '" + v + "' is not an image name";
         }
         c.sandbox.image = v;
         return std::nullopt;
       }},
      {"runtime", "runc|runsc",
       "Container runtime: runc, or runsc (gVisor) for a boundary that survives a host-kernel "
       "bug. With the kubernetes backend, the Pods' RuntimeClass; runsc is refused there "
       "(docs/SCALING.md).",
       [](const Config& c) { return c.sandbox.runtime; },
       [](Config& c, const std::string& v) -> Problem {
         if (v != "runc" && v != "runsc") {
           return "--runtime: '" + v + "' is not runc or runsc";
         }
         c.sandbox.runtime = v;
         return std::nullopt;
       }},
      {"sandbox-uids", "FIRST-LAST",
       "Host uids the sandboxes run as: every sandbox that exists at one time has its own, so no "
       "kernel counter kept per user is shared between runs. Give each server on a host its own "
       "range, one no host user has, with room for every sandbox at once.",
       [](const Config& c) {
         return std::to_string(c.sandbox.uids.first) + "-" + std::to_string(c.sandbox.uids.last);
       },
       [](Config& c, const std::string& v) -> Problem {
         const auto dash = v.find('-');
         std::uint32_t first = 0;
         std::uint32_t last = 0;
         const auto parse = [](std::string_view text, std::uint32_t* out) {
           const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
           return !text.empty() && error == std::errc() && end == text.data() + text.size();
         };
         if (dash == std::string::npos || !parse(std::string_view(v).substr(0, dash), &first) ||
             !parse(std::string_view(v).substr(dash + 1), &last) || first == 0 || first > last ||
             last > 2147483647u || last - first < 15) {
           return "--sandbox-uids: '" + v +
                  "' is not FIRST-LAST with 0 < FIRST, at least 16 uids, and LAST below 2^31";
         }
         c.sandbox.uids = {first, last};
         return std::nullopt;
       }},
      {"seccomp-profile", "FILE",
       "Seccomp profile (JSON) applied to every sandbox; a missing or invalid file stops the "
       "server at startup. \"engine-default\" keeps the engine's own default profile instead, "
       "which on older engines allows more system calls.",
       [](const Config& c) { return c.seccomp_profile_path; },
       nonEmptySetter("seccomp-profile",
                      [](Config& c, const std::string& v) { c.seccomp_profile_path = v; })},
      {"default-memory-gb", "GB", "Memory of a run that does not ask (GB are GiB).",
       [](const Config& c) { return policy::formatNumber(c.limits.defaults.memory_gb); },
       doubleSetter("default-memory-gb", 1 << 20,
                    [](Config& c) -> double& { return c.limits.defaults.memory_gb; })},
      {"max-memory-gb", "GB",
       "Most memory a run may ask for; never above the host's memory as the backend reports it.",
       [](const Config& c) { return policy::formatNumber(c.limits.maxima.memory_gb); },
       doubleSetter("max-memory-gb", 1 << 20,
                    [](Config& c) -> double& { return c.limits.maxima.memory_gb; })},
      {"default-timeout-seconds", "S", "Wall-clock timeout of a run that does not ask.",
       [](const Config& c) { return policy::formatNumber(c.limits.defaults.timeout_seconds); },
       doubleSetter("default-timeout-seconds", 7 * 24 * 3600,
                    [](Config& c) -> double& { return c.limits.defaults.timeout_seconds; })},
      {"max-timeout-seconds", "S", "Longest timeout a run may ask for.",
       [](const Config& c) { return policy::formatNumber(c.limits.maxima.timeout_seconds); },
       doubleSetter("max-timeout-seconds", 7 * 24 * 3600,
                    [](Config& c) -> double& { return c.limits.maxima.timeout_seconds; })},
      {"default-cpus", "N", "CPUs of a run that does not ask.",
       [](const Config& c) { return policy::formatNumber(c.limits.defaults.cpus); },
       doubleSetter("default-cpus", 4096,
                    [](Config& c) -> double& { return c.limits.defaults.cpus; })},
      {"max-cpus", "N",
       "Most CPUs a run may ask for; never above the host's cores as the backend reports them.",
       [](const Config& c) { return policy::formatNumber(c.limits.maxima.cpus); },
       doubleSetter("max-cpus", 4096, [](Config& c) -> double& { return c.limits.maxima.cpus; })},
      {"processes", "N", "Process (PID) limit of every run; not client-settable.",
       [](const Config& c) { return std::to_string(c.limits.defaults.processes); },
       [](Config& c, const std::string& v) -> Problem {
         std::int64_t parsed = 0;
         if (auto problem = parseInt("processes", v, 1, 1'000'000, &parsed)) {
           return problem;
         }
         c.limits.defaults.processes = static_cast<int>(parsed);
         c.limits.maxima.processes = static_cast<int>(parsed);
         return std::nullopt;
       }},
      {"max-concurrent", "N", "Runs executing at once; further runs wait in the queue.",
       [](const Config& c) { return std::to_string(c.runs.max_concurrent); },
       intSetter<int>("max-concurrent", 1, 1024,
                      [](Config& c) -> int& { return c.runs.max_concurrent; })},
      {"max-queue", "N",
       "Runs one tenant may have waiting for a slot; a start beyond this is refused. 0: no "
       "queue.",
       [](const Config& c) { return std::to_string(c.runs.max_queue); },
       intSetter<std::size_t>("max-queue", 0, 100'000,
                              [](Config& c) -> std::size_t& { return c.runs.max_queue; })},
      {"max-queue-total", "N",
       "Runs all tenants together may have waiting. Past it the tenant with the most waiting "
       "gives way: its own new run is refused, or its newest waiting run is stopped to make "
       "room for a tenant with fewer.",
       [](const Config& c) { return std::to_string(c.runs.max_queue_total); },
       intSetter<std::size_t>("max-queue-total", 0, 1'000'000,
                              [](Config& c) -> std::size_t& { return c.runs.max_queue_total; })},
      {"prepared", "N",
       "Sandboxes kept started ahead of need with the default limits, so a run with those "
       "limits (or a shorter timeout) skips the engine's create and start, and a session with "
       "those limits begins in one. Each serves one run or session and, while idle, counts "
       "its measured footprint against host memory (its memory limit until one is measured). "
       "0: off.",
       [](const Config& c) { return std::to_string(c.runs.prepared); },
       intSetter<std::size_t>("prepared", 0, 64,
                              [](Config& c) -> std::size_t& { return c.runs.prepared; })},
      {"prepared-max", "N",
       "The most sandboxes kept prepared when runs with the default limits arrive together or "
       "fast: the pool follows the most such runs in flight at once in the last five minutes, "
       "or as many as arrive while one sandbox is made, between --prepared and this, grows "
       "only while no run waits and memory allows, and shrinks back to --prepared when the "
       "demand is gone.",
       [](const Config& c) { return std::to_string(c.runs.prepared_max); },
       intSetter<std::size_t>("prepared-max", 0, 64,
                              [](Config& c) -> std::size_t& { return c.runs.prepared_max; })},
      {"prepared-idle-seconds", "S",
       "A prepared sandbox idle this long is replaced by a fresh one (its in-sandbox watchdog "
       "allows for this wait on top of the run's timeout).",
       [](const Config& c) { return std::to_string(c.runs.prepared_max_idle.count()); },
       intSetter<std::chrono::seconds>(
           "prepared-idle-seconds", 1, 24 * 3600,
           [](Config& c) -> std::chrono::seconds& { return c.runs.prepared_max_idle; })},
      {"warm-modules", "LIST",
       "Modules a prepared sandbox's interpreter imports while it waits for its run, comma "
       "separated (those the image lacks are skipped), in order; a run that arrives meanwhile "
       "waits for the one being imported only. A run then finds them loaded; it can "
       "tell only by timing, sys.modules and gc.get_freeze_count(). \"none\": none. Under "
       "--runtime runsc the default is none: gVisor copies a forked child's share of them "
       "early, so a program that forks many children needs far more memory.",
       [](const Config& c) {
         std::string list;
         for (const std::string& name : c.runs.prepared_warm_modules) {
           list += (list.empty() ? "" : ",") + name;
         }
         return list.empty() ? std::string("none") : list;
       },
       [](Config& c, const std::string& v) -> Problem {
         static const std::regex kModule("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*");
         c.runs.prepared_warm_modules.clear();
         if (v == "none") {
           return std::nullopt;
         }
         for (const std::string& name : mcp::splitList(v)) {
           if (!std::regex_match(name, kModule)) {
             return "--warm-modules: '" + name + "' is not a Python module name";
           }
           c.runs.prepared_warm_modules.push_back(name);
         }
         return c.runs.prepared_warm_modules.empty()
                    ? Problem("--warm-modules needs module names, or \"none\"")
                    : std::nullopt;
       }},
      {"start-wait-seconds", "S",
       "How long start_run waits for its run to end when the call does not pass wait_seconds "
       "(0 to 60): a run that ends within it is answered with its report in one call.",
       [](const Config& c) { return std::to_string(c.start_wait.count()); },
       intSetter<std::chrono::seconds>(
           "start-wait-seconds", 0, 60,
           [](Config& c) -> std::chrono::seconds& { return c.start_wait; })},
      {"max-waiting-per-tenant", "N",
       "Calls with wait_seconds (start_run, get_result) one tenant may have waiting at once; "
       "one more is a tool error, so that no client's long-polls hold what others need.",
       [](const Config& c) { return std::to_string(c.max_waiting_per_tenant); },
       intSetter<std::size_t>("max-waiting-per-tenant", 1, 100'000,
                              [](Config& c) -> std::size_t& { return c.max_waiting_per_tenant; })},
      {"session-idle-seconds", "S",
       "A session (open_session) without a run this long is closed and its sandbox removed.",
       [](const Config& c) { return std::to_string(c.runs.sessions.idle.count()); },
       intSetter<std::chrono::seconds>(
           "session-idle-seconds", 1, 7 * 24 * 3600,
           [](Config& c) -> std::chrono::seconds& { return c.runs.sessions.idle; })},
      {"session-max-seconds", "S",
       "A session is closed this long after it opened, even while it runs code; its sandbox's "
       "in-sandbox deadline is this and a grace.",
       [](const Config& c) { return std::to_string(c.runs.sessions.max_lifetime.count()); },
       intSetter<std::chrono::seconds>(
           "session-max-seconds", 1, 7 * 24 * 3600,
           [](Config& c) -> std::chrono::seconds& { return c.runs.sessions.max_lifetime; })},
      {"max-open-sessions", "N",
       "Sessions open at once, all tenants together. Each holds its memory limit against the "
       "host's for as long as it is open.",
       [](const Config& c) { return std::to_string(c.runs.sessions.max_open); },
       intSetter<std::size_t>("max-open-sessions", 0, 10'000,
                              [](Config& c) -> std::size_t& { return c.runs.sessions.max_open; })},
      {"max-open-sessions-per-tenant", "N", "Sessions one tenant may have open at once.",
       [](const Config& c) { return std::to_string(c.runs.sessions.max_open_per_tenant); },
       intSetter<std::size_t>(
           "max-open-sessions-per-tenant", 0, 10'000,
           [](Config& c) -> std::size_t& { return c.runs.sessions.max_open_per_tenant; })},
      {"retention-seconds", "S", "How long a finished run's report is kept before it is forgotten.",
       [](const Config& c) { return std::to_string(c.runs.retention.count()); },
       intSetter<std::chrono::seconds>(
           "retention-seconds", 1, 30 * 24 * 3600,
           [](Config& c) -> std::chrono::seconds& { return c.runs.retention; })},
      {"max-retained", "N",
       "Finished reports kept, all tenants together; past it the tenant holding the most "
       "forgets its oldest first.",
       [](const Config& c) { return std::to_string(c.runs.max_retained); },
       intSetter<std::size_t>("max-retained", 1, 10'000'000,
                              [](Config& c) -> std::size_t& { return c.runs.max_retained; })},
      {"max-retained-per-tenant", "N",
       "Finished reports one tenant keeps; past it its oldest are forgotten first.",
       [](const Config& c) { return std::to_string(c.runs.max_retained_per_tenant); },
       intSetter<std::size_t>(
           "max-retained-per-tenant", 1, 10'000'000,
           [](Config& c) -> std::size_t& { return c.runs.max_retained_per_tenant; })},
      {"max-retained-bytes", "N",
       "Output and returned files that finished reports may keep in memory, all tenants "
       "together; past it the tenant holding the most bytes forgets its oldest reports first "
       "(the newest report is always kept).",
       [](const Config& c) { return std::to_string(c.runs.max_retained_bytes); },
       intSetter<std::size_t>("max-retained-bytes", 1 << 20, std::int64_t{1} << 40,
                              [](Config& c) -> std::size_t& { return c.runs.max_retained_bytes; })},
      {"max-retained-bytes-per-tenant", "N",
       "Output and returned files one tenant's finished reports may keep in memory; past it its "
       "oldest reports are forgotten first (its newest is always kept).",
       [](const Config& c) { return std::to_string(c.runs.max_retained_bytes_per_tenant); },
       intSetter<std::size_t>(
           "max-retained-bytes-per-tenant", 1 << 20, std::int64_t{1} << 40,
           [](Config& c) -> std::size_t& { return c.runs.max_retained_bytes_per_tenant; })},
      {"output-cap-bytes", "N",
       "Bytes of stdout and of stderr kept per run (head and tail); the rest is counted and "
       "reported as truncated.",
       [](const Config& c) { return std::to_string(c.runs.output_cap_bytes); },
       intSetter<std::size_t>("output-cap-bytes", 1024, std::int64_t{1} << 30,
                              [](Config& c) -> std::size_t& { return c.runs.output_cap_bytes; })},
      {"max-files", "N", "Most extra files one start_run may carry besides main.py.",
       [](const Config& c) { return std::to_string(c.files.max_files); },
       intSetter<std::size_t>("max-files", 0, 100'000,
                              [](Config& c) -> std::size_t& { return c.files.max_files; })},
      {"max-files-bytes", "N", "Most bytes of code plus files (decoded) one start_run may carry.",
       [](const Config& c) { return std::to_string(c.files.max_total_bytes); },
       intSetter<std::size_t>("max-files-bytes", 1024, std::int64_t{1} << 30,
                              [](Config& c) -> std::size_t& { return c.files.max_total_bytes; })},
      {"max-stdin-bytes", "N", "Most bytes of stdin one start_run may carry.",
       [](const Config& c) { return std::to_string(c.files.max_stdin_bytes); },
       intSetter<std::size_t>("max-stdin-bytes", 0, std::int64_t{1} << 30,
                              [](Config& c) -> std::size_t& { return c.files.max_stdin_bytes; })},
      {"max-out-files", "N",
       "Most files a run returns from /workspace/out; more are left out and flagged.",
       [](const Config& c) { return std::to_string(c.runs.out_files.max_files); },
       intSetter<std::size_t>("max-out-files", 0, 10'000,
                              [](Config& c) -> std::size_t& { return c.runs.out_files.max_files; })},
      {"max-out-file-bytes", "N",
       "Largest file a run returns from /workspace/out; a larger one is left out and flagged.",
       [](const Config& c) { return std::to_string(c.runs.out_files.max_file_bytes); },
       intSetter<std::size_t>(
           "max-out-file-bytes", 0, std::int64_t{1} << 30,
           [](Config& c) -> std::size_t& { return c.runs.out_files.max_file_bytes; })},
      {"max-out-bytes", "N",
       "Most bytes of files, in total, a run returns from /workspace/out.",
       [](const Config& c) { return std::to_string(c.runs.out_files.max_total_bytes); },
       intSetter<std::size_t>(
           "max-out-bytes", 0, std::int64_t{1} << 30,
           [](Config& c) -> std::size_t& { return c.runs.out_files.max_total_bytes; })},
      {"max-message-bytes", "N",
       "Largest JSON-RPC message accepted; a longer one is answered with an error.",
       [](const Config& c) { return std::to_string(c.max_message_bytes); },
       intSetter<std::size_t>("max-message-bytes", 4096, std::int64_t{1} << 30,
                              [](Config& c) -> std::size_t& { return c.max_message_bytes; })},
      {"log-level", "LEVEL", "debug, info, warning or error. Logs go to stderr only.",
       [](const Config& c) { return c.log_level; },
       [](Config& c, const std::string& v) -> Problem {
         if (v != "debug" && v != "info" && v != "warning" && v != "error") {
           return "--log-level: '" + v + "' is not debug, info, warning or error";
         }
         c.log_level = v;
         return std::nullopt;
       }},
      {"log-format", "FORMAT",
       "text (one line per message), or json: one JSON object per line with the fields time, "
       "level, source and message, for a log shipper.",
       [](const Config& c) { return c.log_format; },
       [](Config& c, const std::string& v) -> Problem {
         if (v != "text" && v != "json") {
           return "--log-format: '" + v + "' is not text or json";
         }
         c.log_format = v;
         return std::nullopt;
       }},
      {"http", "ADDR:PORT",
       "Serve MCP over Streamable HTTP at http://ADDR:PORT/mcp instead of stdio (stdin and "
       "stdout are then not used). ADDR defaults to 127.0.0.1 (\":8080\" or \"8080\"); write "
       "IPv6 as [ADDR]:PORT. Port 0 picks a free port. The server logs \"listening on "
       "http://ADDR:PORT/mcp\". An ADDR beyond loopback is refused without --token-file.",
       nullptr,
       [](Config& c, const std::string& v) -> Problem {
         auto address = mcp::parseListenAddress(v);
         if (auto* problem = std::get_if<std::string>(&address)) {
           return *problem;
         }
         c.http.listen = v;
         return std::nullopt;
       }},
      {"token-file", "FILE",
       "HTTP only: bearer tokens clients must send (Authorization: Bearer TOKEN), one per "
       "line or NAME:TOKEN, NAME being the tenant that owns the runs the token starts; # "
       "starts a comment. The file must not be open to other users (chmod 600).",
       nullptr,
       nonEmptySetter("token-file",
                      [](Config& c, const std::string& v) { c.http.token_file = v; })},
      {"allowed-origins", "LIST",
       "HTTP only: comma-separated Origin values accepted from browsers, e.g. "
       "https://app.example.com; * accepts any. Other Origins get 403. Default: http:// and "
       "the allowed hosts.",
       nullptr,
       [](Config& c, const std::string& v) -> Problem {
         c.http.allowed_origins = mcp::splitList(v);
         return c.http.allowed_origins.empty()
                    ? Problem("--allowed-origins needs at least one origin")
                    : std::nullopt;
       }},
      {"allowed-hosts", "LIST",
       "HTTP only: comma-separated Host header values accepted (HOST:PORT, or HOST for any "
       "port; * accepts any); others get 421, which stops DNS rebinding. Default: localhost, "
       "127.0.0.1 and [::1] with the bound port, plus the bound address when it is one.",
       nullptr,
       [](Config& c, const std::string& v) -> Problem {
         c.http.allowed_hosts = mcp::splitList(v);
         return c.http.allowed_hosts.empty() ? Problem("--allowed-hosts needs at least one host")
                                             : std::nullopt;
       }},
      {"metrics", "ADDR:PORT",
       "Serve Prometheus metrics at http://ADDR:PORT/metrics (ADDR as for --http; with "
       "stdio or HTTP). This listener asks for no token, since the metrics count every "
       "tenant's runs and no tenant token may read them: bind it where only the scraper "
       "reaches it. Default: off. See docs/OPERATING.md for the metrics.",
       nullptr,
       [](Config& c, const std::string& v) -> Problem {
         auto address = mcp::parseListenAddress(v, "--metrics");
         if (auto* problem = std::get_if<std::string>(&address)) {
           return *problem;
         }
         c.metrics_listen = v;
         return std::nullopt;
       }},
      {"max-http-body-bytes", "N", "HTTP only: largest request body accepted; larger gets 413.",
       [](const Config& c) { return std::to_string(c.http.max_body_bytes); },
       intSetter<std::size_t>("max-http-body-bytes", 1024, std::int64_t{1} << 30,
                              [](Config& c) -> std::size_t& { return c.http.max_body_bytes; })},
      {"max-sessions", "N",
       "HTTP only: MCP sessions open at once, all tenants together; a new one past it closes "
       "the least recently used session of the tenant holding the most.",
       [](const Config& c) { return std::to_string(c.http.max_sessions); },
       intSetter<std::size_t>("max-sessions", 1, 10'000'000,
                              [](Config& c) -> std::size_t& { return c.http.max_sessions; })},
      {"max-sessions-per-tenant", "N",
       "HTTP only: MCP sessions one tenant may hold open; a new one past it closes that "
       "tenant's least recently used session.",
       [](const Config& c) { return std::to_string(c.http.max_sessions_per_tenant); },
       intSetter<std::size_t>(
           "max-sessions-per-tenant", 1, 10'000'000,
           [](Config& c) -> std::size_t& { return c.http.max_sessions_per_tenant; })},
      {"max-requests-per-tenant", "N",
       "HTTP only: requests one tenant may have in flight at once (answers not yet sent); one "
       "more is refused with 429 before it takes a worker.",
       [](const Config& c) { return std::to_string(c.http.max_requests_per_tenant); },
       intSetter<std::size_t>(
           "max-requests-per-tenant", 1, 100'000,
           [](Config& c) -> std::size_t& { return c.http.max_requests_per_tenant; })},
      {"self-test", "",
       "Run the sandbox audit (see `safe-code-sandbox audit`) once at startup and refuse to "
       "serve (exit 1) when any check fails.",
       nullptr,
       [](Config& c, const std::string& v) -> Problem {
         if (!v.empty() && v != "true" && v != "false") {
           return "--self-test takes no value (in a config file: true or false)";
         }
         c.self_test = v != "false";
         return std::nullopt;
       }},
      {"help", "", "Print this text and exit.", nullptr, nullptr},
      {"version", "", "Print the version and exit.", nullptr, nullptr},
  };
  return table;
}

const Flag* findFlag(const std::string& name) {
  for (const Flag& flag : flags()) {
    if (name == flag.name) {
      return &flag;
    }
  }
  return nullptr;
}

// Scalars of the config file become the text a flag would carry.
Problem scalarText(const std::string& key, const Poco::Dynamic::Var& value, std::string* out) {
  if (value.isEmpty() || value.isArray() || value.isStruct() || value.type() == typeid(bool) ||
      value.type() == typeid(Poco::JSON::Object::Ptr) ||
      value.type() == typeid(Poco::JSON::Array::Ptr)) {
    return "config file: \"" + key + "\" must be a string or a number";
  }
  if (value.isString()) {
    *out = value.extract<std::string>();
  } else if (value.isInteger()) {
    *out = std::to_string(value.convert<std::int64_t>());
  } else {
    *out = policy::formatNumber(value.convert<double>());
  }
  return std::nullopt;
}

Problem applyFileBackendOptions(Config& config, const Poco::Dynamic::Var& value) {
  const Flag* flag = findFlag("backend-option");
  if (value.type() == typeid(Poco::JSON::Object::Ptr)) {
    auto object = value.extract<Poco::JSON::Object::Ptr>();
    for (const auto& [key, item] : *object) {
      std::string text;
      if (auto problem = scalarText("backend-option." + key, item, &text)) {
        return problem;
      }
      if (auto problem = flag->apply(config, key + "=" + text)) {
        return problem;
      }
    }
    return std::nullopt;
  }
  if (value.type() == typeid(Poco::JSON::Array::Ptr)) {
    auto array = value.extract<Poco::JSON::Array::Ptr>();
    for (std::size_t i = 0; i < array->size(); ++i) {
      std::string text;
      if (auto problem = scalarText("backend-option", array->get(i), &text)) {
        return problem;
      }
      if (auto problem = flag->apply(config, text)) {
        return problem;
      }
    }
    return std::nullopt;
  }
  std::string text;
  if (auto problem = scalarText("backend-option", value, &text)) {
    return problem;
  }
  return flag->apply(config, text);
}

Problem applyFile(Config& config, const std::string& path, std::set<std::string>* given) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return "--config: cannot read " + path;
  }
  std::stringstream text;
  text << in.rdbuf();
  Poco::Dynamic::Var parsed;
  try {
    Poco::JSON::Parser parser;
    parsed = parser.parse(text.str());
  } catch (const Poco::Exception& e) {
    return "--config: " + path + " is not valid JSON: " + e.displayText();
  }
  if (parsed.type() != typeid(Poco::JSON::Object::Ptr)) {
    return "--config: " + path + " must hold a JSON object";
  }
  auto object = parsed.extract<Poco::JSON::Object::Ptr>();
  for (const auto& [key, value] : *object) {
    const Flag* flag = findFlag(key);
    if (flag == nullptr || !flag->apply) {
      return "--config: " + path + " has an unknown setting \"" + key + "\"";
    }
    Problem problem;
    if (key == "backend-option") {
      problem = applyFileBackendOptions(config, value);
    } else {
      std::string value_text;
      if (*flag->metavar == '\0' && value.type() == typeid(bool)) {
        value_text = value.extract<bool>() ? "true" : "false";  // a switch: JSON true or false
      } else {
        problem = scalarText(key, value, &value_text);
      }
      if (!problem) {
        problem = flag->apply(config, value_text);
      }
    }
    if (problem) {
      return "--config " + path + ": " + *problem;
    }
    given->insert(key);
  }
  return std::nullopt;
}

Problem checkLimitPair(const Config& config, const std::set<std::string>& given, const char* what,
                       double policy::Limits::*field, double floor, const char* unit) {
  const std::string default_flag = std::string("default-") + what;
  const std::string max_flag = std::string("max-") + what;
  const double default_value = config.limits.defaults.*field;
  const double max_value = config.limits.maxima.*field;
  if (default_value < floor) {
    return flagName(default_flag) + ": " + policy::formatNumber(default_value) +
           " is below the floor of " + policy::formatNumber(floor) + unit;
  }
  if (max_value < floor) {
    return flagName(max_flag) + ": " + policy::formatNumber(max_value) + " is below the floor of " +
           policy::formatNumber(floor) + unit;
  }
  // A default above the maximum is a contradiction only when both were set; otherwise the
  // limit policy lowers the default to the maximum and logs it.
  if (given.count(default_flag) != 0 && default_value > max_value) {
    return flagName(default_flag) + " " + policy::formatNumber(default_value) + " is above " +
           flagName(max_flag) + " " + policy::formatNumber(max_value);
  }
  return std::nullopt;
}

Problem checkHttpFlags(const Config& config, const std::set<std::string>& given) {
  for (const char* flag : {"token-file", "allowed-origins", "allowed-hosts", "max-http-body-bytes",
                           "max-sessions", "max-sessions-per-tenant", "max-requests-per-tenant"}) {
    if (config.http.listen.empty() && given.count(flag) != 0) {
      return flagName(flag) + " applies to HTTP only; give --http ADDR:PORT too";
    }
  }
  return std::nullopt;
}

Problem validate(const Config& config, const std::set<std::string>& given) {
  if (auto p = checkHttpFlags(config, given)) {
    return p;
  }
  const policy::LimitSettings& l = config.limits;
  if (auto p = checkLimitPair(config, given, "memory-gb", &policy::Limits::memory_gb,
                              l.min_memory_gb, " GB")) {
    return p;
  }
  if (auto p = checkLimitPair(config, given, "timeout-seconds", &policy::Limits::timeout_seconds,
                              l.min_timeout_seconds, " seconds")) {
    return p;
  }
  if (auto p = checkLimitPair(config, given, "cpus", &policy::Limits::cpus, l.min_cpus, " CPUs")) {
    return p;
  }
  // Without --prepared-max, a --prepared above its default is the ceiling too.
  if (given.count("prepared-max") != 0 && config.runs.prepared_max < config.runs.prepared) {
    return "--prepared-max " + std::to_string(config.runs.prepared_max) + " is below --prepared " +
           std::to_string(config.runs.prepared);
  }
  return std::nullopt;
}

std::string wrap(const std::string& text, std::size_t indent, std::size_t width) {
  std::istringstream words(text);
  std::string word;
  std::string out;
  std::string line;
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) {
    out += std::string(indent, ' ') + line + "\n";
  }
  return out;
}

}  // namespace

namespace {

// The running executable's directory, or empty when /proc cannot say.
fs::path executableDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// Whether this executable is the installed one (the package's), which finds its plugins and
// seccomp profile where the package puts them; any other (a build tree) finds them beside
// itself and in the checkout it was built from.
bool installed() { return executableDir() == fs::path(SCS_INSTALL_BINDIR); }

}  // namespace

fs::path defaultPluginDir() {
  if (installed()) {
    return SCS_INSTALL_PLUGIN_DIR;
  }
  const fs::path dir = executableDir();
  return dir.empty() ? fs::path("plugins") : dir / "plugins";
}

std::string defaultSeccompProfile() {
  return installed() ? SCS_INSTALL_SECCOMP_PROFILE : SCS_DEFAULT_SECCOMP_PROFILE;
}

Config defaults() {
  Config config;
  config.plugin_dir = defaultPluginDir();
  config.seccomp_profile_path = defaultSeccompProfile();
  config.runs.prepared = 1;
  config.runs.prepared_max = 4;
  config.runs.prepared_warm_modules = {"numpy", "pandas", "matplotlib.pyplot"};
  return config;
}

ParseResult parse(const std::vector<std::string>& args) {
  ParseResult result;
  result.config = defaults();

  // Split into (name, value) pairs first, so that --config is applied before every flag
  // wherever it appears.
  std::vector<std::pair<std::string, std::string>> given_flags;
  std::optional<std::string> config_file;
  const bool audit = !args.empty() && args.front() == "audit";
  for (std::size_t i = audit ? 1 : 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      result.error = "unexpected argument '" + arg + "'; every setting is a --flag";
      return result;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const Flag* flag = findFlag(name);
    if (flag == nullptr) {
      result.error = "unknown flag --" + name;
      return result;
    }
    if (*flag->metavar == '\0') {
      if (value) {
        result.error = "--" + name + " takes no value";
        return result;
      }
      if (flag->apply) {
        given_flags.emplace_back(name, "");
      } else {
        result.action = name == "help" ? Action::kHelp : Action::kVersion;
      }
      continue;
    }
    if (!value) {
      if (i + 1 == args.size()) {
        result.error = "--" + name + " needs a value (" + flag->metavar + ")";
        return result;
      }
      value = args[++i];
    }
    if (name == "config") {
      config_file = *value;
    } else {
      given_flags.emplace_back(name, *value);
    }
  }
  if (result.action != Action::kServe) {
    return result;
  }

  std::set<std::string> given;
  if (config_file) {
    if (auto problem = applyFile(result.config, *config_file, &given)) {
      result.error = *problem;
      return result;
    }
  }
  for (const auto& [name, value] : given_flags) {
    if (auto problem = findFlag(name)->apply(result.config, value)) {
      result.error = *problem;
      return result;
    }
    given.insert(name);
  }
  if (auto problem = validate(result.config, given)) {
    result.error = *problem;
  }
  // gVisor copies what a forked child shares with its parent far sooner than Linux does
  // (measured: about 28 MiB per child of a warm interpreter, against under 1 MiB under runc),
  // so a program that forks many children would reach its memory cap in a warm sandbox where a
  // fresh one holds. Under runsc the interpreter is warmed only when the operator says so.
  if (result.config.sandbox.runtime == "runsc" && given.count("warm-modules") == 0) {
    result.config.runs.prepared_warm_modules.clear();
  }
  if (audit) {
    result.action = Action::kAudit;
  }
  return result;
}

std::optional<std::string> loadSeccompProfile(Config* config) {
  if (config->seccomp_profile_path == kEngineDefaultSeccomp) {
    config->sandbox.seccomp_profile.clear();
    return std::nullopt;
  }
  const std::string& path = config->seccomp_profile_path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return "cannot read the seccomp profile " + path +
           " (--seccomp-profile FILE, or engine-default)";
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    Poco::JSON::Parser parser;
    if (parser.parse(text.str()).type() != typeid(Poco::JSON::Object::Ptr)) {
      return "the seccomp profile " + path + " is not a JSON object";
    }
  } catch (const Poco::Exception& e) {
    return "the seccomp profile " + path + " is not valid JSON: " + e.displayText();
  }
  config->sandbox.seccomp_profile = text.str();
  return std::nullopt;
}

std::string helpText() {
  const Config shipped = defaults();
  std::ostringstream out;
  out << "Usage: safe-code-sandbox [--flag VALUE]...\n"
         "       safe-code-sandbox audit [--flag VALUE]...\n"
         "\n"
         "An MCP server (JSON-RPC 2.0 over stdio, or Streamable HTTP with --http) that runs\n"
         "untrusted Python in a locked-down, throwaway sandbox. On stdio, stdout carries only the\n"
         "protocol; logs always go to stderr.\n"
         "Flags may also be written --flag=VALUE. Exit codes: 0 after a clean shutdown (stdin\n"
         "closed, SIGTERM or SIGINT), 1 when the server cannot start (backend, capacity), 2 for\n"
         "a bad flag, config file or value.\n"
         "\n"
         "audit: loads the backend as the server would, starts one sandbox with the production\n"
         "posture, checks every control from inside it, prints a table on stdout and exits 0\n"
         "when every check passes, 1 when one fails, 2 when the audit cannot run.\n"
         "\n";
  for (const Flag& flag : flags()) {
    std::string head = "  --" + std::string(flag.name);
    if (*flag.metavar != '\0') {
      head += " " + std::string(flag.metavar);
    }
    std::string text = flag.help;
    if (flag.shown_default) {
      text += " (default: " + flag.shown_default(shipped) + ")";
    }
    out << head << "\n" << wrap(text, 6, 92);
  }
  return out.str();
}

std::string versionText() { return std::string("safe-code-sandbox ") + SCS_VERSION; }

}  // namespace scs::config
