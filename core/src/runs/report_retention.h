#pragma once

// Which finished reports the run manager forgets, and when: each one after the retention
// period; a tenant's oldest first while it keeps more than its own count or bytes; and, while
// all reports together are over the total count or bytes, the oldest of the tenant holding the
// most (common::tenantToGiveWay), so one tenant's reports never push out those of a tenant that
// holds less. The newest report of a tenant is never forgotten for its size, nor the newest of all
// for the totals. Not thread-safe: the run manager calls it with its lock held.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"

namespace scs::runs {

struct RetentionSettings {
  std::chrono::seconds retention{3600};
  std::size_t max_reports = 1000;  // all tenants together
  std::size_t max_bytes = std::size_t{256} << 20;
  std::size_t max_reports_per_tenant = 500;
  std::size_t max_bytes_per_tenant = std::size_t{128} << 20;
};

class ReportRetention {
 public:
  explicit ReportRetention(RetentionSettings settings) : settings_(settings) {}

  // A report became final at `finished`, holding `bytes` of output and files.
  void add(const std::string& run_id, const std::string& tenant, std::size_t bytes,
           common::SteadyTime finished);

  // The reports to forget at `now`, in the order they are forgotten; they are no longer
  // counted.
  std::vector<std::string> expire(common::SteadyTime now);

  std::size_t bytes() const { return bytes_; }
  std::size_t count() const { return kept_.size(); }
  std::size_t bytes(const std::string& tenant) const;
  std::size_t count(const std::string& tenant) const;

 private:
  struct Kept {
    std::string run_id;
    std::string tenant;
    std::size_t bytes;
    common::SteadyTime finished;
  };
  struct Held {
    std::size_t count = 0;
    std::size_t bytes = 0;
  };
  using Iterator = std::list<Kept>::iterator;

  void forget(Iterator it, std::vector<std::string>* forgotten);
  // The oldest report of `tenant`, skipping `keep`.
  Iterator oldestOf(const std::string& tenant, Iterator keep);
  // Forgets reports of the tenants that give way until `over()` is false or only the newest
  // report is left.
  template <typename Over, typename Measure>
  void shareOut(Over over, Measure measure, std::vector<std::string>* forgotten);

  const RetentionSettings settings_;
  std::list<Kept> kept_;              // in the order they became final
  std::map<std::string, Held> held_;  // no empty entries
  std::size_t bytes_ = 0;
};

}  // namespace scs::runs
