#include "fake_backend.h"

#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "json_access.h"

namespace scs::fake {
namespace {

namespace launcher = backend::launcher;

using backend::Code;
using backend::Status;

constexpr std::int64_t kBytesPerGb = std::int64_t{1} << 30;
constexpr std::size_t kFloodChunk = 64 * 1024;
constexpr int kKilledExitCode = 137;

Status scripted(const std::string& call) {
  return Status{Code::kUnavailable, "fake: " + call + " failed as scripted"};
}

Status notFound(const std::string& id) { return Status{Code::kNotFound, "fake: no sandbox " + id}; }

// A reply that carries only `status`, a failure.
template <typename Reply>
Reply failedReply(Status status) {
  Reply reply;
  reply.status = std::move(status);
  return reply;
}

template <typename Reply, typename Fn>
Reply guardReply(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return failedReply<Reply>(Status{Code::kInternal, std::string("fake: ") + e.what()});
  }
}

// guardReply, but the scripted failure when the options `fail` the call named `call`.
template <typename Reply, typename Fn>
Reply guardReply(const std::set<std::string>& fail, const std::string& call, Fn&& fn) {
  if (fail.count(call) != 0) {
    return failedReply<Reply>(scripted(call));
  }
  return guardReply<Reply>(std::forward<Fn>(fn));
}

template <typename Fn>
Status guardStatus(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Status{Code::kInternal, std::string("fake: ") + e.what()};
  }
}

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (byte < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out.append(escaped);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// The value of "nonce" in the control file, which the core writes as compact JSON.
std::string nonceOf(std::string_view control) {
  constexpr std::string_view kKey = "\"nonce\":\"";
  const std::size_t at = control.find(kKey);
  if (at == std::string_view::npos) {
    return {};
  }
  const std::size_t start = at + kKey.size();
  const std::size_t end = control.find('"', start);
  return end == std::string_view::npos ? std::string()
                                       : std::string(control.substr(start, end - start));
}

std::string tracebackOf(const std::pair<std::string, std::string>& exception) {
  return "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 1, in "
         "<module>\n" +
         exception.first + ": " + exception.second + "\n";
}

// What the launcher writes after the program ends, `program_exit` being how its process ended
// ({"code":N} or {"signal":N}).
std::string endMarkerOf(const std::string& nonce) {
  return std::string(launcher::kEndPrefix) + nonce + std::string(launcher::kMarkerEnd);
}

std::string trailerOf(const std::string& nonce, const Script& script,
                      const std::string& program_exit,
                      const std::optional<std::string>& result = std::nullopt) {
  std::string trailer(launcher::kTrailerPrefix);
  trailer += nonce;
  trailer += launcher::kMarkerEnd;
  if (script.trailer_json) {
    return trailer + *script.trailer_json + "\n";
  }
  trailer += "{\"exit\":" + program_exit + ",\"exception\":";
  if (script.exception) {
    trailer += "{\"type\":" + jsonString(script.exception->first) +
               ",\"message\":" + jsonString(script.exception->second) +
               ",\"traceback\":" + jsonString(tracebackOf(*script.exception)) + "}";
  } else {
    trailer += "null";
  }
  trailer += ",\"files\":[";
  for (std::size_t i = 0; i < script.out_files.size(); ++i) {
    const auto& [path, content] = script.out_files[i];
    trailer += (i == 0 ? "" : ",");
    trailer += "{\"path\":" + jsonString(path) + ",\"size\":" + std::to_string(content.size()) +
               ",\"content_base64\":\"" + json::encodeBase64(content) + "\"}";
  }
  trailer += "],\"files_truncated\":false,\"files_omitted\":0";
  if (result) {
    trailer += ",\"result\":" + jsonString(*result);
  }
  return trailer + "}\n";
}

void differ(std::int64_t* value) { *value = *value > 0 ? *value * 2 : 1; }

void differ(std::vector<std::string>* values, const char* extra) {
  if (values->empty()) {
    values->push_back(extra);
  } else {
    values->pop_back();
  }
}

const std::map<std::string, std::function<void(backend::Posture&)>>& alterations() {
  using P = backend::Posture;
  static const std::map<std::string, std::function<void(P&)>> table = {
      {"image", [](P& p) { p.image += "-substituted"; }},
      {"runtime", [](P& p) { p.runtime = p.runtime == "runc" ? "runsc" : "runc"; }},
      {"user", [](P& p) { p.user = p.user == "0:0" ? "10001:10001" : "0:0"; }},
      {"network_disabled", [](P& p) { p.network_disabled = !p.network_disabled; }},
      {"read_only_root", [](P& p) { p.read_only_root = !p.read_only_root; }},
      {"privileged", [](P& p) { p.privileged = !p.privileged; }},
      {"all_capabilities_dropped",
       [](P& p) { p.all_capabilities_dropped = !p.all_capabilities_dropped; }},
      {"added_capabilities", [](P& p) { p.added_capabilities.push_back("SYS_ADMIN"); }},
      {"no_new_privileges", [](P& p) { p.no_new_privileges = !p.no_new_privileges; }},
      {"seccomp_enabled", [](P& p) { p.seccomp_enabled = !p.seccomp_enabled; }},
      {"seccomp_profile",
       [](P& p) {
         p.seccomp_profile =
             p.seccomp_profile.empty() ? R"({"defaultAction":"SCMP_ACT_ALLOW"})" : "";
       }},
      {"engine_init", [](P& p) { p.engine_init = !p.engine_init; }},
      {"init_command",
       [](P& p) {
         p.init_command.insert(p.init_command.begin(), "/usr/bin/timeout");  // PID 1 no longer
       }},
      {"host_namespaces", [](P& p) { p.host_namespaces.push_back("pid"); }},
      {"host_mounts", [](P& p) { p.host_mounts.push_back("/:/host"); }},
      {"devices", [](P& p) { p.devices.push_back("/dev/kvm"); }},
      {"tmpfs",
       [](P& p) {
         if (p.tmpfs.empty()) {
           backend::TmpfsMount extra;
           extra.path = "/scratch";
           extra.size_bytes = 1 << 20;
           p.tmpfs.push_back(extra);
         } else {
           p.tmpfs.front().noexec = !p.tmpfs.front().noexec;
         }
       }},
      {"shm_bytes", [](P& p) { differ(&p.shm_bytes); }},
      {"memory_bytes", [](P& p) { differ(&p.memory_bytes); }},
      {"memory_swap_bytes", [](P& p) { differ(&p.memory_swap_bytes); }},
      {"nano_cpus", [](P& p) { differ(&p.nano_cpus); }},
      {"pids_limit", [](P& p) { differ(&p.pids_limit); }},
      {"processes_limit", [](P& p) { differ(&p.processes_limit); }},
      {"open_files_limit", [](P& p) { differ(&p.open_files_limit); }},
      {"file_size_limit_bytes", [](P& p) { differ(&p.file_size_limit_bytes); }},
      {"core_dumps_disabled", [](P& p) { p.core_dumps_disabled = !p.core_dumps_disabled; }},
      {"masked_paths", [](P& p) { differ(&p.masked_paths, "/proc/kcore"); }},
      {"readonly_paths", [](P& p) { differ(&p.readonly_paths, "/proc/sys"); }},
  };
  return table;
}

}  // namespace

std::optional<std::string> parseOptions(const std::map<std::string, std::string>& raw,
                                        Options* options) {
  for (const auto& [key, value] : raw) {
    if (key == "cores") {
      auto cores = parseInteger(value, 1, 4096);
      if (!cores) {
        return "fake backend option cores=" + value + " is not a whole number from 1 to 4096";
      }
      options->cores = static_cast<int>(*cores);
    } else if (key == "memory_gb") {
      char* end = nullptr;
      const double gb = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(gb) || gb <= 0 || gb > 1 << 20) {
        return "fake backend option memory_gb=" + value + " is not a positive number";
      }
      options->memory_gb = gb;
    } else if (key == "fail") {
      std::string_view rest = value;
      while (true) {
        const auto comma = rest.find(',');
        const std::string call(rest.substr(0, comma));
        if (call != "create" && call != "inspect" && call != "list" && call != "capacity" &&
            call != "supports") {
          return "fake backend option fail=" + value +
                 " names an unknown call; use create, inspect, list, capacity or supports";
        }
        options->fail.insert(call);
        if (comma == std::string_view::npos) {
          break;
        }
        rest.remove_prefix(comma + 1);
      }
    } else if (key == "posture") {
      if (alterations().count(value) == 0) {
        return "fake backend option posture=" + value + " names no posture field";
      }
      options->posture_field = value;
    } else if (key == "engine") {
      // Every backend receives --engine; the fake has no engine to reach.
    } else {
      return "unknown fake backend option '" + key +
             "'; known: cores, memory_gb, fail, posture, engine";
    }
  }
  return std::nullopt;
}

bool alterPosture(const std::string& field, backend::Posture* posture) {
  auto it = alterations().find(field);
  if (it == alterations().end()) {
    return false;
  }
  it->second(*posture);
  return true;
}

FakeBackend::FakeBackend(Options options, backend::LogSink* log, const Clock* clock)
    : options_(std::move(options)), log_(log), clock_(clock) {}

FakeBackend::~FakeBackend() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_removals_ = false;
    for (auto& [id, sandbox] : sandboxes_) {
      sandbox->killed = true;
      sandbox->removed = true;
      if (sandbox->worker.joinable()) {
        workers.push_back(std::move(sandbox->worker));
      }
    }
    cv_.notify_all();
  }
  for (auto& worker : workers) {
    worker.join();
  }
}

void FakeBackend::log(backend::LogLevel level, const std::string& message) {
  if (log_ != nullptr) {
    log_->log(level, message);
  }
}

template <typename Done>
bool FakeBackend::waitFor(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout,
                          Done done) {
  if (clock_ == nullptr) {
    return cv_.wait_for(lock, timeout, done);
  }
  const auto deadline = clock_->now() + timeout;
  while (!done()) {
    if (clock_->now() >= deadline) {
      return done();
    }
    clock_->waitUntil(cv_, lock, deadline);
  }
  return true;
}

std::shared_ptr<FakeBackend::Sandbox> FakeBackend::find(const std::string& id) {
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

backend::Status FakeBackend::supports(const backend::Posture&) {
  if (options_.fail.count("supports") != 0) {
    return {Code::kUnsupported, "fake: every control of the posture, as scripted"};
  }
  return {};
}

backend::CapacityReply FakeBackend::capacity() {
  return guardReply<backend::CapacityReply>(options_.fail, "capacity", [&] {
    backend::CapacityReply reply;
    reply.capacity.cores = options_.cores;
    reply.capacity.memory_bytes =
        static_cast<std::int64_t>(options_.memory_gb * static_cast<double>(kBytesPerGb));
    return reply;
  });
}

backend::CreateReply FakeBackend::create(const backend::SandboxSpec& spec) {
  return guardReply<backend::CreateReply>(options_.fail, "create", [&] {
    backend::CreateReply reply;
    auto sandbox = std::make_shared<Sandbox>();
    sandbox->spec = spec;
    sandbox->serves_session = std::find(spec.command.begin(), spec.command.end(),
                                        std::string(launcher::kFlagSession)) != spec.command.end();
    {
      std::lock_guard<std::mutex> lock(mu_);
      sandbox->id = "fake-" + std::to_string(next_id_++);
      sandboxes_[sandbox->id] = sandbox;
      if (options_.keep_removed) {
        history_.push_back(sandbox);
      }
      cv_.notify_all();
    }
    reply.id = sandbox->id;
    log(backend::LogLevel::kDebug, "fake: created " + reply.id);
    return reply;
  });
}

backend::InspectReply FakeBackend::inspect(const std::string& id) {
  return guardReply<backend::InspectReply>(options_.fail, "inspect", [&] {
    std::lock_guard<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return failedReply<backend::InspectReply>(notFound(id));
    }
    backend::InspectReply reply;
    reply.posture = sandbox->spec.posture;
    if (!options_.posture_field.empty()) {
      alterPosture(options_.posture_field, &reply.posture);
    }
    return reply;
  });
}

Status FakeBackend::deliverToSession(Sandbox& sandbox, const std::string& bytes) {
  if (sandbox.state == State::kExited || (sandbox.state != State::kCreated && sandbox.killed)) {
    return Status{Code::kUnavailable, "fake: sandbox " + sandbox.id + " has already ended"};
  }
  if (bytes == std::string(launcher::kInterruptFrame) + "\n") {
    (sandbox.runs.empty() ? sandbox.interrupt : sandbox.runs.back().interrupted) = true;
  } else {
    const std::size_t newline = bytes.find('\n');
    const std::string run = std::string(launcher::kRunFrame) + " ";
    if (bytes.rfind(run, 0) != 0 || newline == std::string::npos ||
        std::to_string(bytes.size() - newline - 1) !=
            bytes.substr(run.size(), newline - run.size())) {
      return Status{Code::kRejected, "fake: a session delivery must be one whole frame"};
    }
    sandbox.archive = bytes.substr(newline + 1);
    sandbox.runs.push_back({sandbox.archive, false});
    sandbox.delivered = true;
  }
  cv_.notify_all();
  return Status{};
}

Status FakeBackend::becomeSession(Sandbox& sandbox, const std::string& frame) {
  const std::string prefix = std::string(launcher::kSessionFrame) + " ";
  const std::string seconds = frame.substr(prefix.size(), frame.size() - prefix.size() - 1);
  if (frame.back() != '\n' || seconds.empty() ||
      seconds.find_first_not_of("0123456789") != std::string::npos) {
    return Status{Code::kRejected, "fake: a malformed session frame"};
  }
  if (sandbox.state == State::kExited || (sandbox.state != State::kCreated && sandbox.killed)) {
    return Status{Code::kUnavailable, "fake: sandbox " + sandbox.id + " has already ended"};
  }
  sandbox.serves_session = true;
  sandbox.archive = frame;
  cv_.notify_all();  // wakes a sandbox started idle
  return Status{};
}

Status FakeBackend::deliver(const std::string& id, const std::string& archive) {
  return guardStatus([&] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto sandbox = find(id);
      if (sandbox && !sandbox->removed && sandbox->serves_session) {
        return deliverToSession(*sandbox, archive);
      }
      if (sandbox && !sandbox->removed && !sandbox->delivered &&
          archive.rfind(std::string(launcher::kSessionFrame) + " ", 0) == 0) {
        return becomeSession(*sandbox, archive);
      }
    }
    std::string main_py;
    if (auto problem = extractFile(archive, "main.py", &main_py)) {
      return Status{Code::kRejected, "fake: " + *problem};
    }
    Script script;
    if (auto problem = parseScript(main_py, &script)) {
      return Status{Code::kRejected, "fake: " + *problem};
    }
    if (script.fail.count("deliver") != 0) {
      return scripted("deliver");
    }
    std::string control;
    std::string nonce;
    std::string stdin_data;
    if (!extractFile(archive, ".scs/control.json", &control)) {
      nonce = nonceOf(control);
      extractFile(archive, ".scs/stdin", &stdin_data);
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox || sandbox->removed) {
      return notFound(id);
    }
    if (sandbox->delivered) {
      return Status{Code::kRejected, "fake: sandbox " + id + " already has its code"};
    }
    if (sandbox->state == State::kExited ||
        (sandbox->state != State::kCreated && sandbox->killed)) {
      return Status{Code::kUnavailable, "fake: sandbox " + id + " has already ended"};
    }
    sandbox->script = std::move(script);
    sandbox->archive = archive;
    sandbox->nonce = std::move(nonce);
    sandbox->stdin_data = std::move(stdin_data);
    sandbox->delivered = true;
    cv_.notify_all();  // wakes a sandbox started idle
    return Status{};
  });
}

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
    sandbox->exit = exit;
    sandbox->state = State::kExited;
  }
  cv_.notify_all();
  sandbox->sink->ended();
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
      cv_.wait(lock, [&] { return !sandbox->runs.empty() || killed(); });
      if (killed()) {
        break;
      }
      archive = std::move(sandbox->runs.front().archive);
      sandbox->interrupt = sandbox->runs.front().interrupted;
      sandbox->runs.pop_front();
    }
    Script script;
    std::string main_py;
    std::string control;
    std::string stdin_data;
    if (auto problem = extractFile(archive, "main.py", &main_py)) {
      script.exception.emplace("ValueError", "fake: " + *problem);
    } else if (auto bad = parseScript(main_py, &script)) {
      script = Script{};
      script.exception.emplace("ValueError", "fake: " + *bad);
    }
    extractFile(archive, ".scs/control.json", &control);
    extractFile(archive, ".scs/stdin", &stdin_data);
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

backend::WaitReply FakeBackend::wait(const std::string& id, std::chrono::milliseconds timeout) {
  return guardReply<backend::WaitReply>([&] {
    std::unique_lock<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return failedReply<backend::WaitReply>(notFound(id));
    }
    if (sandbox->script.fail.count("wait") != 0) {
      return failedReply<backend::WaitReply>(scripted("wait"));
    }
    backend::WaitReply reply;
    if (sandbox->delivered) {
      ++sandbox->waits;
      cv_.notify_all();
    }
    waitFor(lock, timeout, [&] { return sandbox->state == State::kExited || sandbox->removed; });
    if (sandbox->state == State::kExited) {
      reply.exit = sandbox->exit;
    } else if (sandbox->removed) {
      reply.status = notFound(id);
    }
    return reply;
  });
}

// The script says what the cgroup counters would: an OOM kill once the code has arrived.
backend::ProgressReply FakeBackend::progress(const std::string& id) {
  return guardReply<backend::ProgressReply>([&] {
    std::lock_guard<std::mutex> lock(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return failedReply<backend::ProgressReply>(notFound(id));
    }
    backend::ProgressReply reply;
    reply.oom_known = true;
    reply.oom_killed = sandbox->delivered && (sandbox->script.oom || sandbox->script.child_oom);
    reply.oom_kills = sandbox->serves_session ? sandbox->oom_kills : (reply.oom_killed ? 1 : 0);
    reply.oom_killed = reply.oom_killed || sandbox->oom_kills > 0;
    reply.peak_memory_bytes =
        sandbox->delivered ? sandbox->script.peak_memory_bytes : options_.idle_peak_bytes;
    reply.cpu_seconds = sandbox->script.cpu_seconds;
    return reply;
  });
}

Status FakeBackend::kill(const std::string& id) {
  std::unique_lock<std::mutex> lock(mu_);
  if (throw_on_next_kill_) {
    throw_on_next_kill_ = false;
    throw std::runtime_error("fake kill exploded");
  }
  lock.unlock();
  return guardStatus([&] {
    std::lock_guard<std::mutex> guard(mu_);
    auto sandbox = find(id);
    if (!sandbox) {
      return notFound(id);
    }
    sandbox->kill_seen = true;
    if (!(sandbox->delivered && sandbox->script.ignore_kill)) {
      sandbox->killed = true;
    }
    cv_.notify_all();
    return Status{};
  });
}

Status FakeBackend::remove(const std::string& id) {
  return guardStatus([&] {
    std::thread worker;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto held = find(id);
      if (held && hold_removals_) {
        held->removing = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !hold_removals_; });
      }
      auto sandbox = find(id);
      if (!sandbox) {
        return Status{};
      }
      sandbox->killed = true;
      sandbox->removed = true;
      worker = std::move(sandbox->worker);
      sandboxes_.erase(id);
      cv_.notify_all();
    }
    if (worker.joinable()) {
      worker.join();
    }
    log(backend::LogLevel::kDebug, "fake: removed " + id);
    return Status{};
  });
}

backend::ListReply FakeBackend::list(const std::string& label_key) {
  return guardReply<backend::ListReply>(options_.fail, "list", [&] {
    backend::ListReply reply;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, sandbox] : sandboxes_) {
      if (sandbox->spec.labels.count(label_key) != 0) {
        reply.sandboxes.push_back(backend::SandboxInfo{id, sandbox->spec.labels});
      }
    }
    return reply;
  });
}

FakeBackend::View FakeBackend::viewOf(const Sandbox& sandbox) {
  View view;
  view.id = sandbox.id;
  view.spec = sandbox.spec;
  view.archive = sandbox.archive;
  view.started = sandbox.state != State::kCreated;
  view.killed = sandbox.kill_seen;
  view.removed = sandbox.removed;
  view.removing = sandbox.removing;
  view.exited = sandbox.state == State::kExited;
  view.serves_session = sandbox.serves_session;
  view.running = sandbox.state == State::kRunning && sandbox.delivered && !sandbox.killed &&
                 sandbox.finish_code < 0 && !sandbox.removed;
  view.exit = sandbox.exit;
  view.waits = sandbox.waits;
  return view;
}

std::vector<FakeBackend::View> FakeBackend::viewsLocked() const {
  std::vector<View> views;
  if (options_.keep_removed) {
    for (const auto& sandbox : history_) {
      views.push_back(viewOf(*sandbox));
    }
    return views;
  }
  for (const auto& [id, sandbox] : sandboxes_) {
    views.push_back(viewOf(*sandbox));
  }
  std::sort(views.begin(), views.end(), [](const View& a, const View& b) {
    return std::stoull(a.id.substr(5)) < std::stoull(b.id.substr(5));
  });
  return views;
}

std::vector<FakeBackend::View> FakeBackend::sandboxes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return viewsLocked();
}

std::optional<FakeBackend::View> FakeBackend::sandbox(const std::string& id) const {
  for (View& view : sandboxes()) {
    if (view.id == id) {
      return std::move(view);
    }
  }
  return std::nullopt;
}

bool FakeBackend::awaitSandboxes(const std::function<bool(const std::vector<View>&)>& ready,
                                 std::chrono::milliseconds patience) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, patience, [&] { return ready(viewsLocked()); });
}

bool FakeBackend::finish(const std::string& id, int exit_code, std::string_view out,
                         std::string_view err) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sandbox = find(id);
  if (!sandbox || sandbox->state != State::kRunning || sandbox->killed ||
      sandbox->finish_code >= 0) {
    return false;
  }
  if (!out.empty()) {
    sandbox->sink->write(backend::Stream::kStdout, out);
  }
  if (!err.empty()) {
    sandbox->sink->write(backend::Stream::kStderr, err);
  }
  sandbox->finish_code = exit_code;
  cv_.notify_all();
  return true;
}

bool FakeBackend::write(const std::string& id, backend::Stream stream, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sandbox = find(id);
  if (!sandbox || sandbox->sink == nullptr) {
    return false;
  }
  sandbox->sink->write(stream, bytes);
  return true;
}

void FakeBackend::holdRemovals(bool hold) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_removals_ = hold;
  cv_.notify_all();
}

bool FakeBackend::killFromOutside(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sandbox = find(id);
  if (!sandbox || sandbox->state != State::kRunning) {
    return false;
  }
  sandbox->killed_outside = true;
  sandbox->killed = true;
  cv_.notify_all();
  return true;
}

void FakeBackend::throwOnNextKill() {
  std::lock_guard<std::mutex> lock(mu_);
  throw_on_next_kill_ = true;
}

}  // namespace scs::fake
