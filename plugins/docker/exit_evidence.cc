// mergeExitEvidence: the wait body, or failing it the engine's record, gives the exit; the
// engine's errors are gathered, capped; a kill nobody asked for or a vanished record is noted.

#include "exit_evidence.h"

#include <algorithm>

namespace scs::docker {
namespace {

using backend::Code;

constexpr std::size_t kMaxEngineError = 4096;

void appendCapped(std::string* text, std::string_view more) {
  if (text->size() < kMaxEngineError) {
    text->append(more.substr(0, kMaxEngineError - text->size()));
  }
}

}  // namespace

backend::WaitReply mergeExitEvidence(const ExitFacts& facts) {
  backend::WaitReply reply;
  std::string engine_error;
  if (!facts.system_error.empty()) {
    appendCapped(&engine_error, "engine: " + facts.system_error + " ");
  }
  if (facts.stream_broke && !facts.removing) {
    appendCapped(&engine_error, "the output stream broke before the end; ");
  }
  if (facts.stream_malformed) {
    appendCapped(&engine_error, "the engine's output stream was malformed; ");
  }

  const EngineReply<WaitOutcome> outcome =
      facts.wait_broke
          ? EngineReply<WaitOutcome>{{Code::kUnavailable, "wait: the engine's wait broke"}}
          : EngineClient::parseWait(facts.wait_body);
  const json::ObjectPtr state = json::object(facts.record.value, "State");
  if (outcome.status.ok()) {
    reply.exit.exited = true;
    reply.exit.exit_code = static_cast<int>(outcome.value.status_code);
    if (!outcome.value.error.empty()) {
      appendCapped(&engine_error, outcome.value.error + "; ");
    }
  } else if (json::boolean(state, "Running") == false &&
             json::string(state, "Status") == std::string("exited")) {
    // The wait connection broke but the engine's record knows how it ended.
    reply.exit.exited = true;
    if (const auto code = json::integer(state, "ExitCode")) {
      reply.exit.exit_code = static_cast<int>(*code);
    }
  } else {
    reply.status = facts.removing
                       ? backend::Status{Code::kNotFound, "the sandbox was removed before it ended"}
                       : outcome.status;
  }
  if (const auto error = json::string(state, "Error"); error && !error->empty()) {
    appendCapped(&engine_error, *error + "; ");
  }
  // A stopping engine closes its API before it kills the containers, and the open wait stream
  // still delivers their exit: an engine that cannot be reached right after the exit ended the
  // run itself, whatever exit code it reported.
  if (!facts.removing && !facts.record.status.ok() && facts.record.status.code != Code::kNotFound) {
    appendCapped(&engine_error,
                 "the container engine stopped or became unreachable as the run ended: " +
                     facts.record.status.message + "; ");
  }
  while (!engine_error.empty() && (engine_error.back() == ' ' || engine_error.back() == ';')) {
    engine_error.pop_back();
  }
  reply.exit.engine_error = engine_error;

  reply.exit.killed_outside = !facts.removing && !facts.kill_requested &&
                              (facts.kill_event || facts.record.status.code == Code::kNotFound);
  reply.exit.oom_killed =
      json::boolean(state, "OOMKilled").value_or(false) || facts.oom_event || facts.cgroup_oom;
  reply.exit.peak_memory_bytes = facts.peak_memory_bytes;
  if (reply.exit.oom_killed && facts.memory_limit_bytes > 0) {
    reply.exit.peak_memory_bytes =
        std::max(facts.peak_memory_bytes.value_or(0), facts.memory_limit_bytes);
  }
  reply.exit.cpu_seconds = facts.cpu_seconds;
  return reply;
}

}  // namespace scs::docker
