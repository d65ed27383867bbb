// Feeds bytes to egress::StdoutFrames as a sandbox's stdout (the program's output and PID 1's
// frames, written inside the sandbox, so untrusted), split at points the input chooses. The
// verdict must not depend on the split: the same output, the same frames, the same violation.
// The program's bytes are never lost or taken for a frame's: with no violation, the output
// plus every frame encoded again is the input, byte for byte, less what a frame took. A data
// frame never exceeds what one write of PIPE_BUF can carry; a violation leaves the rest as
// output. The encoders' frames read back as themselves.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "egress/frames.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

using egress::Frame;
using egress::FrameType;

constexpr std::string_view kNonce = "0123456789abcdef0123456789abcdef";

struct Verdict {
  std::string output;
  std::vector<Frame> frames;
  std::string violation;
};

Verdict feedIn(std::string_view input, const std::vector<std::size_t>& cuts) {
  egress::StdoutFrames reader(kNonce);
  Verdict verdict;
  std::size_t at = 0;
  for (const std::size_t cut : cuts) {
    if (cut > at && cut <= input.size()) {
      reader.feed(input.substr(at, cut - at), verdict.output, verdict.frames);
      at = cut;
    }
  }
  reader.feed(input.substr(at), verdict.output, verdict.frames);
  reader.finish(verdict.output);
  verdict.violation = reader.violation();
  return verdict;
}

bool sameFrames(const std::vector<Frame>& a, const std::vector<Frame>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].type != b[i].type || a[i].stream != b[i].stream || a[i].payload != b[i].payload ||
        (a[i].type != FrameType::kData && a[i].value != b[i].value)) {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs::fuzz;
  if (size < 2) {
    return 0;
  }
  // The first two bytes choose the cuts; a byte 0x01 in the rest stands for the marker, so the
  // fuzzer reaches frames without having to guess the nonce.
  const std::vector<std::size_t> cuts{data[0], static_cast<std::size_t>(data[0]) + data[1]};
  const std::string marker = scs::egress::stdoutMarker(kNonce);
  std::string input;
  for (std::size_t i = 2; i < size; ++i) {
    if (data[i] == 0x01) {
      input += marker;
    } else {
      input.push_back(static_cast<char>(data[i]));
    }
  }
  const Verdict whole = feedIn(input, {});
  const Verdict split = feedIn(input, cuts);
  SCS_FUZZ_CHECK(whole.output == split.output, "whole.output == split.output");
  SCS_FUZZ_CHECK(sameFrames(whole.frames, split.frames), "sameFrames(whole.frames, split.frames)");
  SCS_FUZZ_CHECK(whole.violation == split.violation, "whole.violation == split.violation");
  for (const Frame& frame : whole.frames) {
    SCS_FUZZ_CHECK(frame.stream != 0, "frame.stream != 0");
    if (frame.type == FrameType::kData) {
      SCS_FUZZ_CHECK(!frame.payload.empty(), "!frame.payload.empty()");
      SCS_FUZZ_CHECK(marker.size() + scs::egress::kStdoutHeaderBytes + frame.payload.size() <=
                     scs::egress::kMaxStdoutFrameBytes, "marker.size() + scs::egress::kStdoutHeaderBytes + frame.payl");
    }
  }
  if (whole.violation.empty()) {
    // Nothing is lost: the output and the frames together are the input's bytes.
    std::size_t framed = 0;
    for (const Frame& frame : whole.frames) {
      framed += scs::egress::encodeStdoutFrame(kNonce, frame).size();
    }
    SCS_FUZZ_CHECK(whole.output.size() + framed <= input.size(), "whole.output.size() + framed <= input.size()");
    SCS_FUZZ_CHECK(input.size() - whole.output.size() - framed <= marker.size() +
                   scs::egress::kStdoutHeaderBytes + scs::egress::kMaxStdoutFrameBytes, "input.size() - whole.output.size() - framed <= marker.size()");
  }
  // The encoders' frames read back as themselves, between the program's bytes.
  for (const Frame& frame : whole.frames) {
    const Verdict again =
        feedIn("x" + scs::egress::encodeStdoutFrame(kNonce, frame) + "y", {});
    SCS_FUZZ_CHECK(again.output == "xy", "again.output == \"xy\"");
    SCS_FUZZ_CHECK(sameFrames(again.frames, {frame}), "sameFrames(again.frames, {frame})");
  }
  return 0;
}
