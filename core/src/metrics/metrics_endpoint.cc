// MetricsEndpoint: a listener behind its own gate that answers GET /metrics with the rendered
// text, 404 for any other path and 405 for any other method.

#include "metrics/metrics_endpoint.h"

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/URI.h>

#include <utility>

namespace scs::metrics {

namespace {

using Poco::Net::HTTPResponse;
using Poco::Net::HTTPServerRequest;
using Poco::Net::HTTPServerResponse;

constexpr std::size_t kThreads = 2;  // a scraper or two; more wait in the gate's queue

void answer(HTTPServerResponse& response, HTTPResponse::HTTPStatus status,
            const std::string& content_type, const std::string& body) {
  response.setStatus(status);
  response.setContentType(content_type);
  response.setContentLength(static_cast<std::streamsize>(body.size()));
  response.send() << body;
}

class Handler final : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(const std::function<std::string()>& render) : render_(render) {}

  void handleRequest(HTTPServerRequest& request, HTTPServerResponse& response) override {
    // The request body, if any, is not read; the connection closes after the answer.
    response.setKeepAlive(false);
    std::string path;
    try {
      path = Poco::URI(request.getURI()).getPath();
    } catch (const Poco::Exception&) {
    }
    if (path != "/metrics") {
      answer(response, HTTPResponse::HTTP_NOT_FOUND, "text/plain", "the metrics are at /metrics\n");
      return;
    }
    if (request.getMethod() != Poco::Net::HTTPRequest::HTTP_GET) {
      response.set("Allow", "GET");
      answer(response, HTTPResponse::HTTP_METHOD_NOT_ALLOWED, "text/plain",
             "/metrics answers GET only\n");
      return;
    }
    answer(response, HTTPResponse::HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", render_());
  }

 private:
  const std::function<std::string()>& render_;
};

}  // namespace

class MetricsEndpoint::Factory final : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(const std::function<std::string()>& render) : render_(render) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(const HTTPServerRequest&) override {
    return new Handler(render_);
  }

 private:
  const std::function<std::string()>& render_;
};

MetricsEndpoint::MetricsEndpoint(Poco::Net::SocketAddress address,
                                 std::function<std::string()> render)
    : address_(std::move(address)), render_(std::move(render)) {}

MetricsEndpoint::~MetricsEndpoint() { stop(); }

Result<Done> MetricsEndpoint::start() {
  Poco::Net::ServerSocket socket;
  try {
    socket.bind(address_, true);
    socket.listen(64);
  } catch (const Poco::Exception& e) {
    return internal("cannot listen for /metrics on " + address_.toString() + ": " +
                    e.displayText());
  }
  bound_ = socket.address();
  Poco::AutoPtr<Poco::Net::HTTPServerParams> params(new Poco::Net::HTTPServerParams);
  params->setKeepAlive(false);
  params->setTimeout(Poco::Timespan(10, 0));
  // Behind the gate, so that idle or slow connections never delay a scrape.
  net::GateSettings gate;
  gate.lanes = {{"metrics", kThreads, 16}};
  gate.max_pending = 64;
  gate_ = std::make_unique<net::HttpGate>(
      gate, new Factory(render_), params,
      [](const Poco::Net::HTTPRequest&) { return net::GateAdmission{}; },
      [](const std::string& message) { return "{\"error\":\"" + message + "\"}"; });
  gate_->start(std::move(socket));
  return Done{};
}

void MetricsEndpoint::stop() {
  if (gate_) {
    gate_->stop();
    gate_->join();
    gate_.reset();
  }
}

}  // namespace scs::metrics
