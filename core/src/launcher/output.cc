// OutputCapture: head and tail kept per stream within the cap, the markers found across writes, the
// trailer buffered apart.

#include "launcher/output.h"

#include <algorithm>
#include <utility>

#include "common/utf8.h"

namespace scs::launcher {
namespace {

// Grows `buffer` geometrically but never past `limit`, so the capacity stays within the cap
// (std::vector::reserve allocates exactly what it is asked for; insert() would double).
void appendBounded(std::vector<char>& buffer, std::string_view bytes, std::size_t limit) {
  const std::size_t needed = buffer.size() + bytes.size();
  if (needed > buffer.capacity()) {
    buffer.reserve(std::min(limit, std::max(needed, buffer.capacity() * 2)));
  }
  buffer.insert(buffer.end(), bytes.begin(), bytes.end());
}

}  // namespace

OutputCapture::OutputCapture(std::size_t cap_bytes_per_stream, std::string trailer_marker,
                             std::size_t trailer_cap_bytes, std::string stderr_end_marker)
    : head_cap_(cap_bytes_per_stream / 2),
      tail_cap_(cap_bytes_per_stream - head_cap_),
      trailer_cap_(trailer_cap_bytes),
      trailer_scan_(std::move(trailer_marker)),
      stderr_scan_(std::move(stderr_end_marker)) {}

OutputCapture::Buffer& OutputCapture::bufferFor(backend::Stream stream) {
  return stream == backend::Stream::kStdout ? stdout_ : stderr_;
}

const OutputCapture::Buffer& OutputCapture::bufferFor(backend::Stream stream) const {
  return stream == backend::Stream::kStdout ? stdout_ : stderr_;
}

void OutputCapture::write(backend::Stream stream, std::string_view bytes) {
  bool completed = false;
  {
    std::lock_guard lock(mutex_);
    const bool was_complete = outputCompleteLocked();
    if (stream == backend::Stream::kStdout) {
      if (trailer_scan_.found) {
        appendTrailer(bytes);
      } else {
        const std::size_t used = scan(stdout_, trailer_scan_, bytes);
        if (trailer_scan_.found) {
          appendTrailer(bytes.substr(used));
        }
      }
    } else if (!stderr_scan_.found) {
      scan(stderr_, stderr_scan_, bytes);  // nothing after the end marker is the program's
    }
    completed = !was_complete && outputCompleteLocked();
  }
  if (completed && listener_) {
    listener_();
  }
}

void OutputCapture::ended() {
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  if (listener_) {
    listener_();
  }
}

bool OutputCapture::hasEnded() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

bool OutputCapture::outputComplete() const {
  std::lock_guard lock(mutex_);
  return outputCompleteLocked();
}

bool OutputCapture::outputCompleteLocked() const {
  return trailer_line_ended_ && (stderr_scan_.search.marker().empty() || stderr_scan_.found);
}

void OutputCapture::close() {
  std::lock_guard lock(mutex_);
  for (const auto stream : {backend::Stream::kStdout, backend::Stream::kStderr}) {
    Scan& pending = scanFor(stream);
    if (!pending.found) {
      append(bufferFor(stream), pending.search.held());
    }
    pending.search.clear();
  }
  closed_ = true;
}

std::size_t OutputCapture::scan(Buffer& buffer, Scan& scan, std::string_view bytes) {
  const MarkerScan::Fed fed =
      scan.search.feed(bytes, [&](std::string_view own) { append(buffer, own); });
  scan.found = scan.found || fed.found;
  return fed.consumed;
}

void OutputCapture::appendTrailer(std::string_view bytes) {
  std::string& buffer = trailer_.bytes;
  const std::size_t take = std::min(bytes.size(), trailer_cap_ - buffer.size());
  if (take < bytes.size()) {
    trailer_.overflowed = true;
  }
  const std::size_t needed = buffer.size() + take;
  if (needed > buffer.capacity()) {
    buffer.reserve(std::min(trailer_cap_, std::max(needed, buffer.capacity() * 2)));
  }
  buffer.append(bytes.substr(0, take));
  // The trailer is one line of JSON: complete at its newline, unless it was cut.
  trailer_line_ended_ =
      trailer_line_ended_ ||
      (!trailer_.overflowed && bytes.substr(0, take).find('\n') != std::string::npos);
}

OutputCapture::Trailer OutputCapture::takeTrailer() {
  std::lock_guard lock(mutex_);
  Trailer taken;
  taken.found = trailer_scan_.found;
  taken.overflowed = trailer_.overflowed;
  taken.bytes.swap(trailer_.bytes);
  return taken;
}

void OutputCapture::append(Buffer& buffer, std::string_view bytes) {
  if (bytes.empty()) {
    return;
  }
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

namespace {

// What a byte adds to the text as a JSON string carries it, in characters, counted from
// above: an escaped byte two (\n, \", \\) or six (\u0001), any other one (a multi-byte
// character counts its bytes, and a stray byte, which becomes U+FFFD, one).
std::uint64_t jsonCost(char byte) {
  if (byte == '"' || byte == '\\' || byte == '\n' || byte == '\r' || byte == '\t' || byte == '\b' ||
      byte == '\f') {
    return 2;
  }
  return static_cast<unsigned char>(byte) < 0x20 ? 6 : 1;
}

std::string streamName(backend::Stream stream) {
  return stream == backend::Stream::kStdout ? "stdout" : "stderr";
}

}  // namespace

// One stream as the capture holds it: bytes [0, head.size()) and [tail_offset, total) of
// everything written, the middle dropped.
struct OutputCapture::Held {
  std::string head;
  std::string tail;
  std::uint64_t tail_offset = 0;
  std::uint64_t total = 0;

  std::uint64_t dropped() const { return tail_offset - head.size(); }
  // The first held offset at or after `offset`.
  std::uint64_t heldAt(std::uint64_t offset) const {
    return offset >= head.size() && offset < tail_offset ? tail_offset : offset;
  }
  // Where text from `from` (held) ends within `budget` characters as a JSON string carries
  // them (jsonCost), at the start of a UTF-8 sequence; the dropped middle is skipped.
  // At least one character is taken, so that reading on always gets somewhere.
  std::uint64_t advance(std::uint64_t from, std::uint64_t budget) const {
    const std::uint64_t first = heldAt(from);
    std::uint64_t offset = first;
    for (std::uint64_t spent = 0; offset < total; offset = heldAt(offset + 1)) {
      spent += jsonCost(at(offset));
      if (spent > budget && back(offset) > first) {
        return back(offset);
      }
    }
    return total;
  }
  // Where text that ends at `to` starts within `budget` characters, at the start of a UTF-8
  // sequence; it never reaches back into the dropped middle.
  std::uint64_t retreat(std::uint64_t to, std::uint64_t budget) const {
    std::uint64_t offset = to;
    for (std::uint64_t spent = 0; offset > 0; --offset) {
      const std::uint64_t before = offset - 1;
      if (before >= head.size() && before < tail_offset) {
        break;
      }
      spent += jsonCost(at(before));
      if (spent > budget) {
        break;
      }
    }
    for (int skipped = 0; skipped < 3 && offset < to && common::isUtf8Continuation(at(offset));
         ++skipped) {
      ++offset;
    }
    return offset;
  }
  // The byte at stream offset `at`, which is held.
  char at(std::uint64_t offset) const {
    return offset < head.size() ? head[offset] : tail[offset - tail_offset];
  }
  // `at`, or the start of the UTF-8 sequence it falls in (moved back), within what is held.
  std::uint64_t back(std::uint64_t offset) const {
    if (offset < head.size()) {
      return common::utf8SequenceStart(head, static_cast<std::size_t>(offset));
    }
    if (offset > tail_offset && offset < total) {
      return tail_offset +
             common::utf8SequenceStart(tail, static_cast<std::size_t>(offset - tail_offset));
    }
    return offset;
  }
  // Where text asked from `from` starts: moved back to the start of a UTF-8 sequence it cuts,
  // or forward to the start of the tail when it falls in the dropped middle.
  std::uint64_t startOf(std::uint64_t from) const { return back(heldAt(std::min(from, total))); }
  // Characters (jsonCost) of the held text from `start` on, counted up to `most` + 1.
  std::uint64_t characters(std::uint64_t start, std::uint64_t most) const {
    std::uint64_t spent = 0;
    for (std::uint64_t offset = heldAt(start); offset < total && spent <= most;
         offset = heldAt(offset + 1)) {
      spent += jsonCost(at(offset));
    }
    return std::min(spent, most + 1);
  }
  // The held bytes of [begin, end), the capture's marker where they span the dropped middle.
  void append(std::string& out, std::uint64_t begin, std::uint64_t end) const {
    if (begin < head.size()) {
      const std::uint64_t stop = std::min<std::uint64_t>(end, head.size());
      out.append(head, static_cast<std::size_t>(begin), static_cast<std::size_t>(stop - begin));
      if (dropped() > 0 && end >= tail_offset) {
        out.append("\n[... " + std::to_string(dropped()) + " bytes omitted ...]\n");
      }
    }
    const std::uint64_t from_tail = std::max(begin, tail_offset);
    if (end > from_tail) {
      out.append(tail, static_cast<std::size_t>(from_tail - tail_offset),
                 static_cast<std::size_t>(end - from_tail));
    }
  }
};

std::pair<std::uint64_t, std::uint64_t> windowShares(std::uint64_t window,
                                                     std::uint64_t stdout_characters,
                                                     std::uint64_t stderr_characters) {
  if (window == 0) {
    return {0, 0};
  }
  const std::uint64_t content = window > 2 * kMarkerRoom ? window - 2 * kMarkerRoom : 1;
  if (stdout_characters + stderr_characters <= content) {
    return {content, content};
  }
  if (stdout_characters <= stderr_characters) {
    const std::uint64_t share = std::min(stdout_characters, content / 2);
    return {std::max<std::uint64_t>(share, 1), content - share};
  }
  const std::uint64_t share = std::min(stderr_characters, content / 2);
  return {content - share, std::max<std::uint64_t>(share, 1)};
}

std::uint64_t OutputCapture::charactersFrom(backend::Stream stream, std::uint64_t from,
                                            std::uint64_t most) const {
  std::lock_guard lock(mutex_);
  const Held held = heldOf(stream);
  return held.characters(held.startOf(from), most);
}

OutputCapture::Held OutputCapture::heldOf(backend::Stream stream) const {
  const Buffer& buffer = bufferFor(stream);
  Held held;
  held.head.assign(buffer.head.data(), buffer.head.size());
  held.tail.reserve(buffer.tail.size());
  held.tail.append(buffer.tail.data() + buffer.tail_start, buffer.tail.size() - buffer.tail_start);
  held.tail.append(buffer.tail.data(), buffer.tail_start);
  // Bytes held back as a partial marker match are shown: they are output unless the marker
  // completes, which only the launcher can make happen, as the run ends.
  const Scan& pending = scanFor(stream);
  const std::string_view kept = pending.found ? std::string_view() : pending.search.held();
  (held.tail.empty() ? held.head : held.tail).append(kept);
  held.total = buffer.total + kept.size();
  held.tail_offset = held.total - held.tail.size();
  return held;
}

CapturedOutput OutputCapture::snapshot(backend::Stream stream, std::uint64_t from,
                                       std::uint64_t window) const {
  std::string raw;
  CapturedOutput result;
  {
    std::lock_guard lock(mutex_);
    result = cutLocked(heldOf(stream), stream, from, window, raw);
  }
  result.text = common::toValidUtf8(raw);
  return result;
}

std::pair<CapturedOutput, CapturedOutput> OutputCapture::report(std::uint64_t stdout_from,
                                                                std::uint64_t stderr_from,
                                                                std::uint64_t window) const {
  std::string out_raw;
  std::string err_raw;
  std::pair<CapturedOutput, CapturedOutput> result;
  {
    std::lock_guard lock(mutex_);
    const Held out = heldOf(backend::Stream::kStdout);
    const Held err = heldOf(backend::Stream::kStderr);
    const auto [out_window, err_window] =
        windowShares(window, out.characters(out.startOf(stdout_from), window),
                     err.characters(err.startOf(stderr_from), window));
    result.first = cutLocked(out, backend::Stream::kStdout, stdout_from, out_window, out_raw);
    result.second = cutLocked(err, backend::Stream::kStderr, stderr_from, err_window, err_raw);
  }
  result.first.text = common::toValidUtf8(out_raw);
  result.second.text = common::toValidUtf8(err_raw);
  return result;
}

CapturedOutput OutputCapture::cutLocked(const Held& held, backend::Stream stream,
                                        std::uint64_t from, std::uint64_t window,
                                        std::string& raw) const {
  CapturedOutput result;
  result.bytes = held.total;
  result.truncated = held.dropped() > 0;
  const std::uint64_t start = held.startOf(from);
  result.offset = start;
  const std::string offset_name = streamName(stream) + "_offset";
  if (window == 0 || held.characters(start, window) <= window) {
    held.append(raw, start, held.total);
  } else if (start == 0) {
    // The head and the tail of the stream, and the offset that reads the middle.
    const std::uint64_t head_end = held.advance(0, window / 2);
    const std::uint64_t tail_start = held.retreat(held.total, window - window / 2);
    held.append(raw, 0, head_end);
    raw.append("\n[... " + std::to_string(tail_start - head_end) +
               " bytes left out of this report: get_result with " + offset_name + "=" +
               std::to_string(head_end) + " reads on from here ...]\n");
    held.append(raw, tail_start, held.total);
    result.truncated = true;
  } else {
    // Reading on from an offset: as much as the window holds, and where to go on.
    const std::uint64_t end = held.advance(start, window);
    held.append(raw, start, end);
    raw.append("\n[... " + std::to_string(held.total - end) + " more bytes: get_result with " +
               offset_name + "=" + std::to_string(end) + " reads on ...]\n");
    result.truncated = true;
  }
  if (!closed_) {
    raw.resize(raw.size() - common::utf8IncompleteSuffix(raw));
  }
  return result;
}

std::size_t OutputCapture::retainedCapacity() const {
  std::lock_guard lock(mutex_);
  return stdout_.head.capacity() + stdout_.tail.capacity() + stderr_.head.capacity() +
         stderr_.tail.capacity();
}

}  // namespace scs::launcher
