// SandboxBringUp: the spec of a run's, a prepared or a session's sandbox (command, labels,
// deadline), and its steps in order: posture on the spec, create, read-back, deliver, start.

#include "sandbox/bring_up.h"

#include <scs/backend/launcher_frames.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "sandbox/labels.h"

namespace scs::sandbox {
namespace {

constexpr long long kDeadlineLabelSlackSeconds = 60;

long long ceilSeconds(double seconds) { return static_cast<long long>(std::ceil(seconds)); }

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

}  // namespace

SandboxBringUp::SandboxBringUp(backend::RuntimeBackend& backend,
                               const policy::SandboxSettings& sandbox, std::string instance_id,
                               std::chrono::seconds prepared_max_idle,
                               std::chrono::seconds session_lifetime,
                               std::vector<std::string> warm_modules, const common::Clock& clock)
    : backend_(backend),
      sandbox_(sandbox),
      instance_id_(std::move(instance_id)),
      prepared_max_idle_(prepared_max_idle),
      session_lifetime_(session_lifetime),
      warm_modules_(std::move(warm_modules)),
      clock_(clock) {}

long long SandboxBringUp::watchdogSeconds(const policy::Limits& limits) const {
  return ceilSeconds(limits.timeout_seconds) + sandbox_.deadline_grace_seconds;
}

long long SandboxBringUp::sessionDeadlineSeconds() const {
  return static_cast<long long>(session_lifetime_.count()) + sandbox_.deadline_grace_seconds;
}

backend::SandboxSpec SandboxBringUp::sessionSpec(const std::string& label_id,
                                                 const policy::Limits& limits,
                                                 const backend::Posture& required) const {
  policy::Limits whole_life = limits;
  whole_life.timeout_seconds = static_cast<double>(session_lifetime_.count());
  backend::SandboxSpec session = spec(label_id, whole_life, required, false);
  session.command.emplace_back(backend::launcher::kFlagSession);
  session.posture.init_command = session.command;
  session.session = true;
  return session;
}

std::string SandboxBringUp::sessionFrame() const {
  return backend::launcher::sessionFrame(static_cast<std::uint64_t>(sessionDeadlineSeconds()));
}

backend::SandboxSpec SandboxBringUp::spec(const std::string& label_run_id,
                                          const policy::Limits& limits,
                                          const backend::Posture& required, bool prepared) const {
  const long long idle = prepared ? static_cast<long long>(prepared_max_idle_.count()) : 0;
  const long long watchdog_seconds = watchdogSeconds(limits) + idle;
  // Labels cannot change once the sandbox exists, so a prepared one's says when it would end
  // had it become a session's at the last moment its launcher could (its own deadline).
  const long long label_seconds =
      prepared ? watchdog_seconds + sessionDeadlineSeconds() : watchdog_seconds;
  const long long now_unix =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch()).count();
  const std::string threads = std::to_string(std::max(1LL, ceilSeconds(limits.cpus)));

  backend::SandboxSpec spec;
  spec.run_id = label_run_id;
  spec.labels = {
      {kLabelManaged, "true"},
      {kLabelInstance, instance_id_},
      {kLabelRunId, label_run_id},
      {kLabelOwnerPid, std::to_string(::getpid())},
      {kLabelDeadline, std::to_string(now_unix + label_seconds + kDeadlineLabelSlackSeconds)},
  };
  if (prepared) {
    spec.labels.emplace(kLabelPrepared, "true");
    spec.session = true;
  }
  // So that the next server's sweep knows the uid is taken while the sandbox lives on.
  spec.labels.emplace(kLabelUid, required.user.substr(0, required.user.find(':')));
  // The launcher is PID 1 and ends the sandbox at this deadline, should the server die first.
  spec.command = required.init_command;
  spec.command.insert(spec.command.end(), {std::string(backend::launcher::kFlagDeadline),
                                           std::to_string(watchdog_seconds)});
  if (prepared && !warm_modules_.empty()) {
    std::string list;
    for (const std::string& name : warm_modules_) {
      list += (list.empty() ? "" : ",") + name;
    }
    spec.command.insert(spec.command.end(), {std::string(backend::launcher::kFlagWarm), list});
  }
  spec.env = {
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "HOME=/tmp",
      "USER=sandbox",  // the uid has no /etc/passwd entry; getpass.getuser() reads these
      "LOGNAME=sandbox",
      "LANG=C.UTF-8",
      "PYTHONDONTWRITEBYTECODE=1",
      "PYTHONUNBUFFERED=1",
      "MPLBACKEND=Agg",
      "OMP_NUM_THREADS=" + threads,
      "OPENBLAS_NUM_THREADS=" + threads,
  };
  spec.working_dir = "/workspace";
  spec.hostname = "sandbox";
  spec.posture = required;
  spec.posture.init_command = spec.command;
  return spec;
}

SandboxBringUp::Outcome SandboxBringUp::bringUp(const backend::SandboxSpec& spec,
                                                const backend::Posture& required,
                                                const Steps& steps) {
  Outcome outcome;
  // True when the sequence ends here: the step failed, or a stop was asked for meanwhile.
  const auto halts = [&](std::string failure) {
    outcome.failure = std::move(failure);
    outcome.stopped = outcome.failure.empty() && steps.stopped && steps.stopped();
    return !outcome.started();
  };
  if (halts(checkSpec(spec, required))) {
    return outcome;
  }
  outcome.failure = create(spec, &outcome.sandbox_id);
  if (!outcome.failure.empty()) {
    return outcome;
  }
  if (steps.created) {
    steps.created(outcome.sandbox_id);
  }
  if (halts(checkReadBack(outcome.sandbox_id, required))) {
    return outcome;
  }
  if (steps.archive != nullptr && halts(deliver(outcome.sandbox_id, *steps.archive))) {
    return outcome;
  }
  outcome.failure = start(outcome.sandbox_id, steps.sink);
  return outcome;
}

// assertPosture(), and the sandbox's own uid within the operator's range.
std::vector<std::string> SandboxBringUp::violations(const backend::Posture& observed,
                                                    const backend::Posture& required) const {
  std::vector<std::string> found = policy::assertPosture(observed, required);
  for (std::string& problem : policy::checkSandboxUser(observed, sandbox_.uids)) {
    found.push_back(std::move(problem));
  }
  return found;
}

std::string SandboxBringUp::checkSpec(const backend::SandboxSpec& spec,
                                      const backend::Posture& required) const {
  const std::vector<std::string> violations = this->violations(spec.posture, required);
  return violations.empty() ? std::string()
                            : "the sandbox spec failed the posture check: " + joined(violations);
}

std::string SandboxBringUp::create(const backend::SandboxSpec& spec, std::string* sandbox_id) {
  const backend::CreateReply created = backend_.create(spec);
  if (!created.status.ok()) {
    return "create failed: " + created.status.message;
  }
  *sandbox_id = created.id;
  return {};
}

std::string SandboxBringUp::checkReadBack(const std::string& sandbox_id,
                                          const backend::Posture& required) {
  const backend::InspectReply inspected = backend_.inspect(sandbox_id);
  if (!inspected.status.ok()) {
    return "inspect failed: " + inspected.status.message;
  }
  const std::vector<std::string> violations = this->violations(inspected.posture, required);
  return violations.empty() ? std::string() : "posture check failed: " + joined(violations);
}

std::string SandboxBringUp::deliver(const std::string& sandbox_id, const std::string& archive) {
  const backend::Status delivered = backend_.deliver(sandbox_id, archive);
  return delivered.ok() ? std::string() : "delivery failed: " + delivered.message;
}

std::string SandboxBringUp::start(const std::string& sandbox_id, backend::OutputSink* sink) {
  const backend::Status started = backend_.start(sandbox_id, sink);
  return started.ok() ? std::string() : "start failed: " + started.message;
}

}  // namespace scs::sandbox
