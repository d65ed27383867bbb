#pragma once

// Where every sandbox of the run manager comes from, written once for its three kinds (a run's,
// a prepared one, a session's): a uid taken from the sandbox range, the posture that uid and the
// limits require, the spec of its kind, the bring-up steps, and a lease that removes the sandbox
// and gives its uid back on every path out.

#include <scs/backend/backend.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "policy/limits.h"
#include "sandbox/bring_up.h"
#include "sandbox/removal_queue.h"
#include "sandbox/uid_pool.h"

namespace scs::sandbox {

// A uid of the sandbox range and, once one is made with it, that sandbox. Released or
// destroyed, it removes the sandbox (through the removal queue, which retries) and gives the
// uid back once the sandbox is gone, or at once when none was made: every path out frees both
// exactly once. Movable, not copyable; a moved-from or released lease holds nothing.
class SandboxLease {
 public:
  SandboxLease() = default;
  SandboxLease(RemovalQueue& removals, UidPool& uids, std::uint32_t uid, std::string whose)
      : removals_(&removals), uids_(&uids), uid_(uid), whose_(std::move(whose)) {}
  SandboxLease(SandboxLease&& other) noexcept { *this = std::move(other); }
  SandboxLease& operator=(SandboxLease&& other) noexcept;
  SandboxLease(const SandboxLease&) = delete;
  SandboxLease& operator=(const SandboxLease&) = delete;
  ~SandboxLease() { release(); }

  // The sandbox made with this lease's uid: it is removed with the lease.
  void bind(std::string sandbox_id) { sandbox_id_ = std::move(sandbox_id); }
  // The pool keeps a prepared sandbox as a record of its own, removed when it retires
  // (RunManager::Impl::removeRetiredLocked): this lease lets go of it without removing it.
  void handOver() { removals_ = nullptr; }
  // What the sandbox's output is written to, held until the sandbox is gone: its removal may
  // then run on a thread of its own at shutdown (RemovalQueue::close).
  void keepUntilRemoved(std::shared_ptr<const void> keep) { keep_ = std::move(keep); }
  // False when its removal goes on on a thread of its own (RemovalQueue::remove).
  bool release();

  bool holds() const { return removals_ != nullptr; }
  std::uint32_t uid() const { return uid_; }
  const std::string& sandboxId() const { return sandbox_id_; }

 private:
  RemovalQueue* removals_ = nullptr;
  UidPool* uids_ = nullptr;
  std::uint32_t uid_ = 0;
  std::string sandbox_id_;
  std::string whose_;
  std::shared_ptr<const void> keep_;
};

enum class SandboxKind {
  kRun,       // one run's: its code is delivered before it starts
  kPrepared,  // started idle for a run (or session) yet to come
  kSession,   // one interpreter for all of a session's runs
};

class SandboxSource {
 public:
  SandboxSource(SandboxBringUp& bring_up, UidPool& uids, RemovalQueue& removals,
                const policy::SandboxSettings& sandbox)
      : bring_up_(bring_up), uids_(uids), removals_(removals), sandbox_(sandbox) {}

  // A lease of a free uid of the range, named `whose` in the log; none when every uid is in use.
  std::optional<SandboxLease> takeUid(std::string whose);
  // A lease of a sandbox that exists already (a prepared one a run or session took).
  SandboxLease adopt(std::uint32_t uid, std::string sandbox_id, std::string whose);

  struct Brought {
    SandboxBringUp::Outcome outcome;
    backend::Posture posture;  // the posture it was checked against
  };
  // Brings up a sandbox of `kind` for `limits` in the uid of `lease`, labelled for `label_id`:
  // the required posture (with `image` for the operator's when not empty: a run's packages),
  // the kind's spec, then SandboxBringUp::bringUp with `steps`. The
  // sandbox is bound to `lease` as soon as it exists (before `steps.created` is called), so
  // whatever the outcome, releasing the lease removes what was made.
  Brought bringUp(SandboxKind kind, const std::string& label_id, const policy::Limits& limits,
                  const std::string& image, SandboxLease& lease, SandboxBringUp::Steps steps);

 private:
  SandboxBringUp& bring_up_;
  UidPool& uids_;
  RemovalQueue& removals_;
  const policy::SandboxSettings& sandbox_;
};

}  // namespace scs::sandbox
