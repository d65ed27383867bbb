// StreamDemux::feed: header bytes gathered across calls, an unknown stream type marks the
// stream malformed, and payload is passed on without buffering a frame.

#include "stream_demux.h"

#include <algorithm>

namespace scs::docker {

StreamDemux::StreamDemux(Handler handler) : handler_(std::move(handler)) {}

bool StreamDemux::feed(std::string_view bytes) {
  while (!bytes.empty() && !malformed_) {
    if (payload_left_ == 0) {
      const std::size_t take = std::min(bytes.size(), sizeof header_ - header_bytes_);
      std::copy_n(bytes.begin(), take, header_ + header_bytes_);
      header_bytes_ += take;
      bytes.remove_prefix(take);
      if (header_bytes_ < sizeof header_) {
        break;
      }
      header_bytes_ = 0;
      if (header_[0] > static_cast<unsigned char>(FrameType::kSystemErr)) {
        malformed_ = true;
        break;
      }
      type_ = static_cast<FrameType>(header_[0]);
      payload_left_ = (static_cast<std::uint32_t>(header_[4]) << 24) |
                      (static_cast<std::uint32_t>(header_[5]) << 16) |
                      (static_cast<std::uint32_t>(header_[6]) << 8) |
                      static_cast<std::uint32_t>(header_[7]);
      continue;
    }
    const std::size_t take = std::min<std::size_t>(bytes.size(), payload_left_);
    payload_left_ -= static_cast<std::uint32_t>(take);
    handler_(type_, bytes.substr(0, take));
    bytes.remove_prefix(take);
  }
  return !malformed_;
}

bool StreamDemux::midFrame() const { return header_bytes_ != 0 || payload_left_ != 0; }

}  // namespace scs::docker
