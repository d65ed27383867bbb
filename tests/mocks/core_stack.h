#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <vector>

#include "common/clock.h"
#include "fake_backend.h"
#include "policy/limits.h"
#include "policy/posture.h"
#include "runs/run_manager.h"
#include "support/manual_clock.h"

namespace scs::mocks {

inline constexpr policy::HostCapacity kTestHost{8, std::int64_t{64} << 30};

// The core as the MCP and transport tests drive it: the fake backend in-process, the limit
// policy of an 8-core, 64 GiB host, and a run manager over them, both on a test clock: a wait
// (wait_seconds, a long poll, a fake program's sleep) ends when the test moves `clock` to its
// deadline or the run ends, never because real time passed.
struct CoreStack {
  explicit CoreStack(const runs::RunSettings& settings = {}, policy::HostCapacity host = kTestHost,
                     runs::RunEvents* events = nullptr)
      : limits(policy::LimitSettings{}, host),
        runs(backend, settings, policy::SandboxSettings{}, clock, events) {}

  // True once the core waits on a sandbox, that is once a run has started executing.
  bool awaitARunning(std::chrono::milliseconds patience = std::chrono::seconds(10)) {
    return backend.awaitSandboxes(
        [](const std::vector<fake::FakeBackend::View>& views) {
          for (const auto& view : views) {
            if (view.waits > 0) {
              return true;
            }
          }
          return false;
        },
        patience);
  }

  // Makes `call` on another thread and moves the clock on, 10 ms at a time, until it
  // returns: a call that waits (wait_seconds) for a run that does not end by itself ends when
  // its wait has passed on the clock.
  template <typename Call>
  auto whileTimePasses(Call call) {
    auto answer = std::async(std::launch::async, std::move(call));
    while (answer.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
      clock.advance(std::chrono::milliseconds(10));
    }
    return answer.get();
  }

  // Kills every sandbox, as the engine would.
  void killAll() {
    for (const auto& view : backend.sandboxes()) {
      backend.kill(view.id);
    }
  }

  static fake::Options fakeOptions() {
    fake::Options options;
    options.keep_removed = true;
    return options;
  }

  testing::ManualClock clock;
  fake::FakeBackend backend{fakeOptions(), nullptr, &clock};
  policy::LimitPolicy limits;
  runs::RunManager runs;  // last: it stops before the backend goes away
};

}  // namespace scs::mocks
