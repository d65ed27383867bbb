#pragma once

// The server's metrics for GET /metrics: what runs did (started, refused, finished by status),
// how loaded the server is (queue, executing runs, prepared sandboxes), how long runs took and
// waited, what the engine failed, what the startup sweep removed. prometheus-cpp's core keeps
// the counters and writes the text exposition format; its HTTP server is not used (the
// endpoint is metrics_endpoint.h, on Poco like the MCP transport).
//
// Label values are bounded by construction: tenants are the names of the token file (or
// "local"), statuses, refusal reasons, backend calls and codes come from fixed tables. No run
// id, code or output ever becomes a label.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <scs/backend/backend.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "egress/relay.h"
#include "runs/run_events.h"
#include "runs/run_manager.h"

namespace scs::metrics {

// "ok", "not_found", "unavailable", "timeout", "rejected", "unsupported", "internal".
std::string_view codeName(backend::Code code);

// Thread-safe; every counting call is short and never blocks on I/O.
class Metrics final : public runs::RunEvents, public egress::EgressEvents {
 public:
  // `version` and `backend` label scs_build_info.
  Metrics(const std::string& version, const std::string& backend);

  void refused(const std::string& tenant, Refusal why) override;
  void accepted(const std::string& tenant) override;
  void finished(const std::string& tenant, policy::RunStatus status,
                std::optional<double> latency_seconds,
                std::optional<double> queued_seconds) override;

  // Makes every tenant's series exist at 0 before its first event, so that rate() sees the
  // first one: runs started, and finished and refused with each status and reason.
  void knowTenants(const std::vector<std::string>& tenants);
  void preparedTaken(bool hit) override;
  // Egress (issue 44): connections carried and their bytes, and refusals by reason.
  void streamEnded(const std::string& tenant, std::uint64_t bytes_up,
                   std::uint64_t bytes_down) override;
  void streamRefused(const std::string& tenant, std::string_view reason) override;

  // A backend call (its method name) answered `code`, other than kOk.
  void engineFailed(std::string_view call, backend::Code code);
  // The startup sweep removed `count` sandboxes of earlier instances.
  void swept(std::size_t count);

  // Every metric in the text exposition format (version 0.0.4), the gauges set from `load`.
  std::string render(const runs::RunLoad& load);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Counter>& refused_;
  prometheus::Family<prometheus::Counter>& finished_;
  prometheus::Family<prometheus::Counter>& prepared_takes_;
  prometheus::Family<prometheus::Counter>& egress_connections_;
  prometheus::Family<prometheus::Counter>& egress_bytes_;
  prometheus::Family<prometheus::Counter>& egress_refusals_;
  prometheus::Family<prometheus::Counter>& engine_errors_;
  prometheus::Counter& swept_;
  prometheus::Gauge& queued_;
  prometheus::Gauge& executing_;
  prometheus::Gauge& prepared_ready_;
  prometheus::Gauge& runs_known_;
  prometheus::Gauge& reports_retained_;
  prometheus::Gauge& report_bytes_retained_;
  prometheus::Gauge& sessions_known_;
  prometheus::Gauge& resident_bytes_;
  prometheus::Histogram& latency_;
  prometheus::Histogram& queue_wait_;
};

}  // namespace scs::metrics
