#include "net/tenant_slots.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>

namespace scs::net {
namespace {

TEST(TenantSlotsTest, EachTenantHoldsAtMostItsCapAndGetsItBackWithItsSlots) {
  TenantSlots slots(2);
  auto first = slots.take("alice");
  auto second = slots.take("alice");
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(slots.take("alice"));
  EXPECT_TRUE(slots.take("bob"));  // given back at once: a temporary
  first.reset();
  EXPECT_EQ(slots.held("alice"), 1u);
  EXPECT_TRUE(slots.take("alice"));
}

// A slot of many places: the bytes of HTTP bodies a tenant's requests in flight hold.
TEST(TenantSlotsTest, AWeightedSlotHoldsItsAmountUntilItIsGone) {
  TenantSlots bytes(100);
  auto big = bytes.take("alice", 70);
  ASSERT_TRUE(big);
  EXPECT_EQ(bytes.held("alice"), 70u);
  EXPECT_FALSE(bytes.take("alice", 31));
  auto rest = bytes.take("alice", 30);
  ASSERT_TRUE(rest);
  EXPECT_FALSE(bytes.take("alice", 1));
  EXPECT_TRUE(bytes.take("bob", 100));
  EXPECT_FALSE(bytes.take("bob", 101));
  std::optional<TenantSlots::Slot> moved = std::move(big);
  big.reset();  // the moved-from slot gives nothing back
  EXPECT_EQ(bytes.held("alice"), 100u);
  moved.reset();
  EXPECT_EQ(bytes.held("alice"), 30u);
  rest.reset();
  EXPECT_EQ(bytes.held("alice"), 0u);
}

}  // namespace
}  // namespace scs::net
