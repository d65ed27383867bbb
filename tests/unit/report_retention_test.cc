#include "runs/report_retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace scs::runs {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const SteadyTime kStart = SteadyTime(1000h);

TEST(ReportRetentionTest, AReportIsForgottenOnlyAfterTheRetentionPeriod) {
  ReportRetention retention({60s, 1000, 1u << 20});
  retention.add("r1", "a", 10, kStart);
  retention.add("r2", "a", 10, kStart + 30s);
  EXPECT_THAT(retention.expire(kStart + 60s), IsEmpty());
  EXPECT_THAT(retention.expire(kStart + 61s), ElementsAre("r1"));
  EXPECT_THAT(retention.expire(kStart + 91s), ElementsAre("r2"));
  EXPECT_EQ(retention.bytes(), 0u);
}

TEST(ReportRetentionTest, PastTheCountTheOldestGoFirst) {
  ReportRetention retention({3600s, 2, 1u << 20});
  retention.add("r1", "a", 1, kStart);
  retention.add("r2", "a", 1, kStart);
  EXPECT_THAT(retention.expire(kStart), IsEmpty());
  retention.add("r3", "b", 1, kStart);
  EXPECT_THAT(retention.expire(kStart), ElementsAre("r1"));
}

TEST(ReportRetentionTest, PastTheBytesTheOldestGoFirstButNeverTheNewest) {
  ReportRetention retention({3600s, 1000, 100});
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

}  // namespace
}  // namespace scs::runs
