#pragma once

#include <scs/backend/backend.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace scs::fuzz {

// A backend that never runs anything: create, inspect (reading back the posture it was
// given), deliver and start succeed at once. It plays the launcher's part from what the
// archive holds: start writes main.py to stdout and one line to stderr, and lines of main.py
// script the rest:
//   #exit=N           wait reports exit code N (default 0)
//   #slow             the run lasts 20 ms (or until killed) instead of ending at once
//   #trailer <json>   after the output, the launcher's trailer: the marker with the run's
//                     nonce (read from .scs/control.json), then <json> and a newline
// A started sandbox calls its sink's ended() once it has ended (or was killed), from a thread
// of its own that remove() joins. Thread-safe.
class NullBackend : public backend::RuntimeBackend {
 public:
  NullBackend() = default;
  NullBackend(const NullBackend&) = delete;
  NullBackend& operator=(const NullBackend&) = delete;
  ~NullBackend() override;

  backend::CapacityReply capacity() override;
  backend::CreateReply create(const backend::SandboxSpec& spec) override;
  backend::InspectReply inspect(const std::string& id) override;
  backend::Status deliver(const std::string& id, const std::string& archive) override;
  backend::Status start(const std::string& id, backend::OutputSink* sink) override;
  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override;
  backend::ProgressReply progress(const std::string& id) override;
  backend::Status kill(const std::string& id) override;
  backend::Status remove(const std::string& id) override;
  backend::ListReply list(const std::string& label_key) override;

 private:
  struct Sandbox {
    backend::Posture posture;
    std::string code;   // main.py from the archive
    std::string nonce;  // from .scs/control.json
    std::chrono::steady_clock::time_point ends;
    int exit_code = 0;
    bool killed = false;
    bool removed = false;
    std::thread ender;  // calls ended() on the sink once the sandbox has ended
  };

  static backend::Status missing(const std::string& id);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t next_id_ = 0;
  std::map<std::string, Sandbox> sandboxes_;
};

}  // namespace scs::fuzz
