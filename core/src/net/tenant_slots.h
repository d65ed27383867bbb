#pragma once

// TenantSlots: at most `cap` places per tenant held at once (the gate's requests in flight, the
// tools' waiting calls, the bytes of bodies in flight), each given back when its Slot is
// destroyed.

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace scs::net {

// Places each tenant may hold at once, at most `cap`: the HTTP gate's requests in flight, the
// tools' calls that wait, the bytes of the HTTP bodies a tenant's requests hold (a slot of
// many places). A tenant at its cap is refused another until one of its slots is given back;
// no tenant's slots count against another's. Thread-safe; outlives its slots.
class TenantSlots {
 public:
  // A held place; given back when destroyed. Movable, not copyable.
  class Slot {
   public:
    Slot(Slot&& other) noexcept
        : owner_(other.owner_), tenant_(std::move(other.tenant_)), amount_(other.amount_) {
      other.owner_ = nullptr;
    }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class TenantSlots;
    Slot(TenantSlots* owner, std::string tenant, std::size_t amount)
        : owner_(owner), tenant_(std::move(tenant)), amount_(amount) {}
    TenantSlots* owner_;
    std::string tenant_;
    std::size_t amount_;
  };

  explicit TenantSlots(std::size_t cap) : cap_(cap) {}

  // A slot for `tenant`, or nullopt when it holds `cap` already. With an `amount` (bytes, say)
  // the slot holds that much of the cap, and is refused when the tenant's holdings and it
  // together would pass the cap.
  std::optional<Slot> take(const std::string& tenant, std::size_t amount = 1);

  std::size_t cap() const { return cap_; }
  std::size_t held(const std::string& tenant) const;

 private:
  void give(const std::string& tenant, std::size_t amount);

  const std::size_t cap_;
  mutable std::mutex mutex_;
  std::map<std::string, std::size_t> held_;
};

}  // namespace scs::net
