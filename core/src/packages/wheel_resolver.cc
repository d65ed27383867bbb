// pip as the resolver: Debian's python3-pip has PEP 440 versions, markers, the platform tags and
// a backtracking resolver that we would otherwise write again; its --report (JSON) says what it
// installed and each wheel's hash.

#include "packages/wheel_resolver.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Pipe.h>
#include <Poco/PipeStream.h>
#include <Poco/Process.h>
#include <Poco/URI.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

namespace scs::packages {
namespace {

using Poco::JSON::Object;

constexpr int kNewestGlibcMinor = 36;  // bookworm's glibc 2.36
constexpr int kOldestManylinuxMinor = 17;
constexpr std::size_t kMaxReasonBytes = 1500;

// pip, bounded (issue 45), run as `python3 -I -c THIS MAX_BYTES pip-arguments...`: each wheel's
// declared size is counted when pip first opens it (to read its metadata, before it unpacks
// anything), the newest candidate of each project only; past MAX_BYTES it says so on stderr and
// exits 3 before a byte is unpacked. No file it writes may pass MAX_BYTES (or 1 MiB, for pip's
// own files) either: a download from an index too large for the layer fails with EFBIG.
constexpr std::string_view kBoundedPip = R"py(
import os, resource, runpy, signal, sys, zipfile
cap = int(sys.argv.pop(1))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (max(cap, 1 << 20),) * 2)
declared = {}
class BoundedZipFile(zipfile.ZipFile):
    def __init__(self, file, mode="r", *args, **kwargs):
        super().__init__(file, mode, *args, **kwargs)
        name = os.path.basename(self.filename) if isinstance(self.filename, str) else ""
        if mode == "r" and name.endswith(".whl"):
            declared[name.split("-")[0].lower()] = sum(m.file_size for m in self.infolist())
            total = sum(declared.values())
            if total > cap:
                sys.stderr.write(f"\nSCS-UNPACK-CAP {name} {total}\n")
                sys.stderr.flush()
                os._exit(3)
zipfile.ZipFile = BoundedZipFile
sys.argv[0] = "pip"
runpy.run_module("pip", run_name="__main__", alter_sys=True)
)py";
constexpr std::string_view kUnpackCapMarker = "\nSCS-UNPACK-CAP ";

// The pip command with kBoundedPip in place of `-m pip`; another pip as it is.
std::vector<std::string> boundedPip(const std::vector<std::string>& pip, std::uint64_t max_bytes) {
  if (pip.size() < 2 || pip[pip.size() - 2] != "-m" || pip.back() != "pip") {
    return pip;
  }
  std::vector<std::string> argv(pip.begin(), pip.end() - 2);
  argv.insert(argv.end(), {"-c", std::string(kBoundedPip), std::to_string(max_bytes)});
  return argv;
}

// "WHEEL BYTES" of kBoundedPip's refusal in pip's output, or nullopt.
std::optional<std::pair<std::string, std::string>> unpackCapOf(const std::string& output) {
  const std::size_t at = output.find(kUnpackCapMarker);
  if (at == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream line(output.substr(at + kUnpackCapMarker.size(), 512));
  std::string wheel;
  std::string bytes;
  line >> wheel >> bytes;
  return std::pair{wheel, bytes};
}

struct PipRun {
  int exit_code = -1;
  bool timed_out = false;
  bool stopped = false;  // by PipControl::stop()
  std::string output;    // stdout and stderr together
};

PipRun runPip(const std::vector<std::string>& argv, const std::string& directory,
              std::chrono::seconds timeout, PipControl& control) {
  PipRun run;
  Poco::Pipe out;
  Poco::Process::Args args(argv.begin() + 1, argv.end());
  Poco::ProcessHandle handle =
      Poco::Process::launch(argv.front(), args, directory, nullptr, &out, &out);
  control.begin(handle.id());
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!done_cv.wait_for(lock, timeout, [&] { return done; })) {
      run.timed_out = true;
      Poco::Process::kill(handle);
    }
  });
  // Whatever happens below, the watchdog and PipControl let go of the pid before it is reaped,
  // so that neither can kill a process that took the number since.
  const auto let_go = [&] {
    control.end();
    {
      std::lock_guard lock(mutex);
      done = true;
    }
    done_cv.notify_all();
    if (watchdog.joinable()) {
      watchdog.join();
    }
  };
  try {
    Poco::PipeInputStream stream(out);
    std::ostringstream collected;
    collected << stream.rdbuf();
    run.output = collected.str();
    siginfo_t ended{};
    while (::waitid(P_PID, static_cast<id_t>(handle.id()), &ended, WEXITED | WNOWAIT) != 0 &&
           errno == EINTR) {
    }
  } catch (...) {
    let_go();
    Poco::Process::kill(handle);  // not reaped yet: still this pip
    handle.wait();
    throw;
  }
  let_go();
  run.exit_code = handle.wait();
  run.stopped = control.stopped();
  return run;
}

// pip's reason, from its ERROR lines and what follows "The conflict is caused by:".
std::string pipReason(const std::string& output) {
  std::istringstream lines(output);
  std::string reason;
  bool conflict = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ERROR: ", 0) == 0) {
      line.erase(0, 7);
      conflict = false;
    } else if (line.find("The conflict is caused by:") != std::string::npos) {
      conflict = true;
    } else if (!conflict || line.find_first_not_of(' ') == std::string::npos ||
               line.rfind("To fix this", 0) == 0) {
      conflict = false;
      continue;
    }
    const std::size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos) {
      continue;
    }
    reason += (reason.empty() ? "" : " ") + line.substr(start);
  }
  if (reason.size() > kMaxReasonBytes) {
    reason = reason.substr(0, kMaxReasonBytes) + "...";
  }
  return reason.empty() ? "pip failed without saying why" : reason;
}

// "name" of each "No matching distribution found for name..." in pip's output.
std::vector<std::string> missingProjects(const std::string& output) {
  std::vector<std::string> names;
  const std::string marker = "No matching distribution found for ";
  for (std::size_t at = output.find(marker); at != std::string::npos;
       at = output.find(marker, at + 1)) {
    const std::size_t start = at + marker.size();
    std::size_t end = start;
    while (end < output.size() &&
           (std::isalnum(static_cast<unsigned char>(output[end])) != 0 || output[end] == '-' ||
            output[end] == '_' || output[end] == '.')) {
      ++end;
    }
    names.push_back(normalizedName(output.substr(start, end - start)));
  }
  return names;
}

// The wheelhouse's files of project `name` (the first field of a wheel's file name).
std::vector<std::string> wheelsOf(const std::string& wheelhouse, const std::string& name) {
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(wheelhouse, error)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > 4 && file.compare(file.size() - 4, 4, ".whl") == 0 &&
        normalizedName(file.substr(0, file.find('-'))) == name) {
      found.push_back(file);
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string failure(const PipRun& run, const ResolverSettings& settings) {
  if (run.stopped) {
    return "The server is shutting down; nothing was installed.";
  }
  if (run.timed_out) {
    return "Resolving the packages took longer than " + std::to_string(settings.timeout.count()) +
           " seconds, the server's limit; nothing was installed.";
  }
  std::string message = "The packages cannot be installed: " + pipReason(run.output);
  if (!settings.wheelhouse.empty()) {
    for (const std::string& name : missingProjects(run.output)) {
      const std::vector<std::string> wheels = wheelsOf(settings.wheelhouse, name);
      if (!wheels.empty()) {
        message += " The wheelhouse has " + name + " only as " + wheels.front() +
                   (wheels.size() > 1 ? " and " + std::to_string(wheels.size() - 1) + " more"
                                      : std::string()) +
                   ": none for the sandbox (CPython " + settings.python_version + ", " +
                   defaultPlatforms().front() + " or manylinux), or not of the versions asked for.";
      }
    }
  }
  return message;
}

std::string sha256Of(const Object::Ptr& item) {
  const Object::Ptr info = item->getObject("download_info");
  const Object::Ptr archive = info ? info->getObject("archive_info") : nullptr;
  if (!archive) {
    return {};
  }
  if (const Object::Ptr hashes = archive->getObject("hashes"); hashes && hashes->has("sha256")) {
    return hashes->getValue<std::string>("sha256");
  }
  const std::string hash = archive->optValue<std::string>("hash", "");
  return hash.rfind("sha256=", 0) == 0 ? hash.substr(7) : std::string();
}

}  // namespace

void PipControl::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  if (running_) {
    Poco::Process::kill(static_cast<Poco::Process::PID>(*running_));
  }
}

bool PipControl::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

void PipControl::begin(long pid) {
  std::lock_guard lock(mutex_);
  running_ = pid;
  if (stopped_) {
    Poco::Process::kill(static_cast<Poco::Process::PID>(pid));
  }
}

void PipControl::end() {
  std::lock_guard lock(mutex_);
  running_.reset();
}

Result<std::string> checkPip(const ResolverSettings& settings, PipControl& control) {
  std::vector<std::string> argv = settings.pip;
  argv.emplace_back("--version");
  PipRun run;
  try {
    run = runPip(argv, std::filesystem::temp_directory_path().string(), std::chrono::seconds(60),
                 control);
  } catch (const std::exception& e) {
    return invalid("packages need pip on this host (Debian's python3-pip); " +
                   settings.pip.front() + " cannot run: " + e.what());
  }
  const std::string line = run.output.substr(0, run.output.find('\n'));
  if (run.exit_code != 0 || line.rfind("pip ", 0) != 0) {
    return invalid("packages need pip on this host (apt-get install python3-pip): `" +
                   settings.pip.front() + " -m pip --version` said: " + line);
  }
  const std::size_t python = line.rfind("(python ");
  const std::string version = python == std::string::npos
                                  ? ""
                                  : line.substr(python + 8, line.find(')', python) - python - 8);
  if (version != settings.python_version) {
    return invalid("packages need pip under Python " + settings.python_version +
                   ", the sandbox's, to judge dependencies for it; this host's pip runs under " +
                   (version.empty() ? "an unknown Python" : "Python " + version) + ": " + line);
  }
  return line;
}

std::vector<std::string> defaultPlatforms() {
  utsname name{};
  uname(&name);
  const std::string arch = name.machine;
  std::vector<std::string> tags = {"linux_" + arch};
  for (int minor = kNewestGlibcMinor; minor >= kOldestManylinuxMinor; --minor) {
    tags.push_back("manylinux_2_" + std::to_string(minor) + "_" + arch);
  }
  tags.push_back("manylinux2014_" + arch);
  if (arch == "x86_64" || arch == "i686") {
    tags.push_back("manylinux2010_" + arch);
    tags.push_back("manylinux1_" + arch);
  }
  return tags;
}

Result<std::vector<ResolvedPackage>> resolveInto(const std::vector<Requirement>& requirements,
                                                 const std::string& target, const std::string& work,
                                                 const ResolverSettings& settings,
                                                 std::uint64_t max_bytes, PipControl& control) {
  const std::string report = work + "/report.json";
  std::vector<std::string> argv = boundedPip(settings.pip, max_bytes);
  for (const char* flag : {"install", "--isolated", "--disable-pip-version-check", "--no-input",
                           "--no-cache-dir", "--root-user-action", "ignore", "--progress-bar",
                           "off", "--only-binary", ":all:", "--implementation", "cp"}) {
    argv.emplace_back(flag);
  }
  std::string abi = "cp" + settings.python_version;
  abi.erase(std::remove(abi.begin(), abi.end(), '.'), abi.end());
  argv.insert(argv.end(), {"--python-version", settings.python_version, "--abi", abi, "--target",
                           target, "--report", report});
  for (const std::string& platform : defaultPlatforms()) {
    argv.insert(argv.end(), {"--platform", platform});
  }
  if (settings.index_url.empty()) {
    argv.emplace_back("--no-index");
  } else {
    argv.insert(argv.end(), {"--index-url", settings.index_url});
    // pip ignores a plain-HTTP index on any host but this one unless it is trusted; the
    // operator who named it has chosen to (docs/PACKAGES.md says what that trusts).
    if (const Poco::URI uri(settings.index_url); uri.getScheme() == "http") {
      argv.insert(argv.end(), {"--trusted-host", uri.getHost()});
    }
  }
  if (!settings.wheelhouse.empty()) {
    argv.insert(argv.end(), {"--find-links", settings.wheelhouse});
  }
  argv.emplace_back("--");
  for (const Requirement& requirement : requirements) {
    argv.push_back(requirement.text);
  }

  PipRun run;
  try {
    run = runPip(argv, work, settings.timeout, control);
  } catch (const std::exception& e) {
    return internal("The server cannot run pip (" + settings.pip.front() + "): " + e.what());
  }
  if (run.stopped) {
    return refused(failure(run, settings));
  }
  if (const auto cap = unpackCapOf(run.output); cap && run.exit_code == 3) {
    return invalid("The packages would unpack to " + cap->second +
                   " bytes (as their wheels declare, " + cap->first +
                   " and those before it), more than the " + std::to_string(max_bytes) +
                   " bytes this server's operator allows for a package set; nothing was "
                   "unpacked.");
  }
  if (run.exit_code != 0 && run.output.find("[Errno 27] File too large") != std::string::npos) {
    return invalid(
        "The packages cannot be installed: a file pip wrote (a wheel it downloaded, "
        "or one it unpacked) passed the " +
        std::to_string(std::max<std::uint64_t>(max_bytes, 1 << 20)) +
        " bytes this server's operator allows for a package set; nothing was kept.");
  }
  if (run.exit_code != 0 || run.timed_out) {
    return invalid(failure(run, settings));
  }

  std::ifstream in(report);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<ResolvedPackage> resolved;
  try {
    Poco::JSON::Parser parser;
    const Object::Ptr parsed = parser.parse(text.str()).extract<Object::Ptr>();
    const Poco::JSON::Array::Ptr installed = parsed->getArray("install");
    for (std::size_t i = 0; installed && i < installed->size(); ++i) {
      const Object::Ptr item = installed->getObject(static_cast<unsigned>(i));
      const Object::Ptr metadata = item->getObject("metadata");
      const Object::Ptr info = item->getObject("download_info");
      ResolvedPackage package;
      package.name = normalizedName(metadata->getValue<std::string>("name"));
      package.version = metadata->getValue<std::string>("version");
      package.sha256 = sha256Of(item);
      const std::string url = info ? info->optValue<std::string>("url", "") : "";
      package.wheel = url.substr(url.find_last_of('/') + 1);
      if (package.wheel.size() < 4 || package.wheel.compare(package.wheel.size() - 4, 4, ".whl")) {
        return internal("pip installed " + package.name + " from " + package.wheel +
                        ", which is not a wheel");
      }
      if (package.sha256.empty()) {  // pip hashes what it installs, from a file or an index
        return internal("pip's report gives no sha256 of " + package.wheel);
      }
      resolved.push_back(std::move(package));
    }
  } catch (const std::exception& e) {
    return internal(std::string("pip's report of what it installed cannot be read: ") + e.what());
  }
  if (resolved.empty()) {
    return internal("pip's report lists nothing installed");
  }
  std::sort(resolved.begin(), resolved.end(),
            [](const ResolvedPackage& a, const ResolvedPackage& b) { return a.name < b.name; });
  return resolved;
}

}  // namespace scs::packages
