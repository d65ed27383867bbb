#pragma once

// Who gives way when a budget that tenants share is full: the tenant holding the most of it,
// and among equals the one asking for more. So a tenant never loses what it holds to another
// tenant's load unless it holds more than that tenant, and a tenant that keeps to its share
// (the total over the number of tenants) never loses anything to anyone else. Used for MCP
// sessions, retained reports and queued runs. Pure: no locks, no clock.

#include <cstdint>
#include <map>
#include <string>

namespace scs::common {

// `held`: what each tenant holds, counting what `asking` is about to add. The tenant that
// gives way: the one holding the most; among equals `asking`, then the first by name.
// `asking` when `held` is empty.
std::string tenantToGiveWay(const std::map<std::string, std::uint64_t>& held,
                            const std::string& asking);

}  // namespace scs::common
