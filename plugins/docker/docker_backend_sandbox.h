// What DockerBackend keeps for each sandbox it created, and the helpers its .cc files share:
// the guard that keeps exceptions from crossing the ABI, short ids and timings for the log.
// Internal to the backend's implementation; nothing else includes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "docker_backend.h"

namespace scs::docker {

struct DockerBackend::Sandbox {
  std::string id;  // the handle the core holds: the first container's id
  // The container that holds the sandbox now: `id` until a snapshot moves it into a fresh one
  // (snapshot()), made from the same create body under the name and a generation.
  std::string container;
  std::string name;
  json::ObjectPtr create_body;
  int generation = 0;
  std::string archive;     // held from deliver() until the stdin writer takes it
  bool delivered = false;  // deliver() succeeded; a second one is refused unless a session's
  bool session = false;    // takes any number of deliveries; stdin stays open
  std::chrono::steady_clock::time_point delivered_at;
  bool started = false;
  bool output_ended = false;  // the attach stream ended: nothing reads stdin any more
  bool done = false;          // the run ended and `result` is final
  bool removing = false;      // remove() has begun; no new thread may start
  // A session snapshotted (or being snapshotted) and not yet resumed: the end of its output
  // thread is the checkpoint's, and `paused` once that thread has finished.
  bool snapshot = false;
  bool paused = false;
  // A snapshot is about to be taken: deliveries wait in `archive` for the next start, and
  // `writer_idle` says the stdin writer has nothing in flight (it waits for a delivery).
  bool holding = false;
  bool writer_idle = false;
  // What the containers a snapshot left behind counted, added to the current one's cgroup.
  std::int64_t oom_kills_before = 0;
  double cpu_seconds_before = 0;
  bool die_event = false;       // the event stream reported the container's exit
  bool oom_event = false;       // the event stream reported an OOM kill
  std::int64_t oom_events = 0;  // how many
  bool kill_event = false;      // the event stream reported a kill (ours or anyone's)
  bool kill_requested = false;  // kill() was called for it
  bool cgroup_oom = false;
  std::int64_t cgroup_oom_kills = 0;  // the cgroup's oom_kill counter, as last read
  std::int64_t memory_limit = 0;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<double> cpu_seconds;
  std::shared_ptr<Connection> attach;
  std::shared_ptr<Connection> wait;
  std::thread thread;
  backend::WaitReply result;
};

// Runs `body`, turning an escaping exception into kInternal: nothing crosses the ABI.
template <typename Reply, typename Body>
Reply guarded(const char* operation, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    Reply reply{};
    reply.status = {backend::Code::kInternal, std::string(operation) + " failed: " + e.what()};
    return reply;
  } catch (...) {
    Reply reply{};
    reply.status = {backend::Code::kInternal,
                    std::string(operation) + " failed: unknown exception"};
    return reply;
  }
}

template <typename Body>
backend::Status guardedStatus(const char* operation, Body&& body) {
  struct Holder {
    backend::Status status;
  };
  return guarded<Holder>(operation, [&] { return Holder{body()}; }).status;
}

inline std::string shortId(const std::string& id) { return id.substr(0, 12); }

using SteadyClock = std::chrono::steady_clock;

inline std::string millisBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms",
                std::chrono::duration<double, std::milli>(to - from).count());
  return text;
}

inline std::string millisSince(SteadyClock::time_point since) {
  return millisBetween(since, SteadyClock::now());
}

}  // namespace scs::docker
