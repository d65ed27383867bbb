// Feeds bytes to mcp::Server the way the stdio transport does (one message per line, a
// trailing "\r" dropped, blank lines skipped), with a RunManager over the fake plugin's
// backend (plugins/fake), which never runs anything but plays the `#fake:` directives of the
// code and the launcher's side of the side channel. Every answer must be one line of strict JSON
// shaped as a JSON-RPC 2.0 response, never an internal error; exactly the messages Server::parse
// classifies as requests or invalid are answered, and only notifications and responses go
// unanswered.
//
// "RUN_ID" in a message stands for the last run started, so that get_result and stop_run
// reach real runs although run ids are random; each run is let end before the next message,
// so that no answer depends on timing, except one whose script keeps it going (lasts()), which a
// later get_result may wait for: then every progress notification is checked too.

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Logger.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "fake_backend.h"
#include "mcp/server.h"
#include "mocks/test_logs.h"
#include "policy/files.h"
#include "policy/limits.h"
#include "policy/posture.h"
#include "policy/status_map.h"
#include "runs/run_manager.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

// More than RunSettings::max_concurrent would let, so that every start_run is admitted at
// once and its answer ("running") does not depend on how fast earlier runs ended.
constexpr std::size_t kMaxMessages = 16;

constexpr std::string_view kRunIdPlaceholder = "RUN_ID";

const std::set<std::string> kMethods = {"initialize", "ping", "tools/list", "tools/call",
                                        "logging/setLevel"};

struct Fixture {
  mocks::NullLog log;
  fake::FakeBackend backend{fake::Options{}, &log};
  policy::LimitPolicy limits{policy::LimitSettings{},
                             policy::HostCapacity{8, std::int64_t{64} << 30}};
  policy::FileSettings files;
  policy::SandboxSettings sandbox;
  common::SystemClock clock;
  runs::RunSettings settings;

  Fixture() {
    settings.instance_id = "fuzz";
    settings.max_concurrent = static_cast<int>(kMaxMessages);
    settings.max_queue = 4;
  }
};

Fixture& fixture() {
  static Fixture* instance = new Fixture;
  return *instance;
}

// Whether an integer literal fits in int64 (negative) or uint64, by comparing digit strings.
bool fitsIn64Bits(std::string_view literal) {
  const bool negative = literal.front() == '-';
  const std::string_view digits = literal.substr(negative ? 1 : 0);
  const std::string_view limit = negative ? "9223372036854775808" : "18446744073709551615";
  return digits.size() < limit.size() || (digits.size() == limit.size() && digits <= limit);
}

// Poco cannot read every integer literal beyond 64 bits; the server reads them as the
// floating-point numbers they are, and so does the oracle, by giving them a ".0".
std::string widenLongIntegers(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"') {
      std::size_t end = i + 1;
      while (end < text.size() && text[end] != '"') {
        end += text[end] == '\\' ? 2 : 1;
      }
      end = std::min(end + 1, text.size());
      out.append(text.substr(i, end - i));
      i = end;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') ||
                                 std::string_view(".eE+-").find(text[end]) != std::string::npos)) {
      ++end;
    }
    if (end == i) {
      out.push_back(c);
      ++i;
      continue;
    }
    const std::string_view token = text.substr(i, end - i);
    out.append(token);
    if (token.find_first_of(".eE+-", 1) == std::string_view::npos && !fitsIn64Bits(token)) {
      out += ".0";
    }
    i = end;
  }
  return out;
}

// The message as a JSON value, when Poco can read it at all.
std::optional<Var> parseLoosely(std::string_view message) {
  try {
    Poco::JSON::Parser parser;
    const Var parsed = parser.parse("[" + widenLongIntegers(message) + "]");
    const Array::Ptr wrapper = parsed.extract<Array::Ptr>();
    if (wrapper && wrapper->size() == 1) {
      return wrapper->get(0);
    }
  } catch (const Poco::Exception&) {
  }
  return std::nullopt;
}

bool isObject(const Var& value) { return value.type() == typeid(Object::Ptr); }

void checkUnanswered(std::string_view message) {
  const std::optional<Var> parsed = parseLoosely(message);
  SCS_FUZZ_CHECK(parsed && isObject(*parsed), message);
  const Object::Ptr object = parsed->extract<Object::Ptr>();
  const bool notification = !object->has("id");
  const bool response = !object->has("method") && (object->has("result") || object->has("error"));
  SCS_FUZZ_CHECK(notification || response, message);
}

// `line`, which the server wrote as the `what` (answer or notification), parsed: one line of
// strict JSON holding an object.
Object::Ptr checkLine(const std::string& line, const std::string& what) {
  SCS_FUZZ_CHECK(line.find('\n') == std::string::npos, line);
  if (const std::optional<std::string> problem = strictJsonProblem(line)) {
    fail(what + " is not strict JSON: " + *problem, line);
  }
  const std::optional<Var> parsed = parseLoosely(line);
  SCS_FUZZ_CHECK(parsed && isObject(*parsed), line);
  return parsed->extract<Object::Ptr>();
}

// Checks one answer; returns it parsed.
Object::Ptr checkAnswer(std::string_view message, const std::string& answer) {
  const Object::Ptr response = checkLine(answer, "answer");
  SCS_FUZZ_CHECK(response->has("jsonrpc") && response->get("jsonrpc").isString() &&
                     response->get("jsonrpc").toString() == "2.0",
                 answer);
  SCS_FUZZ_CHECK(response->has("id"), answer);
  SCS_FUZZ_CHECK(response->has("result") != response->has("error"), answer);
  const auto exchange = [&] { return std::string(message) + " => " + answer; };
  if (response->has("error")) {
    const Object::Ptr error = response->getObject("error");
    SCS_FUZZ_CHECK(error && error->has("code") && error->get("code").isInteger(), answer);
    SCS_FUZZ_CHECK(error->has("message") && error->get("message").isString(), answer);
    const auto code = error->get("code").convert<std::int64_t>();
    SCS_FUZZ_CHECK(code != -32603, exchange());
    SCS_FUZZ_CHECK(code == -32700 || code == -32600 || code == -32601 || code == -32602,
                   exchange());
  } else {
    SCS_FUZZ_CHECK(response->getObject("result"), answer);
  }
  const std::optional<Var> request = parseLoosely(message);
  const Var echoed = response->get("id");
  if (!request || !isObject(*request)) {
    SCS_FUZZ_CHECK(response->has("error") && echoed.isEmpty(), answer);
    return response;
  }
  // A usable id (a string or an integer) comes back as sent, ill-formed UTF-8 repaired;
  // any other id, or none, comes back null. Only a request with a usable id gets a result.
  const Object::Ptr object = request->extract<Object::Ptr>();
  const Var sent = object->has("id") ? object->get("id") : Var();
  const bool usable = sent.isString() || (sent.isInteger() && !sent.isBoolean());
  if (sent.isString()) {
    SCS_FUZZ_CHECK(echoed.isString() && echoed.toString() == referenceRepairUtf8(sent.toString()),
                   exchange());
  } else if (usable) {
    SCS_FUZZ_CHECK(echoed.isInteger() && echoed.toString() == sent.toString(), exchange());
  } else {
    SCS_FUZZ_CHECK(echoed.isEmpty(), exchange());
  }
  if (response->has("result")) {
    const Var method = object->has("method") ? object->get("method") : Var();
    const Var version = object->has("jsonrpc") ? object->get("jsonrpc") : Var();
    SCS_FUZZ_CHECK(usable && version.isString() && version.toString() == "2.0", exchange());
    SCS_FUZZ_CHECK(method.isString() && kMethods.count(method.toString()) == 1, exchange());
  }
  return response;
}

void checkNotification(const std::string& notification) {
  const Object::Ptr object = checkLine(notification, "notification");
  SCS_FUZZ_CHECK(!object->has("id") && object->has("method") &&
                     object->get("method").toString() == "notifications/progress",
                 notification);
  const Object::Ptr params = object->getObject("params");
  SCS_FUZZ_CHECK(params && params->has("progressToken") && params->has("progress"), notification);
}

// The run a successful start_run answer reports; empty for any other answer.
std::string startedRun(const Object::Ptr& response) {
  const Object::Ptr result = response->getObject("result");
  const Object::Ptr structured = result ? result->getObject("structuredContent") : nullptr;
  if (!structured || !structured->has("run_id") || !structured->get("run_id").isString() ||
      !structured->has("status") || structured->get("status").toString() != "running") {
    return {};
  }
  return structured->get("run_id").toString();
}

// The fake's script for the code a start_run `message` passes, as the fake will read it: from the
// decoded JSON string, not the raw line, which may spell a directive with escapes. None when the
// message carries no code; an empty script for code the fake refuses (such a run fails at once).
std::optional<fake::Script> scriptOf(std::string_view message) {
  const std::optional<Var> parsed = parseLoosely(message);
  if (!parsed || !isObject(*parsed)) {
    return std::nullopt;
  }
  const Object::Ptr params = parsed->extract<Object::Ptr>()->getObject("params");
  if (!params || !params->has("name") || !params->get("name").isString() ||
      params->get("name").toString() != "start_run") {
    return std::nullopt;
  }
  const Object::Ptr arguments = params->getObject("arguments");
  if (!arguments || !arguments->has("code") || !arguments->get("code").isString()) {
    return std::nullopt;
  }
  fake::Script script;
  if (fake::parseScript(arguments->get("code").toString(), &script)) {
    return fake::Script{};
  }
  return script;
}

// A script that would take more than a moment to play or to stop (a flood of output, a start
// that blocks, kills or interrupts ignored, each costing the core's grace period): an input that
// has one is not played further, or one input could outlast libFuzzer's timeout.
bool tooSlow(const fake::Script& script) {
  return script.flood_bytes > (std::uint64_t{1} << 20) ||
         script.start_delay > std::chrono::seconds(1) || script.ignore_kill ||
         script.ignore_interrupt;
}

// A script that keeps its run going after start_run has answered.
bool lasts(const fake::Script& script) {
  return script.sleep.count() > 0 || script.start_delay.count() > 0 || script.hang || script.linger;
}

std::string withRunId(std::string_view message, const std::string& run_id) {
  std::string out(message);
  if (run_id.empty()) {
    return out;
  }
  for (std::size_t at = out.find(kRunIdPlaceholder); at != std::string::npos;
       at = out.find(kRunIdPlaceholder, at + run_id.size())) {
    out.replace(at, kRunIdPlaceholder.size(), run_id);
  }
  return out;
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Poco::Logger::root().setLevel("none");
  scs::fuzz::fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs;
  fuzz::Fixture& f = fuzz::fixture();
  runs::RunManager runs(f.backend, f.settings, f.sandbox, f.clock);
  mcp::ServerInfo info;
  info.progress_interval = std::chrono::milliseconds(1);
  mcp::Server server(runs, f.limits, f.files, info);
  mcp::RequestContext context;
  context.on_progress = [](const std::string& notification) {
    if (!notification.empty()) {
      fuzz::checkNotification(notification);
    }
  };
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t messages = 0;
  std::string run_id;
  while (!input.empty() && messages < fuzz::kMaxMessages) {
    const std::size_t newline = input.find('\n');
    std::string_view line = input.substr(0, newline);
    input.remove_prefix(newline == std::string_view::npos ? input.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      continue;
    }
    ++messages;
    const std::string text = fuzz::withRunId(line, run_id);
    const std::optional<fake::Script> script = fuzz::scriptOf(text);
    if (script && fuzz::tooSlow(*script)) {
      break;
    }
    const mcp::Message message = mcp::Server::parse(text);
    const std::optional<std::string> answer = server.handle(message, context);
    const bool answered = message.kind() == mcp::Message::Kind::kRequest ||
                          message.kind() == mcp::Message::Kind::kInvalid;
    SCS_FUZZ_CHECK(answer.has_value() == answered, text);
    if (!answer) {
      fuzz::checkUnanswered(text);
      continue;
    }
    const std::string started = fuzz::startedRun(fuzz::checkAnswer(text, *answer));
    run_id = started.empty() ? run_id : started;
    // Only a run this message started with its code is waited for: get_result also answers
    // "running", for a run that may last.
    if (!started.empty() && script && !fuzz::lasts(*script)) {
      const auto ended = runs.get(runs::kLocalTenant, run_id, std::chrono::seconds(20));
      SCS_FUZZ_CHECK(ended && policy::isFinal(ended->status), run_id);
    }
  }
  return 0;
}
