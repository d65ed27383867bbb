#pragma once

// What the run manager's callers see of sessions: the settings of their life, and what
// open_session and close_session report of one. The record itself is session.h's.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "packages/package_layer_use.h"
#include "policy/language.h"
#include "policy/limits.h"

namespace scs::sessions {

class SessionStore;

struct SessionSettings {
  std::chrono::seconds idle{600};           // closed after this long without a run
  std::chrono::seconds max_lifetime{3600};  // closed once awake this long, busy or not
  // Whether the backend snapshots sessions' sandboxes (RuntimeBackend::snapshots): an idle
  // session is then hibernated instead of closed, and its next run wakes it. Time hibernated
  // does not count towards max_lifetime.
  bool hibernate = false;
  std::chrono::seconds hibernated_max{86400};  // a session hibernated this long is closed
  // --state-dir (with hibernate): a hibernated session's record is kept here while it sleeps,
  // and shutdown() hibernates every open session without egress instead of closing it, for the
  // next server to take back (RunManager::takeBack). Null: sessions end with the server.
  const SessionStore* store = nullptr;
  std::size_t max_open = 16;  // all tenants together
  std::size_t max_open_per_tenant = 4;
};

// What open_session and close_session report about a session.
struct SessionSnapshot {
  std::string session_id;
  policy::Language language = policy::Language::kPython;  // of every run in it
  policy::Limits limits;  // memory, cpus and processes; timeout_seconds: its runs' default
  bool open = false;
  std::string end_reason;  // why it ended, once it has
  std::chrono::system_clock::time_point opened_at;
  std::chrono::system_clock::time_point idle_expires_at;  // when it closes without a run
  std::chrono::system_clock::time_point expires_at;       // when it closes at the latest
  // Hibernation (SessionSettings::hibernate): when it hibernates without a run while awake,
  // and whether it is hibernated now (its next run wakes it).
  std::optional<std::chrono::system_clock::time_point> hibernates_at;
  bool hibernated = false;
  std::optional<packages::PackageLayerUse> packages;
};

// What a start_run in a session asks, before anything is made for the run.
struct RunAsk {
  std::optional<policy::Language> language;  // named by the call; none: the session's
  bool sets_memory_or_cpus = false;          // its limits name memory_gb or cpus
  bool has_stdin = false;
  bool has_packages = false;
};

}  // namespace scs::sessions
