#pragma once

// StreamDemux: the engine's multiplexed attach stream (8-byte headers, then payload) parsed
// incrementally, each piece of payload handed on as it arrives.

#include <cstdint>
#include <functional>
#include <string_view>

namespace scs::docker {

// Stream types of the engine's multiplexed attach stream (moby api/pkg/stdcopy).
enum class FrameType : std::uint8_t { kStdin = 0, kStdout = 1, kStderr = 2, kSystemErr = 3 };

// Incremental parser of the 8-byte-header multiplexed stream ({type, 0, 0, 0, size as
// big-endian uint32} then the payload). Payload bytes are handed on as they arrive: a frame
// is never buffered whole, so any frame size costs constant memory. Not thread-safe.
class StreamDemux {
 public:
  // Called with each piece of payload as it arrives; one frame may come in several pieces.
  using Handler = std::function<void(FrameType type, std::string_view payload)>;

  explicit StreamDemux(Handler handler);

  // Consumes `bytes`, split anywhere. Returns false once the stream is malformed (an unknown
  // stream type); everything from there on is ignored.
  bool feed(std::string_view bytes);

  // True when the bytes so far end inside a frame header or payload.
  bool midFrame() const;

  bool malformed() const { return malformed_; }

 private:
  Handler handler_;
  unsigned char header_[8] = {};
  std::size_t header_bytes_ = 0;
  std::uint32_t payload_left_ = 0;
  FrameType type_ = FrameType::kStdin;
  bool malformed_ = false;
};

}  // namespace scs::docker
