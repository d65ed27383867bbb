#pragma once

#include <scs/backend/backend.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runs/run_manager.h"

namespace scs::runs {

// `bytes` as valid UTF-8: each ill-formed sequence (a stray continuation byte, an overlong
// form, a surrogate, a code point above U+10FFFF, a sequence cut short) becomes one U+FFFD
// per maximal subpart, as Unicode recommends. Valid input is returned unchanged.
std::string toValidUtf8(std::string_view bytes);

// Captures one run's stdout and stderr with a fixed memory bound: per stream it keeps the
// first cap/2 bytes and the last cap - cap/2 bytes and counts everything. write() never
// blocks on anything but a short mutex and never allocates past the cap. Thread-safe.
class OutputCapture : public backend::OutputSink {
 public:
  explicit OutputCapture(std::size_t cap_bytes_per_stream);

  void write(backend::Stream stream, std::string_view bytes) override;

  // The stream so far: everything when nothing was dropped, otherwise the head, a marker
  // "\n[... N bytes omitted ...]\n" and the tail; always valid UTF-8.
  CapturedOutput snapshot(backend::Stream stream) const;

  // Bytes of buffer held for both streams; never more than twice the per-stream cap.
  std::size_t retainedCapacity() const;

 private:
  struct Buffer {
    std::vector<char> head;
    std::vector<char> tail;      // a ring once it holds tail_cap_ bytes
    std::size_t tail_start = 0;  // index of the oldest tail byte once the ring is full
    std::uint64_t total = 0;
  };

  Buffer& bufferFor(backend::Stream stream);
  const Buffer& bufferFor(backend::Stream stream) const;
  void appendTail(Buffer& buffer, std::string_view bytes);

  const std::size_t head_cap_;
  const std::size_t tail_cap_;
  mutable std::mutex mutex_;
  Buffer stdout_;
  Buffer stderr_;
};

}  // namespace scs::runs
