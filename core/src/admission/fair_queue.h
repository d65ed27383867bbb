#pragma once

// Which queued run starts next: FIFO within a tenant; between tenants, the one with the fewest
// runs executing, then the one served longest ago, then the one whose run came first. So no
// tenant can starve another, however many runs it queues. Pure bookkeeping: no threads, no
// clock, no locks (the run manager holds its own).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace scs::admission {

class FairQueue {
 public:
  struct Entry {
    std::string tenant;
    std::string id;
  };

  // Appends a run to its tenant's queue.
  void push(const std::string& tenant, const std::string& id);

  // The id of the tenant's run that came last; nullopt when it has none queued.
  std::optional<std::string> newest(const std::string& tenant) const;

  // Takes a queued run out of its queue; false when it was not queued.
  bool remove(const std::string& tenant, const std::string& id);

  // The run that starts next, without taking it; nullopt when nothing is queued.
  std::optional<Entry> next() const;

  // Takes next() out of its queue and counts it as executing (served now).
  std::optional<Entry> pop();

  // A run that was not queued here begins executing (it counts as served now).
  void started(const std::string& tenant);
  // An executing run of `tenant` ended.
  void ended(const std::string& tenant);

  std::size_t executing() const;
  std::size_t executing(const std::string& tenant) const;
  std::size_t queued() const;
  std::size_t queued(const std::string& tenant) const;
  std::map<std::string, std::uint64_t> queuedPerTenant() const;  // no zero entries

  // Queued runs in the order they would start if no executing run ended meanwhile.
  std::vector<Entry> order() const;

  // Empties every queue; returns what was queued, in order().
  std::vector<Entry> clear();

 private:
  struct Queued {
    std::string id;
    std::uint64_t sequence;  // order of arrival
  };
  using Counts = std::map<std::string, std::size_t>;
  using Ticks = std::map<std::string, std::uint64_t>;

  // The tenant whose run starts next given these counts, skipping the first skip[tenant] runs
  // of each queue; nullptr when nothing is left.
  const std::string* choose(const Counts& executing, const Ticks& served, const Counts& skip) const;

  std::map<std::string, std::deque<Queued>> queues_;  // no empty ones
  Counts executing_;                                  // no zero entries
  Ticks last_served_;                                 // service tick of its latest start
  std::uint64_t tick_ = 0;
  std::uint64_t sequence_ = 0;
};

}  // namespace scs::admission
