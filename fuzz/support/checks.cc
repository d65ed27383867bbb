// The fuzz oracles, written apart from the code they check: a UTF-8 validator and reference
// repair, strict Base64, a strict JSON checker, and fail(), which aborts with what broke.

#include "support/checks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace scs::fuzz {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Sequence length announced by a lead byte's high bits; 0 for a byte that cannot lead.
std::size_t announcedLength(unsigned char lead) {
  if ((lead & 0x80) == 0) {
    return 1;
  }
  if ((lead & 0xE0) == 0xC0) {
    return 2;
  }
  if ((lead & 0xF0) == 0xE0) {
    return 3;
  }
  if ((lead & 0xF8) == 0xF0) {
    return 4;
  }
  return 0;
}

bool isContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Whether the first `count` bytes of `sequence` (count <= announced length) can still be
// completed to the shortest encoding of a Unicode scalar value.
bool canBeginScalar(std::string_view sequence, std::size_t count) {
  const auto lead = static_cast<unsigned char>(sequence[0]);
  const std::size_t length = announcedLength(lead);
  if (length == 0 || count > length) {
    return false;
  }
  if (length == 1) {
    return true;
  }
  std::uint32_t fixed = lead & (0x7Fu >> length);
  for (std::size_t k = 1; k < count; ++k) {
    const auto byte = static_cast<unsigned char>(sequence[k]);
    if (!isContinuation(byte)) {
      return false;
    }
    fixed = (fixed << 6) | (byte & 0x3Fu);
  }
  const std::size_t free_bits = 6 * (length - count);
  const std::uint32_t low = fixed << free_bits;
  const std::uint32_t high = low | ((std::uint32_t{1} << free_bits) - 1);
  static constexpr std::uint32_t kShortest[] = {0, 0, 0x80, 0x800, 0x10000};
  static constexpr std::uint32_t kLongest[] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  const std::uint32_t from = std::max(low, kShortest[length]);
  const std::uint32_t to = std::min(high, kLongest[length]);
  if (from > to) {
    return false;
  }
  // Some value in [from, to] must lie outside the surrogates.
  return from < 0xD800 || to > 0xDFFF;
}

// The value of a hex digit, or -1.
int hexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

class JsonChecker {
 public:
  explicit JsonChecker(std::string_view text) : text_(text) {}

  std::optional<std::string> check() {
    skipSpace();
    if (!value(0)) {
      return problem_;
    }
    skipSpace();
    if (pos_ != text_.size()) {
      return "trailing bytes at offset " + std::to_string(pos_);
    }
    return std::nullopt;
  }

 private:
  static constexpr int kMaxDepth = 1000;

  bool error(const std::string& what) {
    problem_ = what + " at offset " + std::to_string(pos_);
    return false;
  }

  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skipSpace() {
    while (!atEnd() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  bool value(int depth) {
    if (depth > kMaxDepth) {
      return error("nesting too deep");
    }
    if (atEnd()) {
      return error("value expected, got the end");
    }
    switch (peek()) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number();
    }
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      return error("bad literal");
    }
    pos_ += word.size();
    return true;
  }

  bool digits() {
    const std::size_t start = pos_;
    while (!atEnd() && peek() >= '0' && peek() <= '9') {
      ++pos_;
    }
    return pos_ > start;
  }

  bool number() {
    if (!atEnd() && peek() == '-') {
      ++pos_;
    }
    if (atEnd()) {
      return error("number expected");
    }
    if (peek() == '0') {
      ++pos_;
    } else if (!(peek() >= '1' && peek() <= '9') || !digits()) {
      return error("number expected");
    }
    if (!atEnd() && peek() == '.') {
      ++pos_;
      if (!digits()) {
        return error("digits expected after '.'");
      }
    }
    if (!atEnd() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!atEnd() && (peek() == '+' || peek() == '-')) {
        ++pos_;
      }
      if (!digits()) {
        return error("digits expected in exponent");
      }
    }
    return true;
  }

  bool hex4(std::uint32_t* value) {
    if (pos_ + 4 > text_.size()) {
      return error("short \\u escape");
    }
    *value = 0;
    for (int k = 0; k < 4; ++k) {
      const int digit = hexValue(text_[pos_ + k]);
      if (digit < 0) {
        return error("bad \\u escape");
      }
      *value = *value * 16 + static_cast<std::uint32_t>(digit);
    }
    pos_ += 4;
    return true;
  }

  bool string() {
    ++pos_;  // the opening quote
    std::size_t raw_start = pos_;
    const auto checkRaw = [&](std::size_t end) {
      if (!isValidUtf8(text_.substr(raw_start, end - raw_start))) {
        pos_ = raw_start;
        return error("ill-formed UTF-8 in a string");
      }
      return true;
    };
    while (true) {
      if (atEnd()) {
        return error("unterminated string");
      }
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        if (!checkRaw(pos_)) {
          return false;
        }
        ++pos_;
        return true;
      }
      if (c < 0x20) {
        return error("raw control character in a string");
      }
      if (c != '\\') {
        ++pos_;
        continue;
      }
      if (!checkRaw(pos_)) {
        return false;
      }
      ++pos_;
      if (atEnd()) {
        return error("unterminated escape");
      }
      const char escape = peek();
      ++pos_;
      if (escape == 'u') {
        std::uint32_t unit = 0;
        if (!hex4(&unit)) {
          return false;
        }
        if (unit >= 0xDC00 && unit <= 0xDFFF) {
          return error("lone low surrogate escape");
        }
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          if (text_.substr(pos_, 2) != "\\u") {
            return error("high surrogate escape without a low one");
          }
          pos_ += 2;
          std::uint32_t low = 0;
          if (!hex4(&low)) {
            return false;
          }
          if (low < 0xDC00 || low > 0xDFFF) {
            return error("high surrogate escape without a low one");
          }
        }
      } else if (std::string_view("\"\\/bfnrt").find(escape) == std::string_view::npos) {
        return error("bad escape");
      }
      raw_start = pos_;
    }
  }

  // An array or an object from its opening bracket: `element` reads each element (from its
  // first byte), the elements are separated by ',' and `close` ends them.
  template <typename Element>
  bool sequence(char close, const std::string& what, Element element) {
    ++pos_;
    skipSpace();
    if (!atEnd() && peek() == close) {
      ++pos_;
      return true;
    }
    while (true) {
      skipSpace();
      if (!element()) {
        return false;
      }
      skipSpace();
      if (atEnd()) {
        return error("unterminated " + what);
      }
      if (peek() == close) {
        ++pos_;
        return true;
      }
      if (peek() != ',') {
        return error(std::string("',' or '") + close + "' expected");
      }
      ++pos_;
    }
  }

  bool array(int depth) {
    return sequence(']', "array", [&] { return value(depth + 1); });
  }

  bool object(int depth) {
    return sequence('}', "object", [&] {
      if (atEnd() || peek() != '"') {
        return error("member name expected");
      }
      if (!string()) {
        return false;
      }
      skipSpace();
      if (atEnd() || peek() != ':') {
        return error("':' expected");
      }
      ++pos_;
      skipSpace();
      return value(depth + 1);
    });
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::string problem_;
};

}  // namespace

// Allocation-heavy targets (Poco builds a tree of Vars per message) spend much of their time
// recording allocation stacks; eight frames still place a leak or a use-after-free.
extern "C" const char* __asan_default_options() { return "malloc_context_size=8"; }

void fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %.*s\n  %s\n", static_cast<int>(what.size()),
               what.data(), printable(detail).c_str());
  std::abort();
}

bool isValidUtf8(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const std::size_t length = announcedLength(static_cast<unsigned char>(bytes[i]));
    if (length == 0 || i + length > bytes.size() || !canBeginScalar(bytes.substr(i), length)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string referenceRepairUtf8(std::string_view bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < bytes.size()) {
    const std::string_view rest = bytes.substr(i);
    const std::size_t length = announcedLength(static_cast<unsigned char>(rest[0]));
    std::size_t subpart = 0;
    while (subpart < std::min(length, rest.size()) && canBeginScalar(rest, subpart + 1)) {
      ++subpart;
    }
    if (subpart == length && length > 0) {
      out.append(rest.substr(0, length));
    } else {
      out.append(kReplacement);
    }
    i += std::max<std::size_t>(subpart, 1);
  }
  return out;
}

std::optional<std::string> decodeStrictBase64(std::string_view text) {
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  std::size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') {
    ++padding;
  }
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text.substr(0, text.size() - padding)) {
    const std::size_t value = kAlphabet.find(c);
    if (value == std::string_view::npos) {
      return std::nullopt;
    }
    bits = (bits << 6) | static_cast<std::uint32_t>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

std::optional<std::string> strictJsonProblem(std::string_view text) {
  return JsonChecker(text).check();
}

std::string printable(std::string_view text, std::size_t limit) {
  std::string out;
  for (const char c : text.substr(0, limit)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F && byte != '\\') {
      out.push_back(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    }
  }
  if (text.size() > limit) {
    out += "... (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

}  // namespace scs::fuzz
