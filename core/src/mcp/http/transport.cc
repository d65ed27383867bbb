// HttpTransport: the listener and its gate lanes, each request checked in order (Host, Origin,
// path, token, method, headers, size), and MCP messages answered as JSON or SSE per era.
#include "mcp/http/transport.h"

#include <Poco/Exception.h>
#include <Poco/Logger.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/String.h>
#include <Poco/Timespan.h>
#include <Poco/URI.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "mcp/http/access.h"
#include "mcp/http/health.h"
#include "mcp/http/mcp_sessions.h"
#include "mcp/http/reply.h"
#include "mcp/http/routing_headers.h"
#include "mcp/http/text.h"
#include "mcp/message_id.h"
#include "net/http_gate.h"
#include "net/tenant_slots.h"

namespace scs::mcp {
namespace {

using http::kSessionHeader;
using http::Reply;
using http::trim;
using Poco::Net::HTTPResponse;
using Poco::Net::HTTPServerRequest;
using Poco::Net::HTTPServerResponse;

constexpr const char* kEndpointPath = "/mcp";
// The gate's lanes (net/http_gate.h): MCP requests of authenticated tenants, each tenant at most
// HttpEndpoint::max_requests_per_tenant of them; the health probes, which answer whatever the
// MCP lane does; requests without a valid token, which get their 401 from workers of their own.
constexpr std::size_t kMcpLane = 0;
constexpr std::size_t kProbeLane = 1;
constexpr std::size_t kRefusalLane = 2;
constexpr std::size_t kMcpWorkers = 128;
constexpr int kListenBacklog = 256;
// How long a request's body may pause between two reads before its connection is dropped.
constexpr long kBodyReadTimeoutSeconds = 10;
// How far past --max-http-body-bytes an oversized body is read to find its id.
constexpr std::size_t kOversizeScanFactor = 4;

Poco::Logger& logger() { return Poco::Logger::get("scs.http"); }

// Each comma-separated media range of an Accept header, without parameters, lower case.
std::vector<std::string> mediaRanges(const std::string& header) {
  std::vector<std::string> ranges;
  for (const std::string& item : splitList(header)) {
    ranges.push_back(Poco::toLower(trim(item.substr(0, item.find(';')))));
  }
  return ranges;
}

bool acceptsType(const std::vector<std::string>& ranges, const std::string& type) {
  const std::string family = type.substr(0, type.find('/')) + "/*";
  return std::any_of(ranges.begin(), ranges.end(), [&](const std::string& range) {
    return range == type || range == family || range == "*/*";
  });
}

// Whether the client of `request`, whose body has been read, has closed its end: its socket
// reports the peer's hang-up (each connection serves one request, so nothing else may come).
bool clientGone(HTTPServerRequest& request) {
  auto* parsed = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(&request);
  if (parsed == nullptr) {
    return false;
  }
  pollfd watched{parsed->socket().impl()->sockfd(), POLLRDHUP, 0};
  return ::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

struct HttpTransport::Impl {
  class Handler : public Poco::Net::HTTPRequestHandler {
   public:
    explicit Handler(Impl& impl) : impl_(impl) {}
    void handleRequest(HTTPServerRequest& request, HTTPServerResponse& response) override {
      impl_.handle(request, response);
    }

   private:
    Impl& impl_;
  };

  class Factory : public Poco::Net::HTTPRequestHandlerFactory {
   public:
    explicit Factory(Impl& impl) : impl_(impl) {}
    Poco::Net::HTTPRequestHandler* createRequestHandler(const HTTPServerRequest&) override {
      return new Handler(impl_);
    }

   private:
    Impl& impl_;
  };

  Impl(Server& server, HttpEndpoint endpoint)
      : server_(server),
        endpoint_(std::move(endpoint)),
        sessions_(endpoint_.max_sessions, endpoint_.max_sessions_per_tenant),
        body_bytes_(endpoint_.max_body_bytes_per_tenant) {}

  void handle(HTTPServerRequest& request, HTTPServerResponse& response);
  void serve(HTTPServerRequest& request, Reply& reply, std::string* tenant);
  void post(HTTPServerRequest& request, Reply& reply, const std::string& tenant);
  // A message of the modern revision: no session; its routing headers checked first.
  void postModern(HTTPServerRequest& request, Reply& reply, const std::string& tenant,
                  const Message& message);
  // Server::respond's answer to `message` as the era's transport sends it.
  void answer(HTTPServerRequest& request, Reply& reply, const Message& message,
              const std::string& tenant, bool modern, const std::string& new_session);
  void remove(HTTPServerRequest& request, Reply& reply, const std::string& tenant);
  // Where the gate sends a request, by its head alone.
  net::GateAdmission classify(const Poco::Net::HTTPRequest& head) const;

  Server& server_;
  HttpEndpoint endpoint_;
  http::Sessions sessions_;
  net::TenantSlots body_bytes_;  // of the bodies each tenant's requests in flight hold
  Poco::Net::SocketAddress bound_;
  std::unique_ptr<net::HttpGate> gate_;
};

void HttpTransport::Impl::handle(HTTPServerRequest& request, HTTPServerResponse& response) {
  const auto began = std::chrono::steady_clock::now();
  std::string tenant;
  Reply reply(request, response);
  try {
    serve(request, reply, &tenant);
  } catch (const std::exception& e) {
    logger().error(std::string("HTTP request failed: ") + e.what());
    if (!response.sent()) {
      response.setKeepAlive(false);
      reply.json(
          HTTPResponse::HTTP_INTERNAL_SERVER_ERROR,
          R"({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}})");
    }
  }
  if (logger().debug()) {
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - began)
                            .count();
    const std::string& uri = request.getURI();
    logger().debug(request.getMethod() + " " + uri.substr(0, uri.find('?')) + " -> " +
                   std::to_string(static_cast<int>(response.getStatus())) +
                   (tenant.empty() ? std::string() : " tenant " + tenant) + " in " +
                   std::to_string(millis) + " ms from " + request.clientAddress().toString());
  }
}

void HttpTransport::Impl::serve(HTTPServerRequest& request, Reply& reply, std::string* tenant) {
  if (http::serveHealth(request, reply, endpoint_.readiness)) {
    return;
  }
  if (!http::hostAllowed(endpoint_.allowed_hosts, request.get("Host", ""))) {
    reply.refuse(HTTPResponse::HTTP_MISDIRECTED_REQUEST,
                 "this server does not answer for Host '" + request.get("Host", "") +
                     "'; the operator can allow it with --allowed-hosts.");
    return;
  }
  if (request.has("Origin") &&
      !http::originAllowed(endpoint_.allowed_origins, request.get("Origin"))) {
    reply.refuse(HTTPResponse::HTTP_FORBIDDEN,
                 "requests from Origin '" + request.get("Origin") +
                     "' are not allowed; the operator can allow it with --allowed-origins.");
    return;
  }
  std::string path;
  try {
    path = Poco::URI(request.getURI()).getPath();
  } catch (const Poco::Exception&) {
    reply.refuse(HTTPResponse::HTTP_BAD_REQUEST, "the request target is not a valid URI.");
    return;
  }
  if (path != kEndpointPath) {
    reply.refuse(HTTPResponse::HTTP_NOT_FOUND, "the MCP endpoint is /mcp.");
    return;
  }
  const std::optional<std::string> authenticated =
      http::authenticatedTenant(endpoint_, request, reply);
  if (!authenticated) {
    return;
  }
  *tenant = *authenticated;

  const std::string& method = request.getMethod();
  if (method == Poco::Net::HTTPRequest::HTTP_POST) {
    post(request, reply, *tenant);
  } else if (method == Poco::Net::HTTPRequest::HTTP_DELETE &&
             !namesModernRevision(net::rawRequestHead(request))) {
    remove(request, reply, *tenant);
  } else {
    reply.setHeader("Allow", "POST, DELETE");
    reply.refuse(HTTPResponse::HTTP_METHOD_NOT_ALLOWED,
                 method == Poco::Net::HTTPRequest::HTTP_GET
                     ? "this server sends nothing unasked, so there is no GET stream; POST "
                       "each message."
                     : "use POST for messages, and DELETE to end a session of protocol "
                       "revision 2025-11-25 or earlier (2026-07-28 has none).");
  }
}

net::GateAdmission HttpTransport::Impl::classify(const Poco::Net::HTTPRequest& head) const {
  std::string path;
  try {
    path = Poco::URI(head.getURI()).getPath();
  } catch (const Poco::Exception&) {
    return {kRefusalLane, std::nullopt};  // answered 400 there
  }
  if (http::isProbePath(path)) {
    return {kProbeLane, std::nullopt};
  }
  if (!endpoint_.tokens) {
    return {kMcpLane, std::string(runs::kLocalTenant)};
  }
  std::optional<std::string> tenant =
      http::tenantOfAuthorization(*endpoint_.tokens, head.get("Authorization", ""));
  if (!tenant) {
    return {kRefusalLane, std::nullopt};
  }
  return {kMcpLane, std::move(tenant)};
}

void HttpTransport::Impl::post(HTTPServerRequest& request, Reply& reply,
                               const std::string& tenant) {
  const std::vector<std::string> accepted = mediaRanges(request.get("Accept", ""));
  if (!acceptsType(accepted, "application/json") || !acceptsType(accepted, "text/event-stream")) {
    reply.refuse(HTTPResponse::HTTP_NOT_ACCEPTABLE,
                 "the Accept header must list both application/json and text/event-stream.");
    return;
  }
  const std::string content_type =
      Poco::toLower(trim(request.getContentType().substr(0, request.getContentType().find(';'))));
  if (content_type != "application/json") {
    reply.refuse(HTTPResponse::HTTP_UNSUPPORTEDMEDIATYPE,
                 "the Content-Type must be application/json.");
    return;
  }
  if (!request.getChunkedTransferEncoding() && !request.hasContentLength()) {
    reply.refuse(HTTPResponse::HTTP_LENGTH_REQUIRED,
                 "a POST needs a Content-Length or chunked transfer encoding.");
    return;
  }
  const std::size_t limit = endpoint_.max_body_bytes;
  // Past the limit the body is only scanned for its id (it may stand at the end), up to
  // kOversizeScanFactor times the limit; a body declared longer than that is refused unread.
  const std::size_t scan_limit = limit * kOversizeScanFactor;
  const bool declared_huge = request.hasContentLength() &&
                             request.getContentLength64() > static_cast<Poco::Int64>(scan_limit);
  // The body's bytes count against the tenant's in-flight budget until this request is
  // answered: at its declared length, or at the limit when chunked.
  const std::size_t holding = request.hasContentLength()
                                  ? static_cast<std::size_t>(std::min<Poco::Int64>(
                                        std::max<Poco::Int64>(request.getContentLength64(), 0),
                                        static_cast<Poco::Int64>(limit)))
                                  : limit;
  std::optional<net::TenantSlots::Slot> held;
  if (!declared_huge && !(held = body_bytes_.take(tenant, holding))) {
    // Read and dropped as it comes, so that the client, still sending, reads the answer.
    reply.refuse(HTTPResponse::HTTP_TOO_MANY_REQUESTS,
                 "this tenant's requests in flight already hold " +
                     std::to_string(body_bytes_.held(tenant)) +
                     " bytes of bodies; with this one's " + std::to_string(holding) +
                     " that passes the limit of " + std::to_string(body_bytes_.cap()) +
                     ". Wait for answers before sending more.",
                 limit);
    return;
  }
  std::string body;
  std::optional<MessageScanner> scanner;
  std::size_t read = 0;
  if (!declared_huge) {
    body.reserve(holding);  // not an append's doubling: the bytes held are the bytes counted
    std::istream& in = request.stream();
    char buffer[16384];
    while (read <= scan_limit && (in.read(buffer, sizeof(buffer)) || in.gcount() > 0)) {
      const std::string_view chunk(buffer, static_cast<std::size_t>(in.gcount()));
      read += chunk.size();
      if (!scanner && body.size() + chunk.size() > limit) {
        scanner.emplace();
        scanner->feed(body);
        std::string().swap(body);
      }
      if (scanner) {
        scanner->feed(chunk);
      } else {
        body.append(chunk);
      }
    }
  }
  reply.markDrained();
  if (declared_huge || scanner) {
    reply.closeAfter();
    reply.json(HTTPResponse::HTTP_REQUEST_ENTITY_TOO_LARGE,
               Server::oversizedMessageError(limit, scanner ? scanner->id() : std::nullopt));
    return;
  }

  const Message message = server_.parseBounded(body);
  std::string().swap(body);  // the message holds what it needs
  if (message.kind() == Message::Kind::kInvalid) {
    reply.json(HTTPResponse::HTTP_BAD_REQUEST, server_.handle(message).value_or(""));
    return;
  }
  // The modern revision by the body's _meta or by the header; legacy by everything else
  // (initialize, a session, a legacy or no MCP-Protocol-Version).
  if (message.modern() || namesModernRevision(net::rawRequestHead(request))) {
    postModern(request, reply, tenant, message);
    return;
  }
  std::string new_session;
  if (message.kind() == Message::Kind::kRequest && message.method() == "initialize") {
    new_session = sessions_.open(tenant);
    if (logger().debug()) {  // poco_debug() is compiled out of release builds
      logger().debug("session opened for tenant " + tenant);
    }
  } else {
    if (!request.has(kSessionHeader)) {
      reply.json(HTTPResponse::HTTP_BAD_REQUEST,
                 Server::refusal("the Mcp-Session-Id header is missing; send initialize first "
                                 "and then the session id it returned.",
                                 &message));
      return;
    }
    if (!sessions_.touch(request.get(kSessionHeader), tenant)) {
      reply.json(HTTPResponse::HTTP_NOT_FOUND,
                 Server::refusal("unknown or expired session; send initialize again.", &message));
      return;
    }
    const std::string version = request.get(kProtocolVersionHeader, "");
    if (request.has(kProtocolVersionHeader) && !isSupportedProtocolVersion(version)) {
      std::string supported;
      for (const char* known : kSupportedProtocolVersions) {
        supported += (supported.empty() ? "" : ", ") + std::string(known);
      }
      reply.json(HTTPResponse::HTTP_BAD_REQUEST,
                 Server::refusal("unsupported MCP-Protocol-Version '" + version +
                                     "'; supported: " + supported + ".",
                                 &message));
      return;
    }
  }
  answer(request, reply, message, tenant, false, new_session);
}

void HttpTransport::Impl::postModern(HTTPServerRequest& request, Reply& reply,
                                     const std::string& tenant, const Message& message) {
  if (message.kind() == Message::Kind::kRequest) {
    if (std::string problem = routingHeaderProblem(net::rawRequestHead(request), message);
        !problem.empty()) {
      reply.json(HTTPResponse::HTTP_BAD_REQUEST, Server::headerMismatch(problem, message));
      return;
    }
  }
  answer(request, reply, message, tenant, true, {});
}

void HttpTransport::Impl::answer(HTTPServerRequest& request, Reply& reply, const Message& message,
                                 const std::string& tenant, bool modern,
                                 const std::string& new_session) {
  if (message.kind() != Message::Kind::kRequest) {
    server_.handle(message);
    reply.empty(HTTPResponse::HTTP_ACCEPTED);
    return;
  }
  RequestContext context;
  context.tenant = tenant;
  context.modern = modern;
  if (modern) {  // 2026-07-28: a closed response stream cancels the request
    context.abandoned = [&request] { return clientGone(request); };
  }
  context.on_progress = [&reply](const std::string& notification) {
    if (notification.empty()) {
      reply.sseComment("waiting");
    } else {
      reply.sseEvent(notification);
    }
  };
  const Server::Answer answer = server_.respond(message, context).value_or(Server::Answer{});
  if (reply.streaming()) {
    reply.sseEvent(answer.text);
    return;
  }
  // The legacy revisions answer every JSON-RPC error with 200; the modern one an unknown method
  // with 404 and any other refusal with 400 (its clients read the error as the answer).
  HTTPResponse::HTTPStatus status = HTTPResponse::HTTP_OK;
  if (modern && answer.error_code == Server::kMethodNotFound) {
    status = HTTPResponse::HTTP_NOT_FOUND;
  } else if (modern && answer.error_code == Server::kInternalError) {
    status = HTTPResponse::HTTP_INTERNAL_SERVER_ERROR;
  } else if (modern && answer.error_code != 0) {
    status = HTTPResponse::HTTP_BAD_REQUEST;
  }
  reply.json(status, answer.text, new_session);
}

void HttpTransport::Impl::remove(HTTPServerRequest& request, Reply& reply,
                                 const std::string& tenant) {
  reply.drainBody();
  if (!request.has(kSessionHeader)) {
    reply.refuse(HTTPResponse::HTTP_BAD_REQUEST, "the Mcp-Session-Id header is missing.");
    return;
  }
  if (!sessions_.close(request.get(kSessionHeader), tenant)) {
    reply.refuse(HTTPResponse::HTTP_NOT_FOUND, "unknown or expired session.");
    return;
  }
  if (logger().debug()) {
    logger().debug("session closed for tenant " + tenant);
  }
  reply.empty(HTTPResponse::HTTP_NO_CONTENT);
}

HttpTransport::HttpTransport(Server& server, HttpEndpoint endpoint)
    : impl_(std::make_unique<Impl>(server, std::move(endpoint))) {}

HttpTransport::~HttpTransport() {
  stop();
  finish();
}

Result<Done> HttpTransport::start() {
  Impl& impl = *impl_;
  Poco::Net::ServerSocket socket;
  try {
    socket.bind(impl.endpoint_.address, true);
    socket.listen(kListenBacklog);
  } catch (const Poco::Exception& e) {
    return internal("cannot listen on " + impl.endpoint_.address.toString() + ": " +
                    e.displayText());
  }
  impl.bound_ = socket.address();
  const bool hosts_given = !impl.endpoint_.allowed_hosts.empty();
  http::deriveAllowLists(impl.bound_, &impl.endpoint_);
  if (impl.bound_.host().isWildcard() && !hosts_given) {
    logger().warning(
        "listening on every interface, but only the Host names localhost, "
        "127.0.0.1 and [::1] are allowed; add the names remote clients use with "
        "--allowed-hosts");
  }

  Poco::AutoPtr<Poco::Net::HTTPServerParams> params(new Poco::Net::HTTPServerParams);
  params->setKeepAlive(false);  // one request per connection: see net/http_gate.h
  params->setTimeout(Poco::Timespan(kBodyReadTimeoutSeconds, 0));
  net::GateSettings gate;
  gate.lanes = {{"MCP", kMcpWorkers, 256}, {"probe", 2, 32}, {"unauthenticated", 4, 64}};
  gate.max_in_flight_per_tenant = impl.endpoint_.max_requests_per_tenant;
  impl.gate_ = std::make_unique<net::HttpGate>(
      gate, new Impl::Factory(impl), params,
      [&impl](const Poco::Net::HTTPRequest& head) { return impl.classify(head); },
      [](const std::string& message) { return Server::refusal(message); });
  impl.gate_->start(std::move(socket));
  logger().information(
      "listening on " + url() +
      (impl.endpoint_.tokens
           ? " (bearer tokens for " + std::to_string(impl.endpoint_.tokens->size()) + " token(s))"
           : " (no authentication: loopback only)"));
  return Done{};
}

Poco::Net::SocketAddress HttpTransport::address() const { return impl_->bound_; }

std::string HttpTransport::url() const {
  return "http://" + http::hostText(impl_->bound_.host()) + ":" +
         std::to_string(impl_->bound_.port()) + kEndpointPath;
}

void HttpTransport::stop() {
  if (impl_->gate_) {
    impl_->gate_->stop();
  }
}

void HttpTransport::finish() {
  if (impl_->gate_) {
    impl_->gate_->join();
  }
}

}  // namespace scs::mcp
