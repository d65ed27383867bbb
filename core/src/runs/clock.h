#pragma once

#include <chrono>

namespace scs::runs {

// Injected wherever time decides behaviour (deadlines, retention, durations), so tests
// can drive it.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point now() const = 0;
  virtual std::chrono::system_clock::time_point wallNow() const = 0;
};

class SystemClock : public Clock {
 public:
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::now();
  }
  std::chrono::system_clock::time_point wallNow() const override {
    return std::chrono::system_clock::now();
  }
};

}  // namespace scs::runs
