#pragma once

// MCP over stdio: newline-delimited JSON-RPC, each message answered on its own thread, and the
// only code in the server that writes to stdout.

#include <condition_variable>
#include <cstddef>
#include <istream>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "mcp/server.h"

namespace scs::mcp {

// Newline-delimited JSON-RPC over a pair of streams. Each message is handled on its own
// thread (so a long-polling get_result never blocks a ping), at most max_in_flight at once;
// responses are written one per line under a lock and flushed. The only code in the
// server that writes to stdout.
class StdioTransport {
 public:
  StdioTransport(Server& server, std::size_t max_message_bytes, std::size_t max_in_flight = 64);
  ~StdioTransport();  // finish()

  StdioTransport(const StdioTransport&) = delete;
  StdioTransport& operator=(const StdioTransport&) = delete;

  // Reads messages from `in` until end of file and hands each to the server. Returns at
  // end of file without waiting for the requests in flight: they keep writing to `out`,
  // which must outlive finish(). A line over max_message_bytes is discarded and answered
  // with Server::oversizedMessageError; blank lines are ignored; a trailing "\r" is dropped.
  void serve(std::istream& in, std::ostream& out);

  // Waits until every request in flight has written its answer and its thread is joined.
  // Call after serve() returns (and after RunManager::shutdown(), which ends long polls).
  void finish();

 private:
  void dispatch(std::string message);
  void write(const std::string& line);
  void joinFinishedLocked();  // the caller holds mutex_

  Server& server_;
  std::size_t max_message_bytes_;
  std::size_t max_in_flight_;

  std::mutex mutex_;  // guards the next four
  std::condition_variable changed_;
  std::size_t in_flight_ = 0;
  std::vector<std::thread> workers_;
  std::vector<std::thread::id> finished_;  // workers done, not yet joined

  std::mutex write_mutex_;  // guards out_ and the writes to it
  std::ostream* out_ = nullptr;
};

}  // namespace scs::mcp
