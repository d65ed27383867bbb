#pragma once

// The host uids of the sandboxes that exist at one time: each gets its own uid (its gid the
// same number) from the operator's range, so that no kernel counter kept per user (processes,
// inotify instances, message queues, pending signals, locked memory) is shared by two runs, of
// one tenant or of two. A uid is free again only once its sandbox has been removed. Thread-safe.

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "policy/posture.h"

namespace scs::sandbox {

class UidPool {
 public:
  // `reserved`: uids held by sandboxes of other instances that the startup sweep left alive.
  UidPool(policy::UidRange range, const std::vector<std::uint32_t>& reserved);

  // A uid no live sandbox has, the one after the last taken first (so a freed uid waits
  // longest to come back); nullopt when every uid of the range is in use.
  std::optional<std::uint32_t> take();

  // The sandbox that had `uid` is gone.
  void give(std::uint32_t uid);

  std::size_t inUse() const;

 private:
  const policy::UidRange range_;
  mutable std::mutex mutex_;
  std::set<std::uint32_t> taken_;
  std::uint32_t next_;
};

}  // namespace scs::sandbox
