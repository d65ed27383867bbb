// Feeds bytes to launcher::parseTrailer as the launcher's trailer (what follows the marker on a
// run's stdout; written inside the sandbox, so untrusted), under the shipped out-file caps and
// tight ones. The verdict must match an independent model of the trailer's format: a
// malformed trailer is an error sentence (never an exception), an accepted one keeps exactly
// the files that pass the path rules and the caps, counts the others, and caps the exception's
// strings at UTF-8 boundaries. launcher::mimeTypeOf and launcher::isDisplayableImage run on every
// kept file.

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Types.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "launcher/side_channel.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr std::size_t kMaxErrorBytes = 1024;
constexpr std::size_t kTypeCap = 256;
constexpr std::size_t kMessageCap = 8 << 10;
constexpr std::size_t kTracebackCap = 8 << 10;
constexpr std::size_t kMaxOutPathBytes = 4096;

struct ExpectedFile {
  std::string path;
  std::string content;
};

struct Expected {
  bool has_exception = false;
  std::string type;
  std::string message;
  std::string traceback;
  std::vector<ExpectedFile> files;
  std::uint64_t omitted = 0;
  bool truncated = false;
  std::optional<int> code;    // "exit": {"code": N}
  std::optional<int> signal;  // "exit": {"signal": N}
  bool has_result = false;    // a session run's "result"
  bool session_over = false;
};

// A whole number in [min, max] that is not a boolean, as JSON numbers come from Poco.
std::optional<int> smallInteger(const Var& value, int min, int max) {
  const std::type_info& type = value.type();
  std::int64_t number = 0;
  if (type == typeid(Poco::Int64) || type == typeid(int)) {
    number = value.convert<Poco::Int64>();
  } else if (type == typeid(Poco::UInt64) || type == typeid(unsigned)) {
    const Poco::UInt64 unsigned_number = value.convert<Poco::UInt64>();
    if (unsigned_number > static_cast<Poco::UInt64>(max)) {
      return std::nullopt;
    }
    number = static_cast<std::int64_t>(unsigned_number);
  } else {
    return std::nullopt;
  }
  return number >= min && number <= max ? std::optional<int>(static_cast<int>(number))
                                        : std::nullopt;
}

bool isCount(const Var& value) {
  const std::type_info& type = value.type();
  if (type == typeid(Poco::UInt64) || type == typeid(unsigned)) {
    return true;
  }
  if (type == typeid(Poco::Int64) || type == typeid(int)) {
    return value.convert<Poco::Int64>() >= 0;
  }
  return false;
}

bool isString(const Object& object, const std::string& key) {
  return object.has(key) && object.get(key).type() == typeid(std::string);
}

bool isSafeOutPath(std::string_view path) {
  if (path.empty() || path.size() > kMaxOutPathBytes || path.front() == '/' ||
      path.find('\0') != std::string_view::npos) {
    return false;
  }
  while (true) {
    const std::size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    if (part.empty() || part == "." || part == "..") {
      return false;
    }
    if (slash == std::string_view::npos) {
      return true;
    }
    path.remove_prefix(slash + 1);
  }
}

// What launcher::parseTrailer must answer; nullopt for an error sentence.
std::optional<Expected> expectedResults(std::string_view trailer,
                                        const launcher::OutFileCaps& caps) {
  if (!trailer.empty() && trailer.back() == '\n') {
    trailer.remove_suffix(1);
  }
  if (trailer.find('\n') != std::string_view::npos) {
    return std::nullopt;
  }
  Var parsed;
  try {
    Poco::JSON::Parser parser;
    parsed = parser.parse(std::string(trailer));
  } catch (const Poco::Exception&) {
    return std::nullopt;
  }
  if (parsed.type() != typeid(Object::Ptr)) {
    return std::nullopt;
  }
  const Object& root = *parsed.extract<Object::Ptr>();
  Expected expected;
  if (root.has("exit")) {
    const Var value = root.get("exit");
    if (value.type() != typeid(Object::Ptr) || value.extract<Object::Ptr>()->size() != 1) {
      return std::nullopt;
    }
    const Object& exit = *value.extract<Object::Ptr>();
    if (exit.has("code")) {
      expected.code = smallInteger(exit.get("code"), 0, 255);
    } else if (exit.has("signal")) {
      expected.signal = smallInteger(exit.get("signal"), 1, 64);
    }
    if (!expected.code && !expected.signal) {
      return std::nullopt;
    }
  }
  if (root.has("result") && !root.get("result").isEmpty()) {
    if (root.get("result").type() != typeid(std::string)) {
      return std::nullopt;
    }
    expected.has_result = true;
  }
  if (root.has("session_over")) {
    if (root.get("session_over").type() != typeid(bool)) {
      return std::nullopt;
    }
    expected.session_over = root.get("session_over").extract<bool>();
  }
  if (root.has("exception") && !root.get("exception").isEmpty()) {
    const Var value = root.get("exception");
    if (value.type() != typeid(Object::Ptr)) {
      return std::nullopt;
    }
    const Object& exception = *value.extract<Object::Ptr>();
    if (!isString(exception, "type") || !isString(exception, "message") ||
        !isString(exception, "traceback") || exception.getValue<std::string>("type").empty()) {
      return std::nullopt;
    }
    expected.has_exception = true;
    expected.type = exception.getValue<std::string>("type");
    expected.message = exception.getValue<std::string>("message");
    expected.traceback = exception.getValue<std::string>("traceback");
  }
  if (root.has("files_omitted")) {
    if (!isCount(root.get("files_omitted"))) {
      return std::nullopt;
    }
    expected.omitted = root.get("files_omitted").convert<Poco::UInt64>();
  }
  if (root.has("files_truncated")) {
    if (root.get("files_truncated").type() != typeid(bool)) {
      return std::nullopt;
    }
    expected.truncated = root.get("files_truncated").extract<bool>();
  }
  if (root.has("files") && !root.get("files").isEmpty()) {
    const Var files = root.get("files");
    if (files.type() != typeid(Array::Ptr)) {
      return std::nullopt;
    }
    std::size_t total = 0;
    for (const Var& element : *files.extract<Array::Ptr>()) {
      if (element.type() != typeid(Object::Ptr)) {
        return std::nullopt;
      }
      const Object& entry = *element.extract<Object::Ptr>();
      if (!isString(entry, "path") || !isString(entry, "content_base64")) {
        return std::nullopt;
      }
      const std::string path = entry.getValue<std::string>("path");
      const std::optional<std::string> content =
          decodeStrictBase64(entry.getValue<std::string>("content_base64"));
      if (!content) {
        return std::nullopt;
      }
      if (isSafeOutPath(path) && expected.files.size() < caps.max_files &&
          content->size() <= caps.max_file_bytes &&
          total + content->size() <= caps.max_total_bytes) {
        total += content->size();
        expected.files.push_back({path, *content});
      } else {
        ++expected.omitted;
      }
    }
  }
  expected.truncated = expected.truncated || expected.omitted > 0;
  return expected;
}

// `got` is `sent` when it fits the cap, else a prefix of at least cap - 3 bytes, then "...".
bool cappedHead(const std::string& got, const std::string& sent, std::size_t cap) {
  if (sent.size() <= cap) {
    return got == sent;
  }
  if (got.size() < 3 || got.compare(got.size() - 3, 3, "...") != 0) {
    return false;
  }
  const std::size_t kept = got.size() - 3;
  return kept <= cap && kept + 3 >= cap && sent.compare(0, kept, got, 0, kept) == 0;
}

// `got` is `sent` when it fits the cap, else "[...]\n" and a suffix of at least cap - 3 bytes.
bool cappedTail(const std::string& got, const std::string& sent, std::size_t cap) {
  constexpr std::string_view kCut = "[...]\n";
  if (sent.size() <= cap) {
    return got == sent;
  }
  if (got.compare(0, kCut.size(), kCut) != 0) {
    return false;
  }
  const std::size_t kept = got.size() - kCut.size();
  return kept <= cap && kept + 3 >= cap &&
         sent.compare(sent.size() - kept, kept, got, kCut.size(), kept) == 0;
}

void checkImageTyping(const launcher::OutFile& file) {
  const std::string mime = launcher::mimeTypeOf(file.path, file.content);
  SCS_FUZZ_CHECK(!mime.empty(), file.path);
  if (!launcher::isDisplayableImage(mime, file.content)) {
    return;
  }
  const std::string_view content = file.content;
  const bool magic = content.rfind("\x89PNG\r\n\x1a\n", 0) == 0 ||
                     content.rfind("\xFF\xD8\xFF", 0) == 0 || content.rfind("GIF87a", 0) == 0 ||
                     content.rfind("GIF89a", 0) == 0 ||
                     content.substr(0, 4096).find("<svg") != std::string_view::npos;
  SCS_FUZZ_CHECK(magic, mime + " " + file.path);
}

void check(std::string_view trailer, const launcher::OutFileCaps& caps) {
  const Result<launcher::RunResults> parsed = launcher::parseTrailer(trailer, caps);
  const std::optional<Expected> expected = expectedResults(trailer, caps);
  if (const auto* problem = std::get_if<Error>(&parsed)) {
    const std::string& message = problem->message;
    SCS_FUZZ_CHECK(!expected, "refused (" + message + "): " + printable(trailer));
    SCS_FUZZ_CHECK(!message.empty() && message.size() <= kMaxErrorBytes, message);
    return;
  }
  const launcher::RunResults& got = std::get<launcher::RunResults>(parsed);
  SCS_FUZZ_CHECK(expected, trailer);
  SCS_FUZZ_CHECK(got.exception.has_value() == expected->has_exception, trailer);
  if (got.exception) {
    const launcher::RunException& exception = *got.exception;
    SCS_FUZZ_CHECK(isValidUtf8(exception.type) && isValidUtf8(exception.message) &&
                       isValidUtf8(exception.traceback),
                   trailer);
    SCS_FUZZ_CHECK(cappedHead(exception.type, expected->type, kTypeCap), trailer);
    SCS_FUZZ_CHECK(cappedHead(exception.message, expected->message, kMessageCap), trailer);
    SCS_FUZZ_CHECK(cappedTail(exception.traceback, expected->traceback, kTracebackCap), trailer);
  }
  SCS_FUZZ_CHECK(got.exit.has_value() == (expected->code || expected->signal), trailer);
  if (got.exit) {
    SCS_FUZZ_CHECK(got.exit->code == expected->code && got.exit->signal == expected->signal,
                   trailer);
  }
  SCS_FUZZ_CHECK(got.result.has_value() == expected->has_result, trailer);
  if (got.result) {
    SCS_FUZZ_CHECK(isValidUtf8(*got.result), trailer);
  }
  SCS_FUZZ_CHECK(got.session_over == expected->session_over, trailer);
  SCS_FUZZ_CHECK(got.files_omitted == expected->omitted, trailer);
  SCS_FUZZ_CHECK(got.files_truncated == expected->truncated, trailer);
  SCS_FUZZ_CHECK(got.files.size() == expected->files.size(), trailer);
  std::size_t total = 0;
  for (std::size_t i = 0; i < got.files.size(); ++i) {
    SCS_FUZZ_CHECK(got.files[i].path == expected->files[i].path, trailer);
    SCS_FUZZ_CHECK(got.files[i].content == expected->files[i].content, trailer);
    SCS_FUZZ_CHECK(got.files[i].content.size() <= caps.max_file_bytes, trailer);
    total += got.files[i].content.size();
    checkImageTyping(got.files[i]);
  }
  SCS_FUZZ_CHECK(got.files.size() <= caps.max_files && total <= caps.max_total_bytes, trailer);
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs;
  const std::string_view trailer(reinterpret_cast<const char*>(data), size);
  fuzz::check(trailer, launcher::OutFileCaps{});
  fuzz::check(trailer, launcher::OutFileCaps{3, 16, 24});
  return 0;
}
