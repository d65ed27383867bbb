// The trim the HTTP transport's parts share, for header values, flag values and token lines.
// Not Poco::trim, which drops \v and \f too: a token line must refuse those, not lose them.
#pragma once

#include <string>
#include <string_view>

namespace scs::mcp::http {

inline std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace scs::mcp::http
