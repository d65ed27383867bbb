// Sessions: opening, touching and closing legacy MCP sessions, idle ones purged, the least
// recently used one giving way at a limit.
#include "mcp/http/mcp_sessions.h"

#include <Poco/Logger.h>

#include <cstdint>
#include <iterator>

#include "common/ids.h"
#include "common/tenant_share.h"
#include "runs/run_manager.h"

namespace scs::mcp::http {
namespace {

constexpr auto kSessionIdleLimit = std::chrono::hours(24);

Poco::Logger& logger() { return Poco::Logger::get("scs.http"); }

}  // namespace

std::string Sessions::open(const std::string& tenant) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  purgeLocked(now);
  if (held_[tenant] >= max_per_tenant_) {
    closeLeastRecentLocked(tenant);
  } else if (sessions_.size() >= max_total_) {
    std::map<std::string, std::uint64_t> held(held_.begin(), held_.end());
    ++held[tenant];
    closeLeastRecentLocked(common::tenantToGiveWay(held, tenant));
  }
  const std::string id = common::unusedHexId(sessions_);
  sessions_[id] = Session{tenant, now};
  ++held_[tenant];
  return id;
}

bool Sessions::touch(const std::string& id, const std::string& tenant) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  purgeLocked(now);
  const auto found = sessions_.find(id);
  if (found == sessions_.end() || found->second.tenant != tenant) {
    return false;
  }
  found->second.last_used = now;
  return true;
}

bool Sessions::close(const std::string& id, const std::string& tenant) {
  std::lock_guard lock(mutex_);
  const auto found = sessions_.find(id);
  if (found == sessions_.end() || found->second.tenant != tenant) {
    return false;
  }
  eraseLocked(found);
  return true;
}

Sessions::Iterator Sessions::eraseLocked(Iterator it) {
  const auto held = held_.find(it->second.tenant);
  if (--held->second == 0) {
    held_.erase(held);
  }
  return sessions_.erase(it);
}

void Sessions::closeLeastRecentLocked(const std::string& tenant) {
  auto oldest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second.tenant == tenant &&
        (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used)) {
      oldest = it;
    }
  }
  if (oldest != sessions_.end()) {
    logger().debug("session table: the least recently used session of tenant " + tenant +
                   " makes room for a new one");
    eraseLocked(oldest);
  }
}

void Sessions::purgeLocked(std::chrono::steady_clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = now - it->second.last_used > kSessionIdleLimit ? eraseLocked(it) : std::next(it);
  }
}

}  // namespace scs::mcp::http
