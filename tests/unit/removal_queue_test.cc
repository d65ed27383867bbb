#include "runs/removal_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mocks/mock_backend.h"
#include "support/manual_clock.h"

namespace scs::runs {
namespace {

using namespace std::chrono_literals;
using ::testing::Return;

const backend::Status kGone{backend::Code::kUnavailable, "engine gone"};

TEST(RemovalQueueTest, AFailedRemovalIsRetriedAtOnceThenAfterADoublingPause) {
  testing::ManualClock clock;
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend;
  int woken = 0;
  RemovalQueue removals(backend, clock, [&] { ++woken; });
  EXPECT_CALL(backend, remove("sb"))
      .WillOnce(Return(kGone))
      .WillOnce(Return(kGone))
      .WillOnce(Return(kGone))
      .WillOnce(Return(backend::Status{}));

  removals.remove("sb", "run r");
  EXPECT_EQ(woken, 1);
  ASSERT_TRUE(removals.nextRetry().has_value());
  EXPECT_LE(*removals.nextRetry(), clock.now());  // at once
  removals.retry(false);
  EXPECT_EQ(*removals.nextRetry(), clock.now() + 1s);
  clock.advance(1s);
  removals.retry(false);
  EXPECT_EQ(*removals.nextRetry(), clock.now() + 2s);
  clock.advance(2s);
  removals.retry(false);
  EXPECT_FALSE(removals.nextRetry().has_value());
}

TEST(RemovalQueueTest, TheLastChanceGivesUpOnWhatStillFails) {
  testing::ManualClock clock;
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend;
  RemovalQueue removals(backend, clock, nullptr);
  EXPECT_CALL(backend, remove("sb")).Times(2).WillRepeatedly(Return(kGone));
  removals.remove("sb", "prepared sandbox");
  removals.retry(true);
  EXPECT_FALSE(removals.nextRetry().has_value());
}

TEST(RemovalQueueTest, AThrowingBackendIsQueuedLikeAFailure) {
  testing::ManualClock clock;
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend;
  RemovalQueue removals(backend, clock, nullptr);
  EXPECT_CALL(backend, remove("sb"))
      .WillOnce(::testing::Throw(std::runtime_error("boom")))
      .WillOnce(Return(backend::Status{}));
  removals.remove("sb", "run r");
  ASSERT_TRUE(removals.nextRetry().has_value());
  removals.retry(false);
  EXPECT_FALSE(removals.nextRetry().has_value());
}

}  // namespace
}  // namespace scs::runs
