#pragma once

#include <Poco/Base64Decoder.h>

#include <iterator>
#include <sstream>
#include <string>

namespace scs::testing {

// Decodes standard base64, for checking files and images a report returns.
inline std::string base64Decode(const std::string& text) {
  std::istringstream in(text);
  Poco::Base64Decoder decoder(in);
  return std::string(std::istreambuf_iterator<char>(decoder), std::istreambuf_iterator<char>());
}

}  // namespace scs::testing
