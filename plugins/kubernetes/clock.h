#pragma once

// Time as the kubernetes backend sees it (issue 47): its deadlines (a Pod's start, its exit
// after the output, a create over the quota), its pauses between tries, its token re-read and
// its attach heartbeat all read this clock, which is real time unless a unit test passes its
// own (Options::clock): then a pause or deadline ends when the test moves its clock there, not
// when real time does. The plugin's own seam, as the fake's Clock (fake_backend.h) is: a plugin
// includes no header of the core. Real time still: the sockets' timeouts and polls (I/O, which
// decides nothing), wait()'s timeout, which is its caller's bound on a wait for the worker, and
// the wall clock that a Pod's activeDeadlineSeconds is reckoned from (the deadline label's).

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace scs::kubernetes {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
  // Blocks on `cv`, whose mutex `lock` holds, until it is notified or now() reaches
  // `deadline`; may return spuriously. `cv` and its mutex must outlive the wait.
  virtual void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         TimePoint deadline) const = 0;
};

// std::chrono::steady_clock: one for the process, thread-safe.
const Clock& systemClock();

}  // namespace scs::kubernetes
