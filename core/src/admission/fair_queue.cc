// FairQueue: one FIFO per tenant; the next run is the one whose tenant ranks first by runs
// executing, then by when it was last served, then by arrival; and the counts read from it.

#include "admission/fair_queue.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace scs::admission {
namespace {

template <typename Value>
Value valueOr(const std::map<std::string, Value>& map, const std::string& key, Value fallback) {
  const auto found = map.find(key);
  return found == map.end() ? fallback : found->second;
}

}  // namespace

void FairQueue::push(const std::string& tenant, const std::string& id) {
  queues_[tenant].push_back({id, ++sequence_});
}

std::optional<std::string> FairQueue::newest(const std::string& tenant) const {
  const auto found = queues_.find(tenant);
  if (found == queues_.end()) {
    return std::nullopt;
  }
  return found->second.back().id;
}

std::map<std::string, std::uint64_t> FairQueue::queuedPerTenant() const {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& [tenant, queue] : queues_) {
    counts[tenant] = queue.size();
  }
  return counts;
}

bool FairQueue::remove(const std::string& tenant, const std::string& id) {
  const auto found = queues_.find(tenant);
  if (found == queues_.end()) {
    return false;
  }
  std::deque<Queued>& queue = found->second;
  const auto entry =
      std::find_if(queue.begin(), queue.end(), [&](const Queued& q) { return q.id == id; });
  if (entry == queue.end()) {
    return false;
  }
  queue.erase(entry);
  if (queue.empty()) {
    queues_.erase(found);
  }
  return true;
}

const std::string* FairQueue::choose(const Counts& executing, const Ticks& served,
                                     const Counts& skip) const {
  const std::string* chosen = nullptr;
  std::tuple<std::size_t, std::uint64_t, std::uint64_t> best;
  for (const auto& [tenant, queue] : queues_) {
    const std::size_t skipped = valueOr<std::size_t>(skip, tenant, 0);
    if (skipped >= queue.size()) {
      continue;
    }
    const std::tuple<std::size_t, std::uint64_t, std::uint64_t> rank{
        valueOr<std::size_t>(executing, tenant, 0), valueOr<std::uint64_t>(served, tenant, 0),
        queue[skipped].sequence};
    if (chosen == nullptr || rank < best) {
      chosen = &tenant;
      best = rank;
    }
  }
  return chosen;
}

std::optional<FairQueue::Entry> FairQueue::next() const {
  const std::string* tenant = choose(executing_, last_served_, {});
  if (tenant == nullptr) {
    return std::nullopt;
  }
  return Entry{*tenant, queues_.at(*tenant).front().id};
}

std::optional<FairQueue::Entry> FairQueue::pop() {
  std::optional<Entry> entry = next();
  if (entry) {
    remove(entry->tenant, entry->id);
    started(entry->tenant);
  }
  return entry;
}

void FairQueue::started(const std::string& tenant) {
  ++executing_[tenant];
  last_served_[tenant] = ++tick_;
}

void FairQueue::ended(const std::string& tenant) {
  const auto found = executing_.find(tenant);
  if (found != executing_.end() && --found->second == 0) {
    executing_.erase(found);
  }
}

std::size_t FairQueue::executing() const {
  return std::accumulate(executing_.begin(), executing_.end(), std::size_t{0},
                         [](std::size_t sum, const auto& entry) { return sum + entry.second; });
}

std::size_t FairQueue::executing(const std::string& tenant) const {
  return valueOr<std::size_t>(executing_, tenant, 0);
}

std::size_t FairQueue::queued() const {
  return std::accumulate(
      queues_.begin(), queues_.end(), std::size_t{0},
      [](std::size_t sum, const auto& entry) { return sum + entry.second.size(); });
}

std::size_t FairQueue::queued(const std::string& tenant) const {
  const auto found = queues_.find(tenant);
  return found == queues_.end() ? 0 : found->second.size();
}

std::vector<FairQueue::Entry> FairQueue::order() const {
  std::vector<Entry> order;
  Counts executing = executing_;
  Ticks served = last_served_;
  std::uint64_t tick = tick_;
  Counts taken;
  while (const std::string* tenant = choose(executing, served, taken)) {
    order.push_back({*tenant, queues_.at(*tenant)[taken[*tenant]++].id});
    ++executing[*tenant];
    served[*tenant] = ++tick;
  }
  return order;
}

std::vector<FairQueue::Entry> FairQueue::clear() {
  std::vector<Entry> entries = order();
  queues_.clear();
  return entries;
}

}  // namespace scs::admission
