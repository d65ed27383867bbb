// What FakeBackend's .cc files share: the sentences of its failures, the guards that turn an
// exception into a failed status (plugins never throw across the ABI), and waitFor on its clock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "fake_backend.h"

namespace scs::fake {

inline backend::Status scripted(const std::string& call) {
  return backend::Status{backend::Code::kUnavailable, "fake: " + call + " failed as scripted"};
}

inline backend::Status notFound(const std::string& id) {
  return backend::Status{backend::Code::kNotFound, "fake: no sandbox " + id};
}

// A reply that carries only `status`, a failure.
template <typename Reply>
Reply failedReply(backend::Status status) {
  Reply reply;
  reply.status = std::move(status);
  return reply;
}

template <typename Reply, typename Fn>
Reply guardReply(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return failedReply<Reply>(
        backend::Status{backend::Code::kInternal, std::string("fake: ") + e.what()});
  }
}

// guardReply, but the scripted failure when the options `fail` the call named `call`.
template <typename Reply, typename Fn>
Reply guardReply(const std::set<std::string>& fail, const std::string& call, Fn&& fn) {
  if (fail.count(call) != 0) {
    return failedReply<Reply>(scripted(call));
  }
  return guardReply<Reply>(std::forward<Fn>(fn));
}

template <typename Fn>
backend::Status guardStatus(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return backend::Status{backend::Code::kInternal, std::string("fake: ") + e.what()};
  }
}

template <typename Done>
bool FakeBackend::waitFor(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout,
                          Done done) {
  if (clock_ == nullptr) {
    return cv_.wait_for(lock, timeout, done);
  }
  const auto deadline = clock_->now() + timeout;
  while (!done()) {
    if (clock_->now() >= deadline) {
      return done();
    }
    clock_->waitUntil(cv_, lock, deadline);
  }
  return true;
}

}  // namespace scs::fake
