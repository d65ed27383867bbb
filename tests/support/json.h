#pragma once

#include <Poco/JSON/Object.h>
#include <Poco/JSON/ParseHandler.h>
#include <Poco/JSON/Parser.h>

#include <sstream>
#include <string>

namespace scs::testing {

// Parses a JSON object keeping its key order, so that compact() shows the order it was written.
inline Poco::JSON::Object::Ptr parseOrdered(const std::string& json) {
  Poco::JSON::Parser parser(new Poco::JSON::ParseHandler(true));
  return parser.parse(json).extract<Poco::JSON::Object::Ptr>();
}

// The object as one line of JSON.
inline std::string compact(const Poco::JSON::Object::Ptr& object) {
  std::ostringstream out;
  object->stringify(out);
  return out.str();
}

}  // namespace scs::testing
