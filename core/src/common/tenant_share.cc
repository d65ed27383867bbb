// tenantToGiveWay: the tenant holding the most of a shared budget, the asking tenant when
// none holds more.

#include "common/tenant_share.h"

namespace scs::common {

std::string tenantToGiveWay(const std::map<std::string, std::uint64_t>& held,
                            const std::string& asking) {
  const auto own = held.find(asking);
  const std::string* heaviest = &asking;
  std::uint64_t most = own == held.end() ? 0 : own->second;
  for (const auto& [tenant, amount] : held) {
    if (amount > most) {
      heaviest = &tenant;
      most = amount;
    }
  }
  return *heaviest;
}

}  // namespace scs::common
