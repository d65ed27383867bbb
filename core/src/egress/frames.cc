#include "egress/frames.h"

#include <scs/backend/launcher_frames.h>

namespace scs::egress {

namespace {

bool knownType(char type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kOpen:
    case FrameType::kData:
    case FrameType::kCredit:
    case FrameType::kFin:
    case FrameType::kReset:
      return true;
  }
  return false;
}

std::uint32_t readBigEndian(std::string_view bytes) {
  std::uint32_t value = 0;
  for (const char byte : bytes.substr(0, 4)) {
    value = (value << 8) | static_cast<unsigned char>(byte);
  }
  return value;
}

void appendBigEndian(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

}  // namespace

std::string stdoutMarker(std::string_view nonce) {
  std::string marker(kStdoutMarker);
  marker += nonce;
  marker += backend::launcher::kMarkerEnd;
  return marker;
}

std::string encodeStdoutFrame(std::string_view nonce, const Frame& frame) {
  std::string out = stdoutMarker(nonce);
  out.push_back(static_cast<char>(frame.type));
  appendBigEndian(out, frame.stream);
  appendBigEndian(out, frame.type == FrameType::kData
                           ? static_cast<std::uint32_t>(frame.payload.size())
                           : frame.value);
  if (frame.type == FrameType::kData) {
    out += frame.payload;
  }
  return out;
}

std::string encodeStdinFrame(const Frame& frame) {
  return backend::launcher::egressFrame(static_cast<char>(frame.type), frame.stream, frame.value,
                                        frame.payload);
}

StdoutFrames::StdoutFrames(std::string_view nonce) : marker_(stdoutMarker(nonce)) {}

void StdoutFrames::feed(std::string_view bytes, std::string& output, std::vector<Frame>& frames) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    switch (state_) {
      case State::kBroken:
        output.append(bytes.substr(i));
        return;
      case State::kScanning: {
        const MarkerScan::Fed fed =
            marker_.feed(bytes.substr(i), [&](std::string_view own) { output.append(own); });
        i += fed.consumed;
        if (fed.found) {
          state_ = State::kHeader;
          header_.clear();
        }
        break;
      }
      case State::kHeader: {
        const std::size_t take = std::min(kStdoutHeaderBytes - header_.size(), bytes.size() - i);
        header_.append(bytes.substr(i, take));
        i += take;
        if (header_.size() < kStdoutHeaderBytes) {
          return;
        }
        frame_ = Frame{};
        const char type = header_[0];
        frame_.stream = readBigEndian(std::string_view(header_).substr(1, 4));
        frame_.value = readBigEndian(std::string_view(header_).substr(5, 4));
        if (!knownType(type)) {
          violation_ = "an egress frame of unknown type";
        } else if (frame_.stream == 0) {
          violation_ = "an egress frame for stream 0";
        } else {
          frame_.type = static_cast<FrameType>(type);
          if (frame_.type == FrameType::kData &&
              (frame_.value == 0 || frame_.value > kMaxStdoutFrameBytes - marker_.marker().size() -
                                                       kStdoutHeaderBytes)) {
            violation_ = "an egress data frame of " + std::to_string(frame_.value) + " bytes";
          } else if ((frame_.type == FrameType::kOpen || frame_.type == FrameType::kFin) &&
                     frame_.value != 0) {
            violation_ = "an egress frame with a value it cannot have";
          }
        }
        if (!violation_.empty()) {
          state_ = State::kBroken;
          break;
        }
        if (frame_.type == FrameType::kData) {
          state_ = State::kPayload;
        } else {
          frames.push_back(std::move(frame_));
          state_ = State::kScanning;
        }
        break;
      }
      case State::kPayload: {
        const std::size_t take =
            std::min<std::size_t>(frame_.value - frame_.payload.size(), bytes.size() - i);
        frame_.payload.append(bytes.substr(i, take));
        i += take;
        if (frame_.payload.size() == frame_.value) {
          frames.push_back(std::move(frame_));
          state_ = State::kScanning;
        }
        break;
      }
    }
  }
}

void StdoutFrames::finish(std::string& output) {
  if (state_ == State::kScanning) {
    output.append(marker_.held());
    marker_.clear();
  }
}

}  // namespace scs::egress
