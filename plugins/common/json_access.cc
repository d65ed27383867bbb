// The typed JSON reads: a value of the wrong type, a missing key or text that is not JSON all
// read as absent; one-line Base64; key-ordered builders.

#include "json_access.h"

#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Parser.h>

#include <iterator>
#include <sstream>

namespace scs::json {
namespace {

Poco::Dynamic::Var parse(const std::string& text) {
  try {
    Poco::JSON::Parser parser;
    return parser.parse(text);
  } catch (const Poco::Exception&) {
    return {};  // not JSON: the caller reads absent
  }
}

Poco::Dynamic::Var value(const ObjectPtr& parent, const std::string& key) {
  if (parent.isNull() || !parent->has(key)) {
    return {};
  }
  return parent->get(key);
}

}  // namespace

ObjectPtr parseObject(const std::string& text) {
  const Poco::Dynamic::Var parsed = parse(text);
  return parsed.type() == typeid(ObjectPtr) ? parsed.extract<ObjectPtr>() : ObjectPtr();
}

ArrayPtr parseArray(const std::string& text) {
  const Poco::Dynamic::Var parsed = parse(text);
  return parsed.type() == typeid(ArrayPtr) ? parsed.extract<ArrayPtr>() : ArrayPtr();
}

ObjectPtr object(const ObjectPtr& parent, const std::string& key) {
  const Poco::Dynamic::Var found = value(parent, key);
  return found.type() == typeid(ObjectPtr) ? found.extract<ObjectPtr>() : ObjectPtr();
}

ArrayPtr array(const ObjectPtr& parent, const std::string& key) {
  const Poco::Dynamic::Var found = value(parent, key);
  return found.type() == typeid(ArrayPtr) ? found.extract<ArrayPtr>() : ArrayPtr();
}

std::optional<std::string> string(const ObjectPtr& parent, const std::string& key) {
  const Poco::Dynamic::Var found = value(parent, key);
  if (!found.isString()) {
    return std::nullopt;
  }
  return found.extract<std::string>();
}

std::optional<bool> boolean(const ObjectPtr& parent, const std::string& key) {
  const Poco::Dynamic::Var found = value(parent, key);
  if (!found.isBoolean()) {
    return std::nullopt;
  }
  return found.extract<bool>();
}

std::optional<std::int64_t> integer(const ObjectPtr& parent, const std::string& key) {
  const Poco::Dynamic::Var found = value(parent, key);
  if (!found.isInteger()) {
    return std::nullopt;
  }
  try {
    return found.convert<Poco::Int64>();
  } catch (const Poco::Exception&) {
    return std::nullopt;  // an unsigned value beyond int64
  }
}

std::vector<std::string> strings(const ArrayPtr& items) {
  std::vector<std::string> result;
  if (items.isNull()) {
    return result;
  }
  for (std::size_t i = 0; i < items->size(); ++i) {
    const Poco::Dynamic::Var item = items->get(static_cast<unsigned>(i));
    if (item.isString()) {
      result.push_back(item.extract<std::string>());
    }
  }
  return result;
}

std::vector<std::pair<std::string, std::string>> stringMap(const ObjectPtr& parent) {
  std::vector<std::pair<std::string, std::string>> result;
  if (parent.isNull()) {
    return result;
  }
  std::vector<std::string> keys;
  parent->getNames(keys);
  for (const auto& key : keys) {
    if (const auto text = string(parent, key)) {
      result.emplace_back(key, *text);
    }
  }
  return result;
}

std::string stringify(const ObjectPtr& value) {
  std::ostringstream out;
  value->stringify(out);
  return out.str();
}

std::vector<ObjectPtr> objects(const ArrayPtr& items) {
  std::vector<ObjectPtr> result;
  for (std::size_t i = 0; items && i < items->size(); ++i) {
    if (ObjectPtr item = items->getObject(static_cast<unsigned>(i))) {
      result.push_back(item);
    }
  }
  return result;
}

std::string encodeBase64(std::string_view bytes) {
  std::ostringstream out;
  Poco::Base64Encoder encoder(out);
  encoder.rdbuf()->setLineLength(0);
  encoder.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  encoder.close();
  return out.str();
}

std::string decodeBase64(const std::string& text) {
  std::istringstream in(text);
  Poco::Base64Decoder decoder(in);
  return std::string(std::istreambuf_iterator<char>(decoder), std::istreambuf_iterator<char>());
}

ObjectPtr newObject() { return new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER); }

ArrayPtr arrayOf(const std::vector<std::string>& items) {
  ArrayPtr result = new Poco::JSON::Array();
  for (const auto& item : items) {
    result->add(item);
  }
  return result;
}

ArrayPtr emptyArray() { return new Poco::JSON::Array(); }

}  // namespace scs::json
