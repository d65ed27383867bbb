#pragma once

// The stdin frames' reader (scs/backend/launcher_frames.h, header-only) as fuzz_stdin_frames
// drives it, compiled in the coverage-instrumented subject library: a harness that instantiated
// the reader itself would leave the fuzzer blind to its branches.

#include <scs/backend/launcher_frames.h>

#include <cstddef>
#include <string_view>
#include <vector>

namespace scs::fuzz {

struct StdinVerdict {
  std::vector<backend::launcher::StdinFrame> frames;
  bool refused = false;
  bool reason = false;  // a refusal came with its reason
};

// `input` fed in pieces cut at `cuts` (those out of order or range are passed over).
StdinVerdict readStdinFrames(std::string_view input, const std::vector<std::size_t>& cuts,
                             bool skip_nul);

}  // namespace scs::fuzz
