#pragma once

// Removes sandboxes, and keeps those it could not remove (the engine was away) to try again
// with a growing pause, from 1 s doubling up to 60 s, and once more at shutdown; what is left
// after that the next server's startup sweep removes. Thread-safe.

#include <scs/backend/backend.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace scs::runs {

class RemovalQueue {
 public:
  // `wake` is called, without any lock of this queue held, when a failed removal is queued, so
  // that whoever calls retry() knows there is work.
  RemovalQueue(backend::RuntimeBackend& backend, const Clock& clock, std::function<void()> wake);

  // Removes the sandbox now, on the caller's thread; keeps it for retry() when that fails.
  // `whose` names it in the log ("run <id>", "prepared sandbox"); `removed`, when set, is
  // called once the sandbox is gone (now or on a later attempt; never if it stays). Never
  // throws.
  void remove(const std::string& sandbox_id, const std::string& whose,
              std::function<void()> removed = {}) noexcept;

  // When retry() has work next; nullopt when nothing waits.
  std::optional<SteadyTime> nextRetry() const;

  // Tries again every removal that failed. With `last_chance`, what fails again is logged
  // and given up; otherwise it waits for the next, longer pause.
  void retry(bool last_chance);

 private:
  std::string attempt(const std::string& sandbox_id) noexcept;

  backend::RuntimeBackend& backend_;
  const Clock& clock_;
  const std::function<void()> wake_;
  mutable std::mutex mutex_;
  struct Failed {
    std::string sandbox_id;
    std::function<void()> removed;
  };
  std::vector<Failed> failed_;
  SteadyTime retry_at_{};
  std::chrono::seconds backoff_;
};

}  // namespace scs::runs
