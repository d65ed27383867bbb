// ReportRetention: finished reports kept in order with each tenant's count and bytes; expire()
// forgets the expired, then a tenant's oldest over its own budget, then the largest holder's.

#include "runs/report_retention.h"

#include "common/tenant_share.h"

namespace scs::runs {

void ReportRetention::add(const std::string& run_id, const std::string& tenant, std::size_t bytes,
                          common::SteadyTime finished) {
  kept_.push_back({run_id, tenant, bytes, finished});
  Held& held = held_[tenant];
  ++held.count;
  held.bytes += bytes;
  bytes_ += bytes;
}

std::size_t ReportRetention::bytes(const std::string& tenant) const {
  const auto it = held_.find(tenant);
  return it == held_.end() ? 0 : it->second.bytes;
}

std::size_t ReportRetention::count(const std::string& tenant) const {
  const auto it = held_.find(tenant);
  return it == held_.end() ? 0 : it->second.count;
}

void ReportRetention::forget(Iterator it, std::vector<std::string>* forgotten) {
  const auto held = held_.find(it->tenant);
  held->second.bytes -= it->bytes;
  if (--held->second.count == 0) {
    held_.erase(held);
  }
  bytes_ -= it->bytes;
  forgotten->push_back(it->run_id);
  kept_.erase(it);
}

ReportRetention::Iterator ReportRetention::oldestOf(const std::string& tenant, Iterator keep) {
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it != keep && it->tenant == tenant) {
      return it;
    }
  }
  return kept_.end();
}

template <typename Over, typename Measure>
void ReportRetention::shareOut(Over over, Measure measure, std::vector<std::string>* forgotten) {
  while (over() && kept_.size() > 1) {
    const Iterator newest = std::prev(kept_.end());
    // Weighed with the newest report, chosen among tenants with another report to forget.
    std::map<std::string, std::uint64_t> held;
    for (const auto& [tenant, amount] : held_) {
      if (tenant != newest->tenant || amount.count > 1) {
        held[tenant] = measure(amount);
      }
    }
    const std::string& asking =
        held.count(newest->tenant) != 0 ? newest->tenant : held.begin()->first;
    forget(oldestOf(common::tenantToGiveWay(held, asking), newest), forgotten);
  }
}

std::vector<std::string> ReportRetention::expire(common::SteadyTime now) {
  std::vector<std::string> forgotten;
  while (!kept_.empty() && now - kept_.front().finished > settings_.retention) {
    forget(kept_.begin(), &forgotten);
  }
  // A tenant over its own budget forgets its oldest, never its newest.
  std::vector<std::string> tenants;
  for (const auto& [tenant, held] : held_) {
    tenants.push_back(tenant);
  }
  for (const std::string& tenant : tenants) {
    while (count(tenant) > 1 && (count(tenant) > settings_.max_reports_per_tenant ||
                                 bytes(tenant) > settings_.max_bytes_per_tenant)) {
      forget(oldestOf(tenant, kept_.end()), &forgotten);
    }
  }
  shareOut([&] { return kept_.size() > settings_.max_reports; },
           [](const Held& held) { return std::uint64_t{held.count}; }, &forgotten);
  shareOut([&] { return bytes_ > settings_.max_bytes; },
           [](const Held& held) { return std::uint64_t{held.bytes}; }, &forgotten);
  return forgotten;
}

}  // namespace scs::runs
