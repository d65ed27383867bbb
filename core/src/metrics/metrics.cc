// Metrics: the Prometheus counters, gauges and histograms registered once, updated as runs come
// and go, and rendered in the text format with the run manager's load and the process's RSS.

#include "metrics/metrics.h"

#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace scs::metrics {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Seconds, from a prepared trivial run (about 20 ms) to the longest timeout.
const Histogram::BucketBoundaries kLatencyBuckets = {0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                                     5,     10,   30,  60,   120, 300, 600};
const Histogram::BucketBoundaries kQueueWaitBuckets = {0.001, 0.01, 0.1, 0.5, 1,
                                                       5,     10,   30,  60,  300};

// VmRSS of /proc/self/statm, in bytes; 0 where it cannot be read.
std::int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0;
  std::int64_t resident = 0;
  if (!(statm >> size >> resident)) {
    return 0;
  }
  return resident * ::sysconf(_SC_PAGESIZE);
}

}  // namespace

std::string_view codeName(backend::Code code) {
  switch (code) {
    case backend::Code::kOk:
      return "ok";
    case backend::Code::kNotFound:
      return "not_found";
    case backend::Code::kUnavailable:
      return "unavailable";
    case backend::Code::kTimeout:
      return "timeout";
    case backend::Code::kRejected:
      return "rejected";
    case backend::Code::kUnsupported:
      return "unsupported";
    case backend::Code::kInternal:
      return "internal";
  }
  return "internal";
}

Metrics::Metrics(const std::string& version, const std::string& backend)
    : registry_(std::make_shared<prometheus::Registry>()),
      started_(BuildCounter()
                   .Name("scs_runs_started_total")
                   .Help("Runs accepted by start_run (queued or started at once), by tenant.")
                   .Register(*registry_)),
      refused_(BuildCounter()
                   .Name("scs_runs_refused_total")
                   .Help("start_run calls refused before a run existed, by tenant and reason: "
                         "invalid, limits, queue_full, shutting_down.")
                   .Register(*registry_)),
      finished_(BuildCounter()
                    .Name("scs_runs_finished_total")
                    .Help("Runs reported final, by tenant and status.")
                    .Register(*registry_)),
      prepared_takes_(BuildCounter()
                          .Name("scs_prepared_pool_takes_total")
                          .Help("Admitted runs a prepared sandbox could serve, by result: hit "
                                "(one was ready) or miss (the run made its own).")
                          .Register(*registry_)),
      egress_connections_(BuildCounter()
                              .Name("scs_egress_connections_total")
                              .Help("Connections programs made through the egress relay that "
                                    "reached their host, by tenant.")
                              .Register(*registry_)),
      egress_bytes_(BuildCounter()
                        .Name("scs_egress_bytes_total")
                        .Help("Bytes carried by the egress relay, by tenant and direction (sent: "
                              "from the program; received: to it).")
                        .Register(*registry_)),
      egress_refusals_(BuildCounter()
                           .Name("scs_egress_refusals_total")
                           .Help("Egress connections refused or cut, by tenant and reason.")
                           .Register(*registry_)),
      engine_errors_(BuildCounter()
                         .Name("scs_engine_errors_total")
                         .Help("Backend calls that did not answer ok, by call and code.")
                         .Register(*registry_)),
      swept_(BuildCounter()
                 .Name("scs_sweep_removed_total")
                 .Help("Sandboxes of earlier server instances removed by the startup sweep.")
                 .Register(*registry_)
                 .Add({})),
      queued_(BuildGauge()
                  .Name("scs_runs_queued")
                  .Help("Runs waiting for a slot.")
                  .Register(*registry_)
                  .Add({})),
      executing_(BuildGauge()
                     .Name("scs_runs_executing")
                     .Help("Runs holding a slot: bringing their sandbox up, or executing.")
                     .Register(*registry_)
                     .Add({})),
      prepared_ready_(BuildGauge()
                          .Name("scs_prepared_sandboxes_ready")
                          .Help("Prepared sandboxes ready to take a run.")
                          .Register(*registry_)
                          .Add({})),
      runs_known_(BuildGauge()
                      .Name("scs_runs_known")
                      .Help("Runs the server holds a record of: queued, running, and reported "
                            "within their retention.")
                      .Register(*registry_)
                      .Add({})),
      reports_retained_(BuildGauge()
                            .Name("scs_reports_retained")
                            .Help("Finished reports kept for get_result, within the "
                                  "--max-retained budgets.")
                            .Register(*registry_)
                            .Add({})),
      report_bytes_retained_(BuildGauge()
                                 .Name("scs_report_bytes_retained")
                                 .Help("Bytes of output and files those reports hold, within "
                                       "the --max-retained-bytes budgets.")
                                 .Register(*registry_)
                                 .Add({})),
      sessions_known_(BuildGauge()
                          .Name("scs_sessions_known")
                          .Help("Sessions the server holds a record of, open or ended "
                                "within their retention.")
                          .Register(*registry_)
                          .Add({})),
      resident_bytes_(BuildGauge()
                          .Name("scs_process_resident_bytes")
                          .Help("The server process's resident memory.")
                          .Register(*registry_)
                          .Add({})),
      latency_(BuildHistogram()
                   .Name("scs_run_latency_seconds")
                   .Help("From start_run accepting a run to its final report.")
                   .Register(*registry_)
                   .Add({}, kLatencyBuckets)),
      queue_wait_(BuildHistogram()
                      .Name("scs_run_queue_wait_seconds")
                      .Help("Time a run waited in the queue for a slot.")
                      .Register(*registry_)
                      .Add({}, kQueueWaitBuckets)) {
  BuildGauge()
      .Name("scs_build_info")
      .Help("Always 1; the labels say which server and backend answer.")
      .Register(*registry_)
      .Add({{"version", version}, {"backend", backend}})
      .Set(1);
}

void Metrics::refused(const std::string& tenant, Refusal why) {
  refused_.Add({{"tenant", tenant}, {"reason", std::string(admission::refusalName(why))}}).Increment();
}

void Metrics::accepted(const std::string& tenant) {
  started_.Add({{"tenant", tenant}}).Increment();
}

void Metrics::finished(const std::string& tenant, policy::RunStatus status,
                       std::optional<double> latency_seconds,
                       std::optional<double> queued_seconds) {
  finished_.Add({{"tenant", tenant}, {"status", std::string(policy::statusName(status))}})
      .Increment();
  if (latency_seconds) {
    latency_.Observe(*latency_seconds);
  }
  if (queued_seconds) {
    queue_wait_.Observe(*queued_seconds);
  }
}

void Metrics::knowTenants(const std::vector<std::string>& tenants) {
  using policy::RunStatus;
  for (const std::string& tenant : tenants) {
    started_.Add({{"tenant", tenant}});
    for (const RunStatus status :
         {RunStatus::kSucceeded, RunStatus::kFailed, RunStatus::kTimedOut, RunStatus::kOutOfMemory,
          RunStatus::kStopped, RunStatus::kSandboxError}) {
      finished_.Add({{"tenant", tenant}, {"status", std::string(policy::statusName(status))}});
    }
    for (const Refusal why :
         {Refusal::kInvalid, Refusal::kLimits, Refusal::kQueueFull, Refusal::kShuttingDown}) {
      refused_.Add({{"tenant", tenant}, {"reason", std::string(admission::refusalName(why))}});
    }
  }
}

void Metrics::preparedTaken(bool hit) {
  prepared_takes_.Add({{"result", hit ? "hit" : "miss"}}).Increment();
}

void Metrics::streamEnded(const std::string& tenant, std::uint64_t bytes_up,
                          std::uint64_t bytes_down) {
  egress_connections_.Add({{"tenant", tenant}}).Increment();
  egress_bytes_.Add({{"tenant", tenant}, {"direction", "sent"}})
      .Increment(static_cast<double>(bytes_up));
  egress_bytes_.Add({{"tenant", tenant}, {"direction", "received"}})
      .Increment(static_cast<double>(bytes_down));
}

void Metrics::streamRefused(const std::string& tenant, std::string_view reason) {
  egress_refusals_.Add({{"tenant", tenant}, {"reason", std::string(reason)}}).Increment();
}

void Metrics::engineFailed(std::string_view call, backend::Code code) {
  engine_errors_.Add({{"call", std::string(call)}, {"code", std::string(codeName(code))}})
      .Increment();
}

void Metrics::swept(std::size_t count) { swept_.Increment(static_cast<double>(count)); }

std::string Metrics::render(const runs::RunLoad& load) {
  queued_.Set(static_cast<double>(load.queued));
  executing_.Set(static_cast<double>(load.executing));
  prepared_ready_.Set(static_cast<double>(load.prepared_ready));
  runs_known_.Set(static_cast<double>(load.runs_known));
  reports_retained_.Set(static_cast<double>(load.reports_retained));
  report_bytes_retained_.Set(static_cast<double>(load.report_bytes_retained));
  sessions_known_.Set(static_cast<double>(load.sessions_known));
  resident_bytes_.Set(static_cast<double>(residentBytes()));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace scs::metrics
