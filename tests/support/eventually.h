#pragma once

#include <chrono>
#include <thread>

namespace scs::testing {

// Polls `condition` in real time until it holds (true) or `patience` passes (false): for what
// another thread does on its own time, never to show that something did not happen.
template <typename Condition>
bool eventually(Condition condition,
                std::chrono::milliseconds patience = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace scs::testing
