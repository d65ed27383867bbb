// The files rules: each path normalised and checked (no "..", no absolute path, .scs and the
// code file reserved), contents decoded, caps applied, and the ustar archive written block by
// block.

#include "policy/files.h"

#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "policy/json_values.h"

namespace scs::policy {
namespace {

// Reserved for the sandbox's control files (launcher/side_channel.h).
constexpr std::string_view kControlDirectory = backend::launcher::kControlDirectory;
constexpr std::size_t kMaxComponentBytes = 255;  // NAME_MAX
constexpr std::size_t kBlock = 512;
constexpr std::size_t kNameField = 100;
constexpr std::size_t kPrefixField = 155;

using NameParts = std::pair<std::string_view, std::string_view>;

// Splits `path` into ustar's prefix and name fields at a '/'; nullopt when it cannot fit.
// The last usable '/' gives the shortest name, so if it fails every other split fails too.
// A directory's trailing '/' stays in the name.
std::optional<NameParts> splitUstarName(std::string_view path) {
  if (path.size() <= kNameField) {
    return NameParts{{}, path};
  }
  const std::size_t slash = path.rfind('/', std::min(kPrefixField, path.size() - 2));
  if (slash == std::string_view::npos || slash == 0 || path.size() - slash - 1 > kNameField) {
    return std::nullopt;
  }
  return NameParts{path.substr(0, slash), path.substr(slash + 1)};
}

// The archive entries for the directories above `path`: "a/", "a/b/" for "a/b/c.py".
std::vector<std::string> parentDirectories(std::string_view path) {
  std::vector<std::string> directories;
  for (std::size_t slash = path.find('/'); slash != std::string_view::npos;
       slash = path.find('/', slash + 1)) {
    directories.emplace_back(path.substr(0, slash + 1));
  }
  return directories;
}

std::string render(const std::string& text) { return json::render(Poco::Dynamic::Var(text)); }

std::string entryName(std::size_t index) { return "files[" + std::to_string(index) + "]"; }

std::string pathField(std::size_t index) { return entryName(index) + ".path"; }

struct Problem {
  std::string text;
};

// Normalises a client's path ("./a//b" -> "a/b"), or says what is wrong with it.
std::variant<std::string, Problem> normalisePath(const std::string& raw,
                                                 const FileSettings& settings,
                                                 std::string_view code_file) {
  const std::string got = ", got " + render(raw);
  if (raw.empty()) {
    return Problem{"must not be empty"};
  }
  if (raw.find('\0') != std::string::npos) {
    return Problem{"must not contain a NUL byte" + got};
  }
  if (raw.find('\\') != std::string::npos) {
    return Problem{"must separate directories with \"/\", not a backslash" + got};
  }
  if (std::any_of(raw.begin(), raw.end(),
                  [](char c) { return c == 0x7f || (c >= 0 && c < 0x20); })) {
    return Problem{"must not contain control characters" + got};
  }
  if (raw.front() == '/') {
    return Problem{"must be relative" + got};
  }
  std::string path;
  std::string_view last;
  std::string_view rest = raw;
  while (true) {
    const std::size_t slash = rest.find('/');
    last = rest.substr(0, slash);
    if (last == "..") {
      return Problem{"must not contain \"..\"" + got};
    }
    if (last.size() > kMaxComponentBytes) {
      return Problem{"has a component of " + std::to_string(last.size()) + " bytes, max is " +
                     std::to_string(kMaxComponentBytes) + " bytes" + got};
    }
    if (!last.empty() && last != ".") {
      path += (path.empty() ? "" : "/") + std::string(last);
    }
    if (slash == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(slash + 1);
  }
  if (last.empty() || last == ".") {
    return Problem{"must name a file, not end with \"/\" or \".\"" + got};
  }
  if (path.size() > settings.max_path_bytes) {
    return Problem{"is " + std::to_string(path.size()) + " bytes long, max is " +
                   std::to_string(settings.max_path_bytes) + " bytes" + got};
  }
  if (path == code_file || path.starts_with(std::string(code_file) + "/")) {
    return Problem{"must not use \"" + std::string(code_file) +
                   "\", which holds the code argument" + got};
  }
  if (path == kControlDirectory || path.starts_with(std::string(kControlDirectory) + "/")) {
    return Problem{"must not use \".scs\", which the sandbox reserves for its own control files" +
                   got};
  }
  std::vector<std::string> entries = parentDirectories(path);
  entries.push_back(path);
  if (!std::all_of(entries.begin(), entries.end(),
                   [](const std::string& entry) { return splitUstarName(entry).has_value(); })) {
    return Problem{"does not fit a tar header: a name must be at most " +
                   std::to_string(kNameField) + " bytes after its last \"/\" and " +
                   std::to_string(kPrefixField) + " bytes before it" + got};
  }
  return path;
}

// Standard alphabet, padded, no whitespace: Poco's decoder alone accepts "QUJD====" and
// truncated input.
bool isStrictBase64(std::string_view text) {
  if (text.size() % 4 != 0) {
    return false;
  }
  const std::size_t body_end = text.find_last_not_of('=') + 1;  // npos + 1 == 0: all padding
  const std::size_t padding = text.size() - body_end;
  const std::string_view body = text.substr(0, body_end);
  return padding <= 2 && std::all_of(body.begin(), body.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '+' || c == '/';
         });
}

// One element of `files`, decoded, or what is wrong with it.
std::variant<File, Problem> readEntry(const Poco::Dynamic::Var& element, std::size_t index,
                                      const FileSettings& settings, std::string_view code_file) {
  const std::string name = entryName(index);
  const std::optional<json::Members> members = json::members(element);
  if (!members) {
    return Problem{name + " must be an object with path, content and optional encoding, got " +
                   json::render(element)};
  }
  std::string path;
  std::string content;
  std::string encoding = "utf-8";
  for (const auto& [key, value] : *members) {
    std::string* target = key == "path"       ? &path
                          : key == "content"  ? &content
                          : key == "encoding" ? &encoding
                                              : nullptr;
    if (target == nullptr) {
      return Problem{name + " has unknown key " + render(key) +
                     "; allowed keys are path, content, encoding"};
    }
    if (value.type() != typeid(std::string)) {
      return Problem{name + "." + key + " must be a string, got " + json::render(value)};
    }
    *target = value.extract<std::string>();
  }
  for (const std::string_view key : {"path", "content"}) {
    if (std::none_of(members->begin(), members->end(),
                     [&](const auto& member) { return member.first == key; })) {
      return Problem{name + "." + std::string(key) + " is missing"};
    }
  }
  if (encoding != "utf-8" && encoding != "base64") {
    return Problem{name + ".encoding must be \"utf-8\" or \"base64\", got " + render(encoding)};
  }
  std::variant<std::string, Problem> normalised = normalisePath(path, settings, code_file);
  if (const Problem* problem = std::get_if<Problem>(&normalised)) {
    return Problem{name + ".path " + problem->text};
  }
  if (encoding == "base64") {
    std::optional<std::string> bytes = decodeBase64(content);
    if (!bytes) {
      return Problem{name +
                     ".content is not valid base64: use the standard alphabet (A-Z, a-z, 0-9, "
                     "+, /), padded with \"=\" to a multiple of 4 characters, without whitespace"};
    }
    content = std::move(*bytes);
  }
  return File{std::move(std::get<std::string>(normalised)), std::move(content)};
}

Error reject(std::string message) { return invalid(std::move(message)); }

void putText(char* header, std::size_t offset, std::size_t width, std::string_view text) {
  std::copy_n(text.data(), std::min(width, text.size()), header + offset);
}

// Octal digits filling all but the last byte of the field, then NUL.
void putOctal(char* header, std::size_t offset, std::size_t width, std::uint64_t value) {
  if (value >> (3 * (width - 1)) != 0) {
    throw std::invalid_argument("tar header field overflow: " + std::to_string(value));
  }
  std::snprintf(header + offset, width, "%0*llo", static_cast<int>(width - 1),
                static_cast<unsigned long long>(value));
}

void appendEntry(std::string& archive, std::string_view name, char type, std::uint32_t mode,
                 std::string_view content, int uid, int gid, std::int64_t mtime = 0) {
  const std::optional<NameParts> parts = splitUstarName(name);
  if (!parts) {
    throw std::invalid_argument("path does not fit a tar header: " + std::string(name));
  }
  char header[kBlock] = {};
  // POSIX.1-1988 ustar header fields, by offset.
  putText(header, 0, kNameField, parts->second);
  putOctal(header, 100, 8, mode);
  putOctal(header, 108, 8, static_cast<std::uint32_t>(uid));
  putOctal(header, 116, 8, static_cast<std::uint32_t>(gid));
  putOctal(header, 124, 12, content.size());
  putOctal(header, 136, 12, static_cast<std::uint64_t>(std::max<std::int64_t>(mtime, 0)));
  header[156] = type;
  putText(header, 257, 6, std::string_view("ustar\0", 6));  // magic
  putText(header, 263, 2, "00");                            // version
  putText(header, 265, 32, "sandbox");                      // uname
  putText(header, 297, 32, "sandbox");                      // gname
  putOctal(header, 329, 8, 0);                              // devmajor
  putOctal(header, 337, 8, 0);                              // devminor
  putText(header, 345, kPrefixField, parts->first);
  // The checksum is summed with its own field read as spaces.
  std::memset(header + 148, ' ', 8);
  unsigned checksum = 0;
  for (const char byte : header) {
    checksum += static_cast<unsigned char>(byte);
  }
  std::snprintf(header + 148, 8, "%06o", checksum);
  archive.append(header, kBlock);
  archive.append(content);
  archive.append((kBlock - content.size() % kBlock) % kBlock, '\0');
}

}  // namespace

Result<std::vector<File>> resolveFiles(const std::string& code, const Poco::Dynamic::Var& files,
                                       const FileSettings& settings, std::string_view code_file) {
  std::vector<File> result{{std::string(code_file), code}};
  std::vector<Poco::Dynamic::Var> elements;
  if (!files.isEmpty()) {
    std::optional<std::vector<Poco::Dynamic::Var>> array = json::elements(files);
    if (!array) {
      return reject("files must be an array of {path, content, encoding?} objects, got " +
                    json::render(files));
    }
    elements = std::move(*array);
  }
  if (elements.size() > settings.max_files) {
    return reject("Too many files: " + std::to_string(elements.size()) + ", max is " +
                  std::to_string(settings.max_files));
  }
  std::map<std::string, std::size_t> file_at;       // path -> index of the file
  std::map<std::string, std::size_t> directory_at;  // "dir/" -> index of its first file
  std::size_t total = code.size();
  for (std::size_t index = 0; index < elements.size(); ++index) {
    std::variant<File, Problem> entry = readEntry(elements[index], index, settings, code_file);
    if (Problem* problem = std::get_if<Problem>(&entry)) {
      return reject(std::move(problem->text));
    }
    File& file = std::get<File>(entry);
    const std::string here = pathField(index) + " " + render(file.path);
    if (const auto other = file_at.find(file.path); other != file_at.end()) {
      return reject(here + " duplicates " + pathField(other->second));
    }
    if (const auto other = directory_at.find(file.path + "/"); other != directory_at.end()) {
      return reject(here + " names a file, but " + pathField(other->second) +
                    " uses it as a directory");
    }
    for (const std::string& directory : parentDirectories(file.path)) {
      const std::string as_file = directory.substr(0, directory.size() - 1);
      if (const auto other = file_at.find(as_file); other != file_at.end()) {
        return reject(here + " uses " + render(as_file) + " as a directory, but " +
                      pathField(other->second) + " names it as a file");
      }
      directory_at.emplace(directory, index);
    }
    file_at.emplace(file.path, index);
    total += file.content.size();
    result.push_back(std::move(file));
  }
  if (total > settings.max_total_bytes) {
    return reject("Files too large: " + std::to_string(total) + " bytes in total, max is " +
                  std::to_string(settings.max_total_bytes) + " bytes");
  }
  return result;
}

std::string buildArchive(const std::vector<File>& files, int uid, int gid) {
  ArchiveWriter writer(uid, gid);
  for (const File& file : files) {
    writer.add(file.path, file.content);
  }
  return writer.finish();
}

void ArchiveWriter::add(const std::string& path, std::string_view content, bool executable,
                        std::int64_t mtime) {
  for (const std::string& directory : parentDirectories(path)) {
    if (directories_.insert(directory).second) {
      appendEntry(archive_, directory, '5', 0755, {}, uid_, gid_);
    }
  }
  appendEntry(archive_, path, '0', executable ? 0755 : 0644, content, uid_, gid_, mtime);
}

std::string ArchiveWriter::finish() {
  archive_.append(2 * kBlock, '\0');
  return std::move(archive_);
}

std::optional<std::string> decodeBase64(std::string_view text) {
  if (!isStrictBase64(text)) {
    return std::nullopt;
  }
  std::istringstream in{std::string(text)};
  Poco::Base64Decoder decoder(in);
  return std::string(std::istreambuf_iterator<char>(decoder), std::istreambuf_iterator<char>());
}

std::string encodeBase64(std::string_view bytes) {
  std::ostringstream out;
  Poco::Base64Encoder encoder(out);
  encoder.rdbuf()->setLineLength(0);
  encoder.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  encoder.close();
  return out.str();
}

}  // namespace scs::policy
