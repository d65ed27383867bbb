#pragma once

// The fake backend: an in-memory engine double, both the `fake` plugin and the unit tests'
// backend, with its options and clock. Its parts: fake_backend.cc, playback.cc,
// launcher_side.cc, options.cc, test_hooks.cc.

#include <scs/backend/backend.h>
#include <scs/backend/launcher_frames.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "script.h"

namespace scs::fake {

// Backend options (`--backend-option KEY=VALUE`).
struct Options {
  int cores = 8;
  double memory_gb = 64;
  // "create", "inspect", "list", "capacity", "supports", "snapshot", "resume",
  // "saved", "adopt"
  std::set<std::string> fail;
  bool snapshots = false;     // snapshots(): true (snapshots=on) plays a runtime that takes them
  std::string posture_field;  // inspect reads back a posture that differs in this field
  // remove() takes this long before it removes anything: an engine slow to remove.
  std::chrono::milliseconds remove_delay{0};
  bool keep_removed = false;  // sandboxes() still shows removed sandboxes (in-process tests)
  // progress() of a sandbox that has no code yet reports this peak, as an engine reports an
  // idle launcher's (in-process tests).
  std::optional<std::int64_t> idle_peak_bytes;
};

// Parses BackendContext::options; returns an error sentence for an unknown key or value.
std::optional<std::string> parseOptions(const std::map<std::string, std::string>& raw,
                                        Options* options);

// Changes `field` of `posture` so that it differs from what was asked. False for an unknown
// field name.
bool alterPosture(const std::string& field, backend::Posture* posture);

// Time as the fake sees it: the plugin uses real time; a unit test that links the fake
// in-process passes its own clock, so the fake's waits end when the test moves time.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point now() const = 0;
  // Blocks on `cv`, whose mutex `lock` holds, until notified or now() reaches `deadline`;
  // may return spuriously.
  virtual void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         std::chrono::steady_clock::time_point deadline) const = 0;
};

// An in-memory, deterministic test double of a container engine. It never runs code: each
// sandbox plays back the `#fake:` directives of its code (script.h) on its own thread. When
// the archive carries the launcher's `.scs/control.json`, it also plays the launcher's side of
// the side channel (launcher/side_channel.h): after a run that was not killed it writes the trailer
// "\n\0SCS-TRAILER-<nonce>\0{json}\n" to stdout, with the `exception=Type:message` and
// `outfile=path:content` directives as its exception and files (`trailer=JSON` replaces the
// JSON); `echo_stdin` copies `.scs/stdin` to stdout.
//
// A sandbox may be started before it has its code, like a prepared sandbox whose launcher
// blocks on stdin: start() without an earlier deliver() leaves it running idle until deliver()
// hands it its script (which then plays at once), or kill() or remove() ends it (a killed idle
// sandbox exits 137, as any killed run). `start_delay_ms` and `fail=start` apply only when the
// script is known at start, that is when it was delivered before. deliver() succeeds once per
// sandbox: another is kRejected, one to a sandbox that has ended is kUnavailable, and one to a
// removed sandbox kNotFound. A session's sandbox (SandboxSpec::session) takes one frame per
// deliver(), "SCS-RUN <bytes>\n<archive>" or "SCS-INTERRUPT\n", and plays its runs one after
// another, each ending with its trailer (with `result`), until one ends its interpreter. start()
// logs "fake: started <id>"; "fake: running <id>" (info) follows once the sandbox has its code and
// begins to play it.
//
// Linked in-process (tests/unit), it is also the one backend double of the unit tests, as
// leveldb's in-memory Env is: the members after the RuntimeBackend methods let a test look at
// every sandbox and end one as its program would. They are not part of the plugin ABI.
class FakeBackend : public backend::RuntimeBackend {
 public:
  // `clock` null: real time. Otherwise it must outlive the backend.
  FakeBackend(Options options, backend::LogSink* log, const Clock* clock = nullptr);
  ~FakeBackend() override;

  backend::CapacityReply capacity() override;
  backend::Status supports(const backend::Posture& posture) override;
  backend::CreateReply create(const backend::SandboxSpec& spec) override;
  backend::InspectReply inspect(const std::string& id) override;
  backend::Status deliver(const std::string& id, const std::string& archive) override;
  backend::Status start(const std::string& id, backend::OutputSink* sink) override;
  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override;
  backend::ProgressReply progress(const std::string& id) override;
  backend::Status kill(const std::string& id) override;
  backend::Status remove(const std::string& id) override;
  backend::ListReply list(const std::string& label_key) override;
  // Derived images are names it remembers, with their labels and the layer's size; one that a
  // sandbox not yet removed uses cannot be removed, as with Docker.
  backend::Status buildImage(backend::ImageLayer layer) override;
  backend::Status removeImage(const std::string& image) override;
  backend::ImageListReply listImages(const std::string& label_key) override;
  backend::Status snapshots(const backend::Posture& posture) override;
  backend::Status snapshot(const std::string& id) override;
  backend::Status resume(const std::string& id, backend::OutputSink* sink) override;
  // Its text holds the sandbox's spec and names (saved.cc): a fake of another process takes it
  // back as an engine would its container, and the same object (a test's second run manager)
  // takes back the sandbox it still holds.
  backend::SavedReply saved(const std::string& id) override;
  backend::Status adopt(const std::string& id, const std::string& saved) override;

  // What a test sees of one sandbox.
  struct View {
    std::string id;
    backend::SandboxSpec spec;  // as created
    std::string archive;        // as delivered; empty before deliver()
    bool started = false;
    bool killed = false;    // kill() reached it (with ignore_kill it runs on)
    bool removing = false;  // remove() is blocked by holdRemovals()
    bool removed = false;
    bool exited = false;
    bool serves_session = false;  // a session's, from its creation or (prepared) its frame
    bool snapshotted = false;     // stopped by snapshot(), not yet resumed
    // Started with its code, and its program has neither ended nor been told to (kill, finish).
    bool running = false;
    backend::Exit exit;       // once exited
    std::uint64_t waits = 0;  // wait() calls once its code arrived: the core watching the run
  };

  // Every sandbox created, oldest first; removed ones too when Options::keep_removed.
  std::vector<View> sandboxes() const;
  std::optional<View> sandbox(const std::string& id) const;
  // Waits, in real time up to `patience`, until `ready(sandboxes())` holds.
  bool awaitSandboxes(const std::function<bool(const std::vector<View>&)>& ready,
                      std::chrono::milliseconds patience = std::chrono::seconds(10)) const;
  // Ends a sandbox whose program runs or idles (`hang`, `sleep_ms`, not yet delivered) as if
  // it wrote `out` and `err` and exited with `exit_code`. False when it is not running.
  bool finish(const std::string& id, int exit_code, std::string_view out = {},
              std::string_view err = {});
  // Writes to a started sandbox's output, as its launcher would. False when not started.
  bool write(const std::string& id, backend::Stream stream, std::string_view bytes);
  // While held, remove() blocks (the engine is slow to remove).
  void holdRemovals(bool hold);
  // Kills a running sandbox as an operator or the engine would, not through this backend: its
  // exit says killed_outside. False when it is not running.
  bool killFromOutside(const std::string& id);
  // The next kill() throws, breaking the contract once to reach the caller's last defence.
  void throwOnNextKill();

 private:
  // kSnapshotted: a session's sandbox stopped by snapshot(), its names kept, until resume().
  enum class State { kCreated, kStarting, kRunning, kSnapshotted, kExited };

  struct Sandbox {
    std::string id;
    backend::SandboxSpec spec;
    Script script;
    std::string archive;
    std::string nonce;  // from .scs/control.json; empty: no side channel
    std::string stdin_data;
    std::string egress_nonce;  // from .scs/control.json; empty: no egress
    // The egress frames the server wrote to its stdin, not yet read, and their reader.
    std::vector<backend::launcher::StdinFrame> egress_in;
    backend::launcher::StdinFrameReader egress_reader;
    bool delivered = false;  // script, nonce and stdin_data are set and final
    State state = State::kCreated;
    std::atomic<bool> killed{false};  // ends the program
    bool killed_outside = false;      // by killFromOutside()
    bool kill_seen = false;
    std::atomic<int> finish_code{-1};  // finish() asked it to exit so; -1: not asked
    // Its launcher serves a session: its command says --session, or (a sandbox prepared for a
    // run) the session frame reached it before any run.
    bool serves_session = false;
    // A session's sandbox: the runs delivered and not yet played, an interrupt asked for, and
    // the namespace its runs share.
    // An interrupt that arrives after a run's frame and before that run starts to play is that
    // run's, as the launcher, which reads its stdin in order, would take it.
    struct QueuedRun {
      std::string archive;
      bool interrupted = false;
    };
    std::deque<QueuedRun> runs;
    bool interrupt = false;
    bool pausing = false;  // snapshot() asked its thread to stop between runs
    std::map<std::string, std::string> names;
    bool removing = false;
    bool removed = false;
    std::uint64_t waits = 0;
    std::int64_t oom_kills = 0;  // a session's children the scripts had the OOM killer end
    backend::Exit exit;
    backend::OutputSink* sink = nullptr;
    std::thread worker;
  };

  std::shared_ptr<Sandbox> find(const std::string& id);  // requires mu_
  // saved() and adopt()'s text (saved.cc); fromSaved is null for text that is not one.
  static std::string savedText(const Sandbox& sandbox);
  static std::shared_ptr<Sandbox> fromSaved(const std::string& id, const std::string& text);
  void play(const std::shared_ptr<Sandbox>& sandbox);  // the sandbox's thread
  // What the sandbox's thread plays: one run's script, or (a session's sandbox) each run
  // delivered until one ends its interpreter. Both fill in how it exited.
  void playRun(const std::shared_ptr<Sandbox>& sandbox, backend::Exit& exit);
  // The script's connects, through the server's relay as PID 1 carries them.
  void playConnects(const std::shared_ptr<Sandbox>& sandbox);
  void playSession(const std::shared_ptr<Sandbox>& sandbox, backend::Exit& exit);
  backend::Status deliverToSession(Sandbox& sandbox, const std::string& bytes);  // requires mu_
  backend::Status becomeSession(Sandbox& sandbox, const std::string& frame);     // requires mu_
  // It has exited, or was killed after it started: code delivered now would never play.
  static bool hasEnded(const Sandbox& sandbox);  // requires mu_
  void log(backend::LogLevel level, const std::string& message);
  // cv_.wait_for(lock, timeout, done) on the backend's clock.
  template <typename Done>
  bool waitFor(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout, Done done);
  static View viewOf(const Sandbox& sandbox);
  std::vector<View> viewsLocked() const;

  const Options options_;
  backend::LogSink* const log_;
  const Clock* const clock_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::vector<std::shared_ptr<Sandbox>> history_;     // every one created, with keep_removed
  std::map<std::string, backend::ImageInfo> images_;  // derived ones, by name
  bool hold_removals_ = false;
  bool throw_on_next_kill_ = false;
  std::uint64_t next_id_ = 1;
};

}  // namespace scs::fake
