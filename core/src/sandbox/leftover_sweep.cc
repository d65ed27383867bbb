// sweepLeftovers: of the managed sandboxes other instances made, removes those whose owner
// process is gone (or owner label invalid) or whose deadline has passed; keeps the others' uids.

#include "sandbox/leftover_sweep.h"

#include <Poco/Logger.h>
#include <signal.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <optional>

#include "sandbox/labels.h"

namespace scs::sandbox {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("scs.runs"); }

std::optional<long long> labelNumber(const backend::SandboxInfo& sandbox, const char* key) {
  const auto found = sandbox.labels.find(key);
  if (found == sandbox.labels.end()) {
    return std::nullopt;
  }
  const std::string& text = found->second;
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

// Why the sandbox is a leftover to remove; empty when it is not.
std::string leftoverReason(const backend::SandboxInfo& sandbox, long long now_unix) {
  const long long owner = labelNumber(sandbox, kLabelOwnerPid).value_or(0);
  // A pid of 0 or below would make kill() address a process group, so it counts as invalid.
  if (owner <= 0 || owner > INT_MAX) {
    return "it has no valid owner-pid label";
  }
  if (::kill(static_cast<pid_t>(owner), 0) == -1 && errno == ESRCH) {
    return "its owner process " + std::to_string(owner) + " is gone";
  }
  const auto deadline = labelNumber(sandbox, kLabelDeadline);
  if (deadline && *deadline < now_unix) {
    return "its deadline has passed";
  }
  return {};
}

}  // namespace

SweepResult sweepLeftovers(backend::RuntimeBackend& backend, const std::string& instance_id,
                           std::chrono::system_clock::time_point now,
                           const std::set<std::uint32_t>& kept_session_uids) {
  SweepResult result;
  const backend::ListReply reply = backend.list(kLabelManaged);
  if (!reply.status.ok()) {
    logger().warning("could not list leftover sandboxes: " + reply.status.message);
    return result;
  }
  const long long now_unix =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  for (const backend::SandboxInfo& sandbox : reply.sandboxes) {
    const auto instance = sandbox.labels.find(kLabelInstance);
    if (instance != sandbox.labels.end() && instance->second == instance_id) {
      continue;
    }
    const auto uid = labelNumber(sandbox, kLabelUid);
    const bool kept = uid && *uid >= 0 && *uid <= UINT32_MAX &&
                      kept_session_uids.count(static_cast<std::uint32_t>(*uid)) != 0;
    std::string why;
    if (!kept) {
      why = leftoverReason(sandbox, now_unix);
    } else if (const auto deadline = labelNumber(sandbox, kLabelDeadline);
               deadline && *deadline < now_unix) {
      why = "its deadline has passed";  // a kept session past its age ends anyway
    }
    if (!why.empty()) {
      const backend::Status status = backend.remove(sandbox.id);
      if (status.ok()) {
        ++result.removed;
        logger().information("removed leftover sandbox " + sandbox.id + ": " + why);
        continue;
      }
      logger().warning("could not remove leftover sandbox " + sandbox.id + ": " + status.message);
    }
    if (uid && *uid >= 0 && *uid <= UINT32_MAX) {
      result.kept_uids.push_back(static_cast<std::uint32_t>(*uid));
    }
  }
  return result;
}

}  // namespace scs::sandbox
