#include "support/mcp_client.h"

#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>
#include <Poco/Pipe.h>
#include <Poco/PipeStream.h>
#include <Poco/Process.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/base64.h"

namespace scs::testing {

struct McpProcess::Impl {
  Poco::Pipe in_pipe;
  Poco::Pipe out_pipe;
  Poco::Pipe err_pipe;
  std::unique_ptr<Poco::ProcessHandle> handle;
  std::unique_ptr<Poco::PipeOutputStream> in;
  int pid = -1;
  int next_id = 1;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;  // read from stdout, not yet returned by readLine
  bool stdout_eof = false;
  bool stderr_eof = false;
  std::string stderr_text;
  std::optional<int> exit_code;
  std::vector<std::string> seen;  // every line readLine returned

  std::thread stdout_reader;
  std::thread stderr_reader;
  std::thread waiter;

  void readStdout() {
    Poco::PipeInputStream stream(out_pipe);
    std::string line;
    while (std::getline(stream, line)) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(line);
      cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu);
    stdout_eof = true;
    cv.notify_all();
  }

  void readStderr() {
    char buffer[4096];
    while (true) {
      const int n = err_pipe.readBytes(buffer, sizeof(buffer));
      if (n <= 0) {
        break;
      }
      std::lock_guard<std::mutex> lock(mu);
      stderr_text.append(buffer, static_cast<std::size_t>(n));
    }
    std::lock_guard<std::mutex> lock(mu);
    stderr_eof = true;
    cv.notify_all();
  }

  void waitForChild() {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> lock(mu);
    // The shell's convention: 128 + N for death by signal N.
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    cv.notify_all();
  }
};

McpProcess::McpProcess(const std::string& binary, const std::vector<std::string>& args)
    : impl_(std::make_unique<Impl>()) {
  // A write to a child that has exited must fail, not kill the test.
  ::signal(SIGPIPE, SIG_IGN);
  Poco::Process::Args process_args(args.begin(), args.end());
  impl_->handle = std::make_unique<Poco::ProcessHandle>(Poco::Process::launch(
      binary, process_args, &impl_->in_pipe, &impl_->out_pipe, &impl_->err_pipe));
  impl_->pid = impl_->handle->id();
  impl_->in = std::make_unique<Poco::PipeOutputStream>(impl_->in_pipe);
  impl_->stdout_reader = std::thread([this] { impl_->readStdout(); });
  impl_->stderr_reader = std::thread([this] { impl_->readStderr(); });
  impl_->waiter = std::thread([this] { impl_->waitForChild(); });
}

McpProcess::~McpProcess() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->exit_code) {
      ::kill(impl_->pid, SIGKILL);
    }
  }
  closeStdin();
  impl_->waiter.join();
  impl_->stdout_reader.join();
  impl_->stderr_reader.join();
}

void McpProcess::sendLine(const std::string& line) {
  if (!impl_->in) {
    throw std::runtime_error("stdin of the server is closed");
  }
  *impl_->in << line << '\n' << std::flush;
  if (!*impl_->in) {
    throw std::runtime_error("cannot write to the server's stdin");
  }
}

std::optional<std::string> McpProcess::readLine(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_for(lock, timeout, [&] { return !impl_->lines.empty() || impl_->stdout_eof; });
  if (impl_->lines.empty()) {
    return std::nullopt;
  }
  std::string line = std::move(impl_->lines.front());
  impl_->lines.pop_front();
  impl_->seen.push_back(line);
  return line;
}

Poco::JSON::Object::Ptr McpProcess::request(const std::string& method,
                                            Poco::JSON::Object::Ptr params,
                                            std::chrono::milliseconds timeout) {
  const int id = impl_->next_id++;
  Poco::JSON::Object message;
  message.set("jsonrpc", "2.0");
  message.set("id", id);
  message.set("method", method);
  if (params) {
    message.set("params", params);
  }
  std::ostringstream text;
  Poco::JSON::Stringifier::stringify(message, text);
  sendLine(text.str());

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto line = readLine(std::max(left, std::chrono::milliseconds(0)));
    if (!line) {
      throw std::runtime_error("no answer to " + method + " (id " + std::to_string(id) + ")");
    }
    Poco::JSON::Object::Ptr response = parseObject(*line);
    if (response->has("id") && !response->isNull("id") &&
        response->get("id").toString() == std::to_string(id)) {
      return response;
    }
  }
}

Poco::JSON::Object::Ptr McpProcess::initialize(std::chrono::milliseconds timeout) {
  Poco::JSON::Object::Ptr params = new Poco::JSON::Object;
  params->set("protocolVersion", "2025-11-25");
  params->set("capabilities", Poco::JSON::Object::Ptr(new Poco::JSON::Object));
  Poco::JSON::Object::Ptr client = new Poco::JSON::Object;
  client->set("name", "scs-tests");
  client->set("version", "1");
  params->set("clientInfo", client);
  Poco::JSON::Object::Ptr response = request("initialize", params, timeout);
  if (!response->has("result")) {
    throw std::runtime_error("initialize failed: " + response->get("error").toString());
  }
  sendLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  return response->getObject("result");
}

Poco::JSON::Object::Ptr McpProcess::callTool(const std::string& name,
                                             Poco::JSON::Object::Ptr arguments,
                                             std::chrono::milliseconds timeout) {
  Poco::JSON::Object::Ptr params = new Poco::JSON::Object;
  params->set("name", name);
  params->set("arguments", arguments ? arguments : Poco::JSON::Object::Ptr(new Poco::JSON::Object));
  Poco::JSON::Object::Ptr response = request("tools/call", params, timeout);
  if (!response->has("result")) {
    std::ostringstream text;
    Poco::JSON::Stringifier::stringify(response, text);
    throw std::runtime_error("tools/call " + name + " failed: " + text.str());
  }
  return response->getObject("result");
}

void McpProcess::closeStdin() {
  if (impl_->in) {
    impl_->in->close();
    impl_->in.reset();
    impl_->in_pipe.close(Poco::Pipe::CLOSE_WRITE);
  }
}

void McpProcess::signal(int signal_number) { ::kill(impl_->pid, signal_number); }

std::optional<int> McpProcess::waitExit(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  // Also waits for stderr to be drained, so that stderrText() then holds everything.
  if (!impl_->cv.wait_for(lock, timeout,
                          [&] { return impl_->exit_code.has_value() && impl_->stderr_eof; })) {
    return std::nullopt;
  }
  return impl_->exit_code;
}

std::string McpProcess::stderrText() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stderr_text;
}

const std::vector<std::string>& McpProcess::stdoutLines() const { return impl_->seen; }

int McpProcess::pid() const { return impl_->pid; }

Poco::JSON::Object::Ptr parseObject(const std::string& json) {
  Poco::JSON::Parser parser;
  Poco::Dynamic::Var value = parser.parse(json);
  if (value.type() != typeid(Poco::JSON::Object::Ptr)) {
    throw std::runtime_error("not a JSON object: " + json);
  }
  return value.extract<Poco::JSON::Object::Ptr>();
}

Poco::JSON::Object::Ptr object(
    std::initializer_list<std::pair<std::string, Poco::Dynamic::Var>> members) {
  Poco::JSON::Object::Ptr result = new Poco::JSON::Object;
  for (const auto& [key, value] : members) {
    result->set(key, value);
  }
  return result;
}

namespace {

std::vector<Poco::JSON::Object::Ptr> fileBlocks(const Poco::JSON::Object::Ptr& result,
                                                const std::string& path) {
  std::vector<Poco::JSON::Object::Ptr> found;
  const Poco::JSON::Array::Ptr content = result->getArray("content");
  for (std::size_t i = 0; content && i < content->size(); ++i) {
    const Poco::JSON::Object::Ptr block = content->getObject(i);
    const Poco::JSON::Object::Ptr meta = block ? block->getObject("_meta") : nullptr;
    if (meta && meta->has("io.scs/path") && meta->getValue<std::string>("io.scs/path") == path) {
      found.push_back(block);
    }
  }
  return found;
}

}  // namespace

std::optional<std::string> fileContent(const Poco::JSON::Object::Ptr& result,
                                       const std::string& path) {
  const auto blocks = fileBlocks(result, path);
  if (blocks.empty()) {
    return std::nullopt;
  }
  const Poco::JSON::Object::Ptr& block = blocks.front();
  if (block->getValue<std::string>("type") == "image") {
    return base64Decode(block->getValue<std::string>("data"));
  }
  const Poco::JSON::Object::Ptr resource = block->getObject("resource");
  if (!resource) {
    return std::nullopt;
  }
  return resource->has("text") ? resource->getValue<std::string>("text")
                               : base64Decode(resource->getValue<std::string>("blob"));
}

std::size_t fileBlockCount(const Poco::JSON::Object::Ptr& result, const std::string& path) {
  return fileBlocks(result, path).size();
}

std::string toolText(const Poco::JSON::Object::Ptr& result) {
  return result->getArray("content")->getObject(0)->getValue<std::string>("text");
}

Poco::JSON::Object::Ptr callOk(McpProcess& process, const std::string& tool,
                               Poco::JSON::Object::Ptr arguments) {
  Poco::JSON::Object::Ptr result = process.callTool(tool, arguments);
  EXPECT_FALSE(result->optValue<bool>("isError", false)) << toolText(result);
  Poco::JSON::Object::Ptr structured = result->getObject("structuredContent");
  EXPECT_FALSE(structured.isNull()) << toolText(result);
  return structured;
}

Poco::JSON::Object::Ptr finalReport(McpProcess& process, const std::string& run_id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Poco::JSON::Object::Ptr report;
  while (std::chrono::steady_clock::now() < deadline) {
    report = callOk(process, "get_result", object({{"run_id", run_id}, {"wait_seconds", 5}}));
    const std::string status = report->getValue<std::string>("status");
    if (status != "queued" && status != "running") {
      return report;
    }
  }
  const std::string log = process.stderrText();
  ADD_FAILURE() << "run " << run_id << " did not finish; the server logged, last:\n"
                << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  return report;
}

std::vector<std::string> fakeArgs(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--backend", "fake", "--log-level", "debug"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace scs::testing
