#pragma once

// The two streams of a started sandbox: its attached stdin, written by a StdinWriter on a
// thread of its own, and its attach output, drained by pumpOutput() at full speed on the
// sandbox's thread, so that output never waits for the code to be written.

#include <scs/backend/backend.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "engine_socket.h"

namespace scs::docker {

struct PumpResult {
  bool broke = false;        // the stream ended in an error, not at its end
  bool malformed = false;    // a frame header made no sense
  std::string system_error;  // the engine's system-error frames, capped
};

// Demultiplexes the attach stream into `sink` until it ends.
PumpResult pumpOutput(Connection& attach, backend::OutputSink& sink);

// Writes what is delivered to the sandbox's attached stdin, on its own thread, and half-closes
// it after the last delivery (the only one, unless the sandbox is a session's).
class StdinWriter {
 public:
  struct Delivery {
    std::string archive;
    std::chrono::steady_clock::time_point delivered_at;
    bool write = true;  // false: it came, but the sandbox ended or is being removed meanwhile
    bool last = true;   // stdin ends after it
  };

  // `take` blocks until bytes are delivered (and returns them) or never will be (nullopt: the
  // sandbox ended or is being removed); `release` makes a blocked take() return.
  StdinWriter(Connection& attach, std::function<std::optional<Delivery>()> take,
              std::function<void()> release);
  ~StdinWriter();  // finish()
  StdinWriter(const StdinWriter&) = delete;
  StdinWriter& operator=(const StdinWriter&) = delete;

  // Ends the writer: releases a take() still waiting, unblocks a write the sandbox stopped
  // reading, and joins. Idempotent. The accessors below are valid after it.
  void finish();

  std::optional<std::chrono::steady_clock::time_point> deliveredAt() const { return delivered_at_; }
  std::optional<std::chrono::steady_clock::time_point> writtenAt() const { return written_at_; }
  bool written() const { return written_; }

 private:
  Connection& attach_;
  std::function<void()> release_;
  std::optional<std::chrono::steady_clock::time_point> delivered_at_;
  std::optional<std::chrono::steady_clock::time_point> written_at_;
  bool written_ = false;
  std::thread thread_;
};

}  // namespace scs::docker
