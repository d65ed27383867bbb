#pragma once

// The HTTP server's front door: no client can hold the port by being slow or greedy.
//
// Poco's HTTPServer gives each connection a thread from the moment it is accepted, so a client
// that opens connections and sends a few bytes of a request head, or nothing, holds every
// thread until its socket times out (140 idle connections shut the MCP port and /healthz for
// 40 s here), and one tenant's long-polls could hold them all too. The gate keeps those apart:
// one thread accepts and reads every request head without blocking, each within a deadline
// and a size cap, and at most `max_pending` connections wait for theirs (a new one past it
// closes the oldest, whose client is the slowest). Only a complete head reaches a worker, in
// the lane the caller's classify() names (the MCP endpoint, the health probes, requests
// without a valid token), each lane with workers and a queue of its own, so that one lane's
// load never delays another's. A request classify() names a tenant for takes one of that
// tenant's `max_in_flight_per_tenant` slots until its answer is sent; past them it is refused
// with 429 at once, without a worker. Each connection serves one request (Connection: close):
// a connection idle between requests would hold a worker as a slow one does.
//
// Poco is kept for everything past the head: a worker runs Poco's own HTTPServerConnection on
// the socket, whose first bytes (what the gate read) it replays, so requests are parsed,
// answered and streamed exactly as Poco's HTTPServer would.

#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/ServerSocket.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace scs::net {

// The head of `request` exactly as its client sent it, for the headers whose bytes matter:
// Poco decodes RFC 2047 words ("=?charset?B?...?=") in every header value it parses, so a
// parsed value may differ from what a proxy on the way saw. Empty when the request did not
// come through a gate.
std::string rawRequestHead(Poco::Net::HTTPServerRequest& request);

struct GateLane {
  std::string name;         // for the log
  std::size_t workers = 1;  // threads that serve its requests
  std::size_t queued = 64;  // complete requests waiting for one; past it, 503
};

struct GateSettings {
  std::vector<GateLane> lanes;
  std::size_t max_pending = 256;  // connections whose head has not arrived yet
  std::chrono::milliseconds head_timeout{10000};
  std::size_t max_head_bytes = 16 << 10;
  std::size_t max_in_flight_per_tenant = 32;
};

// Where a request goes, from its head: a lane (an index into GateSettings::lanes) and, when
// it is a tenant's, whose slots it takes.
struct GateAdmission {
  std::size_t lane = 0;
  std::optional<std::string> tenant;
};

class HttpGate {
 public:
  using Classify = std::function<GateAdmission(const Poco::Net::HTTPRequest& head)>;
  // The body of an answer the gate gives itself (408, 431 for a head too large, 429, 503):
  // `message` says why. Sent as application/json.
  using RefusalBody = std::function<std::string(const std::string& message)>;

  HttpGate(GateSettings settings, Poco::Net::HTTPRequestHandlerFactory::Ptr factory,
           Poco::Net::HTTPServerParams::Ptr params, Classify classify, RefusalBody refusal);
  ~HttpGate();  // stop() and join()

  HttpGate(const HttpGate&) = delete;
  HttpGate& operator=(const HttpGate&) = delete;

  // Serves `socket` (bound and listening) from now on. Call once.
  void start(Poco::Net::ServerSocket socket);

  // Accepts nothing more, closes the connections whose heads had not arrived, and shuts down
  // the sockets of the requests being served (their handlers run on until they return).
  // Idempotent.
  void stop();

  // Waits for every thread to finish. Call after stop(). Idempotent.
  void join();

  // Requests of `tenant` accepted and not yet answered.
  std::size_t inFlight(const std::string& tenant) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scs::net
