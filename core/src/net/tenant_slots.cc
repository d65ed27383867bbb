// TenantSlots: a slot taken under the lock while the tenant holds fewer than the cap, and given
// back by the Slot's destructor or move-assignment.

#include "net/tenant_slots.h"

namespace scs::net {

TenantSlots::Slot::~Slot() {
  if (owner_ != nullptr) {
    owner_->give(tenant_, amount_);
  }
}

TenantSlots::Slot& TenantSlots::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) {
      owner_->give(tenant_, amount_);
    }
    owner_ = other.owner_;
    tenant_ = std::move(other.tenant_);
    amount_ = other.amount_;
    other.owner_ = nullptr;
  }
  return *this;
}

std::optional<TenantSlots::Slot> TenantSlots::take(const std::string& tenant, std::size_t amount) {
  std::lock_guard lock(mutex_);
  std::size_t& held = held_[tenant];
  if (held >= cap_ || amount > cap_ - held) {
    if (held == 0) {
      held_.erase(tenant);
    }
    return std::nullopt;
  }
  held += amount;
  return Slot(this, tenant, amount);
}

std::size_t TenantSlots::held(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  const auto found = held_.find(tenant);
  return found == held_.end() ? 0 : found->second;
}

void TenantSlots::give(const std::string& tenant, std::size_t amount) {
  std::lock_guard lock(mutex_);
  const auto found = held_.find(tenant);
  if (found != held_.end() && (found->second -= amount) == 0) {
    held_.erase(found);
  }
}

}  // namespace scs::net
