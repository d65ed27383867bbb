#include "runs/report_retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace scs::runs {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const common::SteadyTime kStart = common::SteadyTime(1000h);

TEST(ReportRetentionTest, AReportIsForgottenOnlyAfterTheRetentionPeriod) {
  ReportRetention retention({60s, 1000, 1u << 20, 1000, 1u << 20});
  retention.add("r1", "a", 10, kStart);
  retention.add("r2", "a", 10, kStart + 30s);
  EXPECT_THAT(retention.expire(kStart + 60s), IsEmpty());
  EXPECT_THAT(retention.expire(kStart + 61s), ElementsAre("r1"));
  EXPECT_THAT(retention.expire(kStart + 91s), ElementsAre("r2"));
  EXPECT_EQ(retention.bytes(), 0u);
}

TEST(ReportRetentionTest, PastTheCountTheOldestGoFirst) {
  ReportRetention retention({3600s, 2, 1u << 20, 1000, 1u << 20});
  retention.add("r1", "a", 1, kStart);
  retention.add("r2", "a", 1, kStart);
  EXPECT_THAT(retention.expire(kStart), IsEmpty());
  retention.add("r3", "b", 1, kStart);
  EXPECT_THAT(retention.expire(kStart), ElementsAre("r1"));
}

TEST(ReportRetentionTest, PastTheBytesTheOldestGoFirstButNeverTheNewest) {
  ReportRetention retention({3600s, 1000, 100, 1000, 1000});
  retention.add("r1", "a", 60, kStart);
  retention.add("r2", "a", 30, kStart);
  EXPECT_THAT(retention.expire(kStart), IsEmpty());
  retention.add("r3", "a", 20, kStart);
  EXPECT_THAT(retention.expire(kStart), ElementsAre("r1"));
  EXPECT_EQ(retention.bytes(), 50u);
  retention.add("huge", "a", 500, kStart);
  EXPECT_THAT(retention.expire(kStart), ElementsAre("r2", "r3"));
  EXPECT_EQ(retention.bytes(), 500u);  // over the budget, but the newest stays
}

TEST(ReportRetentionTest, ATenantOverItsOwnCountOrBytesForgetsItsOwnOldestOnly) {
  ReportRetention retention({3600s, 1000, 1u << 20, 2, 100});
  retention.add("a1", "a", 10, kStart);
  retention.add("b1", "b", 10, kStart);
  retention.add("a2", "a", 10, kStart);
  retention.add("a3", "a", 10, kStart);
  EXPECT_THAT(retention.expire(kStart), ElementsAre("a1"));
  retention.add("b2", "b", 95, kStart);
  EXPECT_THAT(retention.expire(kStart), ElementsAre("b1"));
  retention.add("b3", "b", 500, kStart);  // alone over the budget: its newest stays
  EXPECT_THAT(retention.expire(kStart), ElementsAre("b2"));
  EXPECT_EQ(retention.count("a"), 2u);
  EXPECT_EQ(retention.bytes("a"), 20u);
  EXPECT_EQ(retention.count("b"), 1u);
  EXPECT_EQ(retention.bytes("b"), 500u);
}

TEST(ReportRetentionTest, AtTheTotalTheTenantHoldingTheMostForgetsFirst) {
  // Alice's older reports are not pushed out by Bob's load while Bob holds more.
  ReportRetention count({3600s, 4, 1u << 20, 1000, 1u << 20});
  count.add("a1", "alice", 1, kStart);
  count.add("b1", "bob", 1, kStart);
  count.add("b2", "bob", 1, kStart);
  count.add("b3", "bob", 1, kStart);
  EXPECT_THAT(count.expire(kStart), IsEmpty());
  count.add("b4", "bob", 1, kStart);
  EXPECT_THAT(count.expire(kStart), ElementsAre("b1"));
  count.add("a2", "alice", 1, kStart);  // alice 2, bob 3: bob still holds the most
  EXPECT_THAT(count.expire(kStart), ElementsAre("b2"));
  count.add("a3", "alice", 1, kStart);  // alice 3, bob 2: now alice gives way
  EXPECT_THAT(count.expire(kStart), ElementsAre("a1"));

  ReportRetention bytes({3600s, 1000, 100, 1000, 1000});
  bytes.add("a1", "alice", 30, kStart);
  bytes.add("b1", "bob", 40, kStart);
  bytes.add("b2", "bob", 40, kStart);
  EXPECT_THAT(bytes.expire(kStart), ElementsAre("b1"));
  bytes.add("a2", "alice", 40, kStart);  // alice 70, bob 40
  EXPECT_THAT(bytes.expire(kStart), ElementsAre("a1"));
  EXPECT_EQ(bytes.bytes(), 80u);
}

TEST(ReportRetentionTest, TheNewestReportStaysEvenWhenItAloneIsOverTheTotal) {
  ReportRetention retention({3600s, 1000, 100, 1000, 1000});
  retention.add("a1", "alice", 0, kStart);
  retention.add("b1", "bob", 0, kStart);
  retention.add("huge", "carol", 500, kStart);
  EXPECT_THAT(retention.expire(kStart), ElementsAre("a1", "b1"));
  EXPECT_EQ(retention.count("carol"), 1u);
}

}  // namespace
}  // namespace scs::runs
