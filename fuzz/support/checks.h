#pragma once

// Oracles shared by the fuzz targets. Each is written independently of the code under test
// (a different algorithm where the code under test has one), so that a bug in one does not
// hide the same bug in the other.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scs::fuzz {

// Prints `what` and the offending bytes (escaped, cut) to stderr, then aborts, so that
// libFuzzer records the input as a crash.
[[noreturn]] void fail(std::string_view what, std::string_view detail = {});

#define SCS_FUZZ_CHECK(condition, detail)                                     \
  do {                                                                        \
    if (!(condition)) {                                                       \
      ::scs::fuzz::fail("check failed: " #condition " at " __FILE__, detail); \
    }                                                                         \
  } while (false)

// True when `bytes` is well-formed UTF-8 (Unicode 15, table 3-7), decided by decoding each
// scalar value and range-checking it rather than by a table of lead bytes.
bool isValidUtf8(std::string_view bytes);

// The Unicode "maximal subpart" repair (U+FFFD per maximal subpart of an ill-formed
// sequence), computed by asking, byte by byte, whether the bytes so far can still begin
// a valid scalar value.
std::string referenceRepairUtf8(std::string_view bytes);

// Standard-alphabet base64, padded to a multiple of four with at most two "=", nothing else
// (RFC 4648 section 4; bits left over in the last character are ignored); nullopt otherwise.
std::optional<std::string> decodeStrictBase64(std::string_view text);

// A strict RFC 8259 text: one value, optional surrounding whitespace, strings that are
// valid UTF-8 with no raw control characters, escapes that are valid and whose \u
// surrogates pair up (RFC 7493, I-JSON), numbers in the JSON grammar. Returns an
// explanation when `text` is not such a text.
std::optional<std::string> strictJsonProblem(std::string_view text);

// `text` escaped for a one-line diagnostic, cut to `limit` bytes.
std::string printable(std::string_view text, std::size_t limit = 400);

}  // namespace scs::fuzz
