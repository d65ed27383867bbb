#include "runs/report_retention.h"

namespace scs::runs {

void ReportRetention::add(const std::string& run_id, const std::string& tenant, std::size_t bytes,
                          SteadyTime finished) {
  kept_.push_back({run_id, tenant, bytes, finished});
  bytes_ += bytes;
}

std::vector<std::string> ReportRetention::expire(SteadyTime now) {
  std::vector<std::string> forgotten;
  while (!kept_.empty()) {
    const Kept& oldest = kept_.front();
    const bool expired = now - oldest.finished > settings_.retention;
    const bool over = kept_.size() > settings_.max_reports;
    const bool heavy = bytes_ > settings_.max_bytes && kept_.size() > 1;
    if (!expired && !over && !heavy) {
      break;
    }
    bytes_ -= oldest.bytes;
    forgotten.push_back(oldest.run_id);
    kept_.pop_front();
  }
  return forgotten;
}

}  // namespace scs::runs
