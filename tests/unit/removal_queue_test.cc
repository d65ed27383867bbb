#include "sandbox/removal_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "mocks/mock_backend.h"
#include "support/manual_clock.h"

namespace scs::sandbox {
namespace {

using namespace std::chrono_literals;
using ::testing::Return;

const backend::Status kGone{backend::Code::kUnavailable, "engine gone"};

// A queue over a strict mock backend on a test clock, that wakes no one.
class RemovalQueueTest : public ::testing::Test {
 protected:
  testing::ManualClock clock_;
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend_;
  RemovalQueue removals_{backend_, clock_, nullptr};
};

TEST_F(RemovalQueueTest, AFailedRemovalIsRetriedAtOnceThenAfterADoublingPause) {
  int woken = 0;
  RemovalQueue removals(backend_, clock_, [&] { ++woken; });
  EXPECT_CALL(backend_, remove("sb"))
      .WillOnce(Return(kGone))
      .WillOnce(Return(kGone))
      .WillOnce(Return(kGone))
      .WillOnce(Return(backend::Status{}));

  removals.remove({"sb", "run r", {}, {}});
  EXPECT_EQ(woken, 1);
  ASSERT_TRUE(removals.nextRetry().has_value());
  EXPECT_LE(*removals.nextRetry(), clock_.now());  // at once
  removals.retry();
  EXPECT_EQ(*removals.nextRetry(), clock_.now() + 1s);
  clock_.advance(1s);
  removals.retry();
  EXPECT_EQ(*removals.nextRetry(), clock_.now() + 2s);
  clock_.advance(2s);
  removals.retry();
  EXPECT_FALSE(removals.nextRetry().has_value());
}

TEST_F(RemovalQueueTest, WhatTheSandboxWritesToIsKeptUntilTheSandboxIsGone) {
  EXPECT_CALL(backend_, remove("sb")).WillOnce(Return(kGone)).WillOnce(Return(backend::Status{}));
  auto sink = std::make_shared<int>(0);
  const std::weak_ptr<int> watched = sink;
  int removed = 0;
  removals_.remove({"sb", "run r", [&] { ++removed; }, std::move(sink)});
  EXPECT_FALSE(watched.expired()) << "the sandbox is still there";
  removals_.retry();
  EXPECT_TRUE(watched.expired());
  EXPECT_EQ(removed, 1);
}

TEST_F(RemovalQueueTest, ClosingTriesEachFailedRemovalOnceMoreAndLeavesWhatFailsToTheSweep) {
  EXPECT_CALL(backend_, remove("sb")).Times(2).WillRepeatedly(Return(kGone));
  int removed = 0;
  removals_.remove({"sb", "prepared sandbox", [&] { ++removed; }, {}});
  removals_.close();
  EXPECT_EQ(removals_.finish(std::nullopt), 0u) << "the engine answered";
  EXPECT_FALSE(removals_.nextRetry().has_value());
  removals_.retry();  // closed: nothing more
  EXPECT_EQ(removed, 0);
}

TEST_F(RemovalQueueTest, ClosedARemovalThatHoldsNothingOfItsSandboxIsMadeOnTheCallersThread) {
  EXPECT_CALL(backend_, remove("sb")).WillOnce(Return(kGone));
  removals_.close();
  int removed = 0;
  // Its caller frees what the sandbox writes to once this returns: it cannot go on elsewhere.
  removals_.remove({"sb", "run r", [&] { ++removed; }, {}});
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  EXPECT_EQ(removals_.finish(clock_.now()), 0u);
  EXPECT_FALSE(removals_.nextRetry().has_value()) << "failed once closed: left to the sweep";
  EXPECT_EQ(removed, 0);
}

TEST_F(RemovalQueueTest, ARetryUnderWayWhenTheQueueClosesHandsItsRestToTheShutdown) {
  EXPECT_CALL(backend_, remove("a"))
      .WillOnce(Return(kGone))
      .WillOnce([&](const std::string&) {
        removals_.close();  // the server begins to stop while the engine is slow
        return kGone;
      })
      .WillOnce(Return(backend::Status{}));
  EXPECT_CALL(backend_, remove("b")).WillOnce(Return(kGone)).WillOnce(Return(backend::Status{}));
  std::atomic<int> removed = 0;
  removals_.remove({"a", "run a", [&] { ++removed; }, {}});
  removals_.remove({"b", "run b", [&] { ++removed; }, {}});
  removals_.retry();  // tries a, then leaves b untried to the shutdown's threads
  EXPECT_EQ(removals_.finish(std::nullopt), 0u);
  EXPECT_EQ(removed.load(), 2);
}

// The engine holds every remove() until the test opens the gate.
class Gate {
 public:
  backend::Status pass() {
    std::unique_lock lock(mutex_);
    ++inside_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    return {};
  }
  bool awaitInside(int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return inside_ >= count; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int inside_ = 0;
  bool open_ = false;
};

TEST_F(RemovalQueueTest, ClosedItRemovesEverySandboxAtOnceAndWaitsOnlyUntilTheDeadline) {
  Gate engine;
  EXPECT_CALL(backend_, remove(::testing::_)).Times(3).WillRepeatedly([&](const std::string&) {
    return engine.pass();
  });
  std::atomic<int> removed = 0;
  removals_.close();
  for (const char* id : {"a", "b", "c"}) {
    // Each holds what its sandbox writes to, so it may be removed alongside the others.
    removals_.remove({id, "prepared sandbox", [&] { ++removed; }, std::make_shared<int>(0)});
  }
  ASSERT_TRUE(engine.awaitInside(3)) << "the three removals are not under way together";

  std::size_t left = 0;
  std::thread stopping([&] { left = removals_.finish(clock_.now() + 1500ms); });
  ASSERT_TRUE(clock_.awaitWaiters(1));
  clock_.advance(1500ms);
  stopping.join();
  EXPECT_EQ(left, 3u) << "the engine has answered none by the deadline";
  EXPECT_EQ(removed.load(), 0);

  engine.open();
  EXPECT_EQ(removals_.finish(std::nullopt), 0u);
  EXPECT_EQ(removed.load(), 3);
}

TEST_F(RemovalQueueTest, AThrowingBackendIsQueuedLikeAFailure) {
  EXPECT_CALL(backend_, remove("sb"))
      .WillOnce(::testing::Throw(std::runtime_error("boom")))
      .WillOnce(Return(backend::Status{}));
  removals_.remove({"sb", "run r", {}, {}});
  ASSERT_TRUE(removals_.nextRetry().has_value());
  removals_.retry();
  EXPECT_FALSE(removals_.nextRetry().has_value());
}

}  // namespace
}  // namespace scs::sandbox
