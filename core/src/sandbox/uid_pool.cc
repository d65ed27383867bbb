// UidPool: uids taken round-robin through the operator's range, skipping those in use or held
// by a live instance's leftovers, and given back when a sandbox is gone.

#include "sandbox/uid_pool.h"

namespace scs::sandbox {

UidPool::UidPool(policy::UidRange range, const std::vector<std::uint32_t>& reserved)
    : range_(range), next_(range.first) {
  for (const std::uint32_t uid : reserved) {
    if (uid >= range_.first && uid <= range_.last) {
      taken_.insert(uid);
    }
  }
}

std::optional<std::uint32_t> UidPool::take() {
  std::lock_guard lock(mutex_);
  const std::uint64_t size = std::uint64_t{range_.last} - range_.first + 1;
  for (std::uint64_t tried = 0; tried < size; ++tried) {
    const std::uint32_t uid = next_;
    next_ = uid == range_.last ? range_.first : uid + 1;
    if (taken_.insert(uid).second) {
      return uid;
    }
  }
  return std::nullopt;
}

void UidPool::give(std::uint32_t uid) {
  std::lock_guard lock(mutex_);
  taken_.erase(uid);
}

std::size_t UidPool::inUse() const {
  std::lock_guard lock(mutex_);
  return taken_.size();
}

}  // namespace scs::sandbox
