#include "subject/stdin_frames.h"

namespace scs::fuzz {

StdinVerdict readStdinFrames(std::string_view input, const std::vector<std::size_t>& cuts,
                             bool skip_nul) {
  backend::launcher::StdinFrameReader reader(skip_nul);
  StdinVerdict verdict;
  std::size_t at = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(input.size());
  for (const std::size_t end : ends) {
    if (end < at || end > input.size()) {
      continue;
    }
    if (!reader.feed(input.substr(at, end - at), verdict.frames)) {
      verdict.refused = true;
      verdict.reason = !reader.error().empty();
      return verdict;
    }
    at = end;
  }
  return verdict;
}

}  // namespace scs::fuzz
