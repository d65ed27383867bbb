#include "sandbox/removal_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mocks/mock_backend.h"
#include "support/manual_clock.h"

namespace scs::runs {
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

  removals.remove("sb", "run r");
  EXPECT_EQ(woken, 1);
  ASSERT_TRUE(removals.nextRetry().has_value());
  EXPECT_LE(*removals.nextRetry(), clock_.now());  // at once
  removals.retry(false);
  EXPECT_EQ(*removals.nextRetry(), clock_.now() + 1s);
  clock_.advance(1s);
  removals.retry(false);
  EXPECT_EQ(*removals.nextRetry(), clock_.now() + 2s);
  clock_.advance(2s);
  removals.retry(false);
  EXPECT_FALSE(removals.nextRetry().has_value());
}

TEST_F(RemovalQueueTest, TheLastChanceGivesUpOnWhatStillFails) {
  EXPECT_CALL(backend_, remove("sb")).Times(2).WillRepeatedly(Return(kGone));
  removals_.remove("sb", "prepared sandbox");
  removals_.retry(true);
  EXPECT_FALSE(removals_.nextRetry().has_value());
}

TEST_F(RemovalQueueTest, AThrowingBackendIsQueuedLikeAFailure) {
  EXPECT_CALL(backend_, remove("sb"))
      .WillOnce(::testing::Throw(std::runtime_error("boom")))
      .WillOnce(Return(backend::Status{}));
  removals_.remove("sb", "run r");
  ASSERT_TRUE(removals_.nextRetry().has_value());
  removals_.retry(false);
  EXPECT_FALSE(removals_.nextRetry().has_value());
}

}  // namespace
}  // namespace scs::runs
