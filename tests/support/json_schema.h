#pragma once

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <cmath>
#include <string>
#include <vector>

namespace scs::testing {

// The elements of a JSON array, as text.
inline std::vector<std::string> stringsOf(const Poco::Dynamic::Var& value) {
  std::vector<std::string> out;
  for (const Poco::Dynamic::Var& item : *value.extract<Poco::JSON::Array::Ptr>()) {
    out.push_back(item.toString());
  }
  return out;
}

// Whether `value` is of the JSON Schema `type`.
inline bool hasType(const Poco::Dynamic::Var& value, const std::string& type) {
  if (type == "null") {
    return value.isEmpty();
  }
  if (type == "object") {
    return value.type() == typeid(Poco::JSON::Object::Ptr);
  }
  if (type == "array") {
    return value.type() == typeid(Poco::JSON::Array::Ptr);
  }
  if (type == "string") {
    return value.isString();
  }
  if (type == "boolean") {
    return value.isBoolean();
  }
  if (type == "number") {
    return value.isNumeric() && !value.isBoolean();
  }
  if (type == "integer") {
    return (value.isInteger() && !value.isBoolean()) ||
           (value.isNumeric() && !value.isBoolean() &&
            std::floor(value.convert<double>()) == value.convert<double>());
  }
  return false;
}

// Enough of JSON Schema for our output schemas: type, enum, properties, required,
// additionalProperties false, minimum, maximum, items. Appends one line per violation.
inline void appendSchemaViolations(const Poco::Dynamic::Var& value,
                                   const Poco::JSON::Object::Ptr& schema, const std::string& where,
                                   std::vector<std::string>& errors) {
  if (schema->has("type")) {
    const Poco::Dynamic::Var type = schema->get("type");
    const std::vector<std::string> types =
        type.isString() ? std::vector<std::string>{type.toString()} : stringsOf(type);
    bool matched = false;
    for (const std::string& t : types) {
      matched = matched || hasType(value, t);
    }
    if (!matched) {
      errors.push_back(where + ": wrong type");
      return;
    }
  }
  if (schema->has("enum")) {
    bool found = false;
    for (const std::string& option : stringsOf(schema->get("enum"))) {
      found = found || (value.isString() && value.toString() == option);
    }
    if (!found) {
      errors.push_back(where + ": not in enum");
    }
  }
  if (schema->has("minimum") && value.isNumeric() &&
      value.convert<double>() < schema->get("minimum").convert<double>()) {
    errors.push_back(where + ": below minimum");
  }
  if (schema->has("maximum") && value.isNumeric() &&
      value.convert<double>() > schema->get("maximum").convert<double>()) {
    errors.push_back(where + ": above maximum");
  }
  if (value.type() == typeid(Poco::JSON::Object::Ptr)) {
    const Poco::JSON::Object::Ptr object = value.extract<Poco::JSON::Object::Ptr>();
    const Poco::JSON::Object::Ptr properties =
        schema->has("properties") ? schema->getObject("properties")
                                  : Poco::JSON::Object::Ptr(new Poco::JSON::Object);
    if (schema->has("required")) {
      for (const std::string& key : stringsOf(schema->get("required"))) {
        if (!object->has(key)) {
          errors.push_back(where + "." + key + ": required but missing");
        }
      }
    }
    for (const auto& [key, member] : *object) {
      if (properties->has(key)) {
        appendSchemaViolations(member, properties->getObject(key), where + "." + key, errors);
      } else {
        // Our schemas list every field we send: an unlisted one is a bug either way.
        errors.push_back(where + "." + key + ": not in the schema");
      }
    }
  }
  if (value.type() == typeid(Poco::JSON::Array::Ptr) && schema->has("items")) {
    int index = 0;
    for (const Poco::Dynamic::Var& item : *value.extract<Poco::JSON::Array::Ptr>()) {
      appendSchemaViolations(item, schema->getObject("items"),
                             where + "[" + std::to_string(index++) + "]", errors);
    }
  }
}

// What `value` breaks of `schema` (see appendSchemaViolations), one line each, `where` naming the
// value.
inline std::vector<std::string> schemaViolations(const Poco::Dynamic::Var& value,
                                                 const Poco::JSON::Object::Ptr& schema,
                                                 const std::string& where) {
  std::vector<std::string> errors;
  appendSchemaViolations(value, schema, where, errors);
  return errors;
}

}  // namespace scs::testing
