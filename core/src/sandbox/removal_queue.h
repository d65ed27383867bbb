#pragma once

// Removes sandboxes, and keeps those it could not remove (the engine was away) to try again
// with a growing pause, from 1 s doubling up to 60 s. At shutdown it closes: the removals
// whose sandbox's sink they hold then run on threads of their own, all at once, and the
// shutdown waits for them only until its deadline; what is left the next server's startup
// sweep removes. Thread-safe.

#include <scs/backend/backend.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace scs::sandbox {

class RemovalQueue {
 public:
  // `wake` is called, without any lock of this queue held, when a failed removal is queued, so
  // that whoever calls retry() knows there is work.
  RemovalQueue(backend::RuntimeBackend& backend, const common::Clock& clock,
               std::function<void()> wake);
  // finish() with no deadline: waits for every removal still running.
  ~RemovalQueue();
  RemovalQueue(const RemovalQueue&) = delete;
  RemovalQueue& operator=(const RemovalQueue&) = delete;

  struct Removal {
    std::string sandbox_id;
    std::string whose;              // names it in the log ("run <id>", "prepared sandbox")
    std::function<void()> removed;  // when set, called once the sandbox is gone
    // Held until the engine has removed the sandbox: what the sandbox's output is written to
    // must outlive it (RuntimeBackend::start).
    std::shared_ptr<const void> keep;
  };

  // Removes the sandbox now, on the caller's thread; keeps it for retry() when that fails
  // (`removed` is then called on a later attempt, or never if it stays). Once closed, a
  // removal that holds its `keep` is started on a thread of its own and this returns at once;
  // one without is removed on the caller's thread (who may free what the sandbox writes to
  // as soon as this returns), and if that fails, left to the sweep. False when the removal
  // goes on on a thread of its own. Never throws.
  bool remove(Removal removal) noexcept;

  // When retry() has work next; nullopt when nothing waits.
  std::optional<common::SteadyTime> nextRetry() const;

  // Tries again every removal that failed; what fails again waits for the next, longer pause.
  void retry();

  // Shutdown: every removal that failed before, and every one with a `keep` from now on, runs
  // at once on a thread of its own, once (a retry() under way hands its rest over too); what
  // the engine refuses is logged and left to the next server's startup sweep.
  void close();

  // Waits for the removals started since close() until `deadline` (none: until the engine
  // has answered each). Those still waiting for the engine then are logged as left to the
  // next server's startup sweep and go on in the background; the destructor waits for them.
  // Returns how many are left.
  std::size_t finish(std::optional<common::SteadyTime> deadline);

 private:
  std::string attempt(const std::string& sandbox_id) noexcept;
  void startLocked(Removal removal);

  backend::RuntimeBackend& backend_;
  const common::Clock& clock_;
  const std::function<void()> wake_;
  mutable std::mutex mutex_;
  std::vector<Removal> failed_;
  common::SteadyTime retry_at_{};
  std::chrono::seconds backoff_;
  // Once closed: the removals under way, by a number of their own, and their threads.
  bool closed_ = false;
  std::map<std::uint64_t, std::string> under_way_;  // number → "sandbox <id> of <whose>"
  std::uint64_t next_number_ = 0;
  std::vector<std::thread> threads_;
  std::condition_variable answered_;
};

}  // namespace scs::sandbox
