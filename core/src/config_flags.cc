// The flag table: every flag of the server as data (name, value placeholder, help, shown
// default, setter), and the small builders of the setters and shown defaults flags share.
#include "config_flags.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <regex>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace scs::config {
namespace {

namespace fs = std::filesystem;
using Setter = std::function<Result<Done>(Config&, const std::string&)>;

Result<Done> parseDouble(const std::string& flag, const std::string& text, double max,
                         double* out) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return invalid(flagName(flag) + ": '" + text + "' is not a number");
  }
  if (value <= 0 || value > max) {
    return invalid(flagName(flag) + ": " + text +
                   " is out of range; give a number above 0 and at most " +
                   policy::formatNumber(max));
  }
  *out = value;
  return Done{};
}

Result<Done> parseInt(const std::string& flag, const std::string& text, std::int64_t min,
                      std::int64_t max, std::int64_t* out) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return invalid(flagName(flag) + ": '" + text + "' is not a whole number");
  }
  if (value < min || value > max) {
    return invalid(flagName(flag) + ": " + text + " is out of range; give a whole number from " +
                   std::to_string(min) + " to " + std::to_string(max));
  }
  *out = value;
  return Done{};
}

bool isBackendName(const std::string& name) {
  return !name.empty() &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
}

bool isImageName(const std::string& name) {
  return !name.empty() && name.find_first_of(" \t\r\n") == std::string::npos;
}

// The builders below take a flag's field as an accessor, `[](auto& c) -> auto& { return
// c.some.field; }`, which serves the setter (on a Config&) and the shown default (on a const
// Config&) alike; SCS_FIELD(some.field) writes one.
#define SCS_FIELD(path) \
  [](auto& c) -> auto& { return c.path; }

// A field's value as --help shows it.
std::string shownText(const std::string& value) { return value; }
std::string shownText(const fs::path& value) { return value.string(); }
std::string shownText(double value) { return policy::formatNumber(value); }
std::string shownText(std::chrono::seconds value) { return std::to_string(value.count()); }
std::string shownText(std::integral auto value) { return std::to_string(value); }

template <typename Field>
std::function<std::string(const Config&)> shownDefault(Field field) {
  return [=](const Config& c) { return shownText(field(c)); };
}

// A setter for a flag whose value may be any text but the empty one.
template <typename Field>
Setter nonEmptySetter(const char* flag, Field field) {
  return [=](Config& c, const std::string& v) -> Result<Done> {
    if (v.empty()) {
      return invalid(flagName(flag) + " needs a non-empty value");
    }
    field(c) = v;
    return Done{};
  };
}

// A flag whose value is a whole number from `min` to `max`.
template <typename Field>
Flag intFlag(const char* name, const char* metavar, const char* help, std::int64_t min,
             std::int64_t max, Field field) {
  using T = std::remove_cvref_t<decltype(field(std::declval<Config&>()))>;
  return {name, metavar, help, shownDefault(field),
          [=](Config& c, const std::string& v) -> Result<Done> {
            std::int64_t parsed = 0;
            Result<Done> checked = parseInt(name, v, min, max, &parsed);
            if (std::holds_alternative<Done>(checked)) {
              field(c) = static_cast<T>(parsed);
            }
            return checked;
          }};
}

// A flag whose value is a number above 0 and at most `max`.
template <typename Field>
Flag doubleFlag(const char* name, const char* metavar, const char* help, double max, Field field) {
  return {name, metavar, help, shownDefault(field),
          [=](Config& c, const std::string& v) { return parseDouble(name, v, max, &field(c)); }};
}

// Whether --help shows a flag's shipped value.
enum class Shown { kDefault, kNoDefault };

// A flag whose value may be any text but the empty one.
template <typename Field>
Flag textFlag(const char* name, const char* metavar, const char* help, Shown shown, Field field) {
  return {name, metavar, help, shown == Shown::kDefault ? shownDefault(field) : nullptr,
          nonEmptySetter(name, field)};
}

// A flag whose value `valid` accepts; any other is "not `what`".
template <typename Field>
Flag checkedFlag(const char* name, const char* metavar, const char* help,
                 std::function<bool(const std::string&)> valid, std::string what, Field field) {
  return {name, metavar, help, shownDefault(field),
          [=](Config& c, const std::string& v) -> Result<Done> {
            if (!valid(v)) {
              return invalid(flagName(name) + ": '" + v + "' is not " + what);
            }
            field(c) = v;
            return Done{};
          }};
}

// "a, b or c".
std::string alternatives(const std::vector<std::string>& choices) {
  std::string text;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return text;
}

// A flag whose value is one of `choices`.
template <typename Field>
Flag choiceFlag(const char* name, const char* metavar, const char* help,
                std::vector<std::string> choices, Field field) {
  const auto valid = [choices](const std::string& v) {
    return std::find(choices.begin(), choices.end(), v) != choices.end();
  };
  return checkedFlag(name, metavar, help, valid, alternatives(choices), field);
}

// A flag whose value is a listen address (mcp::parseListenAddress), kept as given.
template <typename Field>
Flag listenFlag(const char* name, const char* metavar, const char* help, Field field) {
  return {name, metavar, help, nullptr, [=](Config& c, const std::string& v) -> Result<Done> {
            auto address = mcp::parseListenAddress(v, flagName(name));
            if (auto* problem = std::get_if<Error>(&address)) {
              return *problem;
            }
            field(c) = v;
            return Done{};
          }};
}

// A flag given once per entry (in a config file: a string or an array of them); the entries
// of the file and of the command line add up. Checked as a whole later (validate()).
template <typename Field>
Flag repeatedFlag(const char* name, const char* metavar, const char* help, Field field) {
  return {name,
          metavar,
          help,
          nullptr,
          [=](Config& c, const std::string& v) -> Result<Done> {
            if (v.empty()) {
              return invalid(flagName(name) + " needs a value");
            }
            field(c).push_back(v);
            return Done{};
          },
          true};
}

// A flag whose value is a comma-separated list (mcp::splitList) of at least one `item`.
template <typename Field>
Flag listFlag(const char* name, const char* metavar, const char* help, const char* item,
              Field field) {
  return {name, metavar, help, nullptr, [=](Config& c, const std::string& v) -> Result<Done> {
            field(c) = mcp::splitList(v);
            if (field(c).empty()) {
              return invalid(flagName(name) + " needs at least one " + item);
            }
            return Done{};
          }};
}

}  // namespace

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"config", "FILE",
       "Read settings from a JSON object whose keys are these flag names without the dashes, "
       "e.g. {\"backend\": \"fake\", \"max-memory-gb\": 8, \"backend-option\": "
       "{\"cores\": \"2\"}}. Flags given on the command line override the file.",
       nullptr, nullptr},
      checkedFlag("backend", "NAME",
                  "Runtime backend plugin to load: libscs_backend_NAME.so from the plugin "
                  "directory (docker: the Docker Engine; fake: the in-memory test double; "
                  "kubernetes: one Pod per sandbox, see docs/SCALING.md). There is no fallback: "
                  "if it cannot be loaded the server does not start.",
                  isBackendName, "a backend name (lower-case letters, digits, _)",
                  SCS_FIELD(backend)),
      textFlag("backend-path", "FILE",
               "Load this plugin file instead of the one --backend names. Must be an absolute "
               "path to a file writable only by its owner.",
               Shown::kNoDefault, SCS_FIELD(backend_path)),
      textFlag("plugin-dir", "DIR",
               "Directory holding the backend plugins; by default the plugins folder beside this "
               "executable, or the package's plugin directory for the installed one.",
               Shown::kDefault, SCS_FIELD(plugin_dir)),
      {"backend-option", "KEY=VALUE",
       "A setting addressed to the backend; repeat for several. The fake backend knows cores, "
       "memory_gb, fail=create|inspect|list|capacity|supports and posture=<field>; the "
       "kubernetes backend kube-config, kube-context, namespace and the others docs/SCALING.md "
       "lists.",
       nullptr,
       [](Config& c, const std::string& v) -> Result<Done> {
         const auto eq = v.find('=');
         if (eq == std::string::npos || eq == 0) {
           return invalid("--backend-option: '" + v + "' is not KEY=VALUE");
         }
         c.backend_options[v.substr(0, eq)] = v.substr(eq + 1);
         return Done{};
       },
       true},
      {"engine", "ADDR",
       "Address of the container engine, passed to the backend as its option \"engine\" "
       "(docker: e.g. unix:///var/run/docker.sock). Default: the backend's own default.",
       nullptr,
       nonEmptySetter("engine",
                      [](Config& c) -> std::string& { return c.backend_options["engine"]; })},
      checkedFlag("image", "NAME",
                  "Container image every sandbox runs. The model can never choose it.", isImageName,
                  "an image name", SCS_FIELD(sandbox.image)),
      choiceFlag("runtime", "runc|runsc",
                 "Container runtime: runc, or runsc (gVisor) for a boundary that survives a "
                 "host-kernel bug. With the kubernetes backend, the Pods' RuntimeClass; runsc is "
                 "refused there (docs/SCALING.md).",
                 {"runc", "runsc"}, SCS_FIELD(sandbox.runtime)),
      {"sandbox-uids", "FIRST-LAST",
       "Host uids the sandboxes run as: every sandbox that exists at one time has its own, so no "
       "kernel counter kept per user is shared between runs. Give each server on a host its own "
       "range, one no host user has, with room for every sandbox at once.",
       [](const Config& c) {
         return std::to_string(c.sandbox.uids.first) + "-" + std::to_string(c.sandbox.uids.last);
       },
       [](Config& c, const std::string& v) -> Result<Done> {
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
           return invalid("--sandbox-uids: '" + v +
                  "' is not FIRST-LAST with 0 < FIRST, at least 16 uids, and LAST below 2^31");
         }
         c.sandbox.uids = {first, last};
         return Done{};
       }},
      textFlag("seccomp-profile", "FILE",
               "Seccomp profile (JSON) applied to every sandbox; a missing or invalid file stops "
               "the server at startup. \"engine-default\" keeps the engine's own default profile "
               "instead, which on older engines allows more system calls.",
               Shown::kDefault, SCS_FIELD(seccomp_profile_path)),
      doubleFlag("default-memory-gb", "GB", "Memory of a run that does not ask (GB are GiB).",
                 1 << 20, SCS_FIELD(limits.defaults.memory_gb)),
      doubleFlag("max-memory-gb", "GB",
                 "Most memory a run may ask for; never above the host's memory as the backend "
                 "reports it.",
                 1 << 20, SCS_FIELD(limits.maxima.memory_gb)),
      doubleFlag("default-timeout-seconds", "S", "Wall-clock timeout of a run that does not ask.",
                 7 * 24 * 3600, SCS_FIELD(limits.defaults.timeout_seconds)),
      doubleFlag("max-timeout-seconds", "S", "Longest timeout a run may ask for.", 7 * 24 * 3600,
                 SCS_FIELD(limits.maxima.timeout_seconds)),
      doubleFlag("default-cpus", "N", "CPUs of a run that does not ask.", 4096,
                 SCS_FIELD(limits.defaults.cpus)),
      doubleFlag("max-cpus", "N",
                 "Most CPUs a run may ask for; never above the host's cores as the backend "
                 "reports them.",
                 4096, SCS_FIELD(limits.maxima.cpus)),
      {"processes", "N", "Process (PID) limit of every run; not client-settable.",
       [](const Config& c) { return std::to_string(c.limits.defaults.processes); },
       [](Config& c, const std::string& v) -> Result<Done> {
         std::int64_t parsed = 0;
         Result<Done> checked = parseInt("processes", v, 1, 1'000'000, &parsed);
         if (std::holds_alternative<Done>(checked)) {
           c.limits.defaults.processes = static_cast<int>(parsed);
           c.limits.maxima.processes = static_cast<int>(parsed);
         }
         return checked;
       }},
      intFlag("max-concurrent", "N", "Runs executing at once; further runs wait in the queue.", 1,
              1024, SCS_FIELD(runs.max_concurrent)),
      intFlag("max-queue", "N",
              "Runs one tenant may have waiting for a slot; a start beyond this is refused. 0: "
              "no queue.",
              0, 100'000, SCS_FIELD(runs.max_queue)),
      intFlag("max-queue-total", "N",
              "Runs all tenants together may have waiting. Past it the tenant with the most "
              "waiting gives way: its own new run is refused, or its newest waiting run is "
              "stopped to make room for a tenant with fewer.",
              0, 1'000'000, SCS_FIELD(runs.max_queue_total)),
      intFlag("prepared", "N",
              "Sandboxes kept started ahead of need with the default limits, so a run with those "
              "limits (or a shorter timeout) skips the engine's create and start, and a session "
              "with those limits begins in one. Each serves one run or session and, while idle, "
              "counts its measured footprint against host memory (its memory limit until one is "
              "measured). 0: off.",
              0, 64, SCS_FIELD(runs.prepared)),
      intFlag("prepared-max", "N",
              "The most sandboxes kept prepared when runs with the default limits arrive "
              "together or fast: the pool follows the most such runs in flight at once in the "
              "last five minutes, or as many as arrive while one sandbox is made, between "
              "--prepared and this, grows only while no run waits and memory allows, and "
              "shrinks back to --prepared when the demand is gone.",
              0, 64, SCS_FIELD(runs.prepared_max)),
      intFlag("prepared-package-sets", "N",
              "Package sets (a run's `packages`) whose layers get prepared sandboxes of their own "
              "while --prepared is on: the sets runs asked for most recently, each kept as ready "
              "as its own demand wants (none after five minutes without a run of it), up to "
              "--prepared-max. 0: runs with packages always start a fresh sandbox.",
              0, 16, SCS_FIELD(runs.prepared_package_sets)),
      intFlag("prepared-idle-seconds", "S",
              "A prepared sandbox idle this long is replaced by a fresh one (its in-sandbox "
              "watchdog allows for this wait on top of the run's timeout).",
              1, 24 * 3600, SCS_FIELD(runs.prepared_max_idle)),
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
       [](Config& c, const std::string& v) -> Result<Done> {
         static const std::regex kModule("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*");
         c.runs.prepared_warm_modules.clear();
         if (v == "none") {
           return Done{};
         }
         for (const std::string& name : mcp::splitList(v)) {
           if (!std::regex_match(name, kModule)) {
             return invalid("--warm-modules: '" + name + "' is not a Python module name");
           }
           c.runs.prepared_warm_modules.push_back(name);
         }
         if (c.runs.prepared_warm_modules.empty()) {
           return invalid("--warm-modules needs module names, or \"none\"");
         }
         return Done{};
       }},
      intFlag("start-wait-seconds", "S",
              "How long start_run waits for its run to end when the call does not pass "
              "wait_seconds (0 to 60): a run that ends within it is answered with its report in "
              "one call.",
              0, 60, SCS_FIELD(start_wait)),
      intFlag("max-waiting-per-tenant", "N",
              "Calls with wait_seconds (start_run, get_result) one tenant may have waiting at "
              "once; one more is a tool error, so that no client's long-polls hold what others "
              "need.",
              1, 100'000, SCS_FIELD(max_waiting_per_tenant)),
      intFlag("session-idle-seconds", "S",
              "A session (open_session) without a run this long is hibernated where the "
              "backend snapshots sandboxes (Docker with --runtime runsc and the engine's "
              "experimental mode): its sandbox's memory and files are saved and it holds no "
              "memory until its next run wakes it. Elsewhere it is closed and its sandbox "
              "removed.",
              1, 7 * 24 * 3600, SCS_FIELD(runs.sessions.idle)),
      intFlag("session-hibernate-seconds", "S",
              "A session hibernated this long is closed and its snapshot removed; 0: idle "
              "sessions never hibernate (nothing of theirs is written to the engine's disk).",
              0, 30 * 24 * 3600, SCS_FIELD(runs.sessions.hibernated_max)),
      textFlag("state-dir", "DIR",
               "Keep sessions across restarts: when the server stops (SIGTERM, SIGINT, or the "
               "end of stdin) every open session is hibernated (a run in progress is "
               "interrupted) instead of closed and recorded in DIR/sessions (0700, records "
               "0600); the next server with the same DIR takes it back, and its next run wakes "
               "it. DIR must be this user's and not writable by others; one server at a time. "
               "Needs sessions that hibernate; a session with network access (--egress-allow) "
               "is not kept.",
               Shown::kNoDefault, SCS_FIELD(state_dir)),
      intFlag("session-max-seconds", "S",
              "A session is closed once it has been awake this long (time hibernated does not "
              "count), even while it runs code; its sandbox's in-sandbox deadline is this, a grace "
              "and, where sessions hibernate, --session-hibernate-seconds.",
              1, 7 * 24 * 3600, SCS_FIELD(runs.sessions.max_lifetime)),
      intFlag("max-open-sessions", "N",
              "Sessions open at once, all tenants together. Each holds its memory limit against "
              "the host's for as long as it is open.",
              0, 10'000, SCS_FIELD(runs.sessions.max_open)),
      intFlag("max-open-sessions-per-tenant", "N", "Sessions one tenant may have open at once.", 0,
              10'000, SCS_FIELD(runs.sessions.max_open_per_tenant)),
      intFlag("retention-seconds", "S",
              "How long a finished run's report is kept before it is forgotten.", 1, 30 * 24 * 3600,
              SCS_FIELD(runs.retention)),
      intFlag("max-retained", "N",
              "Finished reports kept, all tenants together; past it the tenant holding the most "
              "forgets its oldest first.",
              1, 10'000'000, SCS_FIELD(runs.max_retained)),
      intFlag("max-retained-per-tenant", "N",
              "Finished reports one tenant keeps; past it its oldest are forgotten first.", 1,
              10'000'000, SCS_FIELD(runs.max_retained_per_tenant)),
      intFlag("max-retained-bytes", "N",
              "Output and returned files that finished reports may keep in memory, all tenants "
              "together; past it the tenant holding the most bytes forgets its oldest reports "
              "first (the newest report is always kept).",
              1 << 20, std::int64_t{1} << 40, SCS_FIELD(runs.max_retained_bytes)),
      intFlag("max-retained-bytes-per-tenant", "N",
              "Output and returned files one tenant's finished reports may keep in memory; past "
              "it its oldest reports are forgotten first (its newest is always kept).",
              1 << 20, std::int64_t{1} << 40, SCS_FIELD(runs.max_retained_bytes_per_tenant)),
      intFlag("output-cap-bytes", "N",
              "Bytes of stdout and of stderr kept per run (head and tail); the rest is counted "
              "and reported as truncated.",
              1024, std::int64_t{1} << 30, SCS_FIELD(runs.output_cap_bytes)),
      intFlag("output-window-chars", "N",
              "Characters of stdout and stderr together one report carries, head and tail of "
              "each; a marker in the text names the offset get_result reads the rest from. 0 "
              "for all that output-cap-bytes keeps.",
              0, std::int64_t{1} << 30, SCS_FIELD(runs.output_window_chars)),
      intFlag("max-files", "N", "Most extra files one start_run may carry besides its code.", 0,
              100'000, SCS_FIELD(files.max_files)),
      intFlag("max-files-bytes", "N",
              "Most bytes of code plus files (decoded) one start_run may carry.", 1024,
              std::int64_t{1} << 30, SCS_FIELD(files.max_total_bytes)),
      intFlag("max-stdin-bytes", "N", "Most bytes of stdin one start_run may carry.", 0,
              std::int64_t{1} << 30, SCS_FIELD(files.max_stdin_bytes)),
      intFlag("max-out-files", "N",
              "Most files a run returns from /workspace/out; more are left out and flagged.", 0,
              10'000, SCS_FIELD(runs.out_files.max_files)),
      intFlag("max-out-file-bytes", "N",
              "Largest file a run returns from /workspace/out; a larger one is left out and "
              "flagged.",
              0, std::int64_t{1} << 30, SCS_FIELD(runs.out_files.max_file_bytes)),
      intFlag("max-out-bytes", "N",
              "Most bytes of files, in total, a run returns from /workspace/out.", 0,
              std::int64_t{1} << 30, SCS_FIELD(runs.out_files.max_total_bytes)),
      intFlag("max-message-bytes", "N",
              "Largest JSON-RPC message accepted; a longer one is answered with an error.", 4096,
              std::int64_t{1} << 30, SCS_FIELD(max_message_bytes)),
      choiceFlag("log-level", "LEVEL", "debug, info, warning or error. Logs go to stderr only.",
                 {"debug", "info", "warning", "error"}, SCS_FIELD(log_level)),
      choiceFlag("log-format", "FORMAT",
                 "text (one line per message), or json: one JSON object per line with the fields "
                 "time, level, source and message, for a log shipper.",
                 {"text", "json"}, SCS_FIELD(log_format)),
      listenFlag("http", "ADDR:PORT",
                 "Serve MCP over Streamable HTTP at http://ADDR:PORT/mcp instead of stdio (stdin "
                 "and stdout are then not used). ADDR defaults to 127.0.0.1 (\":8080\" or "
                 "\"8080\"); write IPv6 as [ADDR]:PORT. Port 0 picks a free port. The server logs "
                 "\"listening on http://ADDR:PORT/mcp\". An ADDR beyond loopback is refused "
                 "without --token-file.",
                 SCS_FIELD(http.listen)),
      textFlag("token-file", "FILE",
               "HTTP only: bearer tokens clients must send (Authorization: Bearer TOKEN), one per "
               "line or NAME:TOKEN, NAME being the tenant that owns the runs the token starts; # "
               "starts a comment. The file must not be open to other users (chmod 600).",
               Shown::kNoDefault, SCS_FIELD(http.token_file)),
      listFlag("allowed-origins", "LIST",
               "HTTP only: comma-separated Origin values accepted from browsers, e.g. "
               "https://app.example.com; * accepts any. Other Origins get 403. Default: http:// "
               "and the allowed hosts.",
               "origin", SCS_FIELD(http.allowed_origins)),
      listFlag("allowed-hosts", "LIST",
               "HTTP only: comma-separated Host header values accepted (HOST:PORT, or HOST for "
               "any port; * accepts any); others get 421, which stops DNS rebinding. Default: "
               "localhost, 127.0.0.1 and [::1] with the bound port, plus the bound address when "
               "it is one.",
               "host", SCS_FIELD(http.allowed_hosts)),
      listenFlag("metrics", "ADDR:PORT",
                 "Serve Prometheus metrics at http://ADDR:PORT/metrics (ADDR as for --http; with "
                 "stdio or HTTP). This listener asks for no token, since the metrics count every "
                 "tenant's runs and no tenant token may read them: bind it where only the scraper "
                 "reaches it. Default: off. See docs/OPERATING.md for the metrics.",
                 SCS_FIELD(metrics_listen)),
      intFlag("max-http-body-bytes", "N",
              "HTTP only: largest request body accepted; larger gets 413.", 1024,
              std::int64_t{1} << 30, SCS_FIELD(http.max_body_bytes)),
      intFlag("max-http-body-bytes-per-tenant", "N",
              "HTTP only: bytes of request bodies one tenant's requests in flight may hold, "
              "each counted at its Content-Length (chunked: at --max-http-body-bytes); a POST "
              "past it is refused with 429, its body read and dropped, never kept. At least "
              "--max-http-body-bytes.",
              1024, std::int64_t{1} << 40, SCS_FIELD(http.max_body_bytes_per_tenant)),
      intFlag("max-sessions", "N",
              "HTTP only: MCP sessions open at once, all tenants together; a new one past it "
              "closes the least recently used session of the tenant holding the most.",
              1, 10'000'000, SCS_FIELD(http.max_sessions)),
      intFlag("max-sessions-per-tenant", "N",
              "HTTP only: MCP sessions one tenant may hold open; a new one past it closes that "
              "tenant's least recently used session.",
              1, 10'000'000, SCS_FIELD(http.max_sessions_per_tenant)),
      intFlag("max-requests-per-tenant", "N",
              "HTTP only: requests one tenant may have in flight at once (answers not yet sent); "
              "one more is refused with 429 before it takes a worker.",
              1, 100'000, SCS_FIELD(http.max_requests_per_tenant)),
      textFlag("wheelhouse", "DIR",
               "Offer runs `packages` from this directory of wheels (.whl files), fully offline: "
               "a run's set is resolved by the host's pip, installed into a read-only layer "
               "over --image and cached (docs/PACKAGES.md). Wheels only, never a source build. "
               "Docker backend only.",
               Shown::kNoDefault, SCS_FIELD(packages.resolver.wheelhouse)),
      textFlag("package-index", "URL",
               "Offer runs `packages` from this package index (the simple API, e.g. a devpi or "
               "a PyPI mirror), which the server reaches and the sandbox never does; with "
               "--wheelhouse, both. Needs --allow-packages.",
               Shown::kNoDefault, SCS_FIELD(packages.resolver.index_url)),
      listFlag("allow-packages", "LIST",
               "Comma-separated projects a run's packages may install, each of their dependencies "
               "among them, or any. Default with only --wheelhouse: any of its wheels.",
               "project", SCS_FIELD(allowed_packages)),
      intFlag("package-layers", "N",
              "Package sets kept as derived images; past it the least recently used is removed.", 1,
              10'000, SCS_FIELD(packages.max_layers)),
      intFlag("max-packages", "N", "Most requirements one `packages` list may name.", 1, 1000,
              SCS_FIELD(packages.max_requirements)),
      intFlag("max-package-bytes", "N",
              "Most bytes one package set's layer may take: its files, and a 512-byte header "
              "each; the server holds one layer in memory while it makes it.",
              1 << 20, std::int64_t{1} << 36, SCS_FIELD(packages.max_layer_bytes)),
      repeatedFlag("egress-allow", "TENANT=HOST[:PORT]",
                   "Let TENANT's programs reach HOST through the server (repeat for several; the "
                   "tenant of stdio and of a server without tokens is local). HOST is a name, "
                   "*.SUFFIX (any name below it; refused on a public suffix), an IP address or a "
                   "CIDR; PORT defaults to 443. The server resolves and dials, never a private, "
                   "loopback, link-local or metadata address unless named here; the sandbox still "
                   "has no network interface. Default: none (no egress, no proxy). "
                   "docs/SECURITY.md 3e.",
                   SCS_FIELD(egress.allow)),
      repeatedFlag("egress-deny", "TENANT=HOST[:PORT]",
                   "Refuse TENANT's programs HOST even where --egress-allow would let them (deny "
                   "wins); same forms.",
                   SCS_FIELD(egress.deny)),
      repeatedFlag("egress-resolve", "NAME=ADDRESS",
                   "Resolve NAME to ADDRESS for egress instead of asking DNS (an internal host, a "
                   "test); the address may then be private or loopback, for that name only.",
                   SCS_FIELD(egress.resolve)),
      repeatedFlag("egress-credential", "TENANT=HOST[:PORT]:HEADER=SOURCE",
                   "Add a credential to TENANT's HTTPS requests to HOST (one on its allow-list), "
                   "so that the sandbox never holds it: the server ends the program's TLS for "
                   "that host with a CA of its own, which the sandbox trusts, and sets HEADER on "
                   "every request. With $VARIABLE[@HEADER] for HEADER, programs get VARIABLE "
                   "holding a placeholder, which the server replaces in that header "
                   "(Authorization unless named) of that host's requests and refuses anywhere "
                   "else it reads. SOURCE is file:PATH (a file only its owner may read; one "
                   "trailing newline dropped) or env:NAME (the server's environment, unset once "
                   "read); never the value itself. docs/SECURITY.md 3f.",
                   SCS_FIELD(egress.credentials)),
      textFlag("egress-upstream-ca", "FILE",
               "PEM certificates trusted beside the system's for the certificates of hosts with "
               "a credential (an internal host, a test).",
               Shown::kNoDefault, SCS_FIELD(egress.upstream_ca)),
      intFlag("egress-max-connections", "N",
              "Egress connections one sandbox may have open at once; one more is refused.", 1,
              1024, SCS_FIELD(egress.limits.streams_per_sandbox)),
      intFlag("egress-max-connections-per-tenant", "N",
              "Egress connections one tenant's sandboxes may have open at once, all together.", 1,
              100'000, SCS_FIELD(egress.limits.streams_per_tenant)),
      intFlag("egress-max-bytes", "N",
              "Egress bytes (sent and received) one sandbox may move in its life; past it every "
              "connection of it is reset.",
              1 << 20, std::int64_t{1} << 40, SCS_FIELD(egress.limits.bytes_per_sandbox)),
      intFlag("egress-idle-seconds", "S",
              "An egress connection with no byte either way for this long is closed.", 1, 86'400,
              SCS_FIELD(egress.limits.idle)),
      {"self-test", "",
       "Run the sandbox audit (see `safe-code-sandbox audit`) once at startup and refuse to "
       "serve (exit 1) when any check fails.",
       nullptr,
       [](Config& c, const std::string& v) -> Result<Done> {
         if (!v.empty() && v != "true" && v != "false") {
           return invalid("--self-test takes no value (in a config file: true or false)");
         }
         c.self_test = v != "false";
         return Done{};
       }},
      {"help", "", "Print this text and exit.", nullptr, nullptr},
      {"version", "", "Print the version and exit.", nullptr, nullptr},
  };
  return table;
}

#undef SCS_FIELD

const Flag* findFlag(const std::string& name) {
  for (const Flag& flag : flags()) {
    if (name == flag.name) {
      return &flag;
    }
  }
  return nullptr;
}

}  // namespace scs::config
