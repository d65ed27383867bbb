// What a started sandbox does on its own thread: start() launches it, and it idles until it has
// its code, then plays one run's script or a session's runs one after another, and exits.
#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string_view>
#include <thread>

#include "fake_backend.h"
#include "fake_backend_internal.h"
#include "launcher_side.h"

namespace scs::fake {
namespace {

namespace launcher = backend::launcher;
using backend::Code;
using backend::Status;

constexpr std::size_t kFloodChunk = 64 * 1024;
constexpr int kKilledExitCode = 137;

}  // namespace

Status FakeBackend::start(const std::string& id, backend::OutputSink* sink) {
  return guardStatus([&] {
    std::unique_lock<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return notFound(id);
    }
    if (sandbox->state != State::kCreated) {
      return Status{Code::kRejected, "fake: sandbox " + id + " has already started"};
    }
    if (sandbox->script.fail.count("start") != 0) {
      return scripted("start");
    }
    sandbox->state = State::kStarting;
    waitFor(lock, sandbox->script.start_delay, [&] { return sandbox->removed; });
    if (sandbox->removed) {
      return notFound(id);
    }
    sandbox->state = State::kRunning;
    sandbox->sink = sink;
    sandbox->worker = std::thread([this, sandbox] { play(sandbox); });
    cv_.notify_all();
    lock.unlock();
    log(backend::LogLevel::kInfo, "fake: started " + id);
    return Status{};
  });
}

Status FakeBackend::snapshots(const backend::Posture&) {
  if (!options_.snapshots) {
    return Status{Code::kUnsupported,
                  "fake: snapshots are off (backend option snapshots=off), as under a runtime "
                  "that cannot take them"};
  }
  return Status{};
}

// Stops a session's thread between runs; its names stay, as a snapshot's memory would.
Status FakeBackend::snapshot(const std::string& id) {
  if (options_.fail.count("snapshot") != 0) {
    return scripted("snapshot");
  }
  return guardStatus([&] {
    std::thread worker;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto sandbox = find(id);
      if (!sandbox) {
        return notFound(id);
      }
      if (!sandbox->serves_session || sandbox->state != State::kRunning || !sandbox->runs.empty() ||
          sandbox->killed.load()) {
        return Status{Code::kRejected, "fake: sandbox " + id + " is not an idle session"};
      }
      sandbox->pausing = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return sandbox->state != State::kRunning; });
      if (sandbox->state != State::kSnapshotted) {
        return Status{Code::kInternal, "fake: sandbox " + id + " ended while snapshotted"};
      }
      worker = std::move(sandbox->worker);
    }
    worker.join();
    log(backend::LogLevel::kInfo, "fake: snapshotted " + id);
    return Status{};
  });
}

Status FakeBackend::resume(const std::string& id, backend::OutputSink* sink) {
  if (options_.fail.count("resume") != 0) {
    return scripted("resume");
  }
  return guardStatus([&] {
    std::lock_guard<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return notFound(id);
    }
    if (sandbox->state != State::kSnapshotted) {
      return Status{Code::kRejected, "fake: sandbox " + id + " has no snapshot"};
    }
    sandbox->state = State::kRunning;
    sandbox->sink = sink;
    sandbox->worker = std::thread([this, sandbox] { play(sandbox); });
    cv_.notify_all();
    return Status{};
  });
}

backend::SavedReply FakeBackend::saved(const std::string& id) {
  if (options_.fail.count("saved") != 0) {
    return backend::SavedReply{scripted("saved"), {}};
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto sandbox = find(id);
  if (!sandbox) {
    return backend::SavedReply{notFound(id), {}};
  }
  if (sandbox->state != State::kSnapshotted) {
    return backend::SavedReply{Status{Code::kRejected, "fake: sandbox " + id + " has no snapshot"},
                               {}};
  }
  return backend::SavedReply{Status{}, savedText(*sandbox)};
}

Status FakeBackend::adopt(const std::string& id, const std::string& saved) {
  if (options_.fail.count("adopt") != 0) {
    return scripted("adopt");
  }
  std::shared_ptr<Sandbox> taken = fromSaved(id, saved);
  if (!taken) {
    return Status{Code::kRejected, "fake: the saved text of sandbox " + id + " is not one of ours"};
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto held = find(id)) {  // this engine keeps it still
    if (held->state != State::kSnapshotted) {
      return Status{Code::kRejected, "fake: sandbox " + id + " has no snapshot"};
    }
  } else {
    // A later fake's ids never meet the sandboxes it took back.
    if (id.rfind("fake-", 0) == 0) {
      next_id_ = std::max<std::uint64_t>(next_id_, std::strtoull(id.c_str() + 5, nullptr, 10) + 1);
    }
    sandboxes_[id] = taken;
    if (options_.keep_removed) {
      history_.push_back(taken);
    }
  }
  log(backend::LogLevel::kInfo, "fake: adopted " + id);
  return Status{};
}

void FakeBackend::play(const std::shared_ptr<Sandbox>& sandbox) {
  backend::Exit exit;
  exit.exited = true;
  try {
    bool session = false;
    {
      // Idle, like the launcher on its stdin, until it knows what it serves or it ends.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return sandbox->serves_session || sandbox->delivered || sandbox->killed.load() ||
               sandbox->finish_code >= 0;
      });
      session = sandbox->serves_session;
    }
    if (session) {
      playSession(sandbox, exit);
    } else {
      playRun(sandbox, exit);
    }
  } catch (const std::exception& e) {
    exit.exit_code.reset();
    exit.engine_error = std::string("fake: ") + e.what();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sandbox->pausing && !sandbox->killed.load()) {
      // Snapshotted between runs: it has not ended, and resume() plays its session again.
      sandbox->pausing = false;
      sandbox->state = State::kSnapshotted;
      cv_.notify_all();
      return;
    }
    sandbox->exit = exit;
    sandbox->state = State::kExited;
  }
  cv_.notify_all();
  sandbox->sink->ended();
}

namespace {

std::string bigEndian(std::uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>((value >> 16) & 0xff),
          static_cast<char>((value >> 8) & 0xff), static_cast<char>(value & 0xff)};
}

// A frame as PID 1 writes it to stdout (core/src/egress/frames.h).
std::string egressFrame(const std::string& nonce, char type, std::uint32_t stream,
                        const std::string& payload = {}) {
  return std::string(launcher::kEgressMarkerPrefix) + nonce + std::string(launcher::kMarkerEnd) +
         type + bigEndian(stream) + bigEndian(static_cast<std::uint32_t>(payload.size())) + payload;
}

// Takes the server's frames off `in`; those for `stream`: its data is appended to `data`; true once
// it sent FIN or RESET.
bool takeEgressFrames(std::vector<launcher::StdinFrame>& in, std::uint32_t stream,
                      std::string& data) {
  bool ended = false;
  for (const launcher::StdinFrame& frame : in) {  // another stream's are of a stream let go
    if (frame.stream == stream) {
      data += frame.payload;
      ended = ended || frame.egress_type == launcher::kEgressFin[0] ||
              frame.egress_type == launcher::kEgressReset[0];
    }
  }
  in.clear();
  return ended;
}

}  // namespace

void FakeBackend::playConnects(const std::shared_ptr<Sandbox>& sandbox) {
  std::uint32_t stream = 1;
  for (const std::string& target : sandbox->script.connects) {
    if (sandbox->egress_nonce.empty()) {
      sandbox->sink->write(backend::Stream::kStdout, "egress " + target + ": no relay\n");
      continue;
    }
    sandbox->sink->write(backend::Stream::kStdout,
                         egressFrame(sandbox->egress_nonce, 'O', stream) +
                             egressFrame(sandbox->egress_nonce, launcher::kEgressData[0], stream,
                                         "CONNECT " + target + " HTTP/1.1\r\n\r\n"));
    std::string answer;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(20), [&] {
        return takeEgressFrames(sandbox->egress_in, stream, answer) ||
               answer.find("\r\n\r\n") != std::string::npos || sandbox->killed.load();
      });
    }
    // The tunnel is not used: the stream is reset, as a program closing at once would.
    sandbox->sink->write(backend::Stream::kStdout,
                         egressFrame(sandbox->egress_nonce, launcher::kEgressReset[0], stream) +
                             "egress " + target + ": " + answer.substr(0, answer.find("\r\n")) +
                             "\n");
    stream += 2;
  }
}

void FakeBackend::playRun(const std::shared_ptr<Sandbox>& sandbox, backend::Exit& exit) {
  const auto stopped = [&] { return sandbox->killed.load() || sandbox->finish_code >= 0; };
  {
    // Idle, like the launcher on its stdin, until the code arrives or the sandbox ends.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return sandbox->delivered || stopped(); });
    if (!stopped()) {
      lock.unlock();
      log(backend::LogLevel::kInfo, "fake: running " + sandbox->id);
    }
  }
  // Final once delivered; a sandbox ended idle plays the empty default script.
  const Script& script = sandbox->script;
  if (!stopped() && !script.stdout_text.empty()) {
    sandbox->sink->write(backend::Stream::kStdout, script.stdout_text);
  }
  if (!stopped() && script.echo_stdin && !sandbox->stdin_data.empty()) {
    sandbox->sink->write(backend::Stream::kStdout, sandbox->stdin_data);
  }
  if (!stopped() && !script.stderr_text.empty()) {
    sandbox->sink->write(backend::Stream::kStderr, script.stderr_text);
  }
  if (!stopped() && !script.connects.empty()) {
    playConnects(sandbox);
  }
  const std::string chunk(kFloodChunk, 'x');
  for (std::uint64_t left = script.flood_bytes; left > 0 && !stopped();) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, kFloodChunk));
    sandbox->sink->write(backend::Stream::kStdout, std::string_view(chunk).substr(0, n));
    left -= n;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (script.hang) {
    cv_.wait(lock, stopped);
  } else {
    waitFor(lock, script.sleep, stopped);
  }
  const int finish_code = sandbox->killed ? -1 : sandbox->finish_code.load();
  lock.unlock();
  // How the program's process ended (the launcher's record), and so the sandbox's exit.
  std::string program_exit;
  if (sandbox->killed) {
    exit.exit_code = kKilledExitCode;
    exit.killed_outside = sandbox->killed_outside;
  } else if (finish_code >= 0) {
    exit.exit_code = finish_code;
  } else if (script.engine_error) {
    exit.engine_error = *script.engine_error;
  } else if (script.oom) {
    exit.exit_code = kKilledExitCode;
    exit.oom_killed = true;
    program_exit = R"({"signal":9})";
  } else if (script.child_oom) {
    exit.exit_code = 0;
    exit.oom_killed = true;
  } else if (script.signal) {
    exit.exit_code = 128 + *script.signal;
    program_exit = "{\"signal\":" + std::to_string(*script.signal) + "}";
  } else if (script.exception && !script.exit_given) {
    exit.exit_code = 1;
  } else {
    exit.exit_code = script.exit_code;
  }
  if (program_exit.empty() && exit.exit_code) {
    program_exit = "{\"code\":" + std::to_string(*exit.exit_code) + "}";
  }
  exit.peak_memory_bytes = script.peak_memory_bytes;
  exit.cpu_seconds = script.cpu_seconds;
  if (!sandbox->killed && finish_code < 0 && script.exception) {
    sandbox->sink->write(backend::Stream::kStderr, tracebackOf(*script.exception));
  }
  if (!sandbox->killed && !sandbox->nonce.empty() && !script.engine_error) {
    sandbox->sink->write(backend::Stream::kStderr, endMarkerOf(sandbox->nonce));
    sandbox->sink->write(backend::Stream::kStdout, trailerOf(sandbox->nonce, script, program_exit));
  }
  if (script.linger && !sandbox->killed) {
    std::unique_lock<std::mutex> linger(mu_);
    cv_.wait(linger, [&] { return sandbox->killed.load(); });
    exit.exit_code = kKilledExitCode;
  }
}

void FakeBackend::playSession(const std::shared_ptr<Sandbox>& sandbox, backend::Exit& exit) {
  const auto killed = [&] { return sandbox->killed.load(); };
  backend::OutputSink& sink = *sandbox->sink;
  while (true) {
    std::string archive;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !sandbox->runs.empty() || killed() || sandbox->pausing; });
      if (killed()) {
        break;
      }
      if (sandbox->pausing) {
        return;  // play() keeps it for resume()
      }
      archive = std::move(sandbox->runs.front().archive);
      sandbox->interrupt = sandbox->runs.front().interrupted;
      sandbox->runs.pop_front();
    }
    Script script;
    std::string code;
    std::string control;
    std::string stdin_data;
    extractFile(archive, controlPath(launcher::kControlFile), &control);
    extractFile(archive, controlPath(launcher::kStdinFile), &stdin_data);
    if (auto problem = extractFile(archive, codeFileOf(control), &code)) {
      script.exception.emplace("ValueError", "fake: " + *problem);
    } else if (auto bad = parseScript(code, &script)) {
      script = Script{};
      script.exception.emplace("ValueError", "fake: " + *bad);
    }
    const std::string nonce = nonceOf(control);
    log(backend::LogLevel::kInfo, "fake: running a run in session " + sandbox->id);
    sink.write(backend::Stream::kStdout, script.stdout_text);
    if (script.echo_stdin) {
      sink.write(backend::Stream::kStdout, stdin_data);
    }
    sink.write(backend::Stream::kStderr, script.stderr_text);
    std::optional<std::string> result = script.result;
    std::string program_exit = "{\"code\":" + std::to_string(script.exit_code) + "}";
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (const auto& [name, value] : script.sets) {
        sandbox->names[name] = value;
      }
      if (script.get) {
        const auto found = sandbox->names.find(*script.get);
        if (found == sandbox->names.end()) {
          script.exception.emplace("NameError", "name '" + *script.get + "' is not defined");
        } else {
          result = found->second;
        }
      }
      if (script.ignore_interrupt) {
        cv_.wait(lock, killed);
      } else if (script.hang) {
        cv_.wait(lock, [&] { return sandbox->interrupt || killed(); });
      } else {
        waitFor(lock, script.sleep, [&] { return sandbox->interrupt || killed(); });
      }
      if (killed()) {
        break;
      }
      if (sandbox->interrupt) {
        script.exception.emplace("KeyboardInterrupt", "");
        result.reset();
      }
    }
    const bool dies = script.die || script.oom;
    if (dies) {
      program_exit = R"({"signal":9})";
      result.reset();
    } else if (script.exception) {
      program_exit = R"({"code":1})";
      result.reset();
      sink.write(backend::Stream::kStderr, tracebackOf(*script.exception));
    }
    if (!nonce.empty()) {
      sink.write(backend::Stream::kStderr, endMarkerOf(nonce));
      sink.write(backend::Stream::kStdout, trailerOf(nonce, script, program_exit, result));
    }
    if (dies) {
      exit.exit_code = kKilledExitCode;
      exit.oom_killed = script.oom;
      return;
    }
    if (script.child_oom) {
      std::lock_guard<std::mutex> lock(mu_);
      sandbox->exit.oom_killed = true;  // seen by progress(); the interpreter lives on
      ++sandbox->oom_kills;
    }
  }
  exit.exit_code = kKilledExitCode;
  exit.killed_outside = sandbox->killed_outside;
}

}  // namespace scs::fake
