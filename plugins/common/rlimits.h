#pragma once

// A Posture's resource limits by the names an engine's ulimits use (Docker's Ulimits, the
// launcher's --rlimits): one table, so that what a backend writes and what it reads back name the
// same fields.

#include <scs/backend/backend.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace scs::rlimits {

struct Rlimit {
  std::string name;  // nofile, nproc, fsize, core
  std::int64_t value = 0;
};

// The limits `posture` asks for, in this order: nofile, nproc, fsize, and core 0 when core dumps
// are off.
std::vector<Rlimit> of(const backend::Posture& posture);

// Sets the field of `posture` that `name` names to `value` (core: core dumps off when 0); false
// for a name it does not know.
bool set(backend::Posture* posture, std::string_view name, std::int64_t value);

}  // namespace scs::rlimits
