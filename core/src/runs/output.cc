#include "runs/output.h"

#include <algorithm>
#include <cstring>

namespace scs::runs {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Grows `buffer` geometrically but never past `limit`, so the capacity stays within the cap
// (std::vector::reserve allocates exactly what it is asked for; insert() would double).
void appendBounded(std::vector<char>& buffer, std::string_view bytes, std::size_t limit) {
  const std::size_t needed = buffer.size() + bytes.size();
  if (needed > buffer.capacity()) {
    buffer.reserve(std::min(limit, std::max(needed, buffer.capacity() * 2)));
  }
  buffer.insert(buffer.end(), bytes.begin(), bytes.end());
}

bool inRange(unsigned char byte, unsigned char low, unsigned char high) {
  return byte >= low && byte <= high;
}

}  // namespace

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

OutputCapture::OutputCapture(std::size_t cap_bytes_per_stream)
    : head_cap_(cap_bytes_per_stream / 2), tail_cap_(cap_bytes_per_stream - head_cap_) {}

OutputCapture::Buffer& OutputCapture::bufferFor(backend::Stream stream) {
  return stream == backend::Stream::kStdout ? stdout_ : stderr_;
}

const OutputCapture::Buffer& OutputCapture::bufferFor(backend::Stream stream) const {
  return stream == backend::Stream::kStdout ? stdout_ : stderr_;
}

void OutputCapture::write(backend::Stream stream, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  Buffer& buffer = bufferFor(stream);
  buffer.total += bytes.size();
  if (buffer.head.size() < head_cap_) {
    const std::size_t take = std::min(bytes.size(), head_cap_ - buffer.head.size());
    appendBounded(buffer.head, bytes.substr(0, take), head_cap_);
    bytes.remove_prefix(take);
  }
  appendTail(buffer, bytes);
}

void OutputCapture::appendTail(Buffer& buffer, std::string_view bytes) {
  if (bytes.empty() || tail_cap_ == 0) {
    return;
  }
  if (bytes.size() >= tail_cap_) {
    bytes.remove_prefix(bytes.size() - tail_cap_);
    buffer.tail.clear();
    appendBounded(buffer.tail, bytes, tail_cap_);
    buffer.tail_start = 0;
    return;
  }
  if (buffer.tail.size() < tail_cap_) {
    const std::size_t fill = std::min(bytes.size(), tail_cap_ - buffer.tail.size());
    appendBounded(buffer.tail, bytes.substr(0, fill), tail_cap_);
    bytes.remove_prefix(fill);
  }
  while (!bytes.empty()) {
    const std::size_t chunk = std::min(bytes.size(), tail_cap_ - buffer.tail_start);
    std::memcpy(buffer.tail.data() + buffer.tail_start, bytes.data(), chunk);
    buffer.tail_start = (buffer.tail_start + chunk) % tail_cap_;
    bytes.remove_prefix(chunk);
  }
}

CapturedOutput OutputCapture::snapshot(backend::Stream stream) const {
  std::string raw;
  CapturedOutput result;
  {
    std::lock_guard lock(mutex_);
    const Buffer& buffer = bufferFor(stream);
    result.bytes = buffer.total;
    const std::uint64_t kept = buffer.head.size() + buffer.tail.size();
    const std::uint64_t omitted = buffer.total - kept;
    result.truncated = omitted > 0;
    raw.reserve(kept + 64);
    raw.append(buffer.head.data(), buffer.head.size());
    if (result.truncated) {
      raw.append("\n[... " + std::to_string(omitted) + " bytes omitted ...]\n");
    }
    raw.append(buffer.tail.data() + buffer.tail_start, buffer.tail.size() - buffer.tail_start);
    raw.append(buffer.tail.data(), buffer.tail_start);
  }
  result.text = toValidUtf8(raw);
  return result;
}

std::size_t OutputCapture::retainedCapacity() const {
  std::lock_guard lock(mutex_);
  return stdout_.head.capacity() + stdout_.tail.capacity() + stderr_.head.capacity() +
         stderr_.tail.capacity();
}

}  // namespace scs::runs
