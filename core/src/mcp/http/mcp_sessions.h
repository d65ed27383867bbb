// The session table of the legacy Streamable HTTP transport (2025-11-25 and earlier): ids
// handed out at initialize, each bound to its tenant, with per-tenant and total limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace scs::mcp::http {

// The header that carries a legacy session's id, both ways.
inline constexpr const char* kSessionHeader = "Mcp-Session-Id";

// Sessions of the legacy Streamable HTTP transport: ids handed out at initialize, each bound
// to the tenant that opened it. A tenant at its own limit loses its least recently used
// session to a new one; when all tenants together hold the total, the least recently used
// session of the tenant that gives way (common/tenant_share.h) goes. Thread-safe.
class Sessions {
 public:
  Sessions(std::size_t max_total, std::size_t max_per_tenant)
      : max_total_(max_total), max_per_tenant_(max_per_tenant) {}

  std::string open(const std::string& tenant);

  // True when `id` is a live session of `tenant`; it counts as used now.
  bool touch(const std::string& id, const std::string& tenant);

  bool close(const std::string& id, const std::string& tenant);

 private:
  struct Session {
    std::string tenant;
    std::chrono::steady_clock::time_point last_used;
  };
  using Iterator = std::map<std::string, Session>::iterator;

  Iterator eraseLocked(Iterator it);
  void closeLeastRecentLocked(const std::string& tenant);
  void purgeLocked(std::chrono::steady_clock::time_point now);

  const std::size_t max_total_;
  const std::size_t max_per_tenant_;
  std::mutex mutex_;
  std::map<std::string, Session> sessions_;
  std::map<std::string, std::size_t> held_;  // sessions per tenant
};

}  // namespace scs::mcp::http
