#pragma once

// The labels every sandbox carries: who made it (instance, owner pid), for which run, and
// until when it may live. The startup sweep finds leftovers by the ABI's managed label.

#include <scs/backend/backend.h>

namespace scs::sandbox {

inline constexpr const char* kLabelManaged = backend::kManagedLabel;  // "true"
inline constexpr const char* kLabelInstance = "io.scs.instance";
inline constexpr const char* kLabelRunId = "io.scs.run-id";
inline constexpr const char* kLabelOwnerPid = "io.scs.owner-pid";
inline constexpr const char* kLabelDeadline = backend::kDeadlineLabel;  // unix seconds
inline constexpr const char* kLabelPrepared = "io.scs.prepared";  // "true": started ahead of need
inline constexpr const char* kLabelUid = "io.scs.uid";            // the host uid it runs as

}  // namespace scs::sandbox
