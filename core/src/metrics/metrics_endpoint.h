#pragma once

// GET /metrics on its own listen address (--metrics), apart from the MCP endpoint. Apart,
// because the MCP endpoint's bearer tokens are tenants' tokens, and the metrics count every
// tenant's runs under its name: no tenant may read them. The operator binds this address where
// only the scraper reaches it (loopback by default, a private interface for a Prometheus on
// another host); it asks for no token. Any other path is 404, any other method 405.

#include <Poco/Net/SocketAddress.h>

#include <functional>
#include <memory>
#include <string>

#include "net/http_gate.h"
#include "result.h"

namespace scs::metrics {

class MetricsEndpoint {
 public:
  // `render` is called on a connection thread for each scrape and returns the exposition text.
  MetricsEndpoint(Poco::Net::SocketAddress address, std::function<std::string()> render);
  ~MetricsEndpoint();  // stop()

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Binds the address and serves; an Error when the address cannot be bound.
  Result<Done> start();

  // The bound address (the real port when port 0 was asked for); valid after start().
  Poco::Net::SocketAddress address() const { return bound_; }

  // Stops serving and waits for scrapes in flight. Idempotent.
  void stop();

 private:
  class Factory;

  Poco::Net::SocketAddress address_;
  std::function<std::string()> render_;
  Poco::Net::SocketAddress bound_;
  std::unique_ptr<net::HttpGate> gate_;
};

}  // namespace scs::metrics
