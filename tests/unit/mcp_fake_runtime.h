#pragma once

#include <scs/backend/backend.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>

namespace scs::mcptest {

// A small in-memory backend for the MCP tests, scripted by lines of main.py:
//   #stdout=TEXT   written to stdout at start ("\n" decoded)
//   #exit=N        exit code (default 0)
//   #hang          runs until killed
// Thread-safe.
class FakeRuntime : public backend::RuntimeBackend {
 public:
  backend::CapacityReply capacity() override { return {{}, {8, std::int64_t{64} << 30}}; }

  backend::CreateReply create(const backend::SandboxSpec& spec) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string id = "sandbox-" + std::to_string(++next_id_);
    sandboxes_[id].posture = spec.posture;
    return {{}, id};
  }

  backend::InspectReply inspect(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return {{}, sandboxes_[id].posture};
  }

  backend::Status deliver(const std::string& id, const std::string& archive) override {
    std::lock_guard<std::mutex> lock(mutex_);
    sandboxes_[id].code = mainPy(archive);
    return {};
  }

  backend::Status start(const std::string& id, backend::OutputSink* sink) override {
    std::lock_guard<std::mutex> lock(mutex_);
    Sandbox& sandbox = sandboxes_[id];
    std::istringstream lines(sandbox.code);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("#stdout=", 0) == 0) {
        sink->write(backend::Stream::kStdout, decode(line.substr(8)));
      } else if (line.rfind("#exit=", 0) == 0) {
        sandbox.exit_code = std::atoi(line.c_str() + 6);
      } else if (line == "#hang") {
        sandbox.hang = true;
      }
    }
    return {};
  }

  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++waits_;
    changed_.notify_all();
    changed_.wait_for(lock, timeout, [&] {
      const Sandbox& sandbox = sandboxes_[id];
      return !sandbox.hang || sandbox.killed;
    });
    const Sandbox& sandbox = sandboxes_[id];
    backend::WaitReply reply;
    if (sandbox.killed) {
      reply.exit.exited = true;
      reply.exit.exit_code = 137;
    } else if (!sandbox.hang) {
      reply.exit.exited = true;
      reply.exit.exit_code = sandbox.exit_code;
      reply.exit.peak_memory_bytes = 1 << 20;
    }
    return reply;
  }

  backend::Status kill(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (throw_on_next_kill_) {
      throw_on_next_kill_ = false;
      throw std::runtime_error("fake kill exploded");
    }
    sandboxes_[id].killed = true;
    changed_.notify_all();
    return {};
  }

  backend::Status remove(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    sandboxes_[id].killed = true;
    changed_.notify_all();
    return {};
  }

  backend::ListReply list(const std::string&) override { return {}; }

  // Breaks the contract (no method throws) once, to reach the server's last line of defence.
  void throwOnNextKill() {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_on_next_kill_ = true;
  }

  // True once the core waits on a sandbox, i.e. after it considers the run started.
  bool waitForWaiter(std::chrono::milliseconds patience) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, patience, [&] { return waits_ > 0; });
  }

  // Ends every sandbox as if killed.
  void killAll() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, sandbox] : sandboxes_) {
      sandbox.killed = true;
    }
    changed_.notify_all();
  }

 private:
  struct Sandbox {
    backend::Posture posture;
    std::string code;
    int exit_code = 0;
    bool hang = false;
    bool killed = false;
  };

  // main.py is the first member of the ustar archive the core builds.
  static std::string mainPy(const std::string& archive) {
    if (archive.size() < 512) {
      return {};
    }
    const std::size_t size = std::strtoul(archive.substr(124, 12).c_str(), nullptr, 8);
    return archive.substr(512, size);
  }

  static std::string decode(const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
        out += '\n';
        ++i;
      } else if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x') {
        out += static_cast<char>(std::strtoul(text.substr(i + 2, 2).c_str(), nullptr, 16));
        i += 3;
      } else {
        out += text[i];
      }
    }
    return out;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  int next_id_ = 0;
  bool throw_on_next_kill_ = false;
  int waits_ = 0;
  std::map<std::string, Sandbox> sandboxes_;
};

}  // namespace scs::mcptest
