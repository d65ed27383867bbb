#pragma once

// The MCP server as transports see it: the revisions it speaks, what a transport knows of a
// message (RequestContext), a message parsed once (Message), and Server, which answers it
// (server.cc, dispatcher.cc, modern_revision.cc, tasks.cc).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "mcp/tools.h"
#include "policy/files.h"
#include "policy/limits.h"
#include "runs/run_manager.h"

namespace scs::mcp {

// The legacy revisions, negotiated once by initialize (stdio process or HTTP session).
inline constexpr const char* kLatestProtocolVersion = "2025-11-25";
inline constexpr const char* kSupportedProtocolVersions[] = {"2025-11-25", "2025-06-18",
                                                             "2025-03-26", "2024-11-05"};
// The modern revisions: no handshake; every request names its version in
// params._meta["io.modelcontextprotocol/protocolVersion"] and is served on its own.
inline constexpr const char* kModernProtocolVersions[] = {"2026-07-28"};

bool isSupportedProtocolVersion(std::string_view version);  // a legacy one
bool isModernProtocolVersion(std::string_view version);

struct ServerInfo {
  std::string name = "safe-code-sandbox";
  std::string title = "Safe Code Sandbox";
  std::string version;
  // How long reports are kept after a run ends (RunSettings::retention); quoted to the model.
  std::chrono::seconds run_retention{3600};
  // How often a waiting request reports through RequestContext::on_progress.
  std::chrono::milliseconds progress_interval{5000};
  ToolOptions tools{};  // start_run's default wait, the session settings
};

// What a transport knows about a message beyond its text.
struct RequestContext {
  // Whose runs the message may start, see and stop.
  std::string tenant = runs::kLocalTenant;
  // Set by a transport that can send messages ahead of the answer (HTTP with SSE). While a
  // request waits (get_result with wait_seconds), handle() calls it, on the caller's thread,
  // every ServerInfo::progress_interval with one serialised JSON-RPC notification to send first:
  // notifications/progress when the request carried a progressToken, otherwise an empty
  // string (nothing to report, the request is still alive).
  std::function<void(const std::string& notification)> on_progress;
  // Set by a transport that knows the request is of the modern era whatever its body says (an
  // HTTP MCP-Protocol-Version header naming a modern revision), so that a body without the
  // per-request _meta is refused rather than served as legacy.
  bool modern = false;
  // Set by a transport that can tell its client has gone and for which that cancels the
  // request (2026-07-28 over HTTP); see CallContext::abandoned.
  std::function<bool()> abandoned;
};

// One JSON-RPC message, parsed and classified once, so that a transport can route it (e.g.
// require an HTTP session for anything but initialize) before Server::handle answers it.
class Message {
 public:
  enum class Kind {
    kRequest,       // has an id: answered
    kNotification,  // no id: never answered
    kResponse,      // a client's answer to a server request: never answered
    kInvalid,       // not JSON, not one JSON-RPC object, or a malformed one: answered with an error
  };

  Kind kind() const { return kind_; }
  // The method of a request or notification; empty otherwise.
  const std::string& method() const { return method_; }
  // Of the modern era: its _meta names a protocol version, or its method is server/discover.
  bool modern() const { return modern_; }
  // The protocol version its _meta names (empty when none), and the name a request routes by
  // (params.name of tools/call, params.taskId of tasks/get, tasks/update and tasks/cancel;
  // empty otherwise): what an HTTP transport checks its routing headers against.
  const std::string& metaVersion() const { return meta_version_; }
  const std::string& routingName() const { return routing_name_; }
  // The params field routingName() comes from ("name", "taskId"); empty when none.
  const std::string& routingField() const { return routing_field_; }

 private:
  friend class Server;
  struct Detail;

  Kind kind_ = Kind::kInvalid;
  std::string method_;
  bool modern_ = false;
  std::string meta_version_;
  std::string routing_name_;
  std::string routing_field_;
  std::shared_ptr<const Detail> detail_;
};

// The transport-independent MCP protocol: JSON-RPC 2.0 framing, the lifecycle, and the
// five tools. Thread-safe: transports may call handle() concurrently.
class Server {
 public:
  // A serialised answer and, when it is an error, its JSON-RPC code (for a transport that maps
  // codes to its own statuses: HTTP 400 or 404 for the modern revision).
  struct Answer {
    std::string text;  // one line, no newline
    int error_code = 0;
  };
  static constexpr int kMethodNotFound = -32601;
  static constexpr int kInternalError = -32603;

  Server(runs::RunManager& runs, const policy::LimitPolicy& limits,
         const policy::FileSettings& files, ServerInfo info);

  // The shape a message may have before its tree is built (MessageScanner): nesting, and
  // values, which cost the tree hundreds of bytes each whatever their own size.
  static constexpr int kMaxMessageDepth = 64;
  static constexpr std::size_t kMaxMessageValues = 4096;  // besides the files' (maxValues())

  // Parses and classifies one message. Never throws. A message deeper than kMaxMessageDepth
  // or with more than `max_values` values is an invalid request, refused before it is parsed.
  static Message parse(std::string_view text, std::size_t max_values = kMaxMessageValues);
  // parse() within the values a start_run with this server's most files may need.
  Message parseBounded(std::string_view text) const { return parse(text, maxValues()); }
  std::size_t maxValues() const;

  // Handles one JSON-RPC message. Returns the serialised response (one line, no newline),
  // or nullopt when the message needs none (a notification or a response).
  std::optional<std::string> handle(const Message& message, const RequestContext& context = {});
  std::optional<std::string> handle(std::string_view message, const RequestContext& context = {});
  // The same, with the error code of an error answer.
  std::optional<Answer> respond(const Message& message, const RequestContext& context = {});

  // The answer to a message over the transport's size cap (JSON-RPC -32600), to `id` when the
  // transport could read it (MessageScanner), otherwise to id null.
  static std::string oversizedMessageError(std::size_t limit,
                                           const std::optional<Poco::Dynamic::Var>& id = {});

  // The answer to a message a transport refuses before handling it (JSON-RPC -32600), e.g. an
  // HTTP request without its session; `message` says what is wrong. To the message's id when
  // it is a request whose id could be read (`refused`), otherwise to id null.
  static std::string refusal(const std::string& message, const Message* refused = nullptr);

  // The modern revision's HeaderMismatch answer (JSON-RPC -32020) to `refused`: an HTTP
  // routing header (MCP-Protocol-Version, Mcp-Method, Mcp-Name) missing or not what the body
  // says; `message` says which.
  static std::string headerMismatch(const std::string& message, const Message& refused);

 private:
  runs::RunManager& runs_;
  const policy::LimitPolicy& limits_;
  policy::FileSettings files_;
  ServerInfo info_;
};

}  // namespace scs::mcp
