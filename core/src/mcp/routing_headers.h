#pragma once

#include <Poco/Net/NameValueCollection.h>

#include <optional>
#include <string>
#include <string_view>

#include "mcp/server.h"

namespace scs::mcp {

// The request metadata headers of the modern Streamable HTTP transport (revision 2026-07-28):
// MCP-Protocol-Version, Mcp-Method and, for tools/call, Mcp-Name mirror the body so that an
// intermediary can route by them; a server that reads the body must refuse a request whose
// headers are missing or say something else (HeaderMismatch, -32020). Returns the sentence
// saying what is wrong, or an empty string when they agree. A body that names no version
// leaves the version header unchecked: the server then refuses the body itself (-32602).
std::string routingHeaderProblem(const Poco::Net::NameValueCollection& headers,
                                 const Message& message);

// A header value as the transport encodes it: plain visible ASCII (surrounding blanks
// dropped), or "=?base64?<Base64 of UTF-8>?=" for anything else. nullopt when the value holds
// a control or non-ASCII byte, or when its Base64 is malformed.
std::optional<std::string> decodeHeaderValue(std::string_view value);

}  // namespace scs::mcp
