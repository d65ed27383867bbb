// The kubernetes backend's real time: the steady clock, and a wait that ends at its deadline.

#include "clock.h"

namespace scs::kubernetes {
namespace {

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline) const override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace

const Clock& systemClock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace scs::kubernetes
