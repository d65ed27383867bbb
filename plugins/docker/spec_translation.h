#pragma once

// SandboxSpec to the Engine API and back: the exact create body with every control explicit,
// and the posture read back from a container's inspect record, absent meaning weak.

#include <scs/backend/backend.h>

#include <cstdint>
#include <string>
#include <vector>

#include "json_access.h"

namespace scs::docker {

// What the engine told us about itself at startup (GET /info) that shapes a create body or
// the reading of a record.
struct EngineTraits {
  int cgroup_version = 1;
  // The engine applies a seccomp profile of its own to a container that names none.
  bool default_seccomp = false;
};

// Controls the posture does not carry: plugin constants that only ever strengthen.
inline constexpr std::int64_t kOomScoreAdj = 500;  // sandboxes die before the engine
inline constexpr std::int64_t kStopTimeoutSeconds = 1;

struct CreateBody {
  backend::Status status;  // kUnsupported when the spec asks for something never honoured
  json::ObjectPtr body;    // the exact POST /containers/create body when status is ok
};

// Translates `spec` field by field into the create body, every control explicit. A spec that
// asks for a weaker setting than this backend's constants (network, privileges, capabilities,
// no-new-privileges, seccomp, host namespaces/mounts/devices) or that leaves a limit unset
// (which the engine would read as "unlimited") fails with kUnsupported.
CreateBody createBody(const backend::SandboxSpec& spec, const EngineTraits& traits);

// "rw,noexec,nosuid,nodev,size=N,nr_inodes=M,mode=0700,uid=U,gid=G": every option explicit.
std::string tmpfsOptions(const backend::TmpfsMount& mount);

// Reads a HostConfig.Tmpfs entry back. An option that is absent reads as the weak value.
backend::TmpfsMount parseTmpfs(const std::string& path, const std::string& options);

// Reads the posture of a created container from its inspect record (GET
// /containers/{id}/json). Anything missing or malformed reads as the weak value.
backend::Posture postureFromRecord(const json::ObjectPtr& record, const EngineTraits& traits);

// The plugin constants the record does not honour, one sentence each; empty when all hold.
std::vector<std::string> constantDeviations(const json::ObjectPtr& record,
                                            const EngineTraits& traits);

}  // namespace scs::docker
