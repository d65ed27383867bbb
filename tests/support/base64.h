#pragma once

#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>

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

// Encodes as standard base64 on one line, as JSON and kubeconfig files carry it.
inline std::string base64Encode(const std::string& bytes) {
  std::ostringstream out;
  Poco::Base64Encoder encoder(out);
  encoder.rdbuf()->setLineLength(0);
  encoder << bytes;
  encoder.close();
  return out.str();
}

}  // namespace scs::testing
