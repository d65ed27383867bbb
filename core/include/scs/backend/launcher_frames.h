#pragma once

// The grammar of the frames the server writes to a sandbox's stdin, whose names
// launcher_protocol.h holds: one codec, header-only, that the core writes with and that every
// backend standing in for PID 1 (the fake, the Kubernetes API double of the tests) reads with.
// docker/scs_launcher/frames.py is PID 1's side; tests/golden/stdin_frames.json holds streams
// that both sides' tests must decode alike (tests/unit/launcher_frames_test.cc,
// tests/launcher/test_frames.py). Not part of the plugin ABI (backend.h): bytes on a stdin.
//
//   run        kRunFrame SP size LF, then `size` bytes of bundle (size <= kMaxFrameBytes)
//   interrupt  kInterruptFrame LF
//   session    kSessionFrame SP seconds LF (whole seconds above 0, at most
//              kMaxSessionSecondsDigits digits): the first bytes of a prepared sandbox's stdin
//              when it becomes a session's, instead of a bundle
//   egress     kEgressStdinFrame SP type SP stream SP value LF, then `value` bytes of payload
//              when type is kEgressData (0 < value <= kMaxEgressStdinPayloadBytes); type is one
//              of kEgressStdinTypes, stream fits 32 bits
// Numbers are 1 to 19 decimal digits (kMaxNumberDigits: none overflows), and nothing else. A
// header is at most kMaxFrameHeaderBytes before its LF.

#include <scs/backend/launcher_protocol.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace scs::backend::launcher {

enum class FrameKind { kRun, kInterrupt, kSession, kEgress };

struct StdinFrame {
  FrameKind kind = FrameKind::kRun;
  std::string payload;        // kRun: the bundle; kEgress: the data of a kEgressData frame
  std::uint64_t seconds = 0;  // kSession: the session's deadline
  char egress_type = 0;       // kEgress: one of kEgressStdinTypes
  std::uint32_t stream = 0;   // kEgress
  std::uint64_t value = 0;    // kEgress: the payload's size for data, else the type's value
};

inline std::string runFrame(std::string_view bundle) {
  std::string frame = std::string(kRunFrame) + " " + std::to_string(bundle.size()) + "\n";
  frame.append(bundle);
  return frame;
}

inline std::string interruptFrame() { return std::string(kInterruptFrame) + "\n"; }

inline std::string sessionFrame(std::uint64_t seconds) {
  return std::string(kSessionFrame) + " " + std::to_string(seconds) + "\n";
}

// `value` is the payload's size for kEgressData (the argument is then ignored).
inline std::string egressFrame(char type, std::uint32_t stream, std::uint64_t value,
                               std::string_view payload = {}) {
  const bool data = type == kEgressData[0];
  std::string frame = std::string(kEgressStdinFrame) + " " + type + " " + std::to_string(stream) +
                      " " + std::to_string(data ? payload.size() : value) + "\n";
  if (data) {
    frame.append(payload);
  }
  return frame;
}

namespace frames_detail {

inline constexpr std::size_t kMaxNumberDigits = 19;

// The decimal number `text` when it is 1 to `max_digits` digits and at most `max`.
inline bool number(std::string_view text, std::size_t max_digits, std::uint64_t max,
                   std::uint64_t& out) {
  if (text.empty() || text.size() > max_digits) {
    return false;
  }
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = value;
  return value <= max;
}

inline bool after(std::string_view header, std::string_view name, std::string_view& rest) {
  if (header.size() <= name.size() || header.substr(0, name.size()) != name ||
      header[name.size()] != ' ') {
    return false;
  }
  rest = header.substr(name.size() + 1);
  return true;
}

}  // namespace frames_detail

// A frame's header line (without its LF) as `frame`, and the payload bytes that follow it in
// `payload_bytes`; false for a line that is no frame's header.
inline bool parseFrameHeader(std::string_view header, StdinFrame& frame,
                             std::uint64_t& payload_bytes) {
  using frames_detail::kMaxNumberDigits;
  using frames_detail::number;
  std::string_view rest;
  frame = StdinFrame{};
  payload_bytes = 0;
  if (header == kInterruptFrame) {
    frame.kind = FrameKind::kInterrupt;
    return true;
  }
  if (frames_detail::after(header, kRunFrame, rest)) {
    frame.kind = FrameKind::kRun;
    return number(rest, kMaxNumberDigits, kMaxFrameBytes, payload_bytes);
  }
  if (frames_detail::after(header, kSessionFrame, rest)) {
    frame.kind = FrameKind::kSession;
    return number(rest, kMaxSessionSecondsDigits, UINT64_MAX, frame.seconds) && frame.seconds > 0;
  }
  if (!frames_detail::after(header, kEgressStdinFrame, rest) || rest.size() < 2 || rest[1] != ' ' ||
      kEgressStdinTypes.find(rest[0]) == std::string_view::npos) {
    return false;
  }
  frame.kind = FrameKind::kEgress;
  frame.egress_type = rest[0];
  rest.remove_prefix(2);
  const std::size_t space = rest.find(' ');
  std::uint64_t stream = 0;
  if (space == std::string_view::npos || !number(rest.substr(0, space), 10, UINT32_MAX, stream) ||
      !number(rest.substr(space + 1), kMaxNumberDigits, UINT64_MAX, frame.value)) {
    return false;
  }
  frame.stream = static_cast<std::uint32_t>(stream);
  if (frame.egress_type == kEgressData[0]) {
    if (frame.value == 0 || frame.value > kMaxEgressStdinPayloadBytes) {
      return false;
    }
    payload_bytes = frame.value;
  }
  return true;
}

// The kinds of frame a reader takes (StdinFrameReader's `kinds`), as bits.
inline constexpr unsigned kindBit(FrameKind kind) { return 1u << static_cast<unsigned>(kind); }
inline constexpr unsigned kEveryFrameKind = 0xFu;

// Takes a stdin as it arrives and gives its whole frames, in order. Bytes that are no frame,
// or a frame of a kind not in `kinds` (refused at its header, before its payload is waited
// for), make the stream unusable (only the server writes a sandbox's stdin): feed() then
// returns false, error() says why, `frames` holds none of that call's frames, and every later
// feed() does the same. `skip_nul`: NUL bytes between frames are skipped (a one-shot run's stdin
// after its bundle, whose last padding block the bundle's reader may have left). Pure; not
// thread-safe.
class StdinFrameReader {
 public:
  explicit StdinFrameReader(bool skip_nul = false, unsigned kinds = kEveryFrameKind)
      : skip_nul_(skip_nul), kinds_(kinds) {}

  bool feed(std::string_view bytes, std::vector<StdinFrame>& frames) {
    const std::size_t before = frames.size();
    if (!read(bytes, frames)) {
      frames.resize(before);
      return false;
    }
    return true;
  }

  const std::string& error() const { return error_; }
  // Bytes held for a frame not yet whole.
  std::size_t buffered() const { return buffer_.size(); }

 private:
  bool read(std::string_view bytes, std::vector<StdinFrame>& frames) {
    if (!error_.empty()) {
      return false;
    }
    buffer_.append(bytes);
    std::size_t at = 0;
    while (true) {
      if (!in_payload_) {
        while (skip_nul_ && at < buffer_.size() && buffer_[at] == '\0') {
          ++at;
        }
        const std::size_t end = buffer_.find('\n', at);
        if (end == std::string::npos) {
          if (buffer_.size() - at > kMaxFrameHeaderBytes) {
            error_ = "a frame header is too long";
            return false;
          }
          break;
        }
        const std::string_view header(buffer_.data() + at, end - at);
        if (header.size() > kMaxFrameHeaderBytes || !parseFrameHeader(header, pending_, need_)) {
          error_ = "unknown frame " + printable(header.substr(0, 32));
          return false;
        }
        if ((kinds_ & kindBit(pending_.kind)) == 0) {
          error_ = "a frame of a kind not taken here: " + printable(header.substr(0, 32));
          return false;
        }
        at = end + 1;
        in_payload_ = true;
      }
      if (buffer_.size() - at < need_) {
        break;
      }
      pending_.payload.assign(buffer_, at, need_);
      at += need_;
      frames.push_back(std::move(pending_));
      pending_ = StdinFrame{};
      in_payload_ = false;
    }
    buffer_.erase(0, at);
    return true;
  }

  static std::string printable(std::string_view text) {
    std::string out = "'";
    for (const char c : text) {
      out += c >= ' ' && c <= '~' ? c : '?';
    }
    return out + "'";
  }

  bool skip_nul_;
  unsigned kinds_;
  std::string buffer_;
  bool in_payload_ = false;
  StdinFrame pending_;
  std::uint64_t need_ = 0;
  std::string error_;
};

}  // namespace scs::backend::launcher
