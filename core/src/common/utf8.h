#pragma once

// UTF-8 as the core hands text on (a run's output, a log line, an HTTP header): ill-formed
// sequences repaired, and the points where a text is cut moved to a sequence's start. Pure.

#include <cstddef>
#include <string>
#include <string_view>

namespace scs::common {

// `bytes` as valid UTF-8: each ill-formed sequence (a stray continuation byte, an overlong
// form, a surrogate, a code point above U+10FFFF, a sequence cut short) becomes one U+FFFD
// per maximal subpart, as Unicode recommends. Valid input is returned unchanged.
std::string toValidUtf8(std::string_view bytes);

bool isUtf8Continuation(char byte);

// `at`, or the start of the UTF-8 sequence in `segment` whose continuation bytes it falls in.
std::size_t utf8SequenceStart(std::string_view segment, std::size_t at);

// Bytes at the end of `text` that begin a UTF-8 sequence the text cuts short.
std::size_t utf8IncompleteSuffix(std::string_view text);

}  // namespace scs::common
