#include "integration/harness.h"

#include <Poco/JSON/Parser.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace scs::integration {
namespace {

std::string trimmed(std::string value) {
  while (!value.empty() && (value.back() == '\n' || value.back() == ' ' || value.back() == '\r')) {
    value.pop_back();
  }
  return value;
}

bool isSafeLabelValue(const std::string& value) {
  if (value.empty()) {
    return false;
  }
  for (char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '=';
    if (!ok) {
      return false;
    }
  }
  return true;
}

}  // namespace

const char* const kHowToStart =
    "The integration tier needs a running Docker engine and the sandbox image. Run "
    "./scripts/test (it installs and starts the Docker daemon and builds the image when "
    "missing), or start dockerd and build the image with ./docker/build-image.sh.";

std::string testRuntime() {
  const char* runtime = std::getenv("SCS_TEST_RUNTIME");
  return runtime != nullptr && *runtime != '\0' ? runtime : "runc";
}

bool underGvisor() { return testRuntime() == "runsc"; }

std::string engineProblem() {
  const CommandResult info = runCommand("docker info --format '{{json .Runtimes}}'");
  if (info.exit_code != 0) {
    return "`docker info` failed: " + info.output + "\n" + kHowToStart;
  }
  if (info.output.find("\"" + testRuntime() + "\"") == std::string::npos) {
    return "the engine has no runtime " + testRuntime() +
           " (SCS_TEST_RUNTIME); runtimes: " + info.output +
           "\nscripts/setup.sh registers runsc when it is installed.";
  }
  const CommandResult image =
      runCommand(std::string("docker image inspect --format '{{.Id}}' ") + kImage);
  if (image.exit_code != 0) {
    return std::string("The image ") + kImage + " is missing: " + image.output + "\n" + kHowToStart;
  }
  return "";
}

CommandResult runCommand(const std::string& command) {
  const std::string full = command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) {
    throw std::runtime_error("popen failed for: " + command);
  }
  CommandResult result;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  return result;
}

std::vector<std::string> containersWithLabel(const std::string& label) {
  if (!isSafeLabelValue(label)) {
    throw std::runtime_error("unexpected characters in label filter: " + label);
  }
  const CommandResult result = runCommand("docker ps -a -q --no-trunc --filter label=" + label);
  if (result.exit_code != 0) {
    throw std::runtime_error("docker ps failed: " + result.output);
  }
  std::vector<std::string> ids;
  std::istringstream lines(result.output);
  std::string line;
  while (std::getline(lines, line)) {
    line = trimmed(line);
    if (!line.empty()) {
      ids.push_back(line);
    }
  }
  return ids;
}

std::vector<std::string> containersOfRun(const std::string& run_id) {
  return containersWithLabel("io.scs.run-id=" + run_id);
}

std::vector<std::string> containersOfRun(const testing::McpProcess& server,
                                         const std::string& run_id) {
  std::vector<std::string> ids = containersOfRun(run_id);
  const std::string log = server.stderrText();
  const std::size_t line_start = log.find("run " + run_id + " of tenant ");
  if (line_start == std::string::npos) {
    return ids;
  }
  const std::string line = log.substr(line_start, log.find('\n', line_start) - line_start);
  const std::string marker = " in prepared sandbox ";
  const std::size_t at = line.find(marker);
  if (at == std::string::npos) {
    return ids;
  }
  const std::string prepared = line.substr(at + marker.size());
  if (containerExists(prepared)) {
    ids.push_back(prepared);
  }
  return ids;
}

std::vector<std::string> containersOfServer(const testing::McpProcess& server) {
  return containersWithLabel("io.scs.owner-pid=" + std::to_string(server.pid()));
}

std::vector<std::string> managedContainers() { return containersWithLabel("io.scs.managed"); }

std::string containerState(const std::string& id) {
  const CommandResult result =
      runCommand("docker inspect --format '{{.State.Status}} {{.State.ExitCode}}' " + id);
  return result.exit_code == 0 ? trimmed(result.output) : "gone";
}

bool containerExists(const std::string& id) {
  if (id.empty() || id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw std::runtime_error("not a container id: " + id);
  }
  const CommandResult result = runCommand("docker ps -a -q --no-trunc --filter id=" + id);
  if (result.exit_code != 0) {
    throw std::runtime_error("docker ps failed: " + result.output);
  }
  return !trimmed(result.output).empty();
}

namespace {

template <typename Match>
bool anyHostProcessArg(Match match) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream cmdline(entry.path() / "cmdline", std::ios::binary);
    std::string argument;
    while (std::getline(cmdline, argument, '\0')) {
      if (match(argument)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool hostProcessArgContains(const std::string& fragment) {
  return anyHostProcessArg(
      [&](const std::string& argument) { return argument.find(fragment) != std::string::npos; });
}

bool hostProcessWithArgExists(const std::string& token) {
  return anyHostProcessArg([&](const std::string& argument) { return argument == token; });
}

std::unique_ptr<testing::McpProcess> launchServer(const std::vector<std::string>& extra_args,
                                                  std::chrono::milliseconds ready) {
  std::vector<std::string> args{"--backend",          "docker",
                                "--runtime",          testRuntime(),
                                "--output-cap-bytes", std::to_string(kOutputCapBytes)};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  // Extra server flags, e.g. "--seccomp-profile engine-default" to see the suite catch a
  // weakened posture.
  if (const char* extra = std::getenv("SCS_INTEGRATION_SERVER_ARGS")) {
    std::istringstream words(extra);
    std::string word;
    while (words >> word) {
      args.push_back(word);
    }
  }
  auto server = std::make_unique<testing::McpProcess>(SCS_BINARY, args);
  server->initialize(ready);
  return server;
}

Poco::JSON::Object::Ptr startRunArguments(const RunRequest& request) {
  Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
  arguments->set("code", request.code);
  Poco::JSON::Object::Ptr limits = new Poco::JSON::Object;
  if (request.limits.memory_gb) {
    limits->set("memory_gb", *request.limits.memory_gb);
  }
  if (request.limits.timeout_seconds) {
    limits->set("timeout_seconds", *request.limits.timeout_seconds);
  }
  if (request.limits.cpus) {
    limits->set("cpus", *request.limits.cpus);
  }
  if (limits->size() > 0) {
    arguments->set("limits", limits);
  }
  if (request.files) {
    arguments->set("files", request.files);
  }
  return arguments;
}

Poco::JSON::Object::Ptr runToFinal(testing::McpProcess& server, Poco::JSON::Object::Ptr arguments) {
  if (!arguments->has("wait_seconds")) {
    arguments->set("wait_seconds", 60);
  }
  Poco::JSON::Object::Ptr report = callToolOk(server, "start_run", arguments);
  return isFinalStatus(text(report, "status")) ? report
                                               : awaitFinal(server, text(report, "run_id"));
}

std::string openSession(testing::McpProcess& server, std::optional<double> memory_gb,
                        const std::string& language) {
  Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
  if (language != "python") {
    arguments->set("language", language);
  }
  if (memory_gb) {
    Poco::JSON::Object::Ptr limits = new Poco::JSON::Object;
    limits->set("memory_gb", *memory_gb);
    arguments->set("limits", limits);
  }
  return text(callToolOk(server, "open_session", arguments), "session_id");
}

Poco::JSON::Object::Ptr closeSession(testing::McpProcess& server, const std::string& session_id) {
  Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
  arguments->set("session_id", session_id);
  return callToolOk(server, "close_session", arguments);
}

Poco::JSON::Object::Ptr callToolOk(testing::McpProcess& server, const std::string& tool,
                                   Poco::JSON::Object::Ptr arguments) {
  Poco::JSON::Object::Ptr result = server.callTool(tool, arguments);
  if (result->has("isError") && result->getValue<bool>("isError")) {
    std::ostringstream out;
    result->stringify(out);
    throw std::runtime_error(tool + " returned a tool error: " + out.str());
  }
  Poco::JSON::Object::Ptr structured = result->getObject("structuredContent");
  if (!structured) {
    std::ostringstream out;
    result->stringify(out);
    throw std::runtime_error(tool + " returned no structuredContent: " + out.str());
  }
  return structured;
}

std::string startRun(testing::McpProcess& server, const RunRequest& request) {
  Poco::JSON::Object::Ptr started = callToolOk(server, "start_run", startRunArguments(request));
  return text(started, "run_id");
}

Poco::JSON::Object::Ptr snapshot(testing::McpProcess& server, const std::string& run_id) {
  Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
  arguments->set("run_id", run_id);
  return callToolOk(server, "get_result", arguments);
}

Poco::JSON::Object::Ptr awaitFinal(testing::McpProcess& server, const std::string& run_id,
                                   std::chrono::seconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now());
    Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
    arguments->set("run_id", run_id);
    arguments->set("wait_seconds", std::clamp<std::int64_t>(left.count(), 0, 60));
    Poco::JSON::Object::Ptr report = callToolOk(server, "get_result", arguments);
    const std::string status = text(report, "status");
    if (isFinalStatus(status)) {
      return report;
    }
    if (status != "queued" && status != "running") {
      throw std::runtime_error("run " + run_id + " reports an unknown status: " + status);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("run " + run_id + " is still " + status + " after " +
                               std::to_string(budget.count()) + " s");
    }
  }
}

std::string awaitRunningContainer(testing::McpProcess& server, const std::string& run_id,
                                  std::chrono::seconds budget) {
  std::string status;
  std::vector<std::string> containers;
  const bool running = eventually(
      [&] {
        status = text(snapshot(server, run_id), "status");
        if (isFinalStatus(status)) {
          throw std::runtime_error("run " + run_id + " ended (" + status +
                                   ") before it was seen running");
        }
        containers = containersOfRun(server, run_id);
        return status == "running" && !containers.empty();
      },
      budget, std::chrono::milliseconds(200));
  if (!running) {
    throw std::runtime_error("run " + run_id + " has no running container after " +
                             std::to_string(budget.count()) + " s (status " + status + ")");
  }
  return containers.front();
}

bool isFinalStatus(const std::string& status) {
  return status == "succeeded" || status == "failed" || status == "timed_out" ||
         status == "out_of_memory" || status == "stopped" || status == "sandbox_error";
}

std::string text(const Poco::JSON::Object::Ptr& report, const std::string& key) {
  if (!report->has(key) || report->isNull(key)) {
    throw std::runtime_error("the report has no string field " + key);
  }
  return report->getValue<std::string>(key);
}

std::int64_t integer(const Poco::JSON::Object::Ptr& report, const std::string& key) {
  if (!report->has(key) || report->isNull(key)) {
    throw std::runtime_error("the report has no integer field " + key);
  }
  return report->get(key).convert<std::int64_t>();
}

double number(const Poco::JSON::Object::Ptr& report, const std::string& key) {
  if (!report->has(key) || report->isNull(key)) {
    throw std::runtime_error("the report has no number field " + key);
  }
  return report->get(key).convert<double>();
}

bool flag(const Poco::JSON::Object::Ptr& report, const std::string& key) {
  if (!report->has(key) || report->isNull(key)) {
    throw std::runtime_error("the report has no boolean field " + key);
  }
  return report->getValue<bool>(key);
}

bool absentOrNull(const Poco::JSON::Object::Ptr& report, const std::string& key) {
  return !report->has(key) || report->isNull(key);
}

std::string stream(const Poco::JSON::Object::Ptr& report, const std::string& name) {
  return report->has(name) && !report->isNull(name) ? report->getValue<std::string>(name) : "";
}

std::string verdict(const Poco::JSON::Object::Ptr& report, const std::string& label) {
  const std::string out = report->has("stdout") ? report->getValue<std::string>("stdout") : "";
  std::istringstream lines(out);
  std::string line;
  const std::string prefix = label + " ";
  while (std::getline(lines, line)) {
    if (line.compare(0, prefix.size(), prefix) == 0) {
      return line.substr(prefix.size());
    }
  }
  return "<no line '" + label + " ...' in the output; " + describe(report) + ">";
}

std::string describe(const Poco::JSON::Object::Ptr& report) {
  std::ostringstream out;
  auto field = [&](const std::string& key) {
    if (absentOrNull(report, key)) {
      return std::string("null");
    }
    return report->get(key).convert<std::string>();
  };
  out << "status=" << field("status") << " exit_code=" << field("exit_code")
      << " signal=" << field("signal") << " reason=\"" << field("reason") << "\"";
  const std::string out_text = absentOrNull(report, "stdout") ? "" : field("stdout");
  const std::string err_text = absentOrNull(report, "stderr") ? "" : field("stderr");
  out << " stdout=\"" << out_text.substr(0, 1500) << "\" stderr=\"" << tail(err_text, 1500) << "\"";
  return out.str();
}

bool isValidUtf8(const std::string& bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + length > bytes.size()) {
      return false;
    }
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      if ((next & 0xC0) != 0x80) {
        return false;
      }
      code = (code << 6) | (next & 0x3F);
    }
    const bool overlong = (length == 2 && code < 0x80) || (length == 3 && code < 0x800) ||
                          (length == 4 && code < 0x10000);
    if (overlong || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string hexOf(const std::string& bytes) {
  static const char* const kDigits = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0x0F]);
  }
  return hex;
}

std::string tail(const std::string& text, std::size_t bytes) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

void RunBatch::add(const std::string& name, RunRequest request) {
  entries_.emplace_back(name, Entry{std::move(request), "", "", nullptr});
}

void RunBatch::startAll(testing::McpProcess& server) {
  for (auto& [name, entry] : entries_) {
    try {
      entry.run_id = startRun(server, entry.request);
    } catch (const std::exception& e) {
      entry.start_error = e.what();
    }
  }
}

RunBatch::Entry& RunBatch::find(const std::string& name) {
  for (auto& [entry_name, entry] : entries_) {
    if (entry_name == name) {
      return entry;
    }
  }
  throw std::runtime_error("no run named " + name + " in the batch");
}

Poco::JSON::Object::Ptr RunBatch::report(testing::McpProcess& server, const std::string& name,
                                         std::chrono::seconds budget) {
  Entry& entry = find(name);
  if (!entry.start_error.empty()) {
    throw std::runtime_error("start_run for " + name + " failed: " + entry.start_error);
  }
  if (!entry.final_report) {
    entry.final_report = awaitFinal(server, entry.run_id, budget);
  }
  return entry.final_report;
}

std::string RunBatch::runId(const std::string& name) const {
  for (const auto& [entry_name, entry] : entries_) {
    if (entry_name == name) {
      return entry.run_id;
    }
  }
  throw std::runtime_error("no run named " + name + " in the batch");
}

void RunBatch::stopUnfinished(testing::McpProcess& server) {
  for (auto& [name, entry] : entries_) {
    if (entry.run_id.empty() || entry.final_report) {
      continue;
    }
    Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
    arguments->set("run_id", entry.run_id);
    try {
      entry.final_report = callToolOk(server, "stop_run", arguments);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stop_run for " << name << " failed: " << e.what();
    }
  }
}

}  // namespace scs::integration
