#pragma once

// A run's limits (memory, timeout, CPUs, processes): the operator's defaults, maxima and floors,
// and LimitPolicy, which fits them to the host and resolves start_run's `limits` argument.

#include <Poco/Dynamic/Var.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "result.h"

namespace scs::policy {

// One run's effective limits. `processes` is never client-settable.
struct Limits {
  double memory_gb = 0;
  double timeout_seconds = 0;
  double cpus = 0;
  int processes = 0;
  bool operator==(const Limits&) const = default;
};

// Operator settings (SPEC section 3). Shipped values are the defaults here.
struct LimitSettings {
  Limits defaults{5, 600, 2, 256};
  Limits maxima{16, 3600, 4, 256};
  // Floors below which a request is absurd rather than merely small.
  double min_memory_gb = 0.125;
  double min_timeout_seconds = 0.1;
  double min_cpus = 0.1;
};

struct HostCapacity {
  int cores = 0;
  std::int64_t memory_bytes = 0;
};

// Bytes in the "GB" of memory_gb: GiB, so that 1 GB of memory is 2^30 bytes.
inline constexpr std::int64_t kBytesPerGb = std::int64_t{1} << 30;

class LimitPolicy {
 public:
  // Lowers any maximum above what the host has to the host's figure (cores; memory),
  // and any default above its maximum to the maximum. `adjustments` receives one
  // sentence per change, for the startup log.
  LimitPolicy(const LimitSettings& settings, const HostCapacity& host,
              std::vector<std::string>* adjustments = nullptr);

  // Resolves the `limits` argument of start_run: empty (null) means all defaults. Rejects
  // unknown keys (`processes` included), non-numbers, NaN, infinities, zero, negatives,
  // values below the floors and above the maxima, each with a message naming the key.
  Result<Limits> resolve(const Poco::Dynamic::Var& requested) const;

  const Limits& defaults() const { return defaults_; }
  const Limits& maxima() const { return maxima_; }
  const HostCapacity& host() const { return host_; }

 private:
  LimitSettings settings_;
  HostCapacity host_;
  Limits defaults_;
  Limits maxima_;
};

// Shortest decimal form: 32 -> "32", 0.25 -> "0.25".
std::string formatNumber(double value);

}  // namespace scs::policy
