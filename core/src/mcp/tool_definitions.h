#pragma once

// The tools as tools/list shows them: core/src/mcp/tools.json, embedded in the binary at build
// time, with the operator's settings filled in. The definitions are data, written once; the
// code that runs a tool is in tools.cc.

#include <Poco/JSON/Array.h>

#include <chrono>
#include <string>
#include <string_view>

#include "policy/files.h"
#include "policy/limits.h"

namespace scs::mcp {

struct ToolSettings {
  policy::Limits defaults;
  policy::Limits maxima;
  policy::FileSettings files;
  std::chrono::seconds retention{3600};
  double max_wait_seconds = 60;
  double default_start_wait_seconds = 0;
  std::chrono::seconds session_idle{600};
  std::chrono::seconds session_lifetime{3600};
  // Idle sessions hibernate (the backend snapshots them) and end this long after.
  bool session_hibernate = false;
  std::chrono::seconds session_hibernated_max{86400};
  bool sessions_kept = false;  // a server restart keeps them (--state-dir)
  std::size_t max_sessions_per_tenant = 4;
  // Whether the operator offers packages (a wheelhouse or an index): without, start_run and
  // open_session do not show the `packages` argument at all.
  bool packages = false;
  std::size_t max_packages = 32;
};

// The `tools` array of a tools/list result. A string "${name}" in tools.json becomes that
// setting's value and a ${name} inside a text its words ("10 MiB", "1 hour"); a description
// given as an array is its lines; {"$ref": "#/$defs/X"} stands for the shared schema X.
// Throws std::logic_error when tools.json names a setting or schema that does not exist.
Poco::JSON::Array::Ptr toolDefinitions(const ToolSettings& settings);
// The same from another document of that form (tests).
Poco::JSON::Array::Ptr toolDefinitions(const ToolSettings& settings, std::string_view document);

// The words for a number of bytes ("10 MiB", "512 KiB", "100 bytes") and for a duration
// ("1 hour", "90 seconds"), as descriptions and messages quote them.
std::string formatBytes(std::size_t bytes);
std::string formatDuration(std::chrono::seconds duration);

}  // namespace scs::mcp
