#pragma once

// The side channel between the core and the in-sandbox launcher (docker/scs_launcher/), which
// never mounts a host path. In: the archive carries `.scs/control.json` (a per-run nonce and
// the out-file caps) and, when given, `.scs/stdin`; the launcher keeps both in memory. Out: after
// the user program ends, the launcher writes to stdout "\n\0SCS-TRAILER-<nonce>\0", one line of
// JSON {"exit", "exception", "files", "files_truncated", "files_omitted"} and "\n". The core
// knows the nonce, so the user program cannot forge the marker; everything from it on is not
// output. The launcher ends every process of the program before it writes the trailer, so
// "exit" and the files are the launcher's own account; "exception" alone comes from inside the
// program's process (docs/SECURITY.md, Reports).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "egress/relay.h"
#include "policy/files.h"
#include "policy/language.h"

namespace scs::launcher {

inline constexpr const char* kOutDirectory = "/workspace/out";
inline constexpr const char* kControlPath = ".scs/control.json";  // launcher_protocol.h's names
inline constexpr const char* kStdinPath = ".scs/stdin";

// Operator caps on the files a run returns from /workspace/out.
struct OutFileCaps {
  std::size_t max_files = 20;
  std::size_t max_file_bytes = std::size_t{8} << 20;
  std::size_t max_total_bytes = std::size_t{16} << 20;
};

// An uncaught Python exception of the user program, as the launcher saw it.
struct RunException {
  std::string type;       // e.g. "ValueError", "numpy.linalg.LinAlgError"
  std::string message;    // str() of the exception, capped
  std::string traceback;  // the formatted traceback's tail, capped
};

struct OutFile {
  std::string path;     // relative to /workspace/out, normalised
  std::string content;  // the bytes
};

// How the program's process ended, as the launcher saw it (its wait status).
struct ProgramExit {
  std::optional<int> code;    // it exited with this code (0 to 255)
  std::optional<int> signal;  // or this signal ended it (1 to 64)
  bool operator==(const ProgramExit&) const = default;
};

// What the trailer told about a run.
struct RunResults {
  std::optional<ProgramExit> exit;  // absent from an older launcher's trailer
  std::optional<RunException> exception;
  std::vector<OutFile> files;
  bool files_truncated = false;     // some file was left out by a cap
  std::uint64_t files_omitted = 0;  // how many
  // A session's run: the repr of its last expression's value, when there is one and it is
  // not None (at most kMaxResultBytes, head and tail kept by the launcher).
  std::optional<std::string> result;
  // A session's run during which its interpreter ended: the session ends with it.
  bool session_over = false;
  // A session's run the launcher did not start, and why: its files could not be placed in the
  // session's sandbox (the code of an earlier run made that so). Nothing of the run executed.
  std::optional<std::string> refused;
  // The launcher's own failure (its traceback, for the server's log; never the user's).
  std::optional<std::string> launcher_error;
  // How long the interpreter's warm imports took, when they all finished before the code
  // arrived (a prepared sandbox's): what the pool learns its sandboxes' readiness from.
  std::optional<double> warm_seconds;
};

// The most of a session run's `result` the launcher sends (control.json's result_cap).
inline constexpr std::size_t kMaxResultBytes = std::size_t{64} << 10;

// "\n\0SCS-TRAILER-<nonce>\0": where the trailer starts in stdout.
std::string trailerMarker(std::string_view nonce);

// "\0SCS-END-<nonce>\0": the launcher's last bytes on stderr, written before the trailer once
// every process of the program has ended. The engine carries stdout and stderr apart, so only
// this tells that stderr has arrived in full when the trailer has.
std::string stderrEndMarker(std::string_view nonce);

// Bytes of trailer the core keeps: every file at its cap in base64, plus room for the rest.
std::size_t trailerCapBytes(const OutFileCaps& caps);

// The archive members that configure the launcher: `.scs/control.json` (naming `language`),
// and `.scs/stdin` when `stdin_data` is set. `watchdog_seconds`: the launcher ends the whole
// sandbox this long after the code arrives, should the server die before it can (a prepared
// sandbox's outer watchdog also allows for its time idle). `egress`: its nonce, and with
// brokered credentials the CA and placeholders.
std::vector<policy::File> controlFiles(std::string_view nonce, const OutFileCaps& caps,
                                       std::int64_t watchdog_seconds,
                                       const std::optional<std::string>& stdin_data,
                                       policy::Language language = policy::Language::kPython,
                                       const std::optional<egress::LauncherEgress>& egress = {});

// Parses the trailer's bytes (everything after the marker). Never trusts them: malformed JSON
// or fields are an error sentence; files that break a path rule or a cap are left out and
// counted in files_omitted.
Result<RunResults> parseTrailer(std::string_view trailer, const OutFileCaps& caps);

// A MIME type for a returned file from its name, checked against its first bytes for images
// ("application/octet-stream" when unknown).
std::string mimeTypeOf(std::string_view path, std::string_view content);

// True for the raster images MCP clients may display (PNG, JPEG, GIF, WebP) when the bytes are
// one. Never SVG, or anything else that can carry script: the program wrote it.
bool isDisplayableImage(std::string_view mime_type, std::string_view content);

}  // namespace scs::launcher
