#pragma once

#include <scs/backend/backend.h>

#include <string>
#include <vector>

#include "policy/limits.h"

namespace scs::policy {

// Operator settings that shape every sandbox. The model can choose none of them.
struct SandboxSettings {
  std::string image = "safe-code-sandbox:latest";
  std::string runtime = "runc";
  std::string user = "10001:10001";
  std::string seccomp_profile;  // profile JSON text; empty: the engine's default
  std::int64_t open_files = 1024;
  std::int64_t file_size_bytes = 256ll << 20;
  std::string launcher = "/opt/scs/launcher.py";
  std::string python = "/usr/bin/python3";
  int deadline_grace_seconds = 10;  // the in-sandbox watchdog fires this long after the timeout
};

// The masked and read-only paths every sandbox gets (the modern engine lists, which
// older engines' defaults lack).
const std::vector<std::string>& requiredMaskedPaths();
const std::vector<std::string>& requiredReadonlyPaths();

// The posture the core demands for a run with these limits.
backend::Posture requiredPosture(const Limits& limits, const SandboxSettings& settings);

// Checks `observed` against every control of SPEC section 4 and against `required`
// (limits, image, runtime, user). Returns one sentence per violation; empty means the
// posture holds. Called on the spec before create and on the engine's read-back before
// start; a backend cannot relax it.
std::vector<std::string> assertPosture(const backend::Posture& observed,
                                       const backend::Posture& required);

}  // namespace scs::policy
