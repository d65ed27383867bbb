#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "fake_backend.h"

namespace scs::testing {

// A clock that moves only when a test says so. Its timed waits end when advance() takes it to
// their deadline (or when the code notifies them), never because real time passed, so a test
// can show that nothing happens before a deadline without sleeping: advance() to just short
// of it, awaitWaiters() until the code's threads wait again, then look. It is the clock of the
// core under test and of the in-process fake backend alike.
class ManualClock : public common::Clock, public fake::Clock {
 public:
  static std::chrono::system_clock::time_point wallStart() {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  }

  common::SteadyTime now() const override {
    std::lock_guard lock(mutex_);
    return now_;
  }

  std::chrono::system_clock::time_point wallNow() const override {
    std::lock_guard lock(mutex_);
    return wall_;
  }

  void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 common::SteadyTime deadline) const override {
    std::uint64_t key = 0;
    {
      std::lock_guard guard(mutex_);
      if (now_ >= deadline) {
        return;
      }
      key = ++next_key_;
      waiters_[key] = Waiter{&cv, lock.mutex(), epoch_};
      changed_.notify_all();
    }
    cv.wait(lock);  // advance() notifies it while holding its mutex: no wake-up is lost
    std::lock_guard guard(mutex_);
    waiters_.erase(key);
  }
  using common::Clock::waitUntil;

  void advance(std::chrono::milliseconds by) {
    std::vector<Waiter> waiters;
    {
      std::lock_guard lock(mutex_);
      now_ += by;
      wall_ += by;
      ++epoch_;
      for (const auto& [key, waiter] : waiters_) {
        waiters.push_back(waiter);
      }
    }
    for (const Waiter& waiter : waiters) {
      std::lock_guard lock(*waiter.mutex);
      waiter.cv->notify_all();
    }
  }

  // Waits, in real time up to `patience`, until at least `count` timed waits have begun since
  // the last advance(): the threads that make them have done what the new time made due.
  bool awaitWaiters(std::size_t count,
                    std::chrono::milliseconds patience = std::chrono::seconds(10)) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, patience, [&] {
      std::size_t current = 0;
      for (const auto& [key, waiter] : waiters_) {
        current += waiter.epoch == epoch_ ? 1 : 0;
      }
      return current >= count;
    });
  }

 private:
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mutex;
    std::uint64_t epoch;  // the advance() it began after
  };

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  common::SteadyTime now_ = common::SteadyTime(std::chrono::hours(1000));
  std::chrono::system_clock::time_point wall_ = wallStart();
  std::uint64_t epoch_ = 0;
  mutable std::uint64_t next_key_ = 0;
  mutable std::map<std::uint64_t, Waiter> waiters_;
};

}  // namespace scs::testing
