#pragma once

// The routing headers of revision 2026-07-28 (MCP-Protocol-Version, Mcp-Method, Mcp-Name),
// read from the request head as sent: checked against the body, and what picks a request's era.

#include <optional>
#include <string>
#include <string_view>

#include "mcp/server.h"

namespace scs::mcp {

inline constexpr const char* kProtocolVersionHeader = "MCP-Protocol-Version";

// The request metadata headers of the modern Streamable HTTP transport (revision 2026-07-28):
// MCP-Protocol-Version, Mcp-Method and, for tools/call and tasks/get, tasks/update and
// tasks/cancel, Mcp-Name mirror the body so that an intermediary can route by them; a server
// that reads the body must refuse a request whose headers are missing or say something else
// (HeaderMismatch, -32020). They are read from `raw_head`, the request head as sent (Poco
// rewrites encoded words in the values it parses, which a proxy would not), and each must
// appear once, in a head without folded lines or blanks before a colon. Returns the sentence saying
// what is wrong, or an empty string when they agree. A body that names no version leaves the
// version header unchecked: the server then refuses the body itself (-32602).
std::string routingHeaderProblem(std::string_view raw_head, const Message& message);

// Whether the head's MCP-Protocol-Version, as sent, names the modern revision, or appears more
// than once, or the head could be read in two ways (a request some would read as modern is
// checked as one, and refused): what chooses the era of a request whose body does not.
bool namesModernRevision(std::string_view raw_head);

// A header value as the transport encodes it: plain visible ASCII (surrounding blanks
// dropped), or "=?base64?<Base64 of UTF-8>?=" for anything else. nullopt when the value holds
// a control or non-ASCII byte, or when its Base64 is malformed.
std::optional<std::string> decodeHeaderValue(std::string_view value);

}  // namespace scs::mcp
