#pragma once

// What a fake run does: the `#fake:` directive lines of its code (main.py, main.sh or main.js)
// read into a Script, and the ustar lookup the fake uses to find the code and the control files
// in a delivered archive.

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scs::fake {

// What one fake run does, from the `#fake:` directive lines of its code.
struct Script {
  int exit_code = 0;
  bool exit_given = false;
  std::string stdout_text;
  std::string stderr_text;
  std::uint64_t flood_bytes = 0;
  std::chrono::milliseconds sleep{0};
  bool hang = false;
  // Once the launcher has reported (its trailer written), the sandbox does not end until it is
  // killed or removed: an engine slow to see the container end.
  bool linger = false;
  bool oom = false;
  bool child_oom = false;
  std::optional<int> signal;
  std::set<std::string> fail;  // "deliver", "start", "wait"
  std::optional<std::string> engine_error;
  std::chrono::milliseconds start_delay{0};
  bool ignore_kill = false;  // kill() is recorded but the sandbox keeps running until removed
  std::optional<std::int64_t> peak_memory_bytes;  // reported with the exit
  std::optional<double> cpu_seconds;
  std::optional<std::string> trailer_json;  // the launcher's trailer carries this JSON instead
  // The launcher's side channel (launcher/side_channel.h), emulated when the archive carries
  // .scs/control.json: an uncaught exception (type, message), files written under
  // /workspace/out (path, content), and stdin echoed to stdout.
  std::optional<std::pair<std::string, std::string>> exception;
  std::vector<std::pair<std::string, std::string>> out_files;
  bool echo_stdin = false;
  // Egress (issue 44), as a program behind PID 1's relay would: `connect=HOST:PORT` opens a
  // stream, asks for HOST:PORT by HTTP CONNECT and writes "egress HOST:PORT: " and the first
  // line of the answer to stdout (or "no relay" when the run has no egress), in order.
  std::vector<std::string> connects;
  // A session's run (SandboxSpec::session) keeps a namespace of NAME=VALUE between runs:
  // `set=NAME=VALUE` assigns, `get=NAME` makes VALUE the run's result (a name never set fails
  // the run with NameError), `result=TEXT` gives a result outright. `hang` runs until an
  // interrupt (then KeyboardInterrupt), `ignore_interrupt` until the sandbox is killed, and
  // `die` ends the interpreter (the launcher reports signal 9 and the sandbox exits 137); `oom`
  // is `die` by the OOM killer.
  std::vector<std::pair<std::string, std::string>> sets;
  std::optional<std::string> get;
  std::optional<std::string> result;
  bool ignore_interrupt = false;
  bool die = false;
};

// Parses every line of `code` that starts with "#fake:". Returns an error sentence for
// an unknown directive or a bad value.
std::optional<std::string> parseScript(std::string_view code, Script* script);

// Finds the regular file `name` in an uncompressed ustar archive. Returns an error sentence
// when the archive is malformed or has no such file.
std::optional<std::string> extractFile(std::string_view archive, std::string_view name,
                                       std::string* content);

// Parses a whole decimal number in [min, max].
std::optional<std::int64_t> parseInteger(std::string_view text, std::int64_t min, std::int64_t max);

}  // namespace scs::fake
