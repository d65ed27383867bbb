#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace scs::testing {

// The real server binary as a child process, spoken to over stdio with newline-delimited
// JSON-RPC, for e2e and integration tests. Not thread-safe.
class McpProcess {
 public:
  // Launches `binary` with `args`. stderr is collected in the background (see stderrText()).
  McpProcess(const std::string& binary, const std::vector<std::string>& args);
  ~McpProcess();  // kills the child if still running

  // Writes one line (a newline is appended) to the child's stdin.
  void sendLine(const std::string& line);

  // Next line the child wrote to stdout, or nullopt at EOF or when `timeout` passes.
  std::optional<std::string> readLine(std::chrono::milliseconds timeout);

  // Sends a request with a fresh integer id and returns the response with that id
  // (notifications and other ids that arrive first are skipped). Throws on timeout/EOF.
  Poco::JSON::Object::Ptr request(const std::string& method, Poco::JSON::Object::Ptr params,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // initialize + notifications/initialized; returns the initialize result. `timeout` bounds the
  // wait for the answer, which a server started with --self-test gives only after its audit.
  Poco::JSON::Object::Ptr initialize(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // tools/call; returns the CallToolResult object (with isError, content, structuredContent).
  Poco::JSON::Object::Ptr callTool(const std::string& name, Poco::JSON::Object::Ptr arguments,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(90));

  // Closes the child's stdin (EOF).
  void closeStdin();

  // Sends a signal (e.g. SIGTERM) to the child.
  void signal(int signal_number);

  // Waits for the child to exit; its exit code, or nullopt if still running after `timeout`.
  std::optional<int> waitExit(std::chrono::milliseconds timeout);

  // Everything the child wrote to stderr so far.
  std::string stderrText() const;

  // Every stdout line read so far (for "stdout carries only JSON-RPC" checks).
  const std::vector<std::string>& stdoutLines() const;

  int pid() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses `json` as an object; throws on anything else.
Poco::JSON::Object::Ptr parseObject(const std::string& json);

// An object of `members`, e.g. the arguments of a tool call.
Poco::JSON::Object::Ptr object(
    std::initializer_list<std::pair<std::string, Poco::Dynamic::Var>> members);

// The text of a CallToolResult's first content item.
std::string toolText(const Poco::JSON::Object::Ptr& result);

// The bytes of the file at `path` (relative to /workspace/out) from a CallToolResult's content
// blocks, decoded: its image block or embedded resource, found by _meta["io.scs/path"];
// nullopt when no block carries it. Where a report's file content is, since issue 24.
std::optional<std::string> fileContent(const Poco::JSON::Object::Ptr& result,
                                       const std::string& path);

// How many content blocks carry the file at `path` (it must be exactly one).
std::size_t fileBlockCount(const Poco::JSON::Object::Ptr& result, const std::string& path);

// tools/call of `tool` that must not be an error (a test failure otherwise); its
// structuredContent.
Poco::JSON::Object::Ptr callOk(McpProcess& process, const std::string& tool,
                               Poco::JSON::Object::Ptr arguments);

// get_result on `run_id`, long-polled until the run's status is final; a test failure and the
// last report when it is not within 60 s.
Poco::JSON::Object::Ptr finalReport(McpProcess& process, const std::string& run_id);

// The server's arguments for the fake backend with debug logs, then `extra`.
std::vector<std::string> fakeArgs(std::vector<std::string> extra = {});

}  // namespace scs::testing
