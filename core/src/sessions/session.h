#pragma once

// One session's record: its limits, its sandbox's lease, its own queue of runs, its times and
// the sink its sandbox writes to, which hands each run's output to that run. Guarded by the run
// manager's mutex (run_manager_impl.h); the session table (session_table.h) holds the rules of its
// life, the run manager's sessions.cc and session_runs.cc act on its sandbox.

#include <scs/backend/backend.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "egress/relay.h"
#include "packages/package_layer_use.h"
#include "policy/files.h"
#include "policy/language.h"
#include "policy/limits.h"
#include "sandbox/prepared_pool.h"
#include "sandbox/sandbox_source.h"

namespace scs::sessions {

// The sink of a session's sandbox: what it writes goes to the capture of the run in progress,
// and is dropped between runs (output of processes a run left behind).
class SessionSink : public backend::OutputSink {
 public:
  void write(backend::Stream stream, std::string_view bytes) override;
  void ended() override;                   // forwarded to the bound capture, and remembered
  void bind(backend::OutputSink* target);  // null: between runs
  bool hasEnded() const;
  // Called, without this sink's lock, when the sandbox ends. Set before it is a sink.
  void setListener(std::function<void()> listener) { listener_ = std::move(listener); }

 private:
  mutable std::mutex mutex_;
  backend::OutputSink* target_ = nullptr;
  bool ended_ = false;
  std::function<void()> listener_;
};

struct Session {
  std::string id;
  std::string tenant;
  policy::Limits limits;
  policy::Language language = policy::Language::kPython;  // of every run in it
  std::int64_t memory_bytes = 0;    // counted against the host's memory until it is removed
  std::vector<policy::File> files;  // from open_session: go with its first run
  std::optional<packages::PackageLayerUse> packages;  // its sandbox runs their layer's image
  std::shared_ptr<void> packages_hold;  // keeps that image until the sandbox is removed
  std::string sandbox_id;               // once it is up
  bool open = true;                     // false once ended (closed, expired, its interpreter gone)
  // open_session is still bringing its sandbox up; once it is not, the sandbox runs (a session
  // whose sandbox failed to come up is forgotten).
  bool opening = false;
  // Hibernation (SessionSettings::hibernate): the maintenance thread snapshots an idle session's
  // sandbox (kHibernating, then kHibernated: it holds no memory); the run that is admitted next
  // marks it kWaking and resumes it before its code goes in (kAwake).
  enum class Rest { kAwake, kHibernating, kHibernated, kWaking };
  Rest rest = Rest::kAwake;
  common::SteadyTime awake_since;                      // opened, or last woken
  std::chrono::steady_clock::duration awake_before{};  // awake time before awake_since
  common::SteadyTime hibernated_at;                    // while kHibernated
  std::chrono::system_clock::time_point hibernated_wall;
  backend::Posture posture;  // what its sandbox was checked against when it came up
  // The server is shutting down and keeps it for the next (SessionSettings::store): its run in
  // progress is interrupted, not killed; once kept, its sandbox is left to the engine.
  bool kept = false;
  bool releasing = false;  // ended, and its sandbox is being removed
  bool removed = false;    // ended, and its sandbox is gone (or never was)
  std::string end_reason;
  std::string current;              // the run in the fair queue or executing, if any
  std::deque<std::string> waiting;  // its later runs, in order
  common::SteadyTime opened;
  common::SteadyTime last_active;  // opened, or its last run ended
  std::chrono::system_clock::time_point opened_wall;
  std::chrono::system_clock::time_point last_active_wall;
  std::optional<common::SteadyTime> ended;
  SessionSink sink;  // outlives the sandbox: the session record is dropped only after removal
  // A session of a tenant with egress: its sandbox's channel (streams outlive runs: a thread of
  // the code may hold a connection), and the sink in front of `sink` that takes its frames out.
  std::shared_ptr<egress::EgressChannel> egress;
  std::unique_ptr<egress::EgressSink> egress_sink;
  // The sink the session's sandbox writes to.
  backend::OutputSink* outerSink() {
    return egress_sink ? static_cast<backend::OutputSink*>(egress_sink.get()) : &sink;
  }
  // The prepared sandbox it took, if it began in one: its sink, which forwards to `sink`, is
  // the backend's and so outlives the sandbox too.
  sandbox::PreparedPtr prepared;
  // Its uid, taken when it was admitted, and its sandbox once up: released once it has ended and
  // no run executes in it (releaseSessionsLocked). Declared after both sinks, so that a lease
  // still held when the record goes removes the sandbox before they go.
  sandbox::SandboxLease lease;
  bool busy() const { return !current.empty() || !waiting.empty(); }
};

}  // namespace scs::sessions
