// PreparedPool: which idle sandbox a run or session may take, how many the recent demand
// wants (smoothed make time, Poisson cover), refill backoff, retirement, and the DeferredSink.

#include "sandbox/prepared_pool.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <cmath>

namespace scs::sandbox {
namespace {

constexpr std::size_t kMaxHeldBytes = 64u << 10;
constexpr auto kRefillDelay = std::chrono::seconds(1);
constexpr auto kFirstBackoff = std::chrono::seconds(1);
constexpr auto kMaxBackoff = std::chrono::seconds(60);

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

// Smoothed, so that one slow start (the engine busy with a flood) does not size the pool.
std::chrono::duration<double> smoothed(std::chrono::duration<double> was,
                                       std::chrono::duration<double> now) {
  return was.count() == 0 ? now : 0.7 * was + 0.3 * now;
}

// The fewest sandboxes that the runs arriving while one is made, a Poisson count with mean
// `expected`, outnumber at most one time in ten.
std::size_t coveringArrivals(double expected) {
  constexpr double kCovered = 0.9;
  constexpr std::size_t kMost = 64;
  if (!(expected > 0)) {
    return 0;
  }
  double term = std::exp(-expected);  // P(N = 0)
  double total = term;
  std::size_t count = 0;
  while (total < kCovered && count < kMost) {
    ++count;
    term *= expected / static_cast<double>(count);
    total += term;
  }
  return count;
}

}  // namespace

void DeferredSink::write(backend::Stream stream, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  if (target_ != nullptr) {
    target_->write(stream, bytes);
    return;
  }
  const std::size_t room = kMaxHeldBytes - std::min(held_bytes_, kMaxHeldBytes);
  bytes = bytes.substr(0, room);
  if (!bytes.empty()) {
    held_.emplace_back(stream, std::string(bytes));
    held_bytes_ += bytes.size();
  }
}

void DeferredSink::ended() {
  std::lock_guard lock(mutex_);
  if (target_ != nullptr) {
    target_->ended();
    return;
  }
  ended_ = true;
}

void DeferredSink::bind(backend::OutputSink* target) {
  std::lock_guard lock(mutex_);
  for (const auto& [stream, bytes] : held_) {
    target->write(stream, bytes);
  }
  held_.clear();
  if (ended_) {
    target->ended();
  }
  target_ = target;
}

std::int64_t PreparedPool::memory() const {
  return static_cast<std::int64_t>(making_ + ready_.size()) * idleHold();
}

std::int64_t PreparedPool::idleHold() const {
  return idle_peak_ == 0 ? settings_.memory_bytes
                         : std::min(settings_.memory_bytes, idle_peak_ + idle_peak_ / 4);
}

void PreparedPool::measuredIdle(std::int64_t peak_bytes) {
  if (peak_bytes > idle_peak_) {
    idle_peak_ = peak_bytes;
    logger().debug("prepared pool: an idle sandbox holds " + std::to_string(idleHold() >> 20) +
                   " MiB in admission (measured peak " + std::to_string(peak_bytes >> 20) +
                   " MiB)");
  }
}

const PreparedSandbox* PreparedPool::find(const policy::Limits& limits,
                                          const policy::SandboxSettings& settings,
                                          common::SteadyTime now, bool for_session) const {
  const auto found = std::find_if(ready_.begin(), ready_.end(), [&](const PreparedPtr& sandbox) {
    return (for_session || limits.timeout_seconds <= sandbox->timeout_seconds) &&
           now - sandbox->ready_at <= settings_.max_idle &&
           sandbox->posture ==
               policy::requiredPosture(limits, settings, sandbox->uid, settings_.image);
  });
  return found == ready_.end() ? nullptr : found->get();
}

PreparedPtr PreparedPool::claim(const PreparedSandbox* sandbox, common::SteadyTime now) {
  const auto found = std::find_if(ready_.begin(), ready_.end(),
                                  [&](const PreparedPtr& ready) { return ready.get() == sandbox; });
  if (found == ready_.end()) {
    return nullptr;
  }
  PreparedPtr claimed = std::move(*found);
  ready_.erase(found);
  ++claimed_running_;
  last_claim_ = now;
  return claimed;
}

void PreparedPool::claimEnded(std::optional<double> warm_seconds) {
  if (claimed_running_ > 0) {
    --claimed_running_;
  }
  if (warm_seconds) {
    warmed_ = smoothed(warmed_, std::chrono::duration<double>(*warm_seconds));
  }
}

std::int64_t PreparedPool::evictable(const PreparedSandbox* keep) const {
  const bool kept = std::any_of(ready_.begin(), ready_.end(),
                                [&](const PreparedPtr& sandbox) { return sandbox.get() == keep; });
  return static_cast<std::int64_t>(ready_.size() - (kept ? 1 : 0)) * idleHold();
}

void PreparedPool::evictUntil(std::int64_t needed, const PreparedSandbox* keep,
                              const std::function<bool(std::int64_t)>& fits) {
  for (auto it = ready_.begin(); it != ready_.end() && !fits(needed);) {
    if (it->get() == keep) {
      ++it;
      continue;
    }
    PreparedPtr evicted = std::move(*it);
    it = ready_.erase(it);
    logger().information("prepared sandbox " + evicted->sandbox_id +
                         " gives way to a run that needs its memory");
    retired_.push_back(std::move(evicted));
  }
}

void Demand::record(common::SteadyTime now, std::size_t in_flight) {
  recent_.push_back(now);
  rate(now);  // forgets what is older than the window
  // Only a new high, or one past what is remembered, can matter: the memory stays small however
  // fast runs arrive.
  while (!arrivals_.empty() && arrivals_.back().second <= in_flight) {
    arrivals_.pop_back();
  }
  arrivals_.emplace_back(now, in_flight);
}

std::size_t Demand::largest(common::SteadyTime now) {
  while (!arrivals_.empty() && now - arrivals_.front().first > kDemandMemory) {
    arrivals_.pop_front();
  }
  // Kept in falling order of in-flight count: the front is the largest.
  return arrivals_.empty() ? 0 : arrivals_.front().second;
}

double Demand::rate(common::SteadyTime now) {
  while (!recent_.empty() && now - recent_.front() > kRateWindow) {
    recent_.pop_front();
  }
  if (recent_.empty()) {
    return 0;
  }
  const std::chrono::duration<double> span =
      std::clamp<common::SteadyTime::duration>(now - recent_.front(), kRateFloor, kRateWindow);
  return static_cast<double>(recent_.size()) / span.count();
}

bool PreparedPool::serves(const policy::Limits& limits,
                          const policy::SandboxSettings& settings) const {
  return settings_.target > 0 && limits.timeout_seconds <= settings_.limits.timeout_seconds &&
         policy::requiredPosture(limits, settings, 0) ==
             policy::requiredPosture(settings_.limits, settings, 0);
}

void PreparedPool::demanded(common::SteadyTime now) {
  last_demanded_ = now;
  demand_.record(now, ++in_flight_);
  wanted(now);
}

void PreparedPool::demandEnded() {
  if (in_flight_ > 0) {
    --in_flight_;
  }
}

std::size_t PreparedPool::wanted(common::SteadyTime now) {
  if (settings_.target == 0 && settings_.image.empty()) {
    return 0;
  }
  const std::size_t most = demand_.largest(now);
  const double rate = demand_.rate(now);
  const std::size_t pace = coveringArrivals(rate * bringUp().count());
  const std::size_t ceiling = std::max(settings_.ceiling, settings_.target);
  const std::size_t wanted = std::clamp(std::max(most, pace), settings_.target, ceiling);
  if (wanted != wanted_) {
    logger().debug("prepared pool: " + std::to_string(wanted) + " wanted ready (at most " +
                   std::to_string(most) + " runs it serves in flight at once in the last " +
                   std::to_string(Demand::kDemandMemory.count()) + " s; " +
                   policy::formatNumber(rate) + " runs/s arriving, " +
                   policy::formatNumber(bringUp().count()) + " s to make one; at least " +
                   std::to_string(settings_.target) + ", at most " + std::to_string(ceiling) + ")");
    wanted_ = wanted;
  }
  return wanted;
}

bool PreparedPool::wantsAnother(common::SteadyTime now, bool memory_fits, bool runs_waiting) {
  const std::size_t have = ready_.size() + making_;
  // The refill waits for the run that took the last sandbox, unless the next run is due before
  // a sandbox made after it would be ready.
  const bool due = demand_.rate(now) * bringUp().count() >= 1;
  return have < wanted(now) && (have < settings_.target || !runs_waiting) && now >= retry_at_ &&
         memory_fits && (claimed_running_ == 0 || due || now - last_claim_ >= kRefillDelay);
}

void PreparedPool::making(common::SteadyTime now) {
  ++making_;
  making_since_.push_back(now);
}

void PreparedPool::made(PreparedPtr sandbox, common::SteadyTime now) {
  --making_;
  if (!making_since_.empty()) {
    const std::chrono::duration<double> took = now - making_since_.front();
    making_since_.pop_front();
    started_ = smoothed(started_, took);
  }
  made_any_ = true;
  last_failed_ = false;
  backoff_ = kFirstBackoff;
  retry_at_ = common::SteadyTime{};
  sandbox->ready_at = now;
  logger().debug("prepared sandbox " + sandbox->sandbox_id + " is ready");
  ready_.push_back(std::move(sandbox));
}

void PreparedPool::failed(common::SteadyTime now) {
  --making_;
  if (!making_since_.empty()) {
    making_since_.pop_front();
  }
  last_failed_ = true;
  retry_at_ = now + backoff_;
  backoff_ = std::min<std::chrono::seconds>(backoff_ * 2, kMaxBackoff);
}

bool PreparedPool::retireStale(common::SteadyTime now) {
  if (ready_.empty()) {
    return false;
  }
  const bool surplus = ready_.size() + making_ > wanted(now);
  if (!surplus && now - ready_.front()->ready_at < settings_.max_idle) {
    return false;
  }
  if (surplus) {
    logger().debug("prepared sandbox " + ready_.front()->sandbox_id +
                   " retires: more are ready than recent demand wants");
  }
  retire(std::move(ready_.front()));
  ready_.pop_front();
  return true;
}

void PreparedPool::retireEnded(const std::vector<std::string>& sandbox_ids) {
  for (const std::string& id : sandbox_ids) {
    const auto found = std::find_if(ready_.begin(), ready_.end(), [&](const PreparedPtr& sandbox) {
      return sandbox->sandbox_id == id;
    });
    if (found != ready_.end()) {
      logger().warning("prepared sandbox " + id + " ended while idle; replacing it");
      retire(std::move(*found));
      ready_.erase(found);
    }
  }
}

void PreparedPool::retireAll() {
  while (!ready_.empty()) {
    retire(std::move(ready_.front()));
    ready_.pop_front();
  }
}

void PreparedPool::retire(PreparedPtr sandbox) {
  if (sandbox) {
    retired_.push_back(std::move(sandbox));
  }
}

std::vector<std::string> PreparedPool::idleIds() const {
  std::vector<std::string> ids;
  for (const PreparedPtr& sandbox : ready_) {
    ids.push_back(sandbox->sandbox_id);
  }
  return ids;
}

std::vector<PreparedPtr> PreparedPool::takeRetired() {
  std::vector<PreparedPtr> retired;
  retired.swap(retired_);
  return retired;
}

bool PreparedPool::empty() const {
  return ready_.empty() && making_ == 0 && claimed_running_ == 0 && retired_.empty() &&
         in_flight_ == 0;
}

PreparedPool* PreparedPools::of(const std::string& image) {
  if (image.empty()) {
    return &main_;
  }
  const auto found = sets_.find(image);
  return found == sets_.end() ? nullptr : found->second.get();
}

PreparedPool* PreparedPools::demandedFor(const std::string& image, const policy::Limits& limits,
                                         const policy::SandboxSettings& settings,
                                         common::SteadyTime now) {
  if (!main_.serves(limits, settings)) {
    return nullptr;  // every pool makes sandboxes of the main pool's limits
  }
  if (PreparedPool* pool = of(image)) {
    return pool;
  }
  if (max_sets_ == 0) {
    return nullptr;
  }
  dropIdle(now);
  if (sets_.size() >= max_sets_) {
    // The idle pool of the set asked for least recently gives way, its sandboxes retired.
    auto oldest = sets_.end();
    for (auto it = sets_.begin(); it != sets_.end(); ++it) {
      if (it->second->idle() &&
          (oldest == sets_.end() || it->second->lastDemanded() < oldest->second->lastDemanded())) {
        oldest = it;
      }
    }
    if (oldest == sets_.end()) {
      return nullptr;  // every set's pool serves runs now
    }
    logger().debug("prepared pool: package layer " + oldest->first + " gives way to " + image);
    oldest->second->retireAll();
    for (PreparedPtr& sandbox : oldest->second->takeRetired()) {
      retired_.push_back(std::move(sandbox));
    }
    sets_.erase(oldest);
  }
  PoolSettings set = main_.settings();
  set.ceiling = std::max(set.ceiling, set.target);  // as many as the main pool
  set.target = 0;
  set.image = image;
  logger().debug("prepared pool: sandboxes of package layer " + image + " from now on");
  return sets_.emplace(image, std::make_unique<PreparedPool>(std::move(set))).first->second.get();
}

void PreparedPools::dropIdle(common::SteadyTime now) {
  for (auto it = sets_.begin(); it != sets_.end();) {
    if (it->second->empty() && it->second->wanted(now) == 0) {
      logger().debug("prepared pool: none of package layer " + it->first + " wanted any more");
      it = sets_.erase(it);
    } else {
      ++it;
    }
  }
}

std::int64_t PreparedPools::memory() const {
  std::int64_t total = main_.memory();
  for (const auto& [image, pool] : sets_) {
    total += pool->memory();
  }
  return total;
}

std::size_t PreparedPools::ready() const {
  std::size_t total = main_.ready();
  for (const auto& [image, pool] : sets_) {
    total += pool->ready();
  }
  return total;
}

bool PreparedPools::hasRetired() const {
  return !retired_.empty() || main_.hasRetired() ||
         std::any_of(sets_.begin(), sets_.end(),
                     [](const auto& set) { return set.second->hasRetired(); });
}

std::vector<PreparedPtr> PreparedPools::takeRetired() {
  std::vector<PreparedPtr> retired = main_.takeRetired();
  for (PreparedPtr& sandbox : retired_) {
    retired.push_back(std::move(sandbox));
  }
  retired_.clear();
  for (const auto& [image, pool] : sets_) {
    for (PreparedPtr& sandbox : pool->takeRetired()) {
      retired.push_back(std::move(sandbox));
    }
  }
  return retired;
}

std::vector<std::string> PreparedPools::idleIds() const {
  std::vector<std::string> ids = main_.idleIds();
  for (const auto& [image, pool] : sets_) {
    const std::vector<std::string> more = pool->idleIds();
    ids.insert(ids.end(), more.begin(), more.end());
  }
  return ids;
}

void PreparedPools::retireEnded(const std::vector<std::string>& sandbox_ids) {
  main_.retireEnded(sandbox_ids);
  for (const auto& [image, pool] : sets_) {
    pool->retireEnded(sandbox_ids);
  }
}

void PreparedPools::retireAll() {
  main_.retireAll();
  for (const auto& [image, pool] : sets_) {
    pool->retireAll();
  }
}

bool PreparedPools::retireStale(common::SteadyTime now) {
  if (main_.retireStale(now)) {
    return true;
  }
  for (const auto& [image, pool] : sets_) {
    if (pool->retireStale(now)) {
      return true;
    }
  }
  dropIdle(now);
  return false;
}

bool PreparedPools::evictFor(std::int64_t needed, const PreparedSandbox* keep,
                             const std::function<bool(std::int64_t)>& fits) {
  std::int64_t idle = main_.evictable(keep);
  for (const auto& [image, pool] : sets_) {
    idle += pool->evictable(keep);
  }
  if (idle == 0 || !fits(needed - idle)) {
    return false;
  }
  for (const auto& [image, pool] : sets_) {
    pool->evictUntil(needed, keep, fits);
  }
  main_.evictUntil(needed, keep, fits);
  return true;
}

PreparedPool* PreparedPools::wantingAnother(common::SteadyTime now,
                                            const std::function<bool(std::int64_t)>& fits,
                                            bool runs_waiting) {
  if (main_.wantsAnother(now, fits(main_.idleHold()), runs_waiting)) {
    return &main_;
  }
  for (const auto& [image, pool] : sets_) {
    if (pool->wantsAnother(now, fits(pool->idleHold()), runs_waiting)) {
      return pool.get();
    }
  }
  return nullptr;
}

}  // namespace scs::sandbox
