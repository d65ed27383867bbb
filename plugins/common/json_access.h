#pragma once

// Typed, non-throwing reads of engine JSON (shared by the backend plugins): a missing key and a
// value of the wrong type both read as absent, so a caller can never mistake a malformed record for
// a strong setting.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scs::json {

using ObjectPtr = Poco::JSON::Object::Ptr;
using ArrayPtr = Poco::JSON::Array::Ptr;

// nullptr when `text` is not JSON or not of that shape.
ObjectPtr parseObject(const std::string& text);
ArrayPtr parseArray(const std::string& text);

ObjectPtr object(const ObjectPtr& parent, const std::string& key);
ArrayPtr array(const ObjectPtr& parent, const std::string& key);
std::optional<std::string> string(const ObjectPtr& parent, const std::string& key);
std::optional<bool> boolean(const ObjectPtr& parent, const std::string& key);
std::optional<std::int64_t> integer(const ObjectPtr& parent, const std::string& key);

// The object elements of `items` (others skipped); empty for a null array.
std::vector<ObjectPtr> objects(const ArrayPtr& items);

// The string elements of `items` (others skipped); empty for a null array.
std::vector<std::string> strings(const ArrayPtr& items);

// Every key of `parent` with its value when that value is a string.
std::vector<std::pair<std::string, std::string>> stringMap(const ObjectPtr& parent);

std::string stringify(const ObjectPtr& value);

// Standard base64 on one line, as engines' JSON and kubeconfig files carry it. decodeBase64
// throws Poco::DataFormatException on a character outside the alphabet.
std::string encodeBase64(std::string_view bytes);
std::string decodeBase64(const std::string& text);

// Builders for a request body: an object that keeps its keys in the order they are set, and
// arrays.
ObjectPtr newObject();
ArrayPtr arrayOf(const std::vector<std::string>& items);
ArrayPtr emptyArray();

}  // namespace scs::json
