// The side channel's formats: the trailer and end markers, the control files, a session run's
// frame, the trailer parsed and capped (exit, exception, files), and a returned file's media type.

#include "launcher/side_channel.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/utf8.h"

namespace scs::launcher {
namespace {

namespace protocol = backend::launcher;
using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr std::size_t kMaxTypeBytes = 256;
constexpr std::size_t kMaxMessageBytes = 8 << 10;
constexpr std::size_t kMaxTracebackBytes = 8 << 10;
constexpr std::size_t kMaxOutPathBytes = 4096;
constexpr std::size_t kMaxRefusalBytes = 1024;
constexpr std::size_t kMaxLauncherErrorBytes = 8 << 10;
// Per file: JSON keys, the escaped path and the size; once: the exception and the flags.
constexpr std::size_t kTrailerSlackPerFile = 32 << 10;
constexpr std::size_t kTrailerSlack = 256 << 10;

// Cuts at a byte count without splitting a UTF-8 sequence.
std::size_t utf8Boundary(std::string_view text, std::size_t at) {
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) {
    --at;
  }
  return at;
}

std::string capHead(std::string text, std::size_t cap) {
  if (text.size() <= cap) {
    return text;
  }
  text.resize(utf8Boundary(text, cap));
  return text + "...";
}

std::string capTail(std::string text, std::size_t cap) {
  if (text.size() <= cap) {
    return text;
  }
  std::size_t from = text.size() - cap;
  while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) {
    ++from;
  }
  return "[...]\n" + text.substr(from);
}

bool isSafeOutPath(std::string_view path) {
  if (path.empty() || path.size() > kMaxOutPathBytes || path.front() == '/' ||
      path.find('\0') != std::string_view::npos) {
    return false;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    const std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") {
      return false;
    }
    if (slash == std::string_view::npos) {
      return true;
    }
    start = slash + 1;
  }
}

std::optional<std::string> stringMember(const Object& object, const std::string& key) {
  if (!object.has(key)) {
    return std::nullopt;
  }
  const Var value = object.get(key);
  if (!value.isString()) {
    return std::nullopt;
  }
  return value.convert<std::string>();
}

Result<RunException> readException(const Var& value) {
  if (value.type() != typeid(Object::Ptr) || !value.extract<Object::Ptr>()) {
    return internal("\"exception\" is not an object");
  }
  const Object& object = *value.extract<Object::Ptr>();
  RunException exception;
  const auto type = stringMember(object, "type");
  const auto message = stringMember(object, "message");
  const auto traceback = stringMember(object, "traceback");
  if (!type || type->empty() || !message || !traceback) {
    return internal("\"exception\" needs the strings type, message and traceback");
  }
  exception.type = capHead(*type, kMaxTypeBytes);
  exception.message = capHead(*message, kMaxMessageBytes);
  exception.traceback = capTail(*traceback, kMaxTracebackBytes);
  return exception;
}

// {"code": N} or {"signal": N}: how the launcher saw the program's process end.
Result<ProgramExit> readExit(const Var& value) {
  const auto small = [](const Var& number, int min, int max) -> std::optional<int> {
    if (!number.isInteger() || number.isBoolean()) {
      return std::nullopt;
    }
    const auto parsed = number.convert<std::int64_t>();
    return parsed >= min && parsed <= max ? std::optional<int>(static_cast<int>(parsed))
                                          : std::nullopt;
  };
  if (value.type() == typeid(Object::Ptr) && value.extract<Object::Ptr>()) {
    const Object& object = *value.extract<Object::Ptr>();
    ProgramExit exit;
    if (object.size() == 1 && object.has("code")) {
      exit.code = small(object.get("code"), 0, 255);
    } else if (object.size() == 1 && object.has("signal")) {
      exit.signal = small(object.get("signal"), 1, 64);
    }
    if (exit.code || exit.signal) {
      return exit;
    }
  }
  return internal("\"exit\" is not {\"code\": 0-255} or {\"signal\": 1-64}");
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string extensionOf(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) {
    return {};
  }
  std::string extension(name.substr(dot + 1));
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

bool isWebp(std::string_view content) {
  return content.size() >= 12 && startsWith(content, "RIFF") && content.substr(8, 4) == "WEBP";
}

bool looksLikeSvg(std::string_view content) {
  return content.substr(0, 4096).find("<svg") != std::string_view::npos;
}

}  // namespace

std::string trailerMarker(std::string_view nonce) {
  std::string marker(protocol::kTrailerPrefix);
  marker.append(nonce);
  marker.append(protocol::kMarkerEnd);
  return marker;
}

std::string stderrEndMarker(std::string_view nonce) {
  std::string marker(protocol::kEndPrefix);
  marker.append(nonce);
  marker.append(protocol::kMarkerEnd);
  return marker;
}

std::size_t trailerCapBytes(const OutFileCaps& caps) {
  const std::size_t encoded = (caps.max_total_bytes + 2) / 3 * 4;
  // A result's JSON string may take six bytes (\uXXXX) for each of its bytes.
  return encoded + caps.max_files * kTrailerSlackPerFile + kTrailerSlack + 6 * kMaxResultBytes;
}

std::vector<policy::File> controlFiles(std::string_view nonce, const OutFileCaps& caps,
                                       std::int64_t watchdog_seconds,
                                       const std::optional<std::string>& stdin_data,
                                       policy::Language language,
                                       const std::optional<egress::LauncherEgress>& egress) {
  Object::Ptr control = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  const auto key = [](std::string_view name) { return std::string(name); };
  control->set(key(protocol::kControlNonce), std::string(nonce));
  control->set(key(protocol::kControlOutDir), std::string(kOutDirectory));
  control->set(key(protocol::kControlMaxFiles), static_cast<std::uint64_t>(caps.max_files));
  control->set(key(protocol::kControlMaxFileBytes),
               static_cast<std::uint64_t>(caps.max_file_bytes));
  control->set(key(protocol::kControlMaxTotalBytes),
               static_cast<std::uint64_t>(caps.max_total_bytes));
  control->set(key(protocol::kControlStdin), stdin_data.has_value());
  control->set(key(protocol::kControlWatchdog), watchdog_seconds);
  control->set(key(protocol::kControlResultCap), static_cast<std::uint64_t>(kMaxResultBytes));
  control->set(key(protocol::kControlLanguage), std::string(policy::nameOf(language)));
  if (egress) {
    control->set(key(protocol::kControlEgress), egress->nonce);
    if (!egress->ca_pem.empty()) {
      control->set(key(protocol::kControlEgressCa), egress->ca_pem);
    }
    if (!egress->environment.empty()) {
      Object::Ptr environment = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      for (const auto& [name, value] : egress->environment) {
        environment->set(name, value);
      }
      control->set(key(protocol::kControlEgressEnvironment), environment);
    }
  }
  std::ostringstream json;
  control->stringify(json);
  std::vector<policy::File> files{{kControlPath, json.str()}};
  if (stdin_data) {
    files.push_back({kStdinPath, *stdin_data});
  }
  return files;
}

Result<RunResults> parseTrailer(std::string_view trailer, const OutFileCaps& caps) {
  std::string_view line = trailer;
  if (!line.empty() && line.back() == '\n') {
    line.remove_suffix(1);
  }
  if (line.find('\n') != std::string_view::npos) {
    return internal("the trailer is more than one line");
  }
  Var parsed;
  try {
    Poco::JSON::Parser parser;
    parsed = parser.parse(std::string(line));
  } catch (const Poco::Exception& e) {
    return internal("the trailer is not JSON: " + e.displayText());
  }
  if (parsed.type() != typeid(Object::Ptr) || !parsed.extract<Object::Ptr>()) {
    return internal("the trailer is not a JSON object");
  }
  const Object& root = *parsed.extract<Object::Ptr>();

  // A member of the trailer by its protocol key: nullopt when absent, the value (maybe null)
  // when present.
  const auto member = [&root](std::string_view key) -> std::optional<Var> {
    const std::string name(key);
    return root.has(name) ? std::optional<Var>(root.get(name)) : std::nullopt;
  };
  const auto given = [&member](std::string_view key) -> std::optional<Var> {
    std::optional<Var> value = member(key);
    return value && !value->isEmpty() ? value : std::nullopt;
  };

  RunResults results;
  if (const auto value = given(protocol::kTrailerExit)) {
    auto exit = readExit(*value);
    if (auto* problem = std::get_if<Error>(&exit)) {
      return *problem;
    }
    results.exit = std::get<ProgramExit>(exit);
  }
  if (const auto value = given(protocol::kTrailerException)) {
    auto exception = readException(*value);
    if (auto* problem = std::get_if<Error>(&exception)) {
      return *problem;
    }
    results.exception = std::move(std::get<RunException>(exception));
  }
  if (const auto result = given(protocol::kTrailerResult)) {
    if (!result->isString()) {
      return internal("\"result\" is not a string");
    }
    // Valid UTF-8 and within the cap whatever the sandbox sent.
    results.result = common::toValidUtf8(capHead(result->toString(), kMaxResultBytes + 64));
  }
  for (const auto& [key, field, cap] :
       {std::tuple{protocol::kTrailerRefused, &results.refused, kMaxRefusalBytes},
        std::tuple{protocol::kTrailerLauncherError, &results.launcher_error,
                   kMaxLauncherErrorBytes}}) {
    if (const auto text = given(key)) {
      if (!text->isString()) {
        return internal("\"" + std::string(key) + "\" is not a string");
      }
      *field = common::toValidUtf8(capTail(text->toString(), cap));
    }
  }
  if (const auto seconds = given(protocol::kTrailerWarmSeconds)) {
    const double value =
        seconds->isNumeric() && !seconds->isBoolean() ? seconds->convert<double>() : -1;
    if (!(value >= 0 && value < 3600)) {
      return internal("\"warm_seconds\" is not a duration");
    }
    results.warm_seconds = value;
  }
  if (const auto over = member(protocol::kTrailerSessionOver)) {
    if (!over->isBoolean()) {
      return internal("\"session_over\" is not a boolean");
    }
    results.session_over = over->convert<bool>();
  }
  if (const auto omitted = member(protocol::kTrailerFilesOmitted)) {
    // Poco counts a bool as an integer, and converting 2^63 or more to int64 throws.
    if (!omitted->isInteger() || omitted->isBoolean() ||
        (omitted->isSigned() && omitted->convert<std::int64_t>() < 0)) {
      return internal("\"files_omitted\" is not a count");
    }
    results.files_omitted = omitted->convert<std::uint64_t>();
  }
  if (const auto truncated = member(protocol::kTrailerFilesTruncated)) {
    if (!truncated->isBoolean()) {
      return internal("\"files_truncated\" is not a boolean");
    }
    results.files_truncated = truncated->convert<bool>();
  }
  if (const auto given_files = given(protocol::kTrailerFiles)) {
    const Var& files = *given_files;
    if (files.type() != typeid(Array::Ptr) || !files.extract<Array::Ptr>()) {
      return internal("\"files\" is not an array");
    }
    std::size_t total = 0;
    for (const Var& element : *files.extract<Array::Ptr>()) {
      if (element.type() != typeid(Object::Ptr) || !element.extract<Object::Ptr>()) {
        return internal("an entry of \"files\" is not an object");
      }
      const Object& entry = *element.extract<Object::Ptr>();
      const auto path = stringMember(entry, "path");
      const auto encoded = stringMember(entry, "content_base64");
      if (!path || !encoded) {
        return internal("an entry of \"files\" needs the strings path and content_base64");
      }
      std::optional<std::string> content = policy::decodeBase64(*encoded);
      if (!content) {
        return internal("the content of \"" + capHead(*path, 200) + "\" is not base64");
      }
      if (!isSafeOutPath(*path) || results.files.size() >= caps.max_files ||
          content->size() > caps.max_file_bytes || total + content->size() > caps.max_total_bytes) {
        ++results.files_omitted;
        continue;
      }
      total += content->size();
      results.files.push_back({*path, std::move(*content)});
    }
  }
  results.files_truncated = results.files_truncated || results.files_omitted > 0;
  return results;
}

std::string mimeTypeOf(std::string_view path, std::string_view content) {
  if (startsWith(content, "\x89PNG\r\n\x1a\n")) {
    return "image/png";
  }
  if (startsWith(content, "\xFF\xD8\xFF")) {
    return "image/jpeg";
  }
  if (startsWith(content, "GIF87a") || startsWith(content, "GIF89a")) {
    return "image/gif";
  }
  if (isWebp(content)) {
    return "image/webp";
  }
  if (startsWith(content, "%PDF-")) {
    return "application/pdf";
  }
  const std::string extension = extensionOf(path);
  if (extension == "svg") {
    return looksLikeSvg(content) ? "image/svg+xml" : "application/octet-stream";
  }
  static const std::pair<const char*, const char*> kByExtension[] = {
      {"txt", "text/plain"},        {"log", "text/plain"},
      {"csv", "text/csv"},          {"tsv", "text/tab-separated-values"},
      {"json", "application/json"}, {"html", "text/html"},
      {"htm", "text/html"},         {"md", "text/markdown"},
      {"xml", "application/xml"},   {"py", "text/x-python"},
      {"zip", "application/zip"},   {"npy", "application/octet-stream"},
  };
  for (const auto& [known, mime] : kByExtension) {
    if (extension == known) {
      return mime;
    }
  }
  return "application/octet-stream";
}

bool isDisplayableImage(std::string_view mime_type, std::string_view content) {
  if (mime_type == "image/png") {
    return startsWith(content, "\x89PNG\r\n\x1a\n");
  }
  if (mime_type == "image/jpeg") {
    return startsWith(content, "\xFF\xD8\xFF");
  }
  if (mime_type == "image/gif") {
    return startsWith(content, "GIF87a") || startsWith(content, "GIF89a");
  }
  if (mime_type == "image/webp") {
    return isWebp(content);
  }
  return false;
}

}  // namespace scs::launcher
