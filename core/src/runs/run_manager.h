#pragma once

// The run manager as the tools see it: its settings, what a run, a session and the load look
// like at one moment, and RunManager (start, get, stop, sessions, shutdown).

#include <scs/backend/backend.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "egress/relay.h"
#include "launcher/output.h"
#include "launcher/side_channel.h"
#include "packages/package_layer_use.h"
#include "policy/files.h"
#include "policy/language.h"
#include "policy/limits.h"
#include "policy/posture.h"
#include "policy/status_map.h"
#include "result.h"
#include "runs/run_events.h"
#include "sandbox/labels.h"
#include "sessions/session_settings.h"

namespace scs::sessions {
struct Session;
struct SavedSession;
}  // namespace scs::sessions

namespace scs::runs {

// What RunManager::takeBack took back: how many sessions, and the uids whose sandboxes stay
// (theirs, and those of records kept for a later start); the others' sandboxes are leftovers.
struct TakenBack {
  std::size_t sessions = 0;
  std::set<std::uint32_t> uids;
};

// The tenant of every run on stdio and on HTTP without tokens: one client, one owner.
inline constexpr const char* kLocalTenant = "local";

struct RunSettings {
  // Egress by allow-list (issue 44): runs and sessions of a tenant the policy names get a
  // channel of their sandbox's (egress/relay.h). Null: no egress, no relay, no proxy variables.
  egress::EgressService* egress = nullptr;
  int max_concurrent = 4;
  // Queued runs: per tenant, and of all tenants together (where the tenant with the most
  // queued runs gives way, see tenant_share.h).
  std::size_t max_queue = 64;
  std::size_t max_queue_total = 256;
  // Finished reports are kept for `retention`, within budgets of count and of bytes (output
  // and returned files) per tenant and in total; ReportRetention says who forgets what.
  std::chrono::seconds retention{3600};
  std::size_t max_retained = 1000;
  std::size_t max_retained_bytes = std::size_t{256} << 20;
  std::size_t max_retained_per_tenant = 500;
  std::size_t max_retained_bytes_per_tenant = std::size_t{128} << 20;
  std::size_t output_cap_bytes = 1u << 20;  // per stream, head and tail kept
  // Characters of stdout and stderr together a report carries, markers included (head and
  // tail, the rest read with offsets: launcher::OutputCapture::snapshot); 0 for the whole capture.
  std::size_t output_window_chars = 30'000;
  std::int64_t host_memory_bytes = 0;  // admission: running memory limits must fit; 0 = off
  std::string instance_id;             // this server instance; random when empty
  // Host uids held by sandboxes the startup sweep left alive (another live instance's).
  std::vector<std::uint32_t> reserved_uids;
  launcher::OutFileCaps out_files;  // files returned from /workspace/out
  // Sandboxes kept created, posture-checked and started with the launcher idle on stdin, so
  // a run skips the engine's create and start. Each serves exactly one run whose limits
  // require the same posture as `prepared_limits` and a timeout no longer; other runs take
  // the normal path. They count against host_memory_bytes, are replaced after idling for
  // prepared_max_idle, and are removed at shutdown. `prepared` are kept ready at the least,
  // up to `prepared_max` when such runs arrive together (sandbox/prepared_pool.h, sandbox::Demand).
  // 0 turns preparation off.
  std::size_t prepared = 0;
  std::size_t prepared_max = 0;
  // Package sets (core/src/packages) whose layers get prepared sandboxes of their own, the
  // sets in most demand, while preparation is on (sandbox::PreparedPools).
  std::size_t prepared_package_sets = 2;
  policy::Limits prepared_limits;
  std::chrono::seconds prepared_max_idle{300};
  // Modules a prepared sandbox's interpreter imports while it waits (those the image lacks
  // are skipped), so a run that imports them finds them loaded. Python dotted names.
  std::vector<std::string> prepared_warm_modules;
  sessions::SessionSettings sessions;
};

using packages::PackageLayerUse;

// Where get() starts each stream's text (launcher::CapturedOutput::offset has the real start).
struct OutputOffsets {
  std::uint64_t stdout_from = 0;
  std::uint64_t stderr_from = 0;
};

// What get_result, start_run and stop_run report about a run at one moment.
struct RunSnapshot {
  std::string run_id;
  policy::RunStatus status = policy::RunStatus::kQueued;
  policy::Limits limits;
  std::optional<std::size_t> queue_position;  // 1-based, while queued
  // The output so far while running, all of it once final:
  launcher::CapturedOutput stdout_output;
  launcher::CapturedOutput stderr_output;
  // Set once final:
  std::optional<int> exit_code;
  std::optional<std::string> signal;
  std::string reason;
  double duration_seconds = 0;  // execution time, from start to end
  double queued_seconds = 0;
  std::chrono::system_clock::time_point submitted_at;  // when start_run asked for it
  std::optional<std::chrono::system_clock::time_point> started_at;
  std::optional<std::chrono::system_clock::time_point> finished_at;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<double> cpu_seconds;
  launcher::RunResults results;   // from the launcher's trailer: exception, files out
  bool prepared_sandbox = false;  // ran in a sandbox prepared ahead of it (not shown to clients)
  // A run in a session: its id, and whether the session is still open now.
  std::string session_id;
  bool session_alive = false;
  // The run woke its session from hibernation first: how long that took (part of its queue
  // time, not of its duration).
  std::optional<double> woke_seconds;
  std::optional<PackageLayerUse> packages;  // the run's (a session's run: its session's)
  // What the program reached through the relay, and what it was refused (egress only).
  egress::NetworkReport network;
};

struct OpenSessionRequest {
  std::string tenant = kLocalTenant;
  policy::Limits limits;            // resolved by LimitPolicy
  std::vector<policy::File> files;  // validated; written into /workspace before the first run
  policy::Language language = policy::Language::kPython;
  std::optional<PackageLayerUse> packages;  // its sandbox runs the layer's image
  std::shared_ptr<void> packages_hold;      // kept until its sandbox is removed
};

// A run's way into its session (RunManager::sessionForRun).
struct SessionTicket {
  std::shared_ptr<sessions::Session> session;
  policy::Language language = policy::Language::kPython;  // the session's
};

struct StartRequest {
  std::vector<policy::File> files;  // validated; the language's code file first
  // In a session, the session's (SessionTicket::language).
  policy::Language language = policy::Language::kPython;
  // Its sandbox runs the layer's image; never in a session (a session's are its own).
  std::optional<PackageLayerUse> packages;
  std::shared_ptr<void> packages_hold;    // kept until the run is final
  policy::Limits limits;                  // resolved by LimitPolicy
  std::string tenant = kLocalTenant;      // owns the run: only this tenant can see or stop it
  std::optional<std::string> stdin_data;  // the program's stdin; none: /dev/null
  // Run in this session (SessionTicket::session, whose rules sessionForRun checked): its
  // language, packages and limits but the timeout are the session's. Null: a fresh sandbox.
  std::shared_ptr<sessions::Session> session;
  // The audit's run on a server with egress: a relay even though its tenant may reach nothing,
  // so that the audit finds the relay as a tenant's programs would, every connection refused.
  bool egress_probe = false;
};

// How loaded the manager is at one moment (GET /metrics).
struct RunLoad {
  std::size_t queued = 0;
  std::size_t executing = 0;       // runs holding a slot
  std::size_t prepared_ready = 0;  // prepared sandboxes ready for a run
  // Where the server's memory goes: runs it knows of (reports included), the finished reports
  // it keeps and their bytes of output and files, the sessions it keeps a record of.
  std::size_t runs_known = 0;
  std::size_t reports_retained = 0;
  std::size_t report_bytes_retained = 0;
  std::size_t sessions_known = 0;
};

// Owns every run: the queue, the concurrency cap, deadlines, the registry of reports, and
// the order of backend calls for each run. Every run belongs to the tenant that started it;
// to any other tenant it does not exist. The queue is fair between tenants: a free slot goes
// to the tenant with the fewest running runs (the one served longest ago among equals), FIFO
// within a tenant, so no tenant can starve another. A run is reported final as soon as its
// outcome is known; its sandbox is removed right after, and stop() and shutdown() wait for
// that removal. Thread-safe.
class RunManager {
 public:
  // `events`, when given, must outlive the manager.
  RunManager(backend::RuntimeBackend& backend, const RunSettings& settings,
             const policy::SandboxSettings& sandbox, const common::Clock& clock,
             RunEvents* events = nullptr);
  ~RunManager();  // shutdown()

  RunManager(const RunManager&) = delete;
  RunManager& operator=(const RunManager&) = delete;

  // Queues the run, or starts it at once when a slot is free; refuses it when its tenant
  // already has max_queue runs waiting, or when max_queue_total runs wait and its tenant has
  // the most of them. When another tenant has more, that tenant's newest queued run is stopped
  // instead to make room. Never blocks on the backend.
  Result<RunSnapshot> start(StartRequest request);

  // The run's state now, or after waiting up to `wait` for it to finish. nullopt for an
  // unknown or expired id, and for a run of another tenant. The output (so far, while
  // running) starts at the offsets `from` (launcher::OutputCapture::snapshot).
  std::optional<RunSnapshot> get(const std::string& tenant, const std::string& run_id,
                                 std::chrono::milliseconds wait = std::chrono::milliseconds(0),
                                 const OutputOffsets& from = {});

  // Stops a queued or running run (status stopped) and waits until its sandbox is removed;
  // a finished run is reported unchanged, once its sandbox is removed. nullopt for an unknown or
  // expired id, and for a run of another tenant.
  std::optional<RunSnapshot> stop(const std::string& tenant, const std::string& run_id);

  // Opens a session: its sandbox is created, posture-checked and started before this returns.
  // Refused at the caps of open sessions, when the tenant's sessions would hold more than half
  // of the host's memory, when its memory does not fit beside the runs and sessions there are,
  // or when its sandbox fails to come up (the message says why). A
  // session's runs wait in its own queue, one at a time, and each takes a slot of the
  // concurrency cap while it executes; its memory counts against the host's until it is closed.
  Result<sessions::SessionSnapshot> openSession(OpenSessionRequest request);

  // Closes a session (idempotent): its queued runs are stopped, a run in progress is stopped
  // (its sandbox killed), and its sandbox is removed before this returns. nullopt for an
  // unknown id or a session of another tenant.
  std::optional<sessions::SessionSnapshot> closeSession(const std::string& tenant,
                                                        const std::string& session_id);

  // The session a run asked for in `session_id` of `tenant`'s goes to, once every rule of a run
  // in a session holds (sessions::SessionTable::forRun): for StartRequest::session, and its
  // language names the run's code file. The refusal is counted (events()).
  Result<SessionTicket> sessionForRun(const std::string& tenant, const std::string& session_id,
                                      const sessions::RunAsk& ask);

  // Sessions an earlier server kept (SessionSettings::store), taken back hibernated: their next
  // run wakes them. One its backend cannot take back is dropped, with its record, and logged
  // (kept for the next start when the engine was unavailable). Call once, before the first
  // request; their uids must be among RunSettings::reserved_uids.
  TakenBack takeBack(std::vector<sessions::SavedSession> sessions);

  // Stops every run, removes every sandbox (prepared ones and sessions' too), joins every
  // thread; with SessionSettings::store, the sessions without egress are hibernated and kept
  // instead (their runs in progress interrupted, as by stop_run; one that cannot be saved
  // ends). Idempotent. The sandboxes are removed at once, each on a thread of its own; with
  // `removals_within`, it waits for the engine to remove them only that long from its call
  // (SPEC §5: a server stops within 2 s), and what the engine has not removed by then is
  // logged and left, labelled, to the next server's startup sweep. Then the process should
  // exit without destroying the manager, whose destructor waits for every removal.
  void shutdown(std::optional<std::chrono::milliseconds> removals_within = std::nullopt);

  // Waits up to `timeout` until at least `count` prepared sandboxes are ready for runs; true
  // when they are.
  bool awaitPrepared(std::size_t count, std::chrono::milliseconds timeout);

  RunLoad load() const;

  // Whether the prepared pool works: it has made a sandbox since the start and its last
  // attempt did not fail (sandbox::PreparedPool::healthy), whether or not one is idle now.
  bool preparedHealthy() const;

  // The observer given at construction (or one that counts nothing): the tools report through
  // it the start_run calls they refuse before the manager sees them.
  RunEvents& events() const;

  const std::string& instanceId() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scs::runs
