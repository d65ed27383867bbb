// UTF-8 as the core hands text on: ill-formed sequences repaired, cut points moved to a
// sequence's start.

#include "common/utf8.h"

namespace scs::common {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool inRange(unsigned char byte, unsigned char low, unsigned char high) {
  return byte >= low && byte <= high;
}

// Length of the UTF-8 sequence `lead` starts; 0 when it starts none.
std::size_t sequenceLength(char lead) {
  const auto byte = static_cast<unsigned char>(lead);
  if (inRange(byte, 0xC2, 0xDF)) {
    return 2;
  }
  if (inRange(byte, 0xE0, 0xEF)) {
    return 3;
  }
  if (inRange(byte, 0xF0, 0xF4)) {
    return 4;
  }
  return 0;
}

}  // namespace

bool isUtf8Continuation(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

std::size_t utf8SequenceStart(std::string_view segment, std::size_t at) {
  std::size_t lead = at;
  while (lead > 0 && lead < segment.size() && at - lead < 3 && isUtf8Continuation(segment[lead])) {
    --lead;
  }
  if (lead < at && sequenceLength(segment[lead]) > at - lead) {
    return lead;
  }
  return at;
}

std::size_t utf8IncompleteSuffix(std::string_view text) {
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const char byte = text[text.size() - back];
    if (!isUtf8Continuation(byte)) {
      return sequenceLength(byte) > back ? back : 0;
    }
  }
  return 0;
}

std::string toValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char second_low = 0x80;
    unsigned char second_high = 0xBF;
    if (inRange(lead, 0xC2, 0xDF)) {
      length = 2;
    } else if (lead == 0xE0) {
      length = 3;
      second_low = 0xA0;
    } else if (inRange(lead, 0xE1, 0xEC) || inRange(lead, 0xEE, 0xEF)) {
      length = 3;
    } else if (lead == 0xED) {
      length = 3;
      second_high = 0x9F;
    } else if (lead == 0xF0) {
      length = 4;
      second_low = 0x90;
    } else if (inRange(lead, 0xF1, 0xF3)) {
      length = 4;
    } else if (lead == 0xF4) {
      length = 4;
      second_high = 0x8F;
    } else {
      out.append(kReplacement);
      ++i;
      continue;
    }
    std::size_t valid = 1;
    while (valid < length && i + valid < bytes.size()) {
      const auto byte = static_cast<unsigned char>(bytes[i + valid]);
      const bool ok =
          valid == 1 ? inRange(byte, second_low, second_high) : inRange(byte, 0x80, 0xBF);
      if (!ok) {
        break;
      }
      ++valid;
    }
    if (valid == length) {
      out.append(bytes.substr(i, length));
    } else {
      out.append(kReplacement);
    }
    i += valid;
  }
  return out;
}

}  // namespace scs::common
