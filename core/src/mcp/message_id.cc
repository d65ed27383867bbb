// MessageScanner: the top-level "id" of a JSON-RPC message and its shape picked out of its
// bytes as they stream past, following only strings, nesting and separators and keeping at
// most one short value.

#include "mcp/message_id.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>

namespace scs::mcp {
namespace {

constexpr std::size_t kMaxNameBytes = 8;  // longer than "id": not it

bool endsBareValue(char c) {
  return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

}  // namespace

void MessageScanner::feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (in_string_) {
      if (capturing_ && value_.size() <= kMaxValueBytes) {
        value_.push_back(c);
      } else if (in_name_ && name_.size() <= kMaxNameBytes) {
        name_.push_back(c);
      }
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (in_name_) {
          in_name_ = false;
          name_.pop_back();  // the closing quote
        } else if (capturing_) {
          valueEnded();
        }
      }
      continue;
    }
    if (capturing_) {  // a number, true, false or null
      if (!endsBareValue(c)) {
        if (value_.size() <= kMaxValueBytes) {
          value_.push_back(c);
        }
        continue;
      }
      valueEnded();
    }
    structural(c);
  }
}

void MessageScanner::structural(char c) {
  switch (c) {
    case '"':
      in_string_ = true;
      if (depth_ == 1 && expect_name_) {
        in_name_ = true;
        expect_name_ = false;
        name_.clear();
      } else if (id_value_next_) {
        id_value_next_ = false;
        capturing_ = true;
        value_.assign(1, '"');
      }
      return;
    case '{':
    case '[':
      if (id_value_next_) {  // an object or array is no id
        id_value_next_ = false;
        id_.reset();
      }
      ++depth_;
      deepest_ = std::max(deepest_, depth_);
      ++values_;
      expect_name_ = depth_ == 1 && c == '{';
      return;
    case '}':
    case ']':
      --depth_;
      return;
    case ':':
      if (depth_ == 1 && name_ == "id") {
        id_value_next_ = true;
      }
      name_.clear();
      return;
    case ',':
      ++values_;
      expect_name_ = depth_ == 1;
      return;
    case ' ':
    case '\t':
    case '\r':
    case '\n':
      return;
    default:
      if (id_value_next_) {
        id_value_next_ = false;
        capturing_ = true;
        value_.assign(1, c);
      }
  }
}

void MessageScanner::valueEnded() {
  capturing_ = false;
  id_.reset();
  if (value_.size() > kMaxValueBytes) {
    return;
  }
  try {
    // In an array, because Poco's parser takes only an object or an array at the top.
    Poco::JSON::Parser parser;
    const Poco::JSON::Array::Ptr array =
        parser.parse("[" + value_ + "]").extract<Poco::JSON::Array::Ptr>();
    const Poco::Dynamic::Var value = array->size() == 1 ? array->get(0) : Poco::Dynamic::Var();
    if (value.isString() || value.isInteger()) {
      id_ = value;
    }
  } catch (const Poco::Exception&) {
    // not a JSON value: no id
  }
}

}  // namespace scs::mcp
