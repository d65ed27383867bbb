#pragma once

#include <scs/backend/backend.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "script.h"

namespace scs::fake {

// Backend options (`--backend-option KEY=VALUE`).
struct Options {
  int cores = 8;
  double memory_gb = 64;
  std::set<std::string> fail;  // "create", "inspect", "list", "capacity"
  std::string posture_field;   // inspect reads back a posture that differs in this field
};

// Parses BackendContext::options; returns an error sentence for an unknown key or value.
std::optional<std::string> parseOptions(const std::map<std::string, std::string>& raw,
                                        Options* options);

// Changes `field` of `posture` so that it differs from what was asked. False for an unknown
// field name.
bool alterPosture(const std::string& field, backend::Posture* posture);

// An in-memory, deterministic test double of a container engine. It never runs code: each
// sandbox plays back the `#fake:` directives of its main.py on its own thread. When the
// archive carries the launcher's `.scs/control.json`, it also plays the launcher's side of the
// side channel (runs/side_channel.h): after a run that was not killed it writes the trailer
// "\n\0SCS-TRAILER-<nonce>\0{json}\n" to stdout, with the `exception=Type:message` and
// `outfile=path:content` directives as its exception and files; `echo_stdin` copies
// `.scs/stdin` to stdout.
//
// A sandbox may be started before it has its code, like a prepared sandbox whose launcher
// blocks on stdin: start() without an earlier deliver() leaves it running idle until deliver()
// hands it its script (which then plays at once), or kill() or remove() ends it (a killed idle
// sandbox exits 137, as any killed run). `start_delay_ms` and `fail=start` apply only when the
// script is known at start, that is when it was delivered before. deliver() succeeds once per
// sandbox: another is kRejected, one to a sandbox that has ended is kUnavailable, and one to a
// removed sandbox kNotFound. start() logs "fake: started <id>"; "fake: running <id>" (info)
// follows once the sandbox has its code and begins to play it.
class FakeBackend : public backend::RuntimeBackend {
 public:
  FakeBackend(Options options, backend::LogSink* log);
  ~FakeBackend() override;

  backend::CapacityReply capacity() override;
  backend::CreateReply create(const backend::SandboxSpec& spec) override;
  backend::InspectReply inspect(const std::string& id) override;
  backend::Status deliver(const std::string& id, const std::string& archive) override;
  backend::Status start(const std::string& id, backend::OutputSink* sink) override;
  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override;
  backend::Status kill(const std::string& id) override;
  backend::Status remove(const std::string& id) override;
  backend::ListReply list(const std::string& label_key) override;

 private:
  enum class State { kCreated, kStarting, kRunning, kExited };

  struct Sandbox {
    std::string id;
    std::map<std::string, std::string> labels;
    backend::Posture posture;
    Script script;
    std::string nonce;  // from .scs/control.json; empty: no side channel
    std::string stdin_data;
    bool delivered = false;  // script, nonce and stdin_data are set and final
    State state = State::kCreated;
    std::atomic<bool> killed{false};
    bool removed = false;
    backend::Exit exit;
    backend::OutputSink* sink = nullptr;
    std::thread worker;
  };

  std::shared_ptr<Sandbox> find(const std::string& id);  // requires mu_
  void play(const std::shared_ptr<Sandbox>& sandbox);    // the sandbox's thread
  void log(backend::LogLevel level, const std::string& message);

  const Options options_;
  backend::LogSink* const log_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::uint64_t next_id_ = 1;
};

}  // namespace scs::fake
