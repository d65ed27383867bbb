// Reads the input as the JSON `arguments` of start_run and validates `limits` with
// LimitPolicy::resolve and `code` plus `files` with resolveFiles, each under two sets of
// settings, with the code file of its `language` (the model's own table: main.py unless it names
// bash or javascript). Every verdict is compared with an independent model of SPEC section 1
// (accept exactly what it accepts), an accepted file list must hold only safe normalised paths
// within the caps, and its archive must read back, header by header, as the same files.

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Types.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "policy/files.h"
#include "policy/limits.h"
#include "support/checks.h"
#include "support/ustar.h"

namespace scs::fuzz {
namespace {

using scs::testing::readUstar;
using scs::testing::TarEntry;

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr std::size_t kMaxMessageBytes = 1024;  // rejection messages quote, but cut, input
constexpr int kUid = 10001;
constexpr int kGid = 10001;

// The model's code file for start_run's `language`; resolveFiles is given it and must reserve
// it and put the code there.
std::string codeFileFor(const Var& language) {
  const std::string name = language.isString() ? language.toString() : std::string();
  return name == "bash" ? "main.sh" : name == "javascript" ? "main.js" : "main.py";
}

struct Policies {
  policy::LimitSettings settings;
  policy::LimitPolicy roomy{settings, {8, std::int64_t{64} << 30}};
  // A host smaller than the shipped maxima, so the lowered maxima are checked too.
  policy::LimitPolicy small{settings, {3, (std::int64_t{13} << 30) / 2}};
  policy::FileSettings shipped;
  policy::FileSettings tight{4, 64, 40};
};

const Policies& policies() {
  static const Policies* instance = new Policies;
  return *instance;
}

bool isJsonNumber(const Var& value) {
  const std::type_info& type = value.type();
  return type == typeid(int) || type == typeid(unsigned) || type == typeid(Poco::Int64) ||
         type == typeid(Poco::UInt64) || type == typeid(double);
}

// ---- limits ----

struct Field {
  const char* key;
  double policy::Limits::*value;
  double policy::LimitSettings::*floor;
};

constexpr Field kFields[] = {
    {"memory_gb", &policy::Limits::memory_gb, &policy::LimitSettings::min_memory_gb},
    {"timeout_seconds", &policy::Limits::timeout_seconds,
     &policy::LimitSettings::min_timeout_seconds},
    {"cpus", &policy::Limits::cpus, &policy::LimitSettings::min_cpus},
};

const Field* findField(const std::string& key) {
  for (const Field& field : kFields) {
    if (key == field.key) {
      return &field;
    }
  }
  return nullptr;
}

// What the model says resolve() must answer: the limits, or nullopt for a rejection.
std::optional<policy::Limits> expectedLimits(const Var& requested,
                                             const policy::LimitSettings& settings,
                                             const policy::LimitPolicy& limits) {
  policy::Limits expected = limits.defaults();
  if (requested.isEmpty()) {
    return expected;
  }
  if (requested.type() != typeid(Object::Ptr)) {
    return std::nullopt;
  }
  for (const auto& [key, value] : *requested.extract<Object::Ptr>()) {
    const Field* field = findField(key);
    if (field == nullptr || !isJsonNumber(value)) {
      return std::nullopt;
    }
    const double number = value.convert<double>();
    if (!std::isfinite(number) || number <= 0 || number < settings.*field->floor ||
        number > limits.maxima().*field->value) {
      return std::nullopt;
    }
    expected.*field->value = number;
  }
  return expected;
}

void checkLimits(const Var& requested, const policy::LimitSettings& settings,
                 const policy::LimitPolicy& limits, std::string_view input) {
  const Result<policy::Limits> resolved = limits.resolve(requested);
  const std::optional<policy::Limits> expected = expectedLimits(requested, settings, limits);
  if (const auto* rejection = std::get_if<Error>(&resolved)) {
    SCS_FUZZ_CHECK(!expected, "rejected: " + rejection->message + " input: " + std::string(input));
    SCS_FUZZ_CHECK(!rejection->message.empty() && rejection->message.size() <= kMaxMessageBytes,
                   rejection->message);
    return;
  }
  const policy::Limits& got = std::get<policy::Limits>(resolved);
  SCS_FUZZ_CHECK(expected, input);
  SCS_FUZZ_CHECK(got == *expected, input);
  SCS_FUZZ_CHECK(got.processes == limits.defaults().processes, input);
  for (const Field& field : kFields) {
    SCS_FUZZ_CHECK(got.*field.value <= limits.maxima().*field.value, input);
    SCS_FUZZ_CHECK(limits.maxima().*field.value <= settings.maxima.*field.value, input);
  }
}

// ---- files ----

struct Entry {
  std::string path;     // as sent
  std::string content;  // decoded
};

std::vector<std::string> split(std::string_view path) {
  std::vector<std::string> parts;
  while (true) {
    const std::size_t slash = path.find('/');
    parts.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) {
      return parts;
    }
    path.remove_prefix(slash + 1);
  }
}

bool fitsUstar(std::string_view name) {
  if (name.size() <= 100) {
    return true;
  }
  for (std::size_t slash = 1; slash <= 155 && slash + 2 <= name.size(); ++slash) {
    if (name[slash] == '/' && name.size() - slash - 1 <= 100) {
      return true;
    }
  }
  return false;
}

// The normalised path ("./a//b" -> "a/b"), or nullopt when SPEC section 1 refuses it.
std::optional<std::string> expectedPath(std::string_view raw, const policy::FileSettings& caps,
                                        const std::string& code_file) {
  if (raw.empty() || raw.front() == '/') {
    return std::nullopt;
  }
  for (const char c : raw) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F || c == '\\') {
      return std::nullopt;
    }
  }
  const std::vector<std::string> parts = split(raw);
  if (parts.back().empty() || parts.back() == ".") {
    return std::nullopt;
  }
  std::string path;
  for (const std::string& part : parts) {
    if (part == ".." || part.size() > 255) {
      return std::nullopt;
    }
    if (!part.empty() && part != ".") {
      path += (path.empty() ? "" : "/") + part;
    }
  }
  if (path.size() > caps.max_path_bytes || path == code_file ||
      path.rfind(code_file + "/", 0) == 0 || path == ".scs" || path.rfind(".scs/", 0) == 0) {
    return std::nullopt;
  }
  for (std::size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    if (!fitsUstar(path.substr(0, slash + 1))) {
      return std::nullopt;
    }
  }
  if (!fitsUstar(path)) {
    return std::nullopt;
  }
  return path;
}

// What the model says resolveFiles() must accept: the files after the code, or nullopt.
std::optional<std::vector<Entry>> expectedFiles(const std::string& code, const Var& files,
                                                const policy::FileSettings& caps,
                                                const std::string& code_file) {
  std::vector<Entry> entries;
  std::vector<Var> elements;
  if (!files.isEmpty()) {
    if (files.type() != typeid(Array::Ptr)) {
      return std::nullopt;
    }
    const Array::Ptr array = files.extract<Array::Ptr>();
    elements.assign(array->begin(), array->end());
  }
  if (elements.size() > caps.max_files) {
    return std::nullopt;
  }
  std::size_t total = code.size();
  for (const Var& element : elements) {
    if (element.type() != typeid(Object::Ptr)) {
      return std::nullopt;
    }
    const Object::Ptr object = element.extract<Object::Ptr>();
    for (const auto& [key, value] : *object) {
      if ((key != "path" && key != "content" && key != "encoding") ||
          value.type() != typeid(std::string)) {
        return std::nullopt;
      }
    }
    if (!object->has("path") || !object->has("content")) {
      return std::nullopt;
    }
    const std::string encoding =
        object->has("encoding") ? object->getValue<std::string>("encoding") : "utf-8";
    std::optional<std::string> path =
        expectedPath(object->getValue<std::string>("path"), caps, code_file);
    std::optional<std::string> content = object->getValue<std::string>("content");
    if (encoding == "base64") {
      content = decodeStrictBase64(*content);
    } else if (encoding != "utf-8") {
      return std::nullopt;
    }
    if (!path || !content) {
      return std::nullopt;
    }
    total += content->size();
    entries.push_back({std::move(*path), std::move(*content)});
  }
  for (const Entry& a : entries) {
    for (const Entry& b : entries) {
      if ((&a != &b && a.path == b.path) || b.path.rfind(a.path + "/", 0) == 0) {
        return std::nullopt;
      }
    }
  }
  if (total > caps.max_total_bytes) {
    return std::nullopt;
  }
  return entries;
}

// The archive must read back as each file's new parent directories, then the file.
void checkArchive(const std::vector<policy::File>& files, std::string_view input) {
  const std::string archive = policy::buildArchive(files, kUid, kGid);
  std::vector<TarEntry> entries;
  if (const std::optional<std::string> problem = readUstar(archive, &entries)) {
    fail("archive does not read back: " + *problem, input);
  }
  std::size_t next = 0;
  std::set<std::string> directories;
  const auto expect = [&](const std::string& name, char type, std::uint32_t mode,
                          const std::string& content) {
    SCS_FUZZ_CHECK(next < entries.size(), input);
    const TarEntry& entry = entries[next++];
    SCS_FUZZ_CHECK(entry.name == name && entry.type == type && entry.mode == mode, entry.name);
    SCS_FUZZ_CHECK(entry.uid == kUid && entry.gid == kGid && entry.content == content, entry.name);
  };
  for (const policy::File& file : files) {
    for (std::size_t slash = file.path.find('/'); slash != std::string::npos;
         slash = file.path.find('/', slash + 1)) {
      const std::string directory = file.path.substr(0, slash + 1);
      if (directories.insert(directory).second) {
        expect(directory, '5', 0755, "");
      }
    }
    expect(file.path, '0', 0644, file.content);
  }
  SCS_FUZZ_CHECK(next == entries.size(), input);
}

void checkFiles(const std::string& code, const Var& files, const policy::FileSettings& caps,
                const std::string& code_file, std::string_view input) {
  const Result<std::vector<policy::File>> resolved =
      policy::resolveFiles(code, files, caps, code_file);
  const std::optional<std::vector<Entry>> expected = expectedFiles(code, files, caps, code_file);
  if (const auto* rejection = std::get_if<Error>(&resolved)) {
    SCS_FUZZ_CHECK(!expected, "rejected: " + rejection->message + " input: " + std::string(input));
    SCS_FUZZ_CHECK(!rejection->message.empty() && rejection->message.size() <= kMaxMessageBytes,
                   rejection->message);
    return;
  }
  const std::vector<policy::File>& got = std::get<std::vector<policy::File>>(resolved);
  SCS_FUZZ_CHECK(expected, input);
  SCS_FUZZ_CHECK(got.size() == expected->size() + 1, input);
  SCS_FUZZ_CHECK(got[0].path == code_file && got[0].content == code, input);
  std::size_t total = code.size();
  for (std::size_t i = 1; i < got.size(); ++i) {
    const policy::File& file = got[i];
    SCS_FUZZ_CHECK(file.path == (*expected)[i - 1].path, file.path);
    SCS_FUZZ_CHECK(file.content == (*expected)[i - 1].content, file.path);
    // The safety properties, stated once more without reference to the model.
    SCS_FUZZ_CHECK(!file.path.empty() && file.path.front() != '/', file.path);
    SCS_FUZZ_CHECK(file.path.find('\0') == std::string::npos, file.path);
    SCS_FUZZ_CHECK(file.path.find('\\') == std::string::npos, file.path);
    SCS_FUZZ_CHECK(file.path.size() <= caps.max_path_bytes, file.path);
    for (const std::string& part : split(file.path)) {
      SCS_FUZZ_CHECK(!part.empty() && part != "." && part != "..", file.path);
    }
    SCS_FUZZ_CHECK(file.path != code_file && file.path.rfind(code_file + "/", 0) != 0, file.path);
    SCS_FUZZ_CHECK(file.path != ".scs" && file.path.rfind(".scs/", 0) != 0, file.path);
    total += file.content.size();
  }
  SCS_FUZZ_CHECK(got.size() - 1 <= caps.max_files, input);
  SCS_FUZZ_CHECK(total <= caps.max_total_bytes, input);
  checkArchive(got, input);
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs::fuzz;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Var parsed;
  try {
    Poco::JSON::Parser parser;
    parsed = parser.parse(std::string(input));
  } catch (const Poco::Exception&) {
    return 0;
  }
  if (parsed.type() != typeid(Object::Ptr)) {
    return 0;
  }
  const Object::Ptr arguments = parsed.extract<Object::Ptr>();
  const Var code_value = arguments->has("code") ? arguments->get("code") : Var();
  const std::string code = code_value.isString() ? code_value.toString() : std::string();
  const Var files = arguments->has("files") ? arguments->get("files") : Var();
  const Var limits = arguments->has("limits") ? arguments->get("limits") : Var();
  const std::string code_file =
      codeFileFor(arguments->has("language") ? arguments->get("language") : Var());

  const Policies& p = policies();
  checkLimits(limits, p.settings, p.roomy, input);
  checkLimits(limits, p.settings, p.small, input);
  checkFiles(code, files, p.shipped, code_file, input);
  checkFiles(code, files, p.tight, code_file, input);
  return 0;
}
