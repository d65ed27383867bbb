#pragma once

// A run's output as the core holds it: OutputCapture, the
// bounded sink of both streams that also splits off the launcher's trailer and end marker.

#include <scs/backend/backend.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "marker_scan.h"

namespace scs::launcher {

struct CapturedOutput {
  std::string text;         // valid UTF-8 (invalid bytes replaced), head and tail when cut
  std::uint64_t bytes = 0;  // everything the run wrote to the stream
  bool truncated = false;
  std::uint64_t offset = 0;  // byte offset in the stream where `text` starts
};

// A marker a window adds (snapshot() below) is shorter than this.
inline constexpr std::uint64_t kMarkerRoom = 240;

// The windows of stdout and stderr (snapshot()'s `window`) whose texts together, markers
// included, stay within `window` characters, for streams whose texts take these characters
// from the offsets asked (charactersFrom()): both whole when they fit, otherwise the smaller
// whole up to half and the larger the rest. {0, 0} (no window) for a `window` of 0.
std::pair<std::uint64_t, std::uint64_t> windowShares(std::uint64_t window,
                                                     std::uint64_t stdout_characters,
                                                     std::uint64_t stderr_characters);

// Captures one run's stdout and stderr with a fixed memory bound: per stream it keeps the
// first cap/2 bytes and the last cap - cap/2 bytes and counts everything. write() never
// blocks on anything but a short mutex and never allocates past the cap. Thread-safe.
//
// With a trailer marker (launcher/side_channel.h), stdout is scanned for it across write()
// boundaries: the bytes of a partial match are held back until the match fails (then they are
// output) or completes; from the marker on, stdout goes to a trailer buffer of
// `trailer_cap_bytes` instead, so neither the text nor `bytes` include the trailer. Snapshots
// show held-back bytes as output, since a match only completes with the launcher's trailer.
// With a stderr end marker, stderr is scanned the same way and ends at it: what follows is
// dropped.
class OutputCapture : public backend::OutputSink {
 public:
  explicit OutputCapture(std::size_t cap_bytes_per_stream, std::string trailer_marker = {},
                         std::size_t trailer_cap_bytes = 0, std::string stderr_end_marker = {});

  void write(backend::Stream stream, std::string_view bytes) override;
  // The backend's word that the sandbox has ended (backend.h).
  void ended() override;

  // Called, without this capture's lock held, when the output is complete (see below) and
  // when the backend says the sandbox has ended. Set before the capture is a sink.
  void setListener(std::function<void()> listener) { listener_ = std::move(listener); }
  bool hasEnded() const;
  // The launcher has said all: the trailer marker and the whole line after it have arrived
  // within the cap, and so has the stderr end marker when there is one.
  bool outputComplete() const;

  // The stream ended: bytes held back as a partial marker match are output after all, and
  // snapshots no longer hold back a UTF-8 sequence cut by the end of what has arrived.
  void close();

  // The stream so far: everything when nothing was dropped, otherwise the head, a marker
  // "\n[... N bytes omitted ...]\n" and the tail; always valid UTF-8. With `from`, the text
  // starts at that byte offset of the stream instead, moved back to the start of a UTF-8
  // sequence it cuts, or forward to the start of the tail when it falls in the dropped middle
  // (CapturedOutput::offset says where it starts). Before close(), a UTF-8 sequence cut by the
  // end of what has arrived is left out of the text (it is still counted in `bytes`).
  // With a `window` (0 for none) the text is cut to that many characters as a JSON string
  // carries them, as a model is handed it (an escaped newline counts two; windowShares()):
  // from offset 0 the stream's head and tail around a marker that names the `stdout_offset`
  // (or `stderr_offset`) from which get_result reads the rest; from a later offset as much as
  // fits, and a marker naming the offset that reads on. `truncated` then.
  CapturedOutput snapshot(backend::Stream stream, std::uint64_t from = 0,
                          std::uint64_t window = 0) const;

  // Both streams' snapshots as a report hands them to a model: `window` characters of the two
  // together, shared by windowShares(), each stream copied once.
  std::pair<CapturedOutput, CapturedOutput> report(std::uint64_t stdout_from,
                                                   std::uint64_t stderr_from,
                                                   std::uint64_t window) const;

  // Characters the stream's held text from `from` on takes as a JSON string carries it (an
  // escaped newline two), counted up to `most` + 1: what a window must fit.
  std::uint64_t charactersFrom(backend::Stream stream, std::uint64_t from,
                               std::uint64_t most) const;

  struct Trailer {
    bool found = false;       // the marker was seen
    bool overflowed = false;  // more than the cap followed it; `bytes` is cut
    std::string bytes;        // what followed the marker
  };

  // The trailer so far; its buffer is released.
  Trailer takeTrailer();

  // Bytes of buffer held for both streams; never more than twice the per-stream cap.
  std::size_t retainedCapacity() const;

 private:
  struct Held;  // a copy of one stream's bytes, which snapshots cut
  struct Buffer {
    std::vector<char> head;
    std::vector<char> tail;      // a ring once it holds tail_cap_ bytes
    std::size_t tail_start = 0;  // index of the oldest tail byte once the ring is full
    std::uint64_t total = 0;
  };

  // A marker looked for in one stream, across write() boundaries; once found, no longer.
  struct Scan {
    explicit Scan(std::string marker) : search(std::move(marker)) {}
    MarkerScan search;
    bool found = false;
  };

  Buffer& bufferFor(backend::Stream stream);
  const Buffer& bufferFor(backend::Stream stream) const;
  Scan& scanFor(backend::Stream stream) {
    return stream == backend::Stream::kStdout ? trailer_scan_ : stderr_scan_;
  }
  const Scan& scanFor(backend::Stream stream) const {
    return stream == backend::Stream::kStdout ? trailer_scan_ : stderr_scan_;
  }
  bool outputCompleteLocked() const;
  Held heldOf(backend::Stream stream) const;  // under the lock
  // snapshot()'s text of `held` (before its UTF-8 repair, into `raw`), under the lock.
  CapturedOutput cutLocked(const Held& held, backend::Stream stream, std::uint64_t from,
                           std::uint64_t window, std::string& raw) const;
  void append(Buffer& buffer, std::string_view bytes);
  void appendTail(Buffer& buffer, std::string_view bytes);
  // Appends `bytes` to the stream's buffer up to its marker; returns how many bytes of it
  // were consumed up to and including the marker (all of them when it is not found).
  std::size_t scan(Buffer& buffer, Scan& scan, std::string_view bytes);
  void appendTrailer(std::string_view bytes);

  const std::size_t head_cap_;
  const std::size_t tail_cap_;
  const std::size_t trailer_cap_;
  mutable std::mutex mutex_;
  Buffer stdout_;
  Buffer stderr_;
  Scan trailer_scan_;  // in stdout
  Scan stderr_scan_;   // the stderr end marker
  bool closed_ = false;
  Trailer trailer_;
  bool trailer_line_ended_ = false;
  bool ended_ = false;
  std::function<void()> listener_;
};

}  // namespace scs::launcher
