// Writes the input to launcher::OutputCapture in chunks on both streams, with or without a
// trailer marker, and compares every snapshot (taken from a chosen offset) and the trailer
// with a model that keeps the whole streams: byte counts, the truncated flag, the offset,
// the text (head, omission marker, tail, repaired to UTF-8), where the marker is found
// across write boundaries, and what follows it. The memory held must stay within the cap.
//
// Input: byte 0 picks the per-stream cap (bits 0-2), the trailer marker (bits 3-4) and the
// trailer cap (bits 5-6); then records of a header byte (bit 7: stderr, bits 0-6: length), an
// offset byte (where the snapshot after the write starts; 255: past the end) and the bytes.

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "launcher/output.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

constexpr std::array<std::size_t, 8> kCaps = {0, 1, 2, 3, 7, 16, 64, 1000};
// No marker; the launcher's shape; and two that overlap themselves, where a naive scan that
// restarts after a failed partial match would miss an occurrence.
constexpr char kLauncherMarker[] = "\n\0SCS-TRAILER-n0\0";
const std::array<std::string, 4> kMarkers = {
    std::string(), std::string(kLauncherMarker, sizeof kLauncherMarker - 1), "aab", "abab"};
constexpr std::array<std::size_t, 4> kTrailerCaps = {0, 1, 8, 64};

std::size_t leadLength(char lead) {
  const auto byte = static_cast<unsigned char>(lead);
  if (byte >= 0xC2 && byte <= 0xDF) {
    return 2;
  }
  if (byte >= 0xE0 && byte <= 0xEF) {
    return 3;
  }
  if (byte >= 0xF0 && byte <= 0xF4) {
    return 4;
  }
  return 0;
}

bool isContinuation(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

// `at` moved back to the lead byte of a sequence that it falls inside, within `segment`.
std::size_t backToLead(std::string_view segment, std::size_t at) {
  for (std::size_t back = 1; back <= 3 && back <= at && at < segment.size(); ++back) {
    if (!isContinuation(segment[at - back + 1])) {
      break;
    }
    if (leadLength(segment[at - back]) > back) {
      return at - back;
    }
    if (!isContinuation(segment[at - back])) {
      break;
    }
  }
  return at;
}

// Bytes at the end of `text` that start a sequence cut short by the end.
std::size_t cutSuffix(std::string_view text) {
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const char byte = text[text.size() - back];
    if (!isContinuation(byte)) {
      return leadLength(byte) > back ? back : 0;
    }
  }
  return 0;
}

// One stream as the capture should show it: `stored` went through the buffers, `held`
// (bytes of a partial marker match) is shown after them.
struct Expected {
  std::uint64_t bytes = 0;
  bool truncated = false;
  std::uint64_t offset = 0;
  std::string text;
};

Expected expectedSnapshot(std::string_view stored, std::string_view held, std::size_t cap,
                          std::uint64_t from, bool closed) {
  const std::size_t head_cap = cap / 2;
  const std::size_t tail_cap = cap - head_cap;
  std::string head(stored.substr(0, head_cap));
  const std::string_view rest = stored.substr(head.size());
  std::string tail(rest.substr(rest.size() - std::min(rest.size(), tail_cap)));
  (tail.empty() ? head : tail).append(held);
  Expected expected;
  expected.bytes = stored.size() + held.size();
  const std::uint64_t tail_offset = expected.bytes - tail.size();
  const std::uint64_t omitted = tail_offset - head.size();
  expected.truncated = omitted > 0;
  std::uint64_t start = std::min<std::uint64_t>(from, expected.bytes);
  std::string raw;
  if (start < head.size()) {
    start = backToLead(head, static_cast<std::size_t>(start));
    raw = head.substr(static_cast<std::size_t>(start));
    if (omitted > 0) {
      raw += "\n[... " + std::to_string(omitted) + " bytes omitted ...]\n";
    }
    raw += tail;
  } else if (start < tail_offset) {
    start = tail_offset;
    raw = tail;
  } else {
    const std::size_t in_tail = backToLead(tail, static_cast<std::size_t>(start - tail_offset));
    start = tail_offset + in_tail;
    raw = tail.substr(in_tail);
  }
  expected.offset = start;
  if (!closed) {
    raw.resize(raw.size() - cutSuffix(raw));
  }
  expected.text = referenceRepairUtf8(raw);
  return expected;
}

struct Model {
  std::size_t cap = 0;
  std::string marker;
  std::size_t trailer_cap = 0;
  std::string out;  // stdout as written
  std::string err;  // stderr as written

  std::size_t markerAt() const { return marker.empty() ? std::string::npos : out.find(marker); }

  // The longest end of stdout that is a proper prefix of the marker: held back.
  std::size_t heldBytes() const {
    if (marker.empty() || markerAt() != std::string::npos) {
      return 0;
    }
    for (std::size_t k = std::min(marker.size() - 1, out.size()); k > 0; --k) {
      if (std::string_view(out).substr(out.size() - k) == std::string_view(marker).substr(0, k)) {
        return k;
      }
    }
    return 0;
  }
};

void checkSnapshot(const launcher::OutputCapture& capture, const Model& model,
                   backend::Stream stream, std::uint64_t from, bool closed,
                   std::string_view input) {
  std::string_view stored = stream == backend::Stream::kStdout ? model.out : model.err;
  std::string_view held;
  if (stream == backend::Stream::kStdout) {
    stored = stored.substr(0, model.markerAt());
    const std::size_t held_bytes = closed ? 0 : model.heldBytes();
    held = stored.substr(stored.size() - held_bytes);
    stored.remove_suffix(held_bytes);
  }
  const Expected expected = expectedSnapshot(stored, held, model.cap, from, closed);
  const launcher::CapturedOutput got = capture.snapshot(stream, from);
  // Built only when a check fails.
  const auto context = [&] {
    return (stream == backend::Stream::kStdout ? "stdout" : "stderr") +
           std::string(closed ? " closed" : " open") + " from " + std::to_string(from) + " got " +
           printable(got.text) + " expected " + printable(expected.text) + " input " +
           printable(input);
  };
  SCS_FUZZ_CHECK(got.bytes == expected.bytes, context());
  SCS_FUZZ_CHECK(got.truncated == expected.truncated, context());
  SCS_FUZZ_CHECK(got.offset == expected.offset, context());
  SCS_FUZZ_CHECK(isValidUtf8(got.text), context());
  SCS_FUZZ_CHECK(got.text == expected.text, context());
  SCS_FUZZ_CHECK(capture.retainedCapacity() <= 2 * model.cap, context());
  // A report's window (issue 45): the same stream and start, valid UTF-8; the whole text when
  // it fits, otherwise cut with a marker that names an offset past the window's start.
  for (const std::uint64_t window : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{40}}) {
    const launcher::CapturedOutput cut = capture.snapshot(stream, from, window);
    SCS_FUZZ_CHECK(cut.bytes == got.bytes && cut.offset == got.offset, context());
    SCS_FUZZ_CHECK(isValidUtf8(cut.text), context() + " window " + std::to_string(window));
    if (capture.charactersFrom(stream, from, window) <= window) {
      SCS_FUZZ_CHECK(cut.text == got.text, context() + " window " + std::to_string(window));
      continue;
    }
    SCS_FUZZ_CHECK(cut.truncated, context());
    // The marker's own words (the program's output may hold the name alone, not the phrase).
    const std::string named = std::string("get_result with ") +
                              (stream == backend::Stream::kStdout ? "stdout" : "stderr") +
                              "_offset=";
    const std::size_t at = cut.text.rfind(named);
    SCS_FUZZ_CHECK(at != std::string::npos, context() + " window " + std::to_string(window));
    std::uint64_t next = 0;
    const char* digits = cut.text.data() + at + named.size();
    const auto [end, error] = std::from_chars(digits, cut.text.data() + cut.text.size(), next);
    SCS_FUZZ_CHECK(error == std::errc() && end != digits, context());
    SCS_FUZZ_CHECK(next > cut.offset && next <= cut.bytes,
                   context() + " window " + std::to_string(window));
  }
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs;
  if (size == 0) {
    return 0;
  }
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  fuzz::Model model;
  model.cap = fuzz::kCaps[data[0] & 7];
  model.marker = fuzz::kMarkers[(data[0] >> 3) & 3];
  model.trailer_cap = fuzz::kTrailerCaps[(data[0] >> 5) & 3];
  launcher::OutputCapture capture(model.cap, model.marker, model.trailer_cap);

  std::string_view rest = input.substr(1);
  while (rest.size() >= 2) {
    const auto header = static_cast<unsigned char>(rest[0]);
    const auto offset = static_cast<unsigned char>(rest[1]);
    rest.remove_prefix(2);
    const std::string_view bytes = rest.substr(0, header & 0x7F);
    rest.remove_prefix(bytes.size());
    const backend::Stream stream =
        (header & 0x80) == 0 ? backend::Stream::kStdout : backend::Stream::kStderr;
    capture.write(stream, bytes);
    (stream == backend::Stream::kStdout ? model.out : model.err).append(bytes);
    const std::uint64_t from = offset == 255 ? std::numeric_limits<std::uint64_t>::max() : offset;
    fuzz::checkSnapshot(capture, model, stream, from, false, input);
    fuzz::checkSnapshot(capture, model, stream, 0, false, input);
  }

  capture.close();
  for (const backend::Stream stream : {backend::Stream::kStdout, backend::Stream::kStderr}) {
    for (const std::uint64_t from : {0, 1, 2, 3, 5, 8, 13, 100}) {
      fuzz::checkSnapshot(capture, model, stream, from, true, input);
    }
  }
  const launcher::OutputCapture::Trailer trailer = capture.takeTrailer();
  const std::size_t at = model.markerAt();
  SCS_FUZZ_CHECK(trailer.found == (at != std::string::npos), input);
  if (trailer.found) {
    const std::string_view after = std::string_view(model.out).substr(at + model.marker.size());
    SCS_FUZZ_CHECK(trailer.overflowed == (after.size() > model.trailer_cap), input);
    SCS_FUZZ_CHECK(trailer.bytes == after.substr(0, model.trailer_cap), input);
  } else {
    SCS_FUZZ_CHECK(!trailer.overflowed && trailer.bytes.empty(), input);
  }
  return 0;
}
