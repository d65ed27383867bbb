#include "common/tenant_share.h"

#include <gtest/gtest.h>

namespace scs::common {
namespace {

TEST(TenantShareTest, TheTenantHoldingTheMostGivesWayAndAmongEqualsTheOneAsking) {
  struct Case {
    std::map<std::string, std::uint64_t> held;
    std::string asking;
    std::string gives_way;
  };
  const std::vector<Case> cases{
      {{}, "a", "a"},
      {{{"a", 1}}, "a", "a"},
      {{{"a", 1}, {"b", 5}}, "a", "b"},
      {{{"a", 5}, {"b", 5}}, "a", "a"},  // even: the one asking
      {{{"a", 5}, {"b", 5}}, "b", "b"},
      {{{"a", 2}, {"b", 5}, {"c", 5}}, "a", "b"},  // among other equals, the first by name
      {{{"a", 6}, {"b", 5}}, "b", "a"},
      {{{"b", 3}}, "a", "b"},  // asking holds nothing yet
  };
  for (const Case& c : cases) {
    EXPECT_EQ(tenantToGiveWay(c.held, c.asking), c.gives_way) << c.asking << " " << c.gives_way;
  }
}

}  // namespace
}  // namespace scs::common
