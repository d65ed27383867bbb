// RemovalQueue: a sandbox removed at once when the engine answers, otherwise kept and retried
// with doubling backoff up to a minute; the last attempt at shutdown leaves it to the sweep.

#include "sandbox/removal_queue.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <exception>
#include <iterator>
#include <utility>

namespace scs::runs {
namespace {

constexpr std::chrono::seconds kFirstBackoff{1};
constexpr std::chrono::seconds kMaxBackoff{60};

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

}  // namespace

RemovalQueue::RemovalQueue(backend::RuntimeBackend& backend, const Clock& clock,
                           std::function<void()> wake)
    : backend_(backend), clock_(clock), wake_(std::move(wake)), backoff_(kFirstBackoff) {}

// Empty when the backend removed the sandbox; otherwise why not.
std::string RemovalQueue::attempt(const std::string& sandbox_id) noexcept {
  try {
    const backend::Status status = backend_.remove(sandbox_id);
    return status.ok() ? std::string() : status.message;
  } catch (const std::exception& e) {
    return std::string("it threw: ") + e.what();
  } catch (...) {
    return "it threw a non-standard exception";
  }
}

void RemovalQueue::remove(const std::string& sandbox_id, const std::string& whose,
                          std::function<void()> removed) noexcept {
  const std::string problem = attempt(sandbox_id);
  if (problem.empty()) {
    logger().debug("removed sandbox " + sandbox_id + " of " + whose);
    if (removed) {
      removed();
    }
    return;
  }
  logger().error(whose + ": removing sandbox " + sandbox_id + " failed: " + problem +
                 "; will retry");
  try {
    {
      std::lock_guard lock(mutex_);
      failed_.push_back({sandbox_id, std::move(removed)});
    }
    if (wake_) {
      wake_();
    }
  } catch (const std::exception& e) {
    logger().error(whose + ": cannot queue sandbox " + sandbox_id + " for removal: " + e.what());
  }
}

std::optional<SteadyTime> RemovalQueue::nextRetry() const {
  std::lock_guard lock(mutex_);
  if (failed_.empty()) {
    return std::nullopt;
  }
  return retry_at_;
}

void RemovalQueue::retry(bool last_chance) {
  std::vector<Failed> queued;
  {
    std::lock_guard lock(mutex_);
    queued.swap(failed_);
  }
  std::vector<Failed> failed;
  for (Failed& entry : queued) {
    const std::string problem = attempt(entry.sandbox_id);
    if (problem.empty()) {
      logger().information("removed sandbox " + entry.sandbox_id + " on a later attempt");
      if (entry.removed) {
        entry.removed();
      }
    } else if (last_chance) {
      logger().error("could not remove sandbox " + entry.sandbox_id + " (" + problem +
                     "); the next server's startup sweep will");
    } else {
      failed.push_back(std::move(entry));
    }
  }
  std::lock_guard lock(mutex_);
  if (failed.empty() && failed_.empty()) {
    backoff_ = kFirstBackoff;
    retry_at_ = SteadyTime{};
    return;
  }
  failed_.insert(failed_.end(), std::make_move_iterator(failed.begin()),
                 std::make_move_iterator(failed.end()));
  if (!failed.empty()) {
    retry_at_ = clock_.now() + backoff_;
    backoff_ = std::min<std::chrono::seconds>(backoff_ * 2, kMaxBackoff);
  }
}

}  // namespace scs::runs
