// Server: the transport-independent MCP protocol's JSON-RPC 2.0 framing. It parses and
// classifies a message, hands a request to the Dispatcher, and serialises its answer or
// error, with the one map from RpcCode to JSON-RPC code.

#include "mcp/server.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Logger.h>

#include <cctype>
#include <cstdio>
#include <exception>
#include <sstream>
#include <utility>

#include "common/utf8.h"
#include "mcp/dispatcher.h"
#include "mcp/message_id.h"

namespace scs::mcp {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

// Client text quoted back in an error is cut to this many bytes.
constexpr std::size_t kMaxQuotedBytes = 100;

Poco::Logger& logger() { return Poco::Logger::get("scs.mcp"); }

}  // namespace

namespace rpc {

std::string cut(const std::string& text) {
  return common::toValidUtf8(text.substr(0, kMaxQuotedBytes)) +
         (text.size() > kMaxQuotedBytes ? "..." : "");
}

int errorCode(RpcCode code) {
  switch (code) {
    case RpcCode::kParse:
      return -32700;
    case RpcCode::kInvalidRequest:
      return -32600;
    case RpcCode::kMethodNotFound:
      return Server::kMethodNotFound;
    case RpcCode::kInvalidParams:
      return -32602;
    case RpcCode::kHeaderMismatch:
      return -32020;
    case RpcCode::kMissingCapability:
      return -32021;
    case RpcCode::kUnsupportedVersion:
      return -32022;
    case RpcCode::kInternal:
      break;
  }
  return Server::kInternalError;
}

void logError(const std::string& message) noexcept {
  try {
    logger().error(message);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scs.mcp: %s (logging failed: %s)\n", message.c_str(), e.what());
  }
}

std::string serialise(const Object::Ptr& object) {
  std::ostringstream out;
  object->stringify(out);
  return out.str();
}

bool isUsableId(const Var& id) { return id.isString() || (id.isInteger() && !id.isBoolean()); }

Var responseId(const Var& id) {
  return id.isString() ? Var(common::toValidUtf8(id.toString())) : id;
}

}  // namespace rpc

namespace {

using rpc::asObject;
using rpc::checkEnvelope;
using rpc::declaresTasks;
using rpc::Dispatcher;
using rpc::errorCode;
using rpc::isObject;
using rpc::isTaskMethod;
using rpc::isUsableId;
using rpc::kDiscover;
using rpc::kMetaCapabilities;
using rpc::kMetaVersion;
using rpc::logError;
using rpc::responseId;
using rpc::RpcCode;
using rpc::RpcError;
using rpc::serialise;

struct ErrorInfo {
  RpcCode code;
  std::string message;
  Var data;
};

bool fitsIn64Bits(std::string_view literal) {
  const bool negative = !literal.empty() && literal.front() == '-';
  std::string_view digits = negative ? literal.substr(1) : literal;
  const std::string_view limit = negative ? "9223372036854775808" : "18446744073709551615";
  if (digits.size() != limit.size()) {
    return digits.size() < limit.size();
  }
  return digits <= limit;
}

// Poco 1.11 silently wraps integer literals that do not fit in 64 bits (2^64 parses as 0),
// which would let an absurd limit or id pass as a small one. Such literals get a ".0" so
// that they parse as the (large) floating-point numbers they are.
std::string widenHugeIntegers(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  bool in_string = false;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        i += 2;
        continue;
      }
      in_string = c != '"';
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      ++i;
      continue;
    }
    if (c != '-' && !std::isdigit(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    i += c == '-' ? 1 : 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    if (i < text.size() && (text[i] == '.' || text[i] == 'e' || text[i] == 'E')) {
      while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) ||
                                 std::string_view(".eE+-").find(text[i]) != std::string::npos)) {
        ++i;
      }
      continue;
    }
    if (!fitsIn64Bits(text.substr(start, i - start))) {
      out.append(text.substr(copied, i - copied));
      out += ".0";
      copied = i;
    }
  }
  if (copied == 0) {
    return std::string(text);
  }
  out.append(text.substr(copied));
  return out;
}

// Parses one message of any JSON type. Poco parses only objects and arrays at the top
// level, so the message is wrapped in an array that must hold exactly one value.
Var parseMessage(std::string_view message) {
  Array::Ptr wrapper;
  try {
    Poco::JSON::Parser parser;
    const Var parsed = parser.parse("[" + widenHugeIntegers(message) + "]");
    wrapper = parsed.extract<Array::Ptr>();
  } catch (const Poco::Exception& e) {
    throw RpcError(RpcCode::kParse, "Parse error: " + common::toValidUtf8(e.message()));
  }
  if (!wrapper || wrapper->size() != 1) {
    throw RpcError(RpcCode::kParse, "Parse error: expected exactly one JSON value.");
  }
  return wrapper->get(0);
}

std::string resultResponse(const Var& id, const Object::Ptr& result) {
  Object::Ptr response = newObject();
  response->set("jsonrpc", "2.0");
  response->set("id", responseId(id));
  response->set("result", result);
  return serialise(response);
}

std::string errorResponse(const Var& id, RpcCode code, const std::string& message,
                          const Var& data) {
  Object::Ptr error = newObject();
  error->set("code", errorCode(code));
  error->set("message", common::toValidUtf8(message));
  if (!data.isEmpty()) {
    error->set("data", data);
  }
  Object::Ptr response = newObject();
  response->set("jsonrpc", "2.0");
  response->set("id", responseId(id));
  response->set("error", error);
  return serialise(response);
}

}  // namespace

struct Message::Detail {
  Var id;                          // the usable id, or empty
  Object::Ptr params;              // a request's params, when given
  std::optional<ErrorInfo> error;  // set: the answer is this error
  // The modern revision's per-request _meta: the version (a string) and capabilities (an
  // object) it must carry; false when either is missing or of another type.
  bool has_envelope = false;
  bool tasks = false;  // its capabilities declare the tasks extension
};

Server::Server(runs::RunManager& runs, const policy::LimitPolicy& limits,
               const policy::FileSettings& files, ServerInfo info)
    : runs_(runs), limits_(limits), files_(files), info_(std::move(info)) {
  info_.tools.waiting = std::make_shared<net::TenantSlots>(info_.tools.max_waiting_per_tenant);
}

std::size_t Server::maxValues() const {
  // A file is an object of at most three members (path, content, encoding).
  return kMaxMessageValues + 4 * files_.max_files;
}

Message Server::parse(std::string_view text, std::size_t max_values) {
  Message message;
  auto detail = std::make_shared<Message::Detail>();
  try {
    MessageScanner shape;
    shape.feed(text);
    if (shape.deepest() > kMaxMessageDepth) {  // a parse error: its id stays unread
      throw RpcError(RpcCode::kParse, "Parse error: the message nests deeper than " +
                                          std::to_string(kMaxMessageDepth) + " levels.");
    }
    if (shape.values() > max_values) {
      // To its id, as a message too long to read is answered (the transports' MessageScanner).
      if (const auto id = shape.id(); id && isUsableId(*id)) {
        detail->id = *id;
      }
      throw RpcError(RpcCode::kInvalidRequest,
                     "Invalid Request: the message holds more than " + std::to_string(max_values) +
                         " JSON values (objects, arrays and their members); send fewer "
                         "files, or pack them into one archive file.");
    }
    const Var parsed = parseMessage(text);
    if (parsed.type() == typeid(Array::Ptr)) {
      throw RpcError(RpcCode::kInvalidRequest,
                     "Invalid Request: batches are not supported; send one message at a time.");
    }
    if (!isObject(parsed)) {
      throw RpcError(RpcCode::kInvalidRequest,
                     "Invalid Request: a JSON-RPC message must be a JSON object.");
    }
    const Object::Ptr request = asObject(parsed);
    const bool has_id = request->has("id");
    const Var raw_id = has_id ? request->get("id") : Var();
    if (has_id && isUsableId(raw_id)) {
      detail->id = raw_id;
    }
    if (!request->has("method") && (request->has("result") || request->has("error"))) {
      message.kind_ = Message::Kind::kResponse;  // we never send requests
      message.detail_ = detail;
      return message;
    }
    const Var jsonrpc = request->has("jsonrpc") ? request->get("jsonrpc") : Var();
    if (!jsonrpc.isString() || jsonrpc.toString() != "2.0") {
      throw RpcError(RpcCode::kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\".");
    }
    const Var method_value = request->has("method") ? request->get("method") : Var();
    if (!method_value.isString()) {
      throw RpcError(RpcCode::kInvalidRequest, "Invalid Request: \"method\" must be a string.");
    }
    if (has_id && !isUsableId(raw_id)) {
      throw RpcError(RpcCode::kInvalidRequest,
                     "Invalid Request: \"id\" must be a string or an integer.");
    }
    message.method_ = method_value.toString();
    message.kind_ = has_id ? Message::Kind::kRequest : Message::Kind::kNotification;
    if (has_id && request->has("params")) {
      const Var value = request->get("params");
      if (!isObject(value)) {
        throw RpcError(RpcCode::kInvalidParams, "Invalid params: \"params\" must be an object.");
      }
      detail->params = asObject(value);
    }
    const Object::Ptr params = detail->params;
    const Var meta_value = params && params->has("_meta") ? params->get("_meta") : Var();
    if (isObject(meta_value)) {
      const Object::Ptr meta = asObject(meta_value);
      const Var version = meta->has(kMetaVersion) ? meta->get(kMetaVersion) : Var();
      message.modern_ = meta->has(kMetaVersion);
      message.meta_version_ = version.isString() ? common::toValidUtf8(version.toString()) : "";
      const Var capabilities = meta->has(kMetaCapabilities) ? meta->get(kMetaCapabilities) : Var();
      detail->has_envelope = version.isString() && isObject(capabilities);
      detail->tasks = isObject(capabilities) && declaresTasks(asObject(capabilities));
    }
    message.modern_ = message.modern_ || message.method_ == kDiscover;
    message.routing_field_ = message.method_ == "tools/call" ? "name"
                             : isTaskMethod(message.method_) ? "taskId"
                                                             : "";
    if (!message.routing_field_.empty() && params && params->has(message.routing_field_) &&
        params->get(message.routing_field_).isString()) {
      message.routing_name_ = params->get(message.routing_field_).toString();
    }
  } catch (const RpcError& e) {
    if (e.code() != RpcCode::kInvalidParams) {
      message.kind_ = Message::Kind::kInvalid;
    }
    detail->error = ErrorInfo{e.code(), e.what(), e.data()};
  } catch (const std::exception& e) {
    logError(std::string("internal error parsing a message: ") + e.what());
    message.kind_ = Message::Kind::kInvalid;
    detail->error = ErrorInfo{RpcCode::kInternal, "Internal error", Var()};
  }
  message.detail_ = detail;
  return message;
}

std::optional<std::string> Server::handle(std::string_view message, const RequestContext& context) {
  return handle(parseBounded(message), context);
}

std::optional<std::string> Server::handle(const Message& message, const RequestContext& context) {
  std::optional<Answer> answer = respond(message, context);
  if (!answer) {
    return std::nullopt;
  }
  return std::move(answer->text);
}

std::optional<Server::Answer> Server::respond(const Message& message,
                                              const RequestContext& context) {
  const Message::Detail* detail = message.detail_.get();
  if (message.kind() == Message::Kind::kResponse) {
    return std::nullopt;
  }
  if (message.kind() == Message::Kind::kNotification) {
    if (logger().debug()) {  // poco_debug() is compiled out of release builds
      logger().debug("notification " + common::toValidUtf8(message.method()));
    }
    return std::nullopt;
  }
  const Var id = detail != nullptr ? detail->id : Var();
  RpcCode code = RpcCode::kInternal;
  std::string error_message = "Internal error";
  Var data;
  if (detail == nullptr) {
    code = RpcCode::kInvalidRequest;
    error_message = "Invalid Request";
  } else if (detail->error) {
    code = detail->error->code;
    error_message = detail->error->message;
    data = detail->error->data;
  } else {
    if (logger().debug()) {
      logger().debug("request " + common::toValidUtf8(message.method()));
    }
    try {
      const bool modern = message.modern() || context.modern;
      if (modern) {
        checkEnvelope(message, detail->has_envelope);
      }
      Dispatcher dispatcher(runs_, limits_, files_, info_, context, modern,
                            modern && detail->tasks);
      return Answer{resultResponse(id, dispatcher.dispatch(message.method(), detail->params))};
    } catch (const RpcError& e) {
      code = e.code();
      error_message = e.what();
      data = e.data();
    } catch (const Poco::Exception& e) {
      logError("internal error handling a message: " + e.displayText());
    } catch (const std::exception& e) {
      logError(std::string("internal error handling a message: ") + e.what());
    } catch (...) {
      logError("internal error handling a message: unknown exception");
    }
  }
  try {
    return Answer{errorResponse(id, code, error_message, data), errorCode(code)};
  } catch (const std::exception& e) {
    logError(std::string("cannot serialise an error answer: ") + e.what());
    return Answer{
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}})",
        errorCode(RpcCode::kInternal)};
  }
}

std::string Server::oversizedMessageError(std::size_t limit, const std::optional<Var>& id) {
  return errorResponse(id.value_or(Var()), RpcCode::kInvalidRequest,
                       "Invalid Request: the message is longer than the limit of " +
                           std::to_string(limit) + " bytes.",
                       Var());
}

std::string Server::refusal(const std::string& message, const Message* refused) {
  const Var id = refused && refused->detail_ ? refused->detail_->id : Var();
  return errorResponse(id, RpcCode::kInvalidRequest, "Invalid Request: " + message, Var());
}

std::string Server::headerMismatch(const std::string& message, const Message& refused) {
  const Var id = refused.detail_ ? refused.detail_->id : Var();
  return errorResponse(id, RpcCode::kHeaderMismatch, "Header mismatch: " + message, Var());
}

bool isModernProtocolVersion(std::string_view version) {
  for (const char* modern : kModernProtocolVersions) {
    if (version == modern) {
      return true;
    }
  }
  return false;
}

bool isSupportedProtocolVersion(std::string_view version) {
  for (const char* supported : kSupportedProtocolVersions) {
    if (version == supported) {
      return true;
    }
  }
  return false;
}

}  // namespace scs::mcp
