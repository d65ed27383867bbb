#pragma once

// Time as the run manager sees it: the steady and the wall clock, and every timed wait the
// code makes. Injected wherever time decides behaviour (deadlines, retention, the prepared
// pool, long polls), so that a test moves time itself and a timed wait ends when the test's
// clock reaches its deadline, not when real time does.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

namespace scs::common {

using SteadyTime = std::chrono::steady_clock::time_point;
using SteadyDuration = std::chrono::steady_clock::duration;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime now() const = 0;
  virtual std::chrono::system_clock::time_point wallNow() const = 0;

  // Blocks on `cv`, whose mutex `lock` holds, until it is notified or now() reaches
  // `deadline`; may also return spuriously. `cv` and the mutex must outlive the wait.
  virtual void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         SteadyTime deadline) const = 0;

  // Waits until `done()` holds (true) or now() reaches `deadline` (false, unless done()
  // holds by then). `done()` is evaluated with the lock held.
  template <typename Predicate>
  bool waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 SteadyTime deadline, Predicate done) const {
    while (!done()) {
      if (now() >= deadline) {
        return done();
      }
      waitUntil(cv, lock, deadline);
    }
    return true;
  }

  template <typename Predicate>
  bool waitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
               SteadyDuration timeout, Predicate done) const {
    return waitUntil(cv, lock, now() + timeout, std::move(done));
  }
};

class SystemClock : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point wallNow() const override {
    return std::chrono::system_clock::now();
  }
  void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 SteadyTime deadline) const override {
    cv.wait_until(lock, deadline);
  }
  using Clock::waitUntil;
};

}  // namespace scs::common
