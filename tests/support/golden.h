#pragma once

// The files of tests/golden, which both languages' tests read: their strings' characters (each
// below 256, as Python's latin-1 writes them) stand for bytes.

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <fstream>
#include <string>

namespace scs::testing {

// The bytes a golden string's characters stand for (UTF-8 of U+0000 to U+00FF).
inline std::string goldenBytes(const std::string& utf8) {
  std::string out;
  for (std::size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    out.push_back(c < 0x80 ? static_cast<char>(c)
                           : static_cast<char>(((c & 0x1f) << 6) | (utf8[++i] & 0x3f)));
  }
  return out;
}

// tests/golden/`name`, parsed; null when it cannot be read.
inline Poco::JSON::Object::Ptr readGolden(const std::string& name) {
  std::ifstream file(std::string(SCS_SOURCE_DIR) + "/tests/golden/" + name);
  if (!file) {
    return nullptr;
  }
  Poco::JSON::Parser parser;
  return parser.parse(file).extract<Poco::JSON::Object::Ptr>();
}

}  // namespace scs::testing
