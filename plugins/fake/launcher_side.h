// The launcher's side of its protocol (scs/backend/launcher_protocol.h) as the fake plays it:
// the frames a session's sandbox reads, and what the launcher writes once a program has ended.
#pragma once

#include <scs/backend/launcher_frames.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "script.h"

namespace scs::fake {

// Where a control file of the protocol sits in a run's bundle: ".scs/control.json", ".scs/stdin".
std::string controlPath(std::string_view file);

// The string value of `name` in the control file, which the core writes as compact JSON; empty
// when it has none.
std::string stringOf(std::string_view control, std::string_view name);

// The value of "nonce" in the control file.
std::string nonceOf(std::string_view control);

// The bundle's member that holds the code: main.py, main.sh or main.js, by the control file's
// language (main.py when it names none; empty for an unknown language, which the fake then
// refuses as the launcher does). The fake reads its script from it in every language.
std::string codeFileOf(std::string_view control);

// The traceback the interpreter writes to stderr for an uncaught exception (type, message).
std::string tracebackOf(const std::pair<std::string, std::string>& exception);

// What the launcher writes after the program ends, `program_exit` being how its process ended
// ({"code":N} or {"signal":N}): the end marker to stderr, then the trailer (with `result`, a
// session's run's) to stdout. `script.trailer_json` replaces the trailer's JSON.
std::string endMarkerOf(const std::string& nonce);
std::string trailerOf(const std::string& nonce, const Script& script,
                      const std::string& program_exit,
                      const std::optional<std::string>& result = std::nullopt);

// A session's sandbox takes one frame per deliver() (scs/backend/launcher_frames.h): the frame
// `bytes` is when it is one whole frame and nothing more, else nullopt.
std::optional<backend::launcher::StdinFrame> oneFrame(const std::string& bytes);
// True when `bytes` begins as the session frame does, which makes a prepared sandbox a
// session's (whether it is one well-formed frame is oneFrame()'s to say).
bool opensSession(const std::string& bytes);

}  // namespace scs::fake
