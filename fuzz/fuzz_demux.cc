// Feeds the engine's multiplexed attach stream to docker::StreamDemux in chunks split at
// places chosen by the input, and compares what comes out (the payload of each stream, the
// malformed and mid-frame flags) with a whole-buffer reference parser.
//
// Input: byte 0 picks how the rest is cut into chunks; the rest is the stream.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "stream_demux.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

struct Parsed {
  std::array<std::string, 4> payload;  // by frame type
  bool malformed = false;
  bool mid_frame = false;
};

// moby's stdcopy format read in one pass over the whole buffer.
Parsed referenceParse(std::string_view stream) {
  Parsed parsed;
  std::size_t at = 0;
  while (at < stream.size()) {
    if (stream.size() - at < 8) {
      parsed.mid_frame = true;
      break;
    }
    const auto type = static_cast<unsigned char>(stream[at]);
    if (type > 3) {
      parsed.malformed = true;
      break;
    }
    std::uint64_t size = 0;
    for (std::size_t k = 4; k < 8; ++k) {
      size = size * 256 + static_cast<unsigned char>(stream[at + k]);
    }
    at += 8;
    const std::size_t available = stream.size() - at;
    const std::size_t take = size < available ? static_cast<std::size_t>(size) : available;
    parsed.payload[type].append(stream.substr(at, take));
    at += take;
    if (take < size) {
      parsed.mid_frame = true;
    }
  }
  return parsed;
}

// Chunk lengths from a xorshift generator; the selector picks the longest chunk, from one
// byte at a time to whole frames.
class Splitter {
 public:
  explicit Splitter(std::uint8_t selector)
      : state_(0x9E3779B9u ^ selector), longest_(kLongest[selector % kLongest.size()]) {}

  std::size_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    return state_ % (longest_ + 1);  // 0: an empty feed, which must change nothing
  }

 private:
  static constexpr std::array<std::size_t, 6> kLongest = {1, 2, 7, 9, 64, 100000};
  std::uint32_t state_;
  std::size_t longest_;
};

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs;
  if (size == 0) {
    return 0;
  }
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  const fuzz::Parsed expected = fuzz::referenceParse(stream);

  fuzz::Parsed got;
  docker::StreamDemux demux([&got](docker::FrameType type, std::string_view payload) {
    const auto index = static_cast<std::size_t>(type);
    SCS_FUZZ_CHECK(index < got.payload.size(), "handler got an unknown frame type");
    got.payload[index].append(payload);
  });
  fuzz::Splitter splitter(data[0]);
  std::string_view rest = stream;
  bool ever_failed = false;
  while (true) {
    const std::size_t take = std::min(splitter.next(), rest.size());
    const bool ok = demux.feed(rest.substr(0, take));
    SCS_FUZZ_CHECK(ok == !demux.malformed(), "feed() disagrees with malformed()");
    SCS_FUZZ_CHECK(!(ever_failed && ok), "feed() recovered after a malformed stream");
    ever_failed = ever_failed || !ok;
    rest.remove_prefix(take);
    if (rest.empty()) {
      break;
    }
  }
  got.malformed = demux.malformed();
  got.mid_frame = demux.midFrame();

  SCS_FUZZ_CHECK(got.malformed == expected.malformed, stream);
  if (!expected.malformed) {
    SCS_FUZZ_CHECK(got.mid_frame == expected.mid_frame, stream);
  }
  for (std::size_t type = 0; type < expected.payload.size(); ++type) {
    SCS_FUZZ_CHECK(
        got.payload[type] == expected.payload[type],
        "payload of type " + std::to_string(type) + " differs; stream: " + fuzz::printable(stream));
  }
  const std::size_t got_output = got.payload[1].size() + got.payload[2].size();
  const std::size_t expected_output = expected.payload[1].size() + expected.payload[2].size();
  SCS_FUZZ_CHECK(got_output == expected_output, stream);
  return 0;
}
