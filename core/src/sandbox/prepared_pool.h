#pragma once

// The sandboxes prepared ahead of need: created, posture-checked and started for the default
// limits with the launcher idle on stdin, so that a run whose limits require the same posture
// skips the engine's create and start. This class holds the pool's state and decides when it
// wants another sandbox, when one has idled too long and which give way to a run that needs
// memory; the run manager makes and removes the sandboxes. Not thread-safe: the run manager
// calls it with its lock held.

#include <scs/backend/backend.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "policy/limits.h"
#include "policy/posture.h"

namespace scs::sandbox {

// The sink a prepared sandbox is started with, before its run exists. It holds what the idle
// launcher writes (normally nothing; capped) and whether the sandbox ended, and, once bound to
// the run's capture, hands that over first and forwards everything after it. Thread-safe.
class DeferredSink : public backend::OutputSink {
 public:
  void write(backend::Stream stream, std::string_view bytes) override;
  void ended() override;  // forwarded, or held for bind() when the sandbox ended idle
  void bind(backend::OutputSink* target);

 private:
  std::mutex mutex_;
  backend::OutputSink* target_ = nullptr;
  bool ended_ = false;
  std::vector<std::pair<backend::Stream, std::string>> held_;
  std::size_t held_bytes_ = 0;
};

// A sandbox created, posture-checked and started idle for a run that has yet to come.
struct PreparedSandbox {
  std::string sandbox_id;
  std::uint32_t uid = 0;       // its host uid, taken from the UidPool
  backend::Posture posture;    // the required posture its engine record passed
  double timeout_seconds = 0;  // the longest run its watchdog allows
  common::SteadyTime ready_at;
  DeferredSink sink;  // outlives the sandbox: freed only after its removal
};

using PreparedPtr = std::unique_ptr<PreparedSandbox>;

struct PoolSettings {
  std::size_t target = 0;         // sandboxes kept ready at the least; 0 turns preparation off
  std::size_t ceiling = 0;        // the most kept ready when runs arrive together (>= target)
  policy::Limits limits;          // what each is made for
  std::int64_t memory_bytes = 0;  // their memory limit
  std::chrono::seconds max_idle{300};
  // A package set's pool (PreparedPools): its sandboxes run this derived image instead of the
  // operator's, and it keeps none ready but what recent demand wants (target 0 does not turn
  // it off).
  std::string image;
};

// How many sandboxes the pool wants ready follows from two things it remembers of the runs it
// could serve: the most that were in flight at once (queued or executing) in the last
// kDemandMemory, and how fast they arrived in the last kRateWindow. An agent that fans out four
// at once needs four; runs that come one after another need as many as arrive while one
// sandbox is being made, so that the next run finds one ready instead of waiting for it. Those
// arrivals are counted as a Poisson count whose mean is the arrival rate times the pool's
// measured bring-up time, and the pool keeps enough that they outnumber it at most one time in
// ten: at one run a second and a second to make one, two rather than one, since runs that
// arrive at random come close together as often as not. The memory of five minutes keeps the pool
// ready for that agent's next fan-out, and then lets it shrink back to the target.
class Demand {
 public:
  static constexpr std::chrono::seconds kDemandMemory{300};
  static constexpr std::chrono::seconds kRateWindow{60};
  // The shortest span a rate is taken over, so that the first two runs of a minute do not
  // read as a flood.
  static constexpr std::chrono::seconds kRateFloor{10};

  // A run arrived; `in_flight` such runs (itself included) are now queued or executing.
  void record(common::SteadyTime now, std::size_t in_flight);
  // The most in flight at once in the memory at `now`; forgets what is older.
  std::size_t largest(common::SteadyTime now);
  // Arrivals per second over the last kRateWindow (over at least kRateFloor).
  double rate(common::SteadyTime now);

 private:
  std::deque<std::pair<common::SteadyTime, std::size_t>> arrivals_;  // oldest first
  std::deque<common::SteadyTime> recent_;                            // arrival times, oldest first
};

class PreparedPool {
 public:
  explicit PreparedPool(PoolSettings settings)
      : settings_(std::move(settings)), wanted_(settings_.target) {}

  const PoolSettings& settings() const { return settings_; }

  // What the ready sandboxes and the ones being made hold in the host's memory admission:
  // idleHold() each.
  std::int64_t memory() const;
  // What an idle sandbox holds in admission: its memory limit until the pool has measured the
  // footprint of one whose warm imports had all finished, then that footprint and a quarter
  // (never more than the limit). Nothing but PID 1 and the waiting interpreter runs in an idle
  // sandbox, and once the imports are done its footprint stays; a run or session that takes one
  // is charged its whole limit at admission (less this hold), as a fresh one is, so the limits
  // of what executes never exceed the host.
  std::int64_t idleHold() const;
  // The engine's peak memory of a sandbox taken from here, read before its run's code arrived,
  // once that run said its warm imports had all finished before (or there were none).
  void measuredIdle(std::int64_t peak_bytes);
  std::size_t ready() const { return ready_.size(); }

  // A ready sandbox a run (or, with `for_session`, a session) with these limits can use, or
  // nullptr: its posture is the one the limits require (in a sandbox of its uid), it has not
  // idled past max_idle (its launcher's own deadline is near: retireStale() replaces it), and
  // a run's timeout is no longer than it allows (a session's launcher takes its own deadline).
  const PreparedSandbox* find(const policy::Limits& limits, const policy::SandboxSettings& settings,
                              common::SteadyTime now, bool for_session = false) const;

  // Takes `sandbox` (from find()) for a run that starts executing now.
  PreparedPtr claim(const PreparedSandbox* sandbox, common::SteadyTime now);
  // A run that took a sandbox from here ended; `warm_seconds`, what its trailer said of the
  // warm imports that sandbox made before the run arrived.
  void claimEnded(std::optional<double> warm_seconds = std::nullopt);

  // What its idle sandboxes other than `keep` hold in admission, and their retirement, oldest
  // first, until `fits(needed)` holds (`fits` counts this pool's memory() as it shrinks) or
  // none is left: PreparedPools::evictFor makes room from several pools with them.
  std::int64_t evictable(const PreparedSandbox* keep) const;
  void evictUntil(std::int64_t needed, const PreparedSandbox* keep,
                  const std::function<bool(std::int64_t)>& fits);

  // Whether the pool is on and a run with these limits could use its sandboxes (in any uid). A
  // package set's pool, whose target is 0, is never asked: PreparedPools::demandedFor asks the
  // main pool, whose limits every set's pool shares.
  bool serves(const policy::Limits& limits, const policy::SandboxSettings& settings) const;
  // A run the pool serves arrived, and one such run ended (was reported): the demand it
  // follows.
  void demanded(common::SteadyTime now);
  void demandEnded();
  // Sandboxes wanted ready now (see Demand), logged at debug when it changes.
  std::size_t wanted(common::SteadyTime now);

  // Whether the maintenance thread should make another sandbox now, given whether its memory
  // fits and whether a run waits in the queue (the pool grows past its target only when none
  // does, so that it never takes memory or CPU a waiting run could use). A new one waits
  // kRefillDelay for the run that took the last one, so that making it does not compete with
  // that run for the CPU, and after a failure a growing pause.
  bool wantsAnother(common::SteadyTime now, bool memory_fits, bool runs_waiting);
  void making(common::SteadyTime now);                     // counts one being made
  void made(PreparedPtr sandbox, common::SteadyTime now);  // it is ready
  void failed(common::SteadyTime now);                     // making it failed
  // How long a sandbox takes to be ready for a run: from making() to made() (the engine's
  // create and start) and then its warm imports (as the runs that took one said), each
  // smoothed; zero before the first.
  std::chrono::duration<double> bringUp() const { return started_ + warmed_; }
  // One sandbox has been made since the start, and the last attempt did not fail: the image
  // is there and sandboxes pass the posture check, whether or not one is idle now.
  bool healthy() const { return made_any_ && !last_failed_; }

  // Retires the oldest idle sandbox when it has idled longer than max_idle, or when more are
  // ready than wanted(); true if it did.
  bool retireStale(common::SteadyTime now);
  // Retires the idle sandboxes with these ids (they ended while idle).
  void retireEnded(const std::vector<std::string>& sandbox_ids);
  void retireAll();
  void retire(PreparedPtr sandbox);

  // The ids of the idle sandboxes, to check whether they still live.
  std::vector<std::string> idleIds() const;
  // It holds no sandbox (ready, being made, taken or retired) and serves no run in flight.
  bool empty() const;
  // No run it serves is in flight and none of its sandboxes is being made or taken: what it
  // holds is idle (ready or retired) and may all be retired.
  bool idle() const { return in_flight_ == 0 && making_ == 0 && claimed_running_ == 0; }
  // When a run it serves last arrived.
  common::SteadyTime lastDemanded() const { return last_demanded_; }
  bool hasRetired() const { return !retired_.empty(); }
  std::vector<PreparedPtr> takeRetired();

 private:
  const PoolSettings settings_;
  Demand demand_;
  std::size_t in_flight_ = 0;      // runs it serves that are queued or executing
  std::size_t wanted_;             // as last logged
  std::deque<PreparedPtr> ready_;  // oldest first
  std::size_t making_ = 0;
  std::deque<common::SteadyTime> making_since_;  // when each one being made was begun, oldest first
  std::chrono::duration<double> started_{0};
  std::chrono::duration<double> warmed_{0};
  std::int64_t idle_peak_ = 0;       // the largest footprint measured of an idle, warm sandbox
  std::size_t claimed_running_ = 0;  // runs executing in a sandbox from here
  common::SteadyTime last_claim_{};
  common::SteadyTime last_demanded_{};
  common::SteadyTime retry_at_{};  // the next attempt after a failure
  std::chrono::seconds backoff_{1};
  bool made_any_ = false;
  bool last_failed_ = false;
  std::vector<PreparedPtr> retired_;  // to be removed
};

// The pools of prepared sandboxes: the operator's image's (main()), and one for each of the
// package sets asked for most recently, at most `max_sets`: a set's pool is made when a run of
// the set arrives and the main pool is on, and keeps ready only what that set's demand wants. It
// goes once it holds nothing and wants none, or, with its sandboxes retired, when another set's
// run arrives and it is the idle one whose set was asked for least recently. Not thread-safe:
// the run manager calls it with its lock held.
class PreparedPools {
 public:
  PreparedPools(PoolSettings main, std::size_t max_sets)
      : main_(std::move(main)), max_sets_(max_sets) {}

  PreparedPool& main() { return main_; }
  const PreparedPool& main() const { return main_; }
  // The pool of `image` (empty: the operator's), or nullptr.
  PreparedPool* of(const std::string& image);
  // The pool of `image` for a run or session of these limits that arrived: made now if there is
  // room for another set's or an idle set's pool gives way. nullptr when the pools could not
  // serve those limits (or preparation is off), or there is none to be had (every set's pool
  // serves runs now).
  PreparedPool* demandedFor(const std::string& image, const policy::Limits& limits,
                            const policy::SandboxSettings& settings, common::SteadyTime now);

  // Over every pool, as PreparedPool's of the same name.
  std::int64_t memory() const;
  std::size_t ready() const;
  bool hasRetired() const;
  std::vector<PreparedPtr> takeRetired();
  std::vector<std::string> idleIds() const;
  void retireEnded(const std::vector<std::string>& sandbox_ids);
  void retireAll();
  bool retireStale(common::SteadyTime now);
  // Retires idle sandboxes other than `keep`, of any pool, the operator's image's last, until
  // `fits(needed)` holds; does nothing when even all of them would not make room. True when it
  // made room.
  bool evictFor(std::int64_t needed, const PreparedSandbox* keep,
                const std::function<bool(std::int64_t)>& fits);
  // The pool whose wantsAnother() holds now, the main one first; nullptr when none does.
  // `fits(bytes)`: whether that much more memory fits.
  PreparedPool* wantingAnother(common::SteadyTime now,
                               const std::function<bool(std::int64_t)>& fits, bool runs_waiting);

 private:
  // Drops the sets' pools that are empty() and want none now.
  void dropIdle(common::SteadyTime now);

  PreparedPool main_;
  const std::size_t max_sets_;
  std::map<std::string, std::unique_ptr<PreparedPool>> sets_;  // by derived image
  std::vector<PreparedPtr> retired_;  // of pools that gave way, to be removed
};

}  // namespace scs::sandbox
