// Feeds bytes to the stdin frames' reader (scs/backend/launcher_frames.h), split at points the
// input chooses. The verdict must not depend on the split: the same frames and the same refusal.
// Every frame keeps within the grammar's bounds, and written again by the encoders it reads back
// as itself, alone or after the others. The reader is the fake's and the Kubernetes double's, and
// the grammar PID 1's frames.py holds to the same golden streams (tests/golden).

#include <scs/backend/launcher_frames.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "subject/stdin_frames.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

namespace launcher = backend::launcher;
using launcher::FrameKind;
using launcher::StdinFrame;

using Verdict = StdinVerdict;

Verdict feedIn(std::string_view input, const std::vector<std::size_t>& cuts, bool skip_nul) {
  Verdict verdict = readStdinFrames(input, cuts, skip_nul);
  SCS_FUZZ_CHECK(!verdict.refused || verdict.reason, "a refusal without a reason");
  return verdict;
}

bool same(const StdinFrame& a, const StdinFrame& b) {
  return a.kind == b.kind && a.payload == b.payload && a.seconds == b.seconds &&
         a.egress_type == b.egress_type && a.stream == b.stream && a.value == b.value;
}

std::string encoded(const StdinFrame& frame) {
  switch (frame.kind) {
    case FrameKind::kRun:
      return launcher::runFrame(frame.payload);
    case FrameKind::kInterrupt:
      return launcher::interruptFrame();
    case FrameKind::kSession:
      return launcher::sessionFrame(frame.seconds);
    case FrameKind::kEgress:
      return launcher::egressFrame(frame.egress_type, frame.stream, frame.value, frame.payload);
  }
  return {};
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs::fuzz;
  if (size < 3) {
    return 0;
  }
  // The first two bytes choose the cuts, the third whether NULs between frames are skipped.
  const std::vector<std::size_t> cuts{data[0], static_cast<std::size_t>(data[0]) + data[1]};
  const bool skip_nul = (data[2] & 1) != 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 3, size - 3);
  const Verdict whole = feedIn(input, {}, skip_nul);
  const Verdict split = feedIn(input, cuts, skip_nul);
  SCS_FUZZ_CHECK(whole.refused == split.refused, "the split changed the refusal");
  if (!whole.refused) {
    SCS_FUZZ_CHECK(whole.frames.size() == split.frames.size(), "the split changed the frames");
    for (std::size_t i = 0; i < whole.frames.size(); ++i) {
      SCS_FUZZ_CHECK(same(whole.frames[i], split.frames[i]), "the split changed a frame");
    }
  }
  std::string again;
  for (const StdinFrame& frame : whole.frames) {
    SCS_FUZZ_CHECK(frame.payload.size() <= scs::backend::launcher::kMaxFrameBytes, "payload cap");
    if (frame.kind == FrameKind::kSession) {
      SCS_FUZZ_CHECK(frame.seconds > 0, "a session of no seconds");
    }
    if (frame.kind == FrameKind::kEgress) {
      const bool data_frame = frame.egress_type == scs::backend::launcher::kEgressData[0];
      SCS_FUZZ_CHECK(data_frame
                         ? frame.payload.size() == frame.value && frame.value > 0 &&
                               frame.value <= scs::backend::launcher::kMaxEgressStdinPayloadBytes
                         : frame.payload.empty(),
                     "an egress frame outside its bounds");
    }
    const Verdict alone = feedIn(encoded(frame), {}, false);
    SCS_FUZZ_CHECK(!alone.refused && alone.frames.size() == 1 && same(alone.frames[0], frame),
                   "a frame written again does not read back as itself");
    again += encoded(frame);
  }
  const Verdict all = feedIn(again, {}, false);
  SCS_FUZZ_CHECK(!all.refused && all.frames.size() == whole.frames.size(),
                 "the frames written again do not read back");
  return 0;
}
