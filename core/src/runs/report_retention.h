#pragma once

// Which finished reports the run manager forgets, and when: each one after the retention
// period, and the oldest first while more than max_reports are kept or their output and
// files together exceed max_bytes (never the newest one). Not thread-safe: the run manager
// calls it with its lock held.

#include <chrono>
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "runs/clock.h"

namespace scs::runs {

struct RetentionSettings {
  std::chrono::seconds retention{3600};
  std::size_t max_reports = 1000;
  std::size_t max_bytes = std::size_t{256} << 20;
};

class ReportRetention {
 public:
  explicit ReportRetention(RetentionSettings settings) : settings_(settings) {}

  // A report became final at `finished`, holding `bytes` of output and files.
  void add(const std::string& run_id, const std::string& tenant, std::size_t bytes,
           SteadyTime finished);

  // The reports to forget at `now`, oldest first; they are no longer counted.
  std::vector<std::string> expire(SteadyTime now);

  std::size_t bytes() const { return bytes_; }

 private:
  struct Kept {
    std::string run_id;
    std::string tenant;
    std::size_t bytes;
    SteadyTime finished;
  };

  const RetentionSettings settings_;
  std::deque<Kept> kept_;  // in the order they became final
  std::size_t bytes_ = 0;
};

}  // namespace scs::runs
