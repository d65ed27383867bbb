#include "support/null_backend.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <charconv>
#include <sstream>
#include <vector>

#include "runs/side_channel.h"
#include "support/checks.h"
#include "support/ustar.h"

namespace scs::fuzz {
namespace {

using scs::testing::readUstar;
using scs::testing::TarEntry;

constexpr auto kSlowRun = std::chrono::milliseconds(20);

// The nonce from the control file; empty when it is missing or malformed.
std::string nonceOf(const std::string& control) {
  try {
    Poco::JSON::Parser parser;
    const auto object = parser.parse(control).extract<Poco::JSON::Object::Ptr>();
    return object->getValue<std::string>("nonce");
  } catch (const Poco::Exception&) {
    return {};
  }
}

}  // namespace

backend::Status NullBackend::missing(const std::string& id) {
  return {backend::Code::kNotFound, "no sandbox " + id};
}

backend::CapacityReply NullBackend::capacity() { return {{}, {8, std::int64_t{64} << 30}}; }

backend::CreateReply NullBackend::create(const backend::SandboxSpec& spec) {
  std::lock_guard lock(mutex_);
  const std::string id = "null-" + std::to_string(++next_id_);
  sandboxes_[id].posture = spec.posture;
  return {{}, id};
}

backend::InspectReply NullBackend::inspect(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto found = sandboxes_.find(id);
  if (found == sandboxes_.end()) {
    return {missing(id), {}};
  }
  return {{}, found->second.posture};
}

backend::Status NullBackend::deliver(const std::string& id, const std::string& archive) {
  std::vector<TarEntry> entries;
  if (const std::optional<std::string> problem = readUstar(archive, &entries)) {
    fail("the core delivered a broken archive: " + *problem);
  }
  std::lock_guard lock(mutex_);
  const auto found = sandboxes_.find(id);
  if (found == sandboxes_.end()) {
    return missing(id);
  }
  for (const TarEntry& entry : entries) {
    if (entry.name == "main.py") {
      found->second.code = entry.content;
    } else if (entry.name == ".scs/control.json") {
      found->second.nonce = nonceOf(entry.content);
    }
  }
  return {};
}

backend::Status NullBackend::start(const std::string& id, backend::OutputSink* sink) {
  std::string code;
  std::string nonce;
  std::string trailer;
  {
    std::lock_guard lock(mutex_);
    const auto found = sandboxes_.find(id);
    if (found == sandboxes_.end()) {
      return missing(id);
    }
    Sandbox& sandbox = found->second;
    code = sandbox.code;
    nonce = sandbox.nonce;
    sandbox.ends = std::chrono::steady_clock::now();
    std::istringstream lines(code);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("#exit=", 0) == 0) {
        std::from_chars(line.data() + 6, line.data() + line.size(), sandbox.exit_code);
      } else if (line == "#slow") {
        sandbox.ends += kSlowRun;
      } else if (line.rfind("#trailer ", 0) == 0) {
        trailer = line.substr(9);
      }
    }
  }
  sink->write(backend::Stream::kStdout, code);
  sink->write(backend::Stream::kStderr, "null backend: done\n");
  if (!trailer.empty()) {
    sink->write(backend::Stream::kStderr, runs::stderrEndMarker(nonce));
    sink->write(backend::Stream::kStdout, runs::trailerMarker(nonce) + trailer + "\n");
  }
  std::lock_guard lock(mutex_);
  const auto found = sandboxes_.find(id);
  if (found == sandboxes_.end()) {
    return missing(id);
  }
  found->second.ender = std::thread([this, id, sink] {
    std::unique_lock wait(mutex_);
    Sandbox& sandbox = sandboxes_.at(id);  // erased only after this thread is joined
    changed_.wait_until(wait, sandbox.ends, [&] { return sandbox.killed || sandbox.removed; });
    if (sandbox.removed) {
      return;
    }
    wait.unlock();
    sink->ended();
  });
  return {};
}

backend::ProgressReply NullBackend::progress(const std::string& id) {
  std::lock_guard lock(mutex_);
  backend::ProgressReply reply;
  if (sandboxes_.count(id) == 0) {
    reply.status = missing(id);
    return reply;
  }
  reply.oom_known = true;  // nothing here is ever OOM-killed
  return reply;
}

backend::WaitReply NullBackend::wait(const std::string& id, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto found = sandboxes_.find(id);
  if (found == sandboxes_.end()) {
    return {missing(id), {}};
  }
  const auto deadline = std::min(found->second.ends, std::chrono::steady_clock::now() + timeout);
  // Looked up again after every wake-up: remove() may run meanwhile.
  changed_.wait_until(lock, deadline, [&] {
    const auto current = sandboxes_.find(id);
    return current == sandboxes_.end() || current->second.killed;
  });
  const auto current = sandboxes_.find(id);
  if (current == sandboxes_.end()) {
    return {missing(id), {}};
  }
  backend::WaitReply reply;
  if (current->second.killed) {
    reply.exit.exited = true;
    reply.exit.exit_code = 137;
  } else if (std::chrono::steady_clock::now() >= current->second.ends) {
    reply.exit.exited = true;
    reply.exit.exit_code = current->second.exit_code;
  }
  return reply;
}

backend::Status NullBackend::kill(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto found = sandboxes_.find(id);
  if (found == sandboxes_.end()) {
    return missing(id);
  }
  found->second.killed = true;
  changed_.notify_all();
  return {};
}

backend::Status NullBackend::remove(const std::string& id) {
  std::thread ender;
  {
    std::lock_guard lock(mutex_);
    const auto found = sandboxes_.find(id);
    if (found == sandboxes_.end() || found->second.removed) {
      return {};  // gone, or another remove() is erasing it
    }
    found->second.removed = true;
    ender = std::move(found->second.ender);
    changed_.notify_all();
  }
  if (ender.joinable()) {
    ender.join();
  }
  std::lock_guard lock(mutex_);
  sandboxes_.erase(id);
  return {};
}

NullBackend::~NullBackend() {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, sandbox] : sandboxes_) {
      ids.push_back(id);
    }
  }
  for (const std::string& id : ids) {
    remove(id);
  }
}

backend::ListReply NullBackend::list(const std::string&) { return {}; }

}  // namespace scs::fuzz
