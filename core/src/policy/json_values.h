#pragma once

// Private to policy: reading request arguments that arrive as Poco::Dynamic::Var, either
// parsed JSON (Object::Ptr, Array::Ptr) or built in code (DynamicStruct, Dynamic::Array).

#include <Poco/Dynamic/Struct.h>
#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Stringifier.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace scs::policy::json {

using Members = std::vector<std::pair<std::string, Poco::Dynamic::Var>>;

// The members of a JSON object, sorted by key so that error messages do not depend on the
// order the client wrote them in; nullopt when `value` is not an object.
inline std::optional<Members> members(const Poco::Dynamic::Var& value) {
  Members result;
  if (value.type() == typeid(Poco::JSON::Object::Ptr)) {
    const auto& object = value.extract<Poco::JSON::Object::Ptr>();
    if (object.isNull()) {
      return std::nullopt;
    }
    result.assign(object->begin(), object->end());
  } else if (value.type() == typeid(Poco::DynamicStruct)) {
    const auto& object = value.extract<Poco::DynamicStruct>();
    result.assign(object.begin(), object.end());
  } else {
    return std::nullopt;
  }
  std::sort(result.begin(), result.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return result;
}

// The elements of a JSON array; nullopt when `value` is not an array.
inline std::optional<std::vector<Poco::Dynamic::Var>> elements(const Poco::Dynamic::Var& value) {
  if (value.type() == typeid(Poco::JSON::Array::Ptr)) {
    const auto& array = value.extract<Poco::JSON::Array::Ptr>();
    if (array.isNull()) {
      return std::nullopt;
    }
    return std::vector<Poco::Dynamic::Var>(array->begin(), array->end());
  }
  if (value.type() == typeid(Poco::Dynamic::Array)) {
    return value.extract<Poco::Dynamic::Array>();
  }
  return std::nullopt;
}

// A JSON number: Poco counts bool (and char) as numeric too.
inline bool isNumber(const Poco::Dynamic::Var& value) {
  return value.isNumeric() && !value.isBoolean() && value.type() != typeid(char);
}

// `value` as compact JSON for an error message, cut at a UTF-8 boundary when long, so that
// a huge argument cannot make a huge message.
inline std::string render(const Poco::Dynamic::Var& value) {
  constexpr std::size_t kMaxBytes = 120;
  std::ostringstream out;
  Poco::JSON::Stringifier::stringify(value, out);
  std::string text = out.str();
  if (text.size() > kMaxBytes) {
    std::size_t cut = kMaxBytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    text.resize(cut);
    text += "...";
  }
  return text;
}

}  // namespace scs::policy::json
