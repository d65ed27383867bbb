#pragma once

// Resolving a package set into a directory: pip, run by the server on the host, never in the
// sandbox. Wheels only (--only-binary :all:), so installing one runs none of its code; for the
// sandbox's interpreter and platform, not the host's; from the operator's wheelhouse
// (--no-index --find-links) and/or index (--index-url) alone, with pip's own configuration and
// environment ignored (--isolated).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "packages/requirements.h"
#include "result.h"

namespace scs::packages {

struct ResolverSettings {
  // argv before "install": the host's Python in isolated mode (no PYTHONPATH, no user site).
  std::vector<std::string> pip = {"/usr/bin/python3", "-I", "-m", "pip"};
  std::string wheelhouse;               // a directory of wheels; empty: none
  std::string index_url;                // a simple-API index the server reaches; empty: none
  std::string python_version = "3.11";  // the sandbox image's CPython, major.minor
  std::chrono::seconds timeout{300};
};

// The platform tags of a bookworm sandbox on this machine's architecture: linux_<arch>,
// manylinux_2_17 to manylinux_2_36 (glibc 2.36) and the legacy manylinux aliases.
std::vector<std::string> defaultPlatforms();

struct ResolvedPackage {
  std::string name;  // normalised
  std::string version;
  std::string sha256;  // of the wheel, as pip's report records it
  std::string wheel;   // its file name
};

// Lets another thread end the pip that resolveInto() runs (the server's shutdown). Thread-safe.
class PipControl {
 public:
  // Ends the pip that runs, if any; every later one is ended as soon as it starts.
  void stop();
  bool stopped() const;

  // resolveInto()'s side: a pip started and ended. begin() ends it at once after stop().
  void begin(long pid);
  void end();

 private:
  mutable std::mutex mutex_;
  std::optional<long> running_;
  bool stopped_ = false;
};

// pip's version line ("pip 23.0.1 from ... (python 3.11)"), or an Error when pip cannot run or
// runs under another Python than the sandbox's: pip judges dependencies' markers by its own
// interpreter, whatever --python-version says, so the two must be the same major.minor.
Result<std::string> checkPip(const ResolverSettings& settings, PipControl& control);

// Installs `requirements` and their dependencies into `target` (an empty directory) and returns
// what was installed; `work` is a directory for pip's report. An Error that names the package
// and pip's reason when the set cannot be had: a project the sources do not have, no wheel for
// the sandbox's platform, a conflict; or wheels that would unpack to more than `max_bytes`.
// With the default pip (`python3 -m pip`), pip runs under kBoundedPip: the sizes the wheels'
// zip directories declare are added up before any is unpacked (Python's zipfile never writes
// more of a member than it declares), and no file pip writes may pass `max_bytes`; a pip the
// settings replace runs as it is.
Result<std::vector<ResolvedPackage>> resolveInto(const std::vector<Requirement>& requirements,
                                                 const std::string& target, const std::string& work,
                                                 const ResolverSettings& settings,
                                                 std::uint64_t max_bytes, PipControl& control);

}  // namespace scs::packages
