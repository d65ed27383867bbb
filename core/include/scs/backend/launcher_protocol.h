#pragma once

// The launcher protocol: what the core (and a backend that stands in for the launcher, as the
// fake does, or that must put the launcher's flags on a command line, as the kubernetes
// backend does) and PID 1 of every sandbox say to each other over its stdin, stdout and stderr.
// docker/scs_launcher/protocol.py is the launcher's copy; tests/unit/launcher_protocol_test.cc
// fails when the two disagree. Constants only: no change here changes the plugin ABI
// (backend.h), but every change must be made on both sides at once.
//
// In: the bundle, an uncompressed ustar with the code (main.py, main.sh or main.js: kCodeFile*),
// the run's files and, under kControlDirectory, the control file (JSON: the run's nonce and
// language, the caps on returned files, its watchdog and result cap) and the run's stdin, which PID
// 1 keeps in memory and never writes to disk. A session's sandbox reads frames instead
// (launcher_frames.h has their grammar and codec): kRunFrame,
// a space, the bundle's size in decimal and "\n", then the bundle; or kInterruptFrame and "\n". A
// sandbox prepared for a run becomes a session's when its stdin begins with kSessionFrame, a space,
// the session's deadline in seconds and "\n" instead of a bundle (whose first member is always the
// code file): its warm interpreter, which has run no code, is ended and the session's is started.
// Out: once every process of the run has ended (in a session: once its code has), PID 1 writes
// to stderr kEndPrefix, the nonce and kMarkerEnd, and then to stdout kTrailerPrefix, the
// nonce, kMarkerEnd, one line of JSON (the kTrailer* keys) and "\n". PID 1 exits with the
// program's exit code, 128 + N when signal N killed it, and kRejectedExit when it refused to
// run anything (a malformed bundle or flag, a posture check of its own that failed).

#include <cstdint>
#include <string_view>

namespace scs::backend::launcher {

using namespace std::string_view_literals;

inline constexpr int kRejectedExit = 125;

inline constexpr std::string_view kControlDirectory = ".scs";
inline constexpr std::string_view kControlFile = "control.json";
inline constexpr std::string_view kStdinFile = "stdin";

inline constexpr std::string_view kControlNonce = "nonce";
inline constexpr std::string_view kControlOutDir = "out_dir";
inline constexpr std::string_view kControlMaxFiles = "max_files";
inline constexpr std::string_view kControlMaxFileBytes = "max_file_bytes";
inline constexpr std::string_view kControlMaxTotalBytes = "max_total_bytes";
inline constexpr std::string_view kControlStdin = "stdin";
inline constexpr std::string_view kControlWatchdog = "watchdog_seconds";
inline constexpr std::string_view kControlResultCap = "result_cap";
inline constexpr std::string_view kControlLanguage = "language";
// The sandbox's egress nonce (issue 44), present only when its tenant may reach hosts through the
// server: PID 1 then serves its relay and gives programs the proxy variables.
inline constexpr std::string_view kControlEgress = "egress";
// Brokered credentials (issue 48): the server's brokering CA (PEM), which PID 1 adds to the
// programs' trust (SSL_CERT_FILE and the like), and the placeholders programs are given
// ({"GITHUB_TOKEN": "scs-placeholder-..."}). Present only with kControlEgress.
inline constexpr std::string_view kControlEgressCa = "egress_ca";
inline constexpr std::string_view kControlEgressEnvironment = "egress_environment";

// The languages kControlLanguage names (python when the control file names none), and the file
// in /workspace that holds each one's code.
inline constexpr std::string_view kLanguagePython = "python";
inline constexpr std::string_view kLanguageBash = "bash";
inline constexpr std::string_view kLanguageJavascript = "javascript";
inline constexpr std::string_view kCodeFilePython = "main.py";
inline constexpr std::string_view kCodeFileBash = "main.sh";
inline constexpr std::string_view kCodeFileJavascript = "main.js";

// The code file of the language `language` (kControlLanguage's value; kLanguagePython when it
// names none); empty for a name that is not a language.
constexpr std::string_view codeFileOf(std::string_view language) {
  return language.empty() || language == kLanguagePython ? kCodeFilePython
         : language == kLanguageBash                     ? kCodeFileBash
         : language == kLanguageJavascript               ? kCodeFileJavascript
                                                         : std::string_view();
}

inline constexpr std::string_view kRunFrame = "SCS-RUN";
inline constexpr std::string_view kInterruptFrame = "SCS-INTERRUPT";
inline constexpr std::string_view kSessionFrame = "SCS-SESSION";
inline constexpr std::size_t kMaxFrameHeaderBytes = 64;
inline constexpr std::uint64_t kMaxFrameBytes = 2147483648;
inline constexpr std::size_t kMaxSessionSecondsDigits = 12;

// Egress frames (issue 44; core/src/egress/frames.h has their grammar): on stdout each begins
// with kEgressMarkerPrefix, the sandbox's egress nonce and kMarkerEnd; on stdin with
// kEgressStdinFrame and a space.
inline constexpr std::string_view kEgressMarkerPrefix = "\0SCS-NET-"sv;
inline constexpr std::string_view kEgressStdinFrame = "SCS-NET";
// The types of egress frame the server writes to stdin (core/src/egress/frames.h names them):
// the one among them that carries data, at most kMaxEgressStdinPayloadBytes a frame, and the
// two that end a stream (no more data this way; gone both ways).
inline constexpr std::string_view kEgressStdinTypes = "DCFR";
inline constexpr std::string_view kEgressData = "D";
inline constexpr std::string_view kEgressFin = "F";
inline constexpr std::string_view kEgressReset = "R";
inline constexpr std::size_t kMaxEgressStdinPayloadBytes = 65536;

inline constexpr std::string_view kTrailerPrefix = "\n\0SCS-TRAILER-"sv;
inline constexpr std::string_view kEndPrefix = "\0SCS-END-"sv;
inline constexpr std::string_view kMarkerEnd = "\0"sv;

inline constexpr std::string_view kTrailerExit = "exit";
inline constexpr std::string_view kTrailerException = "exception";
inline constexpr std::string_view kTrailerFiles = "files";
inline constexpr std::string_view kTrailerFilesTruncated = "files_truncated";
inline constexpr std::string_view kTrailerFilesOmitted = "files_omitted";
inline constexpr std::string_view kTrailerResult = "result";
inline constexpr std::string_view kTrailerSessionOver = "session_over";
inline constexpr std::string_view kTrailerRefused = "refused";
inline constexpr std::string_view kTrailerLauncherError = "launcher_error";
// A one-shot run's interpreter's warm imports: their seconds when they all finished before the
// run arrived, else null. How the server's pool learns how long a sandbox takes to be ready.
inline constexpr std::string_view kTrailerWarmSeconds = "warm_seconds";

inline constexpr std::string_view kFlagDeadline = "--deadline";
inline constexpr std::string_view kFlagWarm = "--warm";
inline constexpr std::string_view kFlagRlimits = "--rlimits";
inline constexpr std::string_view kFlagMasked = "--masked";
inline constexpr std::string_view kFlagReadonly = "--readonly";
inline constexpr std::string_view kFlagConfine = "--confine";
inline constexpr std::string_view kFlagSession = "--session";
// For an engine whose sandboxes have a network interface (a Pod): the program's seccomp filter
// refuses every socket but AF_UNIX, and the engine's service variables leave the environment.
inline constexpr std::string_view kFlagNoNetwork = "--no-network";

// Where an image derived for a run's packages (core/src/packages) holds them: a directory of
// the image's read-only root that is on no interpreter's default path, so that nothing of a
// package is imported or run by PID 1. The program's interpreter puts it before the image's own
// packages (child/program.py), and a bash or JavaScript program's Python finds it through
// PYTHONPATH.
inline constexpr std::string_view kPackagesDirectory = "/usr/local/lib/scs-packages";

}  // namespace scs::backend::launcher
