#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "policy/files.h"
#include "policy/limits.h"
#include "runs/run_manager.h"

namespace scs::mcp {

inline constexpr const char* kLatestProtocolVersion = "2025-11-25";

struct ServerInfo {
  std::string name = "safe-code-sandbox";
  std::string title = "Safe Code Sandbox";
  std::string version;
  // How long reports are kept after a run ends (RunSettings::retention); quoted to the model.
  std::chrono::seconds run_retention{3600};
};

// The transport-independent MCP protocol: JSON-RPC 2.0 framing, the lifecycle, and the
// three tools. Thread-safe: transports may call handle() concurrently.
class Server {
 public:
  Server(runs::RunManager& runs, const policy::LimitPolicy& limits,
         const policy::FileSettings& files, ServerInfo info);

  // Handles one JSON-RPC message. Returns the serialised response (one line, no newline),
  // or nullopt when the message needs none (a notification or a response).
  std::optional<std::string> handle(std::string_view message);

  // The answer to a message over the transport's size cap (JSON-RPC -32600, id null).
  static std::string oversizedMessageError(std::size_t limit);

 private:
  runs::RunManager& runs_;
  const policy::LimitPolicy& limits_;
  policy::FileSettings files_;
  ServerInfo info_;
};

}  // namespace scs::mcp
