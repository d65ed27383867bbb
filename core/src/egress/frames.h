#pragma once

// The egress frames between the server and a sandbox's PID 1 (issue 44): each connection a
// program makes to PID 1's relay on the sandbox's own loopback is one stream, carried over the
// stdin and stdout the server already holds. No socket of the host is mounted.
//
// Out (PID 1 to the server, on stdout): kStdoutMarker, the sandbox's egress nonce and
// launcher::kMarkerEnd, then a type byte, the stream id and a value (each 4 bytes, big-endian),
// then `value` bytes of payload for kData. PID 1 writes each frame with one write() of at most
// kMaxStdoutFrameBytes, which a pipe keeps whole (PIPE_BUF), so a one-shot program that shares
// stdout can write between frames but never into one, and since it does not know the nonce it
// cannot write a frame of its own (a forged one could only do what its own connections do).
// In (the server to PID 1, on stdin, which only the server writes): "SCS-NET", a space, the type
// letter, a space, the stream id, a space, the value in decimal and "\n", then `value` bytes of
// payload for kData.
//
// Types: kOpen (PID 1 accepted a connection; value 0), kData (value: payload bytes), kCredit
// (value: bytes the sender may now send more of, on top of kInitialWindow), kFin (no more data
// this way), kReset (the stream is gone both ways). Each side sends data only within the credit
// the other has given, so neither ever buffers more than kInitialWindow of a stream.

#include <scs/backend/launcher_protocol.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "marker_scan.h"

namespace scs::egress {

enum class FrameType : char {
  kOpen = 'O',
  kData = 'D',
  kCredit = 'C',
  kFin = 'F',
  kReset = 'R',
};

static_assert(static_cast<char>(FrameType::kData) == backend::launcher::kEgressData[0]);
static_assert(static_cast<char>(FrameType::kFin) == backend::launcher::kEgressFin[0]);
static_assert(static_cast<char>(FrameType::kReset) == backend::launcher::kEgressReset[0]);

inline constexpr std::string_view kStdoutMarker = backend::launcher::kEgressMarkerPrefix;
inline constexpr std::string_view kStdinFrame = backend::launcher::kEgressStdinFrame;
inline constexpr std::size_t kStdoutHeaderBytes = 9;       // type, stream, value
inline constexpr std::size_t kMaxStdoutFrameBytes = 4096;  // PIPE_BUF: one atomic write
inline constexpr std::size_t kMaxStdinPayloadBytes = backend::launcher::kMaxEgressStdinPayloadBytes;
inline constexpr std::uint32_t kInitialWindow = 256 << 10;
// The relay's address in the sandbox: PID 1 listens there, and the proxy variables name it.
inline constexpr std::uint16_t kRelayPort = 3128;

struct Frame {
  FrameType type = FrameType::kData;
  std::uint32_t stream = 0;
  std::uint32_t value = 0;
  std::string payload;  // kData only
};

// "\0SCS-NET-<nonce>\0": where each of a sandbox's frames starts in its stdout.
std::string stdoutMarker(std::string_view nonce);

// A frame as PID 1 writes it to stdout (tests and the fake's launcher side use it).
std::string encodeStdoutFrame(std::string_view nonce, const Frame& frame);

// A frame as the server writes it to a sandbox's stdin.
std::string encodeStdinFrame(const Frame& frame);

// Takes a sandbox's stdout as it arrives and splits it into the program's output and PID 1's
// frames. Bytes that could begin a marker are held back until they do or cannot (then they are
// output after all), so neither is ever taken for the other across write() boundaries. A frame
// whose header is invalid (an unknown type, a kData payload past the frame cap, a value on a
// type that takes none) makes the stream of frames unusable: violation() says why, and every
// later byte is output (the server then resets the sandbox's streams). Pure; not thread-safe.
class StdoutFrames {
 public:
  explicit StdoutFrames(std::string_view nonce);

  // Appends the program's bytes of `bytes` to `output` and the complete frames to `frames`.
  void feed(std::string_view bytes, std::string& output, std::vector<Frame>& frames);
  // Stdout ended: bytes held back as a partial marker are output. A frame cut short is lost.
  void finish(std::string& output);

  const std::string& violation() const { return violation_; }

 private:
  enum class State { kScanning, kHeader, kPayload, kBroken };
  MarkerScan marker_;
  State state_ = State::kScanning;
  std::string header_;
  Frame frame_;
  std::string violation_;
};

}  // namespace scs::egress
