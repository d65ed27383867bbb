// The FakeBackend members that only in-process tests call (not the plugin ABI): views of every
// sandbox, and ending, writing to or killing one as its program or an operator would.
#include <algorithm>
#include <utility>

#include "fake_backend.h"

namespace scs::fake {

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
  view.snapshotted = sandbox.state == State::kSnapshotted;
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
