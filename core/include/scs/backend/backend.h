#pragma once

// The plugin ABI: the only header a backend plugin may include. It uses std:: vocabulary
// types only (no Poco, no Boost, no JSON), so a plugin never sees the core's policy code.
//
// Ownership rules across the boundary (Boost.DLL):
//  - Nothing a plugin creates may outlive the call that returned it, except the
//    RuntimeBackend object itself, which the core deletes while the library is still mapped.
//  - No exception crosses the boundary in either direction: every method returns a Status.
//  - Plugin and core are built by the same toolchain against one libstdc++; the AbiStamp
//    proves it before the factory is called.
//
// A plugin exports exactly two symbols (plugins/plugin.map hides the rest):
//
//   scs::backend::RuntimeBackend* create(const scs::backend::BackendContext& context,
//                                        std::string* error);  // new MyBackend, or nullptr
//   const scs::backend::AbiStamp kStamp{scs::backend::kAbiVersion, scs::backend::kToolchain};
//   BOOST_DLL_ALIAS(create, scs_create_backend)
//   BOOST_DLL_ALIAS(kStamp, scs_backend_abi)
//
// Any change to this file changes the ABI: bump kAbiVersion (tests/unit/abi_test.cc fails
// until the version and its recorded fingerprint are updated together).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scs::backend {

// Bumped on any change to a type or a signature in this folder.
inline constexpr std::uint32_t kAbiVersion = 12;

// Exported by every plugin under kAbiSymbol. The loader reads it before anything else.
struct AbiStamp {
  std::uint32_t abi_version;
  // kToolchain of the compiler that built the plugin: libstdc++ release and dual-ABI flag.
  std::uint32_t toolchain;
};

#if defined(_GLIBCXX_RELEASE) && defined(_GLIBCXX_USE_CXX11_ABI)
inline constexpr std::uint32_t kToolchain = _GLIBCXX_RELEASE * 10 + _GLIBCXX_USE_CXX11_ABI;
#else
inline constexpr std::uint32_t kToolchain = 0;
#endif

inline constexpr const char* kAbiSymbol = "scs_backend_abi";
inline constexpr const char* kFactorySymbol = "scs_create_backend";

// The label every sandbox the core creates carries (value "true"), and the one key list()
// is asked for: a backend may use it to find its sandboxes, for example to filter the
// engine's events.
inline constexpr const char* kManagedLabel = "io.scs.managed";

// The label that says until when a sandbox may live (unix seconds, every sandbox carries it):
// a backend whose engine can end a sandbox itself at a deadline (a Pod's activeDeadlineSeconds)
// sets that backstop from it. The core's own timer ends runs first.
inline constexpr const char* kDeadlineLabel = "io.scs.deadline";

// What went wrong. The core never retries a run's call: any code but kOk from capacity() or
// supports() stops the server from starting; from create, inspect, deliver, start or wait it ends
// the run as sandbox_error with the message, and the sandbox is removed; kill() may return
// kNotFound (ignored; other codes are logged and the core gives the sandbox 10 s to end); a
// remove() that fails is retried with a growing pause and once more at shutdown; a failed list()
// skips the startup sweep.
enum class Code {
  kOk,
  kNotFound,     // no such sandbox (already removed, or never existed)
  kUnavailable,  // the engine cannot be reached or answered 5xx
  kTimeout,      // the engine did not answer within the call's deadline
  kRejected,     // the engine refused the request (4xx other than 404)
  kUnsupported,  // the backend cannot honour a field of the spec; it never weakens one instead
  kInternal,     // a bug or an unexpected answer
};

struct Status {
  Code code = Code::kOk;
  std::string message;  // one sentence for an operator; never contains user code or output
  bool ok() const { return code == Code::kOk; }
};

struct TmpfsMount {
  std::string path;
  std::uint64_t size_bytes = 0;
  std::uint64_t max_inodes = 0;
  bool noexec = false;
  bool nosuid = false;
  bool nodev = false;
  std::string owner;           // numeric "uid:gid" owning the mount's root; empty: root
  std::uint32_t mode = 01777;  // permission bits of the mount's root
  bool operator==(const TmpfsMount&) const = default;
};

// The security-relevant shape of a sandbox, in backend-neutral terms. The core fills one
// in for the spec; a backend fills one in from what the engine reports about the created
// sandbox (never from its own request). The core compares both against its policy.
struct Posture {
  std::string image;
  std::string runtime;            // e.g. "runc", "runsc"
  std::string user;               // numeric "uid:gid"
  bool network_disabled = false;  // no interface but loopback
  bool read_only_root = false;
  bool privileged = false;
  bool all_capabilities_dropped = false;
  std::vector<std::string> added_capabilities;  // must stay empty
  bool no_new_privileges = false;
  bool seccomp_enabled = false;              // a filter is on: engine default or stricter
  std::string seccomp_profile;               // profile text; empty means engine default
  bool engine_init = true;                   // the engine's own init is PID 1; must not be
  std::vector<std::string> init_command;     // argv of PID 1: reaps orphans, holds the deadline
  std::vector<std::string> host_namespaces;  // namespaces shared with the host; must be empty
  std::vector<std::string> host_mounts;      // binds, volumes, mounts; must be empty
  std::vector<std::string> devices;          // devices added; must be empty
  std::vector<TmpfsMount> tmpfs;             // the only writable places
  std::int64_t shm_bytes = 0;                // size cap of the private /dev/shm tmpfs
  std::int64_t memory_bytes = 0;
  std::int64_t memory_swap_bytes = 0;  // memory plus swap; equal to memory: no swap
  std::int64_t nano_cpus = 0;
  std::int64_t pids_limit = 0;       // tasks the sandbox's cgroup may hold on the host
  std::int64_t processes_limit = 0;  // RLIMIT_NPROC: processes and threads of its user
  std::int64_t open_files_limit = 0;
  std::int64_t file_size_limit_bytes = 0;
  bool core_dumps_disabled = false;
  std::vector<std::string> masked_paths;
  std::vector<std::string> readonly_paths;
  bool operator==(const Posture&) const = default;
};

// Immutable description of one sandbox, built by the core. A backend translates it
// field by field; it never fills in defaults and never drops a field.
struct SandboxSpec {
  std::string run_id;
  std::map<std::string, std::string> labels;  // identify the server instance and the run
  std::vector<std::string> command;           // argv of the in-sandbox launcher
  std::vector<std::string> env;               // complete environment, "KEY=value"
  std::string working_dir;
  std::string hostname;
  Posture posture;
  // A session's sandbox: it takes any number of deliveries (its runs, and word to interrupt
  // one), written to the launcher's stdin in order, and its stdin stays open until it ends.
  // Otherwise the one delivery is followed by the end of stdin.
  bool session = false;
};

struct Capacity {
  int cores = 0;
  std::int64_t memory_bytes = 0;
};

struct CapacityReply {
  Status status;
  Capacity capacity;
  // What the engine says of itself and of the runtime that runs the sandboxes, name to
  // version (e.g. {"engine": "20.10.24", "runc": "1.1.5"}); the audit prints them. Empty when
  // it says nothing.
  std::map<std::string, std::string> versions;
};

struct CreateReply {
  Status status;
  std::string id;  // the backend's handle for the sandbox
};

// What RuntimeBackend::saved() keeps of a snapshotted sandbox for a later process.
struct SavedReply {
  Status status;
  std::string text;
};

struct InspectReply {
  Status status;
  Posture posture;  // read from the engine's record of the created sandbox
};

// What the backend knows about how the sandbox ended. Evidence only: the core decides.
struct Exit {
  bool exited = false;           // false: still running when the wait ended
  std::optional<int> exit_code;  // code of the sandbox's main process
  bool oom_killed = false;       // the engine saw the memory cap's OOM killer fire
  std::string engine_error;      // non-empty when the runtime itself failed
  bool killed_outside = false;   // killed or removed by someone other than this backend (an
                                 // operator, the engine); never by the sandbox's own processes
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<double> cpu_seconds;
};

struct WaitReply {
  Status status;
  Exit exit;
};

// What the backend can tell about a sandbox that has not ended yet, without waiting.
struct ProgressReply {
  Status status;
  // Whether the backend can tell now if the memory cap's OOM killer has fired in the sandbox
  // (for Docker: when it reads the sandbox's cgroup counters); false: only wait() can tell.
  bool oom_known = false;
  bool oom_killed = false;  // it has, so far
  // How many processes it has killed so far, where the backend can count them (0 otherwise):
  // a session's runs tell which of them saw a kill.
  std::int64_t oom_kills = 0;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<double> cpu_seconds;
};

struct SandboxInfo {
  std::string id;
  std::map<std::string, std::string> labels;
};

struct ListReply {
  Status status;
  std::vector<SandboxInfo> sandboxes;
};

// An image derived from another by one layer of files: the packages of a run (core/src/packages).
struct ImageLayer {
  std::string base_image;  // the image it derives from, as a Posture names one
  std::string image;       // the name the derived image gets, as a Posture will name it
  // The layer's files: an uncompressed ustar of regular files and their directories, paths
  // relative to the image's root, owned by root. Added to base_image's filesystem unchanged.
  std::string archive;
  std::map<std::string, std::string> labels;  // carried by the derived image
  // Carried by anything the backend makes on the way and removes before it returns (a
  // container), so that a later server's startup sweep (list()) removes what a server that
  // died meanwhile left.
  std::map<std::string, std::string> build_labels;
};

struct ImageInfo {
  std::string image;       // as buildImage() named it
  std::string base_image;  // as buildImage() was given it
  // Whether it was made from base_image as that name stands now: false once an image of that
  // name was made anew (the derived one still carries the old one's files).
  bool current = true;
  std::map<std::string, std::string> labels;
};

struct ImageListReply {
  Status status;
  std::vector<ImageInfo> images;
};

enum class Stream { kStdout, kStderr };

// Owned by the core; receives a run's output as it arrives. Thread-safety: a backend may
// call write() from any one thread at a time per sandbox. write() never throws and never
// blocks for long (it caps and counts; it does not apply backpressure to the run).
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void write(Stream stream, std::string_view bytes) = 0;
  // Called once, on the same thread, after the last write(): the sandbox has ended and
  // wait() returns its exit at once. Never after remove() has returned. It lets the core wait
  // for output and the end on one condition instead of polling wait().
  virtual void ended() = 0;
};

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Owned by the core; the plugin's only way to log. Thread-safe.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void log(LogLevel level, std::string_view message) = 0;
};

// A runtime that can host one sandbox per run. At startup the core asks capacity() and
// supports(); then, per sandbox, it drives the order of calls: create -> inspect -> deliver ->
// start -> wait (repeatedly) -> remove, with kill at any time after start. A sandbox prepared ahead
// of need is started before its run exists: create -> inspect -> start -> deliver -> wait ->
// remove; its launcher idles on stdin until deliver(). Thread-safety: every method may be called
// concurrently, including for the same sandbox id (kill and remove race with wait). No method
// throws.
//
// Blocking: wait() blocks at most its timeout (the core passes up to 1 s, and 0 to poll);
// start() returns once the sandbox runs, never waiting for it to end; create() may wait, up to
// the backend's own start timeout, while the engine has no room for the sandbox yet (a cluster's
// quota); every other call returns within the backend's own deadline for one engine request (an
// operator setting, such as the Docker plugin's api_timeout_ms), answering kTimeout past it.
class RuntimeBackend {
 public:
  virtual ~RuntimeBackend() = default;

  // Cores and memory the host offers to sandboxes, as the engine reports them.
  virtual CapacityReply capacity() = 0;

  // Whether the backend can carry every control of `posture` (the one a run with the default
  // limits needs) exactly, as create() would. kUnsupported, its message naming each control it
  // cannot carry, stops the server from starting: an engine that cannot say a control refuses
  // here, once, rather than fail every run. The core asks once, after capacity().
  virtual Status supports(const Posture& posture) = 0;

  // Creates, but does not start, a sandbox exactly as `spec` says. A field the backend
  // cannot honour fails with kUnsupported; it never substitutes a weaker setting.
  virtual CreateReply create(const SandboxSpec& spec) = 0;

  // Reads the effective posture of a created sandbox from the engine itself.
  virtual InspectReply inspect(const std::string& id) = 0;

  // Hands the sandbox its code: `archive` is bytes for the launcher's stdin built by the core
  // (an uncompressed ustar of regular files and their directories, no links or devices; for a
  // session, framed runs and interrupts). Before start() the backend may hold it until start();
  // after start() it reaches the running launcher's stdin without delay. At most once per
  // sandbox (kRejected otherwise), unless its spec says `session`: then as often as the core
  // calls, in order. It must never write the bytes to the host's disk or mount a host path to
  // deliver them.
  virtual Status deliver(const std::string& id, const std::string& archive) = 0;

  // Starts the sandbox, with or without its code delivered. Output is written to `sink`
  // until the sandbox ends; `sink` outlives the sandbox (the core keeps it until remove()
  // returns).
  virtual Status start(const std::string& id, OutputSink* sink) = 0;

  // Waits up to `timeout` for the sandbox to end. Reports exited only after every byte of
  // output has been written to the sink; after that the sink is not called again.
  virtual WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) = 0;

  // What the backend can tell of a started sandbox now, without waiting for its end: the
  // core asks once the launcher has reported, to decide whether the report may go out
  // before the sandbox has ended. kNotFound if it is not a sandbox of this backend.
  virtual ProgressReply progress(const std::string& id) = 0;

  // Kills every process of the sandbox at once (SIGKILL). Idempotent; kNotFound if gone.
  virtual Status kill(const std::string& id) = 0;

  // Removes the sandbox and everything it holds, killing it first if needed. Idempotent:
  // removing a sandbox that is gone is kOk.
  virtual Status remove(const std::string& id) = 0;

  // Lists this backend's sandboxes that carry the label `label_key`, running or not.
  virtual ListReply list(const std::string& label_key) = 0;

  // Derived images, for runs that ask for packages. A backend that cannot make them keeps these
  // defaults: kUnsupported, and a server configured for packages refuses to start with that
  // message. Unlike the calls above, buildImage() may take as long as the engine needs to
  // write the layer (minutes). Thread-safety: as every call; the core makes one at a time.
  //
  // Makes `layer.image` from `layer.base_image` and the layer's files; kOk at once when an
  // image of that name exists already, made from base_image as that name stands now (one made
  // from an earlier image of the name is made anew). Nothing is left behind when it fails. The
  // layer is the backend's to move from (its archive may be large).
  virtual Status buildImage(ImageLayer layer) {
    return {Code::kUnsupported, "this backend cannot derive images (" + layer.image + ")"};
  }
  // Removes a derived image. kRejected while a sandbox still uses it; kOk when it is gone.
  virtual Status removeImage(const std::string& image) {
    return {Code::kUnsupported, "this backend cannot remove images (" + image + ")"};
  }
  // The derived images that carry the label `label_key`, each with its base and whether it is
  // current (ImageInfo).
  virtual ImageListReply listImages(const std::string& label_key) {
    return {{Code::kUnsupported, "this backend cannot list images (" + label_key + ")"}, {}};
  }

  // Snapshots, for sessions that outlive an idle spell (hibernation). A backend whose runtime
  // cannot take them keeps these defaults, and idle sessions end instead. Like buildImage(), a
  // snapshot or a resume may take as long as the runtime needs to write or read the sandbox's
  // memory (seconds per GiB).
  //
  // Whether sandboxes of `posture` (its runtime above all) can be snapshotted and resumed:
  // kOk, or kUnsupported with one sentence naming what is missing and what would allow it. The
  // core asks once, at startup, after supports().
  virtual Status snapshots(const Posture& posture) {
    return {Code::kUnsupported,
            "this backend cannot snapshot sandboxes (runtime " + posture.runtime + ")"};
  }
  // Saves a started session sandbox's processes, memory and files where only this backend's
  // engine keeps them, and stops it: from kOk on it holds no memory or CPU, its sink is called
  // no more (neither write() nor ended()) until resume(), and only resume() or remove() may
  // follow. remove() deletes the snapshot with the sandbox. On a failure the sandbox may have
  // stopped: the core removes it. kUnsupported: refused before anything was done (a runtime
  // that cannot snapshot this one sandbox): it runs on, and its session ends as an idle one.
  virtual Status snapshot(const std::string& id) {
    return {Code::kUnsupported, "this backend cannot snapshot sandbox " + id};
  }
  // Starts a snapshotted sandbox again where it stopped; its output goes to `sink` from then
  // on, as after start(). Its snapshot is deleted once it runs.
  virtual Status resume(const std::string& id, OutputSink* sink) {
    (void)sink;
    return {Code::kUnsupported, "this backend cannot resume sandbox " + id};
  }
  // Restarts (the core's --state-dir): a snapshotted sandbox outlives the server process.
  // saved() is what a later process's backend needs to take snapshotted sandbox `id` back: text
  // of the backend's own making, no secret, that the core keeps for it (mode 0600) and hands to
  // adopt(). adopt() makes `id` a sandbox of this backend again, snapshotted: only resume() or
  // remove() may follow. It checks the text against its engine's record (that sandbox exists,
  // is ours and holds a snapshot), and takes no path to read or write from it.
  virtual SavedReply saved(const std::string& id) {
    return {{Code::kUnsupported, "this backend cannot keep sandbox " + id + " across restarts"},
            {}};
  }
  virtual Status adopt(const std::string& id, const std::string& saved) {
    (void)saved;
    return {Code::kUnsupported, "this backend cannot take sandbox " + id + " back"};
  }
};

struct BackendContext {
  std::map<std::string, std::string> options;  // operator settings addressed to the backend
  LogSink* log = nullptr;                      // never null; outlives the backend
};

// The factory every plugin exports under kFactorySymbol. Returns nullptr and sets *error
// when the backend cannot serve (a startup error: the server exits). The caller owns the
// object it returns and deletes it while the library is still mapped.
using FactoryFn = RuntimeBackend*(const BackendContext& context, std::string* error);

// The loaded backend, as the core holds it: its deleter keeps the library mapped while it lives.
using RuntimeBackendPtr = std::shared_ptr<RuntimeBackend>;

}  // namespace scs::backend
