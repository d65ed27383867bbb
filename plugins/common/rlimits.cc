// The rlimit table: a Posture's open files, processes, file size and core limits by their
// ulimit names, read out in a fixed order and set back by name.

#include "rlimits.h"

namespace scs::rlimits {

std::vector<Rlimit> of(const backend::Posture& posture) {
  std::vector<Rlimit> limits{{"nofile", posture.open_files_limit},
                             {"nproc", posture.processes_limit},
                             {"fsize", posture.file_size_limit_bytes}};
  if (posture.core_dumps_disabled) {
    limits.push_back({"core", 0});
  }
  return limits;
}

bool set(backend::Posture* posture, std::string_view name, std::int64_t value) {
  if (name == "nofile") {
    posture->open_files_limit = value;
  } else if (name == "nproc") {
    posture->processes_limit = value;
  } else if (name == "fsize") {
    posture->file_size_limit_bytes = value;
  } else if (name == "core") {
    posture->core_dumps_disabled = value == 0;
  } else {
    return false;
  }
  return true;
}

}  // namespace scs::rlimits
