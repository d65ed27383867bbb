// The `#fake:` directives parsed (escapes decoded, each value checked, an unknown one refused)
// and a regular file found in a ustar archive, its header checksum and size checked.

#include "script.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <type_traits>

namespace scs::fake {
namespace {

constexpr std::size_t kBlock = 512;

// The one-letter escapes of a directive value, and the bytes they stand for (\s: a space).
constexpr std::string_view kEscapeLetters = "ntrs\\";
constexpr std::string_view kEscapedBytes = "\n\t\r \\";

std::optional<int> parseHex(std::string_view digits) {
  if (digits.size() != 2) {
    return std::nullopt;
  }
  int value = 0;
  for (const char c : digits) {
    value *= 16;
    if (c >= '0' && c <= '9') {
      value += c - '0';
    } else if (c >= 'a' && c <= 'f') {
      value += c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      value += c - 'A' + 10;
    } else {
      return std::nullopt;
    }
  }
  return value;
}

std::optional<std::string> decodeEscapes(std::string_view text, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out->push_back(text[i]);
      continue;
    }
    if (i + 1 == text.size()) {
      return std::string("a directive value ends with a lone backslash");
    }
    const char escape = text[++i];
    if (escape == 'x') {
      const auto hex = parseHex(text.substr(i + 1, 2));
      if (!hex) {
        return std::string("\\x in a directive value needs two hex digits");
      }
      out->push_back(static_cast<char>(*hex));
      i += 2;
      continue;
    }
    const std::size_t simple = kEscapeLetters.find(escape);
    if (simple == std::string_view::npos) {
      return "unknown escape \\" + std::string(1, escape) + " in a directive value";
    }
    out->push_back(kEscapedBytes[simple]);
  }
  return std::nullopt;
}

std::string fieldText(const char* field, std::size_t size) {
  return std::string(field, strnlen(field, size));
}

std::optional<std::uint64_t> parseOctal(const char* field, std::size_t size) {
  std::uint64_t value = 0;
  std::size_t i = 0;
  while (i < size && field[i] == ' ') {
    ++i;
  }
  bool any = false;
  for (; i < size && field[i] >= '0' && field[i] <= '7'; ++i) {
    value = value * 8 + static_cast<std::uint64_t>(field[i] - '0');
    any = true;
  }
  for (; i < size; ++i) {
    if (field[i] != ' ' && field[i] != '\0') {
      return std::nullopt;
    }
  }
  if (!any) {
    return std::nullopt;
  }
  return value;
}

bool checksumMatches(const char* header) {
  auto stored = parseOctal(header + 148, 8);
  if (!stored) {
    return false;
  }
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    sum += (i >= 148 && i < 156) ? static_cast<unsigned char>(' ')
                                 : static_cast<unsigned char>(header[i]);
  }
  return sum == *stored;
}

std::optional<std::string> applyDirective(std::string_view item, Script* script) {
  const auto eq = item.find('=');
  const std::string_view key = item.substr(0, eq);
  const bool has_value = eq != std::string_view::npos;
  const std::string_view value = has_value ? item.substr(eq + 1) : std::string_view();
  auto needValue = [&]() -> std::optional<std::string> {
    if (!has_value) {
      return "directive '" + std::string(key) + "' needs a value";
    }
    return std::nullopt;
  };
  auto integer = [&](std::int64_t min, std::int64_t max,
                     auto* target) -> std::optional<std::string> {
    if (auto problem = needValue()) {
      return problem;
    }
    auto parsed = parseInteger(value, min, max);
    if (!parsed) {
      return "directive '" + std::string(item) + "' needs a whole number from " +
             std::to_string(min) + " to " + std::to_string(max);
    }
    *target = static_cast<std::remove_pointer_t<decltype(target)>>(*parsed);
    return std::nullopt;
  };
  // The value with its escapes decoded, into `*target`.
  auto text = [&](std::string* target) -> std::optional<std::string> {
    if (auto problem = needValue()) {
      return problem;
    }
    return decodeEscapes(value, target);
  };
  auto flag = [&](bool* target) -> std::optional<std::string> {
    if (has_value) {
      return "directive '" + std::string(key) + "' takes no value";
    }
    *target = true;
    return std::nullopt;
  };

  if (key == "exit") {
    script->exit_given = true;
    return integer(0, 255, &script->exit_code);
  }
  if (key == "exception" || key == "outfile") {
    if (auto problem = needValue()) {
      return problem;
    }
    const auto colon = value.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return "directive '" + std::string(key) + "' needs " +
             (key == "exception" ? "Type:message" : "path:content");
    }
    std::string first;
    std::string second;
    if (auto problem = decodeEscapes(value.substr(0, colon), &first)) {
      return problem;
    }
    if (auto problem = decodeEscapes(value.substr(colon + 1), &second)) {
      return problem;
    }
    if (key == "exception") {
      script->exception.emplace(std::move(first), std::move(second));
    } else {
      script->out_files.emplace_back(std::move(first), std::move(second));
    }
    return std::nullopt;
  }
  if (key == "connect") {
    if (value.empty() || value.find_first_of(" \r\n") != std::string::npos) {
      return "#fake: connect needs HOST:PORT";
    }
    script->connects.emplace_back(value);
    return std::nullopt;
  }
  if (key == "echo_stdin") {
    return flag(&script->echo_stdin);
  }
  if (key == "stdout" || key == "stderr") {
    std::string decoded;
    if (auto problem = text(&decoded)) {
      return problem;
    }
    (key == "stdout" ? script->stdout_text : script->stderr_text) += decoded;
    return std::nullopt;
  }
  if (key == "flood") {
    return integer(0, std::int64_t{1} << 32, &script->flood_bytes);
  }
  if (key == "sleep_ms" || key == "start_delay_ms") {
    std::int64_t ms = 0;
    if (auto problem = integer(0, 3'600'000, &ms)) {
      return problem;
    }
    (key == "sleep_ms" ? script->sleep : script->start_delay) = std::chrono::milliseconds(ms);
    return std::nullopt;
  }
  if (key == "hang") {
    return flag(&script->hang);
  }
  if (key == "linger") {
    return flag(&script->linger);
  }
  if (key == "oom") {
    return flag(&script->oom);
  }
  if (key == "child_oom") {
    return flag(&script->child_oom);
  }
  if (key == "signal") {
    int number = 0;
    if (auto problem = integer(1, 64, &number)) {
      return problem;
    }
    script->signal = number;
    return std::nullopt;
  }
  if (key == "fail") {
    if (auto problem = needValue()) {
      return problem;
    }
    if (value != "deliver" && value != "start" && value != "wait") {
      return "directive 'fail' takes deliver, start or wait, not '" + std::string(value) + "'";
    }
    script->fail.insert(std::string(value));
    return std::nullopt;
  }
  if (key == "engine_error" || key == "trailer") {
    auto& field = key == "engine_error" ? script->engine_error : script->trailer_json;
    return text(&field.emplace());
  }
  if (key == "set") {
    std::string assignment;
    if (auto problem = text(&assignment)) {
      return problem;
    }
    const auto equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0) {
      return "directive 'set' needs NAME=VALUE";
    }
    script->sets.emplace_back(assignment.substr(0, equals), assignment.substr(equals + 1));
    return std::nullopt;
  }
  if (key == "get" || key == "result") {
    return text(&(key == "get" ? script->get : script->result).emplace());
  }
  if (key == "ignore_interrupt") {
    return flag(&script->ignore_interrupt);
  }
  if (key == "die") {
    return flag(&script->die);
  }
  if (key == "ignore_kill") {
    return flag(&script->ignore_kill);
  }
  if (key == "peak_memory") {
    std::int64_t bytes = 0;
    if (auto problem = integer(0, std::int64_t{1} << 50, &bytes)) {
      return problem;
    }
    script->peak_memory_bytes = bytes;
    return std::nullopt;
  }
  if (key == "cpu_ms") {
    std::int64_t ms = 0;
    if (auto problem = integer(0, std::int64_t{1} << 40, &ms)) {
      return problem;
    }
    script->cpu_seconds = static_cast<double>(ms) / 1000;
    return std::nullopt;
  }
  return "unknown fake directive '" + std::string(key) + "'";
}

}  // namespace

std::optional<std::int64_t> parseInteger(std::string_view text, std::int64_t min,
                                         std::int64_t max) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> parseScript(std::string_view code, Script* script) {
  constexpr std::string_view kPrefix = "#fake:";
  std::size_t pos = 0;
  while (pos < code.size()) {
    std::size_t end = code.find('\n', pos);
    if (end == std::string_view::npos) {
      end = code.size();
    }
    std::string_view line = code.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.substr(0, kPrefix.size()) != kPrefix) {
      continue;
    }
    line.remove_prefix(kPrefix.size());
    std::size_t i = 0;
    while (i < line.size()) {
      if (line[i] == ' ' || line[i] == '\t') {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') {
        ++j;
      }
      if (auto problem = applyDirective(line.substr(i, j - i), script)) {
        return problem;
      }
      i = j;
    }
  }
  return std::nullopt;
}

std::optional<std::string> extractFile(std::string_view archive, std::string_view name,
                                       std::string* content) {
  std::size_t offset = 0;
  while (offset + kBlock <= archive.size()) {
    const char* header = archive.data() + offset;
    if (std::all_of(header, header + kBlock, [](char c) { return c == '\0'; })) {
      break;
    }
    if (!checksumMatches(header)) {
      return std::string("the archive has a tar header with a bad checksum");
    }
    std::string path = fieldText(header, 100);
    if (std::memcmp(header + 257, "ustar", 5) == 0) {
      std::string prefix = fieldText(header + 345, 155);
      if (!prefix.empty()) {
        path = prefix + "/" + path;
      }
    }
    auto size = parseOctal(header + 124, 12);
    if (!size) {
      return std::string("the archive has a tar header with a bad size");
    }
    const std::size_t data = offset + kBlock;
    if (*size > archive.size() - data) {
      return std::string("the archive is cut short");
    }
    const char type = header[156];
    if ((type == '0' || type == '\0') && (path == name || path == "./" + std::string(name))) {
      content->assign(archive.substr(data, *size));
      return std::nullopt;
    }
    offset = data + (*size + kBlock - 1) / kBlock * kBlock;
  }
  return "the archive has no " + std::string(name);
}

}  // namespace scs::fake
