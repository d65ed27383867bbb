#include "admission/fair_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace scs::admission {
namespace {

std::vector<std::string> ids(const std::vector<FairQueue::Entry>& entries) {
  std::vector<std::string> out;
  for (const FairQueue::Entry& entry : entries) {
    out.push_back(entry.id);
  }
  return out;
}

TEST(FairQueueTest, WithinATenantRunsStartInTheOrderTheyCame) {
  FairQueue queue;
  queue.push("a", "a1");
  queue.push("a", "a2");
  queue.push("a", "a3");
  EXPECT_EQ(ids(queue.order()), (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(queue.pop()->id, "a1");
  EXPECT_EQ(queue.executing(), 1u);
  EXPECT_EQ(queue.queued(), 2u);
  EXPECT_EQ(queue.next()->id, "a2");
}

TEST(FairQueueTest, FreeSlotsGoRoundRobinBetweenTenantsFewestExecutingFirst) {
  FairQueue queue;
  queue.started("a");  // a0 executes
  queue.push("a", "a1");
  queue.push("a", "a2");
  queue.push("b", "b1");
  queue.push("b", "b2");
  queue.push("c", "c1");
  const std::vector<std::string> expected{"b1", "c1", "a1", "b2", "a2"};
  EXPECT_EQ(ids(queue.order()), expected);
  // One slot: each run that ends lets the next of the order in.
  std::string executing_tenant = "a";
  for (const std::string& id : expected) {
    queue.ended(executing_tenant);
    const auto next = queue.pop();
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->id, id);
    executing_tenant = next->tenant;
  }
  EXPECT_FALSE(queue.next().has_value());
}

TEST(FairQueueTest, ATenantWithManyQueuedRunsCannotStarveAnotherTenantsOneRun) {
  FairQueue queue;
  queue.started("greedy");
  for (int i = 0; i < 50; ++i) {
    queue.push("greedy", "g" + std::to_string(i));
  }
  queue.push("modest", "m");
  EXPECT_EQ(queue.order().front().id, "m");
  EXPECT_EQ(queue.order()[1].id, "g0");
  EXPECT_EQ(queue.queued("greedy"), 50u);
  EXPECT_EQ(queue.queued("modest"), 1u);
}

TEST(FairQueueTest, AmongEqualsTheTenantServedLongestAgoGoesFirst) {
  FairQueue queue;
  queue.started("b");
  queue.ended("b");
  queue.started("a");
  queue.ended("a");  // both idle now; b was served before a
  queue.push("a", "a1");
  queue.push("b", "b1");
  EXPECT_EQ(queue.next()->id, "b1");
}

TEST(FairQueueTest, ARemovedRunLeavesTheOrderAndCountsStayExact) {
  FairQueue queue;
  queue.push("a", "a1");
  queue.push("a", "a2");
  EXPECT_TRUE(queue.remove("a", "a1"));
  EXPECT_FALSE(queue.remove("a", "a1"));
  EXPECT_FALSE(queue.remove("b", "a2"));
  EXPECT_EQ(ids(queue.order()), (std::vector<std::string>{"a2"}));
  queue.started("a");
  queue.started("b");
  EXPECT_EQ(queue.executing(), 2u);
  EXPECT_EQ(queue.executing("a"), 1u);
  queue.ended("a");
  queue.ended("a");  // an extra end never goes below zero
  EXPECT_EQ(queue.executing("a"), 0u);
  EXPECT_EQ(queue.executing(), 1u);
  EXPECT_EQ(ids(queue.clear()), (std::vector<std::string>{"a2"}));
  EXPECT_EQ(queue.queued(), 0u);
}

}  // namespace
}  // namespace scs::admission
