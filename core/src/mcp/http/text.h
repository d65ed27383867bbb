// Text helpers the HTTP transport's parts share: ASCII lower case and surrounding blanks
// dropped, for header values and flag values.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace scs::mcp::http {

inline std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

inline std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace scs::mcp::http
