// Where every sandbox of the run manager comes from: the uid lease, the posture, the spec of
// its kind and the bring-up, once for runs, prepared sandboxes and sessions.

#include "sandbox/sandbox_source.h"

#include <utility>

#include "policy/posture.h"

namespace scs::sandbox {

SandboxLease& SandboxLease::operator=(SandboxLease&& other) noexcept {
  if (this != &other) {
    release();
    removals_ = std::exchange(other.removals_, nullptr);
    uids_ = other.uids_;
    uid_ = other.uid_;
    sandbox_id_ = std::move(other.sandbox_id_);
    whose_ = std::move(other.whose_);
    keep_ = std::move(other.keep_);
  }
  return *this;
}

bool SandboxLease::release() {
  if (removals_ == nullptr) {
    return true;
  }
  RemovalQueue* removals = std::exchange(removals_, nullptr);
  if (sandbox_id_.empty()) {
    uids_->give(uid_);  // no sandbox was made with it
    keep_.reset();
    return true;
  }
  return removals->remove(
      {sandbox_id_, whose_, [uids = uids_, uid = uid_] { uids->give(uid); }, std::move(keep_)});
}

std::optional<SandboxLease> SandboxSource::takeUid(std::string whose) {
  const std::optional<std::uint32_t> uid = uids_.take();
  if (!uid) {
    return std::nullopt;
  }
  return SandboxLease(removals_, uids_, *uid, std::move(whose));
}

SandboxLease SandboxSource::adopt(std::uint32_t uid, std::string sandbox_id, std::string whose) {
  SandboxLease lease(removals_, uids_, uid, std::move(whose));
  lease.bind(std::move(sandbox_id));
  return lease;
}

SandboxSource::Brought SandboxSource::bringUp(SandboxKind kind, const std::string& label_id,
                                              const policy::Limits& limits,
                                              const std::string& image, SandboxLease& lease,
                                              SandboxBringUp::Steps steps) {
  Brought brought;
  brought.posture = policy::requiredPosture(limits, sandbox_, lease.uid(), image);
  backend::SandboxSpec spec =
      kind == SandboxKind::kSession
          ? bring_up_.sessionSpec(label_id, limits, brought.posture)
          : bring_up_.spec(label_id, limits, brought.posture, kind == SandboxKind::kPrepared);
  spec.session = spec.session || steps.stdin_open;
  steps.created = [&lease, created = std::move(steps.created)](const std::string& sandbox_id) {
    lease.bind(sandbox_id);
    if (created) {
      created(sandbox_id);
    }
  };
  brought.outcome = bring_up_.bringUp(spec, brought.posture, steps);
  return brought;
}

}  // namespace scs::sandbox
