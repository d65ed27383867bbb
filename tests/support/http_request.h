#pragma once

#include <Poco/Net/HTTPRequest.h>

#include <map>
#include <string>

namespace scs::testing {

// The first request of an MCP session, and a ping, as a client posts them.
inline constexpr const char* kInitialize =
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",)"
    R"("capabilities":{},"clientInfo":{"name":"test","version":"1"}}})";
inline constexpr const char* kPing = R"({"jsonrpc":"2.0","id":1,"method":"ping"})";

// Sets on `request` the headers of a well-formed MCP POST (a JSON body, JSON or an event stream
// accepted), each replaced by the one of the same name in `headers`; an empty value leaves the
// header out.
inline void setMcpHeaders(Poco::Net::HTTPRequest& request,
                          const std::map<std::string, std::string>& headers) {
  std::map<std::string, std::string> all = {{"Content-Type", "application/json"},
                                            {"Accept", "application/json, text/event-stream"}};
  for (const auto& [name, value] : headers) {
    all[name] = value;
  }
  for (const auto& [name, value] : all) {
    if (!value.empty()) {
      request.set(name, value);
    }
  }
}

}  // namespace scs::testing
