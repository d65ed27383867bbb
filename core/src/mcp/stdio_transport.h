#pragma once

#include <cstddef>
#include <istream>
#include <ostream>

#include "mcp/server.h"

namespace scs::mcp {

// Newline-delimited JSON-RPC over a pair of streams. Each request is handled on its own
// thread (so a long-polling get_result never blocks a ping); responses are written one
// per line under a lock. The only code in the server that writes to stdout.
class StdioTransport {
 public:
  StdioTransport(Server& server, std::size_t max_message_bytes, std::size_t max_in_flight = 64);

  // Serves until `in` reaches end of file or stop() is called, then waits for the
  // requests in flight to answer. Returns when done.
  void serve(std::istream& in, std::ostream& out);

 private:
  Server& server_;
  std::size_t max_message_bytes_;
  std::size_t max_in_flight_;
};

}  // namespace scs::mcp
