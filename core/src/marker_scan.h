#pragma once

// A marker looked for in a stream that arrives in pieces, as the launcher's markers are in a
// sandbox's output (the trailer's and the stderr end's, launcher/output.cc; each egress frame's,
// egress/frames.cc): Knuth-Morris-Pratt across pieces, the bytes of a partial match at the end
// of a piece held back until the match completes (they are the marker's) or fails (they are the
// stream's own after all). Header-only, pure, not thread-safe.

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scs {

class MarkerScan {
 public:
  explicit MarkerScan(std::string marker) : marker_(std::move(marker)), failure_(marker_.size()) {
    for (std::size_t i = 1, k = 0; i < marker_.size(); ++i) {
      while (k > 0 && marker_[i] != marker_[k]) {
        k = failure_[k - 1];
      }
      if (marker_[i] == marker_[k]) {
        ++k;
      }
      failure_[i] = k;  // the longest proper prefix of marker_[0..i] that is also its suffix
    }
  }

  const std::string& marker() const { return marker_; }
  // The bytes held back: the marker's first ones, matched at the end of what was fed.
  std::string_view held() const { return std::string_view(marker_).substr(0, matched_); }
  // Forgets the held bytes (the caller has taken them as the stream's: it ended).
  void clear() { matched_ = 0; }

  struct Fed {
    std::size_t consumed = 0;  // bytes of the piece read: all, or through the marker's end
    bool found = false;        // the marker completed (nothing is held then)
  };

  // Reads `bytes`, what follows in the stream, up to the marker's end. `release(view)` is
  // called with the stream's own bytes in order (held ones first, when a match fails): never
  // with the marker's, nor with bytes that may still begin it.
  template <class Release>
  Fed feed(std::string_view bytes, Release&& release) {
    if (marker_.empty()) {
      release(bytes);
      return {bytes.size(), false};
    }
    const std::size_t held = matched_;
    // The stream's own bytes: a prefix, of `length`, of the held bytes and then `bytes`.
    const auto own = [&](std::size_t length) {
      const std::size_t from_held = std::min(length, held);
      if (from_held > 0) {
        release(std::string_view(marker_).substr(0, from_held));
      }
      if (length > from_held) {
        release(bytes.substr(0, length - from_held));
      }
    };
    std::size_t i = 0;
    while (i < bytes.size()) {
      if (matched_ == 0) {  // most bytes begin nothing: skip to the next that could
        const void* next = std::memchr(bytes.data() + i, marker_.front(), bytes.size() - i);
        if (next == nullptr) {
          break;
        }
        i = static_cast<std::size_t>(static_cast<const char*>(next) - bytes.data());
      }
      const char byte = bytes[i++];
      while (matched_ > 0 && marker_[matched_] != byte) {
        matched_ = failure_[matched_ - 1];
      }
      if (marker_[matched_] == byte) {
        ++matched_;
      }
      if (matched_ == marker_.size()) {
        own(held + i - marker_.size());
        matched_ = 0;
        return {i, true};
      }
    }
    own(held + bytes.size() - matched_);
    return {bytes.size(), false};
  }

 private:
  std::string marker_;
  std::vector<std::size_t> failure_;
  std::size_t matched_ = 0;
};

}  // namespace scs
