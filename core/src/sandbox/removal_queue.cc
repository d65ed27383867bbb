// RemovalQueue: a sandbox removed at once when the engine answers, otherwise kept and retried
// with doubling backoff up to a minute; once closed (shutdown), every removal at once, each on
// a thread of its own, waited for until a deadline and otherwise left to the sweep.

#include "sandbox/removal_queue.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <exception>
#include <iterator>
#include <utility>

namespace scs::sandbox {
namespace {

constexpr std::chrono::seconds kFirstBackoff{1};
constexpr std::chrono::seconds kMaxBackoff{60};

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

void gone(RemovalQueue::Removal& removal) {
  if (removal.removed) {
    removal.removed();
  }
  removal.keep.reset();
}

}  // namespace

RemovalQueue::RemovalQueue(backend::RuntimeBackend& backend, const common::Clock& clock,
                           std::function<void()> wake)
    : backend_(backend), clock_(clock), wake_(std::move(wake)), backoff_(kFirstBackoff) {}

RemovalQueue::~RemovalQueue() { finish(std::nullopt); }

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

bool RemovalQueue::remove(Removal removal) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (closed_ && removal.keep) {
      startLocked(std::move(removal));
      return false;
    }
  }
  const std::string problem = attempt(removal.sandbox_id);
  if (problem.empty()) {
    logger().debug("removed sandbox " + removal.sandbox_id + " of " + removal.whose);
    gone(removal);
    return true;
  }
  try {
    {
      std::lock_guard lock(mutex_);
      if (closed_) {  // no later attempt: its caller may free what the sandbox writes to
        logger().error(removal.whose + ": removing sandbox " + removal.sandbox_id +
                       " failed: " + problem + "; the next server's startup sweep will");
        return true;
      }
      logger().error(removal.whose + ": removing sandbox " + removal.sandbox_id +
                     " failed: " + problem + "; will retry");
      failed_.push_back(std::move(removal));
    }
    if (wake_) {
      wake_();
    }
  } catch (const std::exception& e) {
    logger().error(removal.whose + ": cannot queue sandbox " + removal.sandbox_id +
                   " for removal: " + e.what());
  }
  return true;
}

std::optional<common::SteadyTime> RemovalQueue::nextRetry() const {
  std::lock_guard lock(mutex_);
  if (failed_.empty() || closed_) {
    return std::nullopt;
  }
  return retry_at_;
}

void RemovalQueue::retry() {
  std::vector<Removal> queued;
  {
    std::lock_guard lock(mutex_);
    if (closed_) {
      return;
    }
    queued.swap(failed_);
  }
  std::vector<Removal> failed;
  std::size_t next = 0;
  while (next < queued.size()) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) {
        break;
      }
    }
    Removal& entry = queued[next++];
    if (attempt(entry.sandbox_id).empty()) {
      logger().information("removed sandbox " + entry.sandbox_id + " on a later attempt");
      gone(entry);
    } else {
      failed.push_back(std::move(entry));
    }
  }
  std::lock_guard lock(mutex_);
  if (closed_) {  // closed meanwhile: the rest go with the shutdown's, at once
    for (; next < queued.size(); ++next) {
      failed.push_back(std::move(queued[next]));
    }
    for (Removal& entry : failed) {
      startLocked(std::move(entry));
    }
    return;
  }
  if (failed.empty() && failed_.empty()) {
    backoff_ = kFirstBackoff;
    retry_at_ = common::SteadyTime{};
    return;
  }
  failed_.insert(failed_.end(), std::make_move_iterator(failed.begin()),
                 std::make_move_iterator(failed.end()));
  if (!failed.empty()) {
    retry_at_ = clock_.now() + backoff_;
    backoff_ = std::min<std::chrono::seconds>(backoff_ * 2, kMaxBackoff);
  }
}

void RemovalQueue::close() {
  std::lock_guard lock(mutex_);
  if (closed_) {
    return;
  }
  closed_ = true;
  std::vector<Removal> failed;
  failed.swap(failed_);
  for (Removal& entry : failed) {
    startLocked(std::move(entry));
  }
}

void RemovalQueue::startLocked(Removal removal) {
  const std::uint64_t number = next_number_++;
  const std::string what = "sandbox " + removal.sandbox_id + " of " + removal.whose;
  auto shared = std::make_shared<Removal>(std::move(removal));
  try {
    threads_.reserve(threads_.size() + 1);  // so that a thread made is always kept
    under_way_.emplace(number, what);
    threads_.emplace_back([this, number, shared, what] {
      const std::string problem = attempt(shared->sandbox_id);
      if (problem.empty()) {
        logger().debug("removed " + what);
        gone(*shared);
      } else {
        logger().error("could not remove " + what + " (" + problem +
                       "); the next server's startup sweep will");
      }
      std::lock_guard lock(mutex_);
      under_way_.erase(number);
      answered_.notify_all();
    });
  } catch (const std::exception& e) {
    // No thread to be had: removed here, holding the queue's lock, rather than not at all.
    under_way_.erase(number);
    logger().warning("no thread to remove " + what + " alongside the others (" + e.what() +
                     "); removing it now");
    if (attempt(shared->sandbox_id).empty()) {
      gone(*shared);
    } else {
      logger().error("could not remove " + what + "; the next server's startup sweep will");
    }
  }
}

std::size_t RemovalQueue::finish(std::optional<common::SteadyTime> deadline) {
  std::vector<std::thread> done;
  {
    std::unique_lock lock(mutex_);
    const auto answered = [&] { return under_way_.empty(); };
    if (deadline) {
      clock_.waitUntil(answered_, lock, *deadline, answered);
    } else {
      answered_.wait(lock, answered);
    }
    if (!under_way_.empty()) {
      for (const auto& [number, what] : under_way_) {
        logger().error(what +
                       " is not removed by the shutdown's deadline (the engine has not "
                       "answered); the next server's startup sweep will remove it");
      }
      return under_way_.size();
    }
    done.swap(threads_);
  }
  for (std::thread& thread : done) {
    thread.join();
  }
  return 0;
}

}  // namespace scs::sandbox
