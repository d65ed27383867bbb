#pragma once

// Where hibernated sessions outlive the server (--state-dir DIR): one record per session,
// DIR/sessions/<id>.json, mode 0600 in a directory of mode 0700, written whole (a temporary file
// renamed over it) when the session hibernates and removed when it wakes or ends. A later
// server with the same directory reads them at startup and takes the sessions back (their
// sandboxes stay with the engine, snapshotted). Records hold no secret: a session of a tenant
// with egress is never kept (its channel's nonce and its CA are one server's).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "packages/package_layer_use.h"
#include "policy/language.h"
#include "policy/limits.h"
#include "result.h"

namespace scs::sessions {

struct SavedSession {
  std::string id;
  std::string tenant;
  policy::Language language = policy::Language::kPython;
  policy::Limits limits;
  std::optional<packages::PackageLayerUse> packages;
  std::uint32_t uid = 0;
  std::string sandbox_id;
  std::string backend_saved;  // RuntimeBackend::saved()
  std::chrono::system_clock::time_point opened;
  std::chrono::system_clock::time_point last_active;
  std::chrono::system_clock::time_point hibernated;
  std::chrono::milliseconds awake{0};  // its lifetime counts only this
};

class SessionStore {
 public:
  // Creates DIR/sessions (mode 0700) when missing; an error when that cannot be done, when DIR
  // is not a directory this process owns that nobody else may write to, or when another server
  // uses it (an exclusive lock on DIR/lock, held while the store lives).
  static Result<SessionStore> open(const std::string& directory);

  // Writes (or replaces) the session's record; an Error says why it could not.
  Result<Done> write(const SavedSession& session) const;
  void remove(const std::string& session_id) const;

  // Every record found; `problems` gets one line for each file that is not a record (it is
  // removed, so that it is reported once), and for a record of another version (left alone).
  std::vector<SavedSession> load(std::vector<std::string>* problems) const;

  const std::string& directory() const { return directory_; }

 private:
  SessionStore(std::string directory, std::shared_ptr<void> lock)
      : directory_(std::move(directory)), lock_(std::move(lock)) {}
  std::string pathOf(const std::string& session_id) const;
  std::string directory_;       // DIR/sessions
  std::shared_ptr<void> lock_;  // DIR/lock, open and locked
};

}  // namespace scs::sessions
