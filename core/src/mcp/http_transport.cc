#include "mcp/http_transport.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Object.h>
#include <Poco/Logger.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/IPAddress.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/SHA2Engine.h>
#include <Poco/Timespan.h>
#include <Poco/URI.h>
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include "mcp/message_id.h"
#include "mcp/routing_headers.h"
#include "net/http_gate.h"
#include "runs/tenant_share.h"

namespace scs::mcp {
namespace {

using Poco::JSON::Object;
using Poco::Net::HTTPResponse;
using Poco::Net::HTTPServerRequest;
using Poco::Net::HTTPServerResponse;

constexpr const char* kEndpointPath = "/mcp";
constexpr const char* kHealthPath = "/healthz";
constexpr const char* kReadyPath = "/readyz";
constexpr const char* kSessionHeader = "Mcp-Session-Id";
constexpr const char* kRealm = "safe-code-sandbox";
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
constexpr auto kSessionIdleLimit = std::chrono::hours(24);
// Bytes of an unwanted request body read to keep a connection in step; beyond, it is closed.
constexpr std::size_t kMaxDrainBytes = 64 * 1024;
constexpr std::size_t kMaxNameLength = 64;
// How far past --max-http-body-bytes an oversized body is read to find its id.
constexpr std::size_t kOversizeScanFactor = 4;

Poco::Logger& logger() { return Poco::Logger::get("scs.http"); }

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// Splits "host", "host:port", "[v6]" or "[v6]:port". False when it is none of them.
bool splitHostPort(const std::string& text, std::string* host, std::string* port) {
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) {
      return false;
    }
    *host = text.substr(0, close + 1);
    const std::string rest = text.substr(close + 1);
    if (rest.empty()) {
      port->clear();
      return true;
    }
    if (rest.front() != ':') {
      return false;
    }
    *port = rest.substr(1);
    return true;
  }
  const auto colon = text.find(':');
  if (colon != text.rfind(':')) {
    return false;  // a bare IPv6 address: ambiguous
  }
  *host = text.substr(0, colon);
  *port = colon == std::string::npos ? std::string() : text.substr(colon + 1);
  return true;
}

std::optional<std::uint16_t> parsePort(const std::string& text) {
  unsigned value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

std::string hostText(const Poco::Net::IPAddress& host) {
  return host.family() == Poco::Net::IPAddress::IPv6 ? "[" + host.toString() + "]"
                                                     : host.toString();
}

bool isValidName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxNameLength &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '_' || c == '.' || c == '-';
         });
}

bool isValidToken(const std::string& token) {
  return std::all_of(token.begin(), token.end(),
                     [](unsigned char c) { return c > 0x20 && c < 0x7F; });
}

std::string hex(const unsigned char* bytes, std::size_t count) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xF]);
  }
  return out;
}

// Each comma-separated media range of an Accept header, without parameters, lower case.
std::vector<std::string> mediaRanges(const std::string& header) {
  std::vector<std::string> ranges;
  for (const std::string& item : splitList(header)) {
    ranges.push_back(lower(trim(item.substr(0, item.find(';')))));
  }
  return ranges;
}

bool acceptsType(const std::vector<std::string>& ranges, const std::string& type) {
  const std::string family = type.substr(0, type.find('/')) + "/*";
  return std::any_of(ranges.begin(), ranges.end(), [&](const std::string& range) {
    return range == type || range == family || range == "*/*";
  });
}

// Sessions of the legacy Streamable HTTP transport: ids handed out at initialize, each bound
// to the tenant that opened it. A tenant at its own limit loses its least recently used
// session to a new one; when all tenants together hold the total, the least recently used
// session of the tenant that gives way (runs/tenant_share.h) goes. Thread-safe.
class Sessions {
 public:
  Sessions(std::size_t max_total, std::size_t max_per_tenant)
      : max_total_(max_total), max_per_tenant_(max_per_tenant) {}

  std::string open(const std::string& tenant) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    purgeLocked(now);
    if (held_[tenant] >= max_per_tenant_) {
      closeLeastRecentLocked(tenant);
    } else if (sessions_.size() >= max_total_) {
      std::map<std::string, std::uint64_t> held(held_.begin(), held_.end());
      ++held[tenant];
      closeLeastRecentLocked(runs::tenantToGiveWay(held, tenant));
    }
    const std::string id = runs::unusedHexId(sessions_);
    sessions_[id] = Session{tenant, now};
    ++held_[tenant];
    return id;
  }

  // True when `id` is a live session of `tenant`; it counts as used now.
  bool touch(const std::string& id, const std::string& tenant) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    purgeLocked(now);
    const auto found = sessions_.find(id);
    if (found == sessions_.end() || found->second.tenant != tenant) {
      return false;
    }
    found->second.last_used = now;
    return true;
  }

  bool close(const std::string& id, const std::string& tenant) {
    std::lock_guard lock(mutex_);
    const auto found = sessions_.find(id);
    if (found == sessions_.end() || found->second.tenant != tenant) {
      return false;
    }
    eraseLocked(found);
    return true;
  }

 private:
  struct Session {
    std::string tenant;
    std::chrono::steady_clock::time_point last_used;
  };
  using Iterator = std::map<std::string, Session>::iterator;

  Iterator eraseLocked(Iterator it) {
    const auto held = held_.find(it->second.tenant);
    if (--held->second == 0) {
      held_.erase(held);
    }
    return sessions_.erase(it);
  }

  void closeLeastRecentLocked(const std::string& tenant) {
    auto oldest = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.tenant == tenant &&
          (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used)) {
        oldest = it;
      }
    }
    if (oldest != sessions_.end()) {
      logger().debug("session table: the least recently used session of tenant " + tenant +
                     " makes room for a new one");
      eraseLocked(oldest);
    }
  }

  void purgeLocked(std::chrono::steady_clock::time_point now) {
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      it = now - it->second.last_used > kSessionIdleLimit ? eraseLocked(it) : std::next(it);
    }
  }

  const std::size_t max_total_;
  const std::size_t max_per_tenant_;
  std::mutex mutex_;
  std::map<std::string, Session> sessions_;
  std::map<std::string, std::size_t> held_;  // sessions per tenant
};

// The answer to one request, written once: a JSON body, an empty one, or an SSE stream
// started on the first event.
class Reply {
 public:
  Reply(HTTPServerRequest& request, HTTPServerResponse& response)
      : request_(request), response_(response) {}

  void json(HTTPResponse::HTTPStatus status, const std::string& body,
            const std::string& session_id = {}) {
    response_.setStatusAndReason(status);
    if (!session_id.empty()) {
      response_.set(kSessionHeader, session_id);
    }
    response_.setContentType("application/json");
    response_.setContentLength(static_cast<std::streamsize>(body.size()));
    response_.send() << body;
  }

  void empty(HTTPResponse::HTTPStatus status) {
    response_.setStatusAndReason(status);
    if (status == HTTPResponse::HTTP_NO_CONTENT) {
      // A 204 carries no Content-Length; Poco then ends the connection after it.
      response_.send();
      return;
    }
    response_.setContentLength(0);
    response_.send();
  }

  // An early JSON-RPC refusal: the body the client sent is read first, or, when it is too
  // big for that, the connection is closed after the answer.
  void refuse(HTTPResponse::HTTPStatus status, const std::string& message) {
    drainBody();
    json(status, Server::refusal(message));
  }

  void sseEvent(const std::string& data) {
    std::ostream& out = sseStream();
    out << "event: message\ndata: " << data << "\n\n";
    out.flush();
  }

  // An SSE comment: keeps the stream (and any proxy on the way) alive without an event.
  void sseComment(const std::string& text) {
    std::ostream& out = sseStream();
    out << ": " << text << "\n\n";
    out.flush();
  }

  bool streaming() const { return sse_ != nullptr; }

  void setHeader(const std::string& name, const std::string& value) { response_.set(name, value); }

  // The connection is closed after the answer (part of the request is left unread).
  void closeAfter() { response_.setKeepAlive(false); }

  void drainBody() {
    if (drained_) {
      return;
    }
    drained_ = true;
    // Without a length or chunking a request has no body (and reading would wait for EOF).
    if (!request_.getChunkedTransferEncoding() && !request_.hasContentLength()) {
      return;
    }
    if (request_.hasContentLength() &&
        request_.getContentLength64() > static_cast<Poco::Int64>(kMaxDrainBytes)) {
      response_.setKeepAlive(false);
      return;
    }
    std::istream& body = request_.stream();
    char buffer[8192];
    std::size_t total = 0;
    while (body.read(buffer, sizeof(buffer)) || body.gcount() > 0) {
      total += static_cast<std::size_t>(body.gcount());
      if (total > kMaxDrainBytes) {
        response_.setKeepAlive(false);
        return;
      }
    }
  }

  void markDrained() { drained_ = true; }

 private:
  std::ostream& sseStream() {
    if (sse_ == nullptr) {
      response_.setStatusAndReason(HTTPResponse::HTTP_OK);
      response_.setContentType("text/event-stream");
      response_.setChunkedTransferEncoding(true);
      response_.set("Cache-Control", "no-cache, no-transform");
      response_.set("X-Accel-Buffering", "no");
      sse_ = &response_.send();
    }
    return *sse_;
  }

  HTTPServerRequest& request_;
  HTTPServerResponse& response_;
  std::ostream* sse_ = nullptr;
  bool drained_ = false;
};

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

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    item = trim(item);
    if (!item.empty()) {
      items.push_back(item);
    }
  }
  return items;
}

std::variant<Poco::Net::SocketAddress, std::string> parseListenAddress(const std::string& text,
                                                                       const std::string& flag) {
  const std::string value = trim(text);
  std::string host;
  std::string port_text = value;
  if (value.find(':') != std::string::npos || (!value.empty() && value.front() == '[')) {
    if (!splitHostPort(value, &host, &port_text)) {
      return flag + ": '" + text + "' is not ADDR:PORT (write an IPv6 address as [ADDR]:PORT)";
    }
  }
  const std::optional<std::uint16_t> port = parsePort(port_text);
  if (!port) {
    return flag + ": '" + text + "' has no valid port (0 to 65535; 0 picks a free one)";
  }
  if (host.size() >= 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    host = "127.0.0.1";
  }
  try {
    return Poco::Net::SocketAddress(host, *port);
  } catch (const Poco::Exception& e) {
    return flag + ": cannot use the address '" + host + "': " + e.displayText();
  }
}

TokenTable::Digest TokenTable::digestOf(std::string_view token) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(token.data(), static_cast<unsigned>(token.size()));
  const Poco::DigestEngine::Digest& bytes = engine.digest();
  Digest digest{};
  std::copy_n(bytes.begin(), std::min(bytes.size(), digest.size()), digest.begin());
  return digest;
}

std::variant<TokenTable, std::string> TokenTable::parse(const std::string& text) {
  TokenTable table;
  std::map<Digest, std::size_t> first_line;
  std::istringstream in(text);
  std::size_t number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    const std::string line = trim(raw);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    const std::string where = "line " + std::to_string(number);
    std::string name;
    std::string token = line;
    if (const auto colon = line.find(':'); colon != std::string::npos) {
      name = trim(line.substr(0, colon));
      token = trim(line.substr(colon + 1));
      if (!isValidName(name)) {
        return where + ": the tenant name before ':' must be 1 to 64 of A-Z a-z 0-9 _ . -";
      }
    }
    if (!isValidToken(token)) {
      return where + ": a token is printable ASCII without blanks";
    }
    if (token.size() < kMinTokenLength) {
      return where + ": the token is shorter than " + std::to_string(kMinTokenLength) +
             " characters (make one with: openssl rand -hex 32)";
    }
    const Digest digest = digestOf(token);
    if (const auto seen = first_line.find(digest); seen != first_line.end()) {
      return where + ": the same token as line " + std::to_string(seen->second);
    }
    first_line[digest] = number;
    table.entries_.push_back(Entry{digest, name.empty() ? "token-" + hex(digest.data(), 6) : name});
  }
  if (table.entries_.empty()) {
    return std::string("there is no token in it (one per line, or NAME:TOKEN)");
  }
  return table;
}

std::variant<TokenTable, std::string> TokenTable::load(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return "--token-file: cannot read " + path + ": " + std::generic_category().message(errno);
  }
  if (!S_ISREG(info.st_mode)) {
    return "--token-file: " + path + " is not a regular file";
  }
  if ((info.st_mode & S_IRWXO) != 0) {
    std::ostringstream mode;
    mode << std::oct << (info.st_mode & 07777);
    return "--token-file: " + path + " is open to other users (mode 0" + mode.str() +
           "); make it private with chmod 600 " + path + " (or chmod 640 with the service's group)";
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return "--token-file: cannot read " + path;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = parse(text.str());
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    return "--token-file " + path + ": " + *problem;
  }
  return parsed;
}

std::vector<std::string> TokenTable::tenants() const {
  std::set<std::string> names;
  for (const Entry& entry : entries_) {
    names.insert(entry.tenant);
  }
  return {names.begin(), names.end()};
}

std::optional<std::string> TokenTable::tenantOf(std::string_view token) const {
  const Digest digest = digestOf(token);
  const Entry* match = nullptr;
  for (const Entry& entry : entries_) {
    unsigned char difference = 0;
    for (std::size_t i = 0; i < digest.size(); ++i) {
      difference = static_cast<unsigned char>(difference | (entry.digest[i] ^ digest[i]));
    }
    match = difference == 0 ? &entry : match;
  }
  if (match == nullptr) {
    return std::nullopt;
  }
  return match->tenant;
}

std::variant<HttpEndpoint, std::string> resolveHttpSettings(const HttpSettings& settings) {
  HttpEndpoint endpoint;
  auto address = parseListenAddress(settings.listen);
  if (auto* problem = std::get_if<std::string>(&address)) {
    return *problem;
  }
  endpoint.address = std::get<Poco::Net::SocketAddress>(address);
  if (!settings.token_file.empty()) {
    auto tokens = TokenTable::load(settings.token_file);
    if (auto* problem = std::get_if<std::string>(&tokens)) {
      return *problem;
    }
    endpoint.tokens = std::move(std::get<TokenTable>(tokens));
  }
  if (!endpoint.tokens && !endpoint.address.host().isLoopback()) {
    return "--http " + settings.listen + ": refusing to serve beyond loopback (" +
           endpoint.address.toString() +
           ") without authentication; give --token-file FILE, or bind 127.0.0.1";
  }
  for (const std::string& host : settings.allowed_hosts) {
    endpoint.allowed_hosts.push_back(lower(host));
  }
  for (const std::string& origin : settings.allowed_origins) {
    std::string value = lower(origin);
    while (value.size() > 1 && value.back() == '/') {
      value.pop_back();
    }
    endpoint.allowed_origins.push_back(value);
  }
  endpoint.max_body_bytes = settings.max_body_bytes;
  endpoint.max_sessions = settings.max_sessions;
  endpoint.max_sessions_per_tenant = settings.max_sessions_per_tenant;
  endpoint.max_requests_per_tenant = settings.max_requests_per_tenant;
  return endpoint;
}

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
        sessions_(endpoint_.max_sessions, endpoint_.max_sessions_per_tenant) {}

  void handle(HTTPServerRequest& request, HTTPServerResponse& response);
  void serve(HTTPServerRequest& request, Reply& reply, std::string* tenant);
  bool serveHealth(HTTPServerRequest& request, Reply& reply);
  void post(HTTPServerRequest& request, Reply& reply, const std::string& tenant);
  // A message of the modern revision: no session; its routing headers checked first.
  void postModern(HTTPServerRequest& request, Reply& reply, const std::string& tenant,
                  const Message& message);
  // Server::respond's answer to `message` as the era's transport sends it.
  void answer(HTTPServerRequest& request, Reply& reply, const Message& message,
              const std::string& tenant, bool modern, const std::string& new_session);
  void remove(HTTPServerRequest& request, Reply& reply, const std::string& tenant);
  bool hostAllowed(const std::string& header) const;
  bool originAllowed(const std::string& header) const;
  std::optional<std::string> authenticate(HTTPServerRequest& request, Reply& reply) const;
  // The tenant of an Authorization header's bearer token; none without a valid one.
  std::optional<std::string> tenantOfAuthorization(const std::string& header) const;
  // Where the gate sends a request, by its head alone.
  net::GateAdmission classify(const Poco::Net::HTTPRequest& head) const;
  void deriveAllowLists();

  Server& server_;
  HttpEndpoint endpoint_;
  Sessions sessions_;
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

// GET /healthz and /readyz (see the header); false for any other path.
bool HttpTransport::Impl::serveHealth(HTTPServerRequest& request, Reply& reply) {
  std::string path;
  try {
    path = Poco::URI(request.getURI()).getPath();
  } catch (const Poco::Exception&) {
    return false;
  }
  if (path != kHealthPath && path != kReadyPath) {
    return false;
  }
  if (request.getMethod() != Poco::Net::HTTPRequest::HTTP_GET) {
    reply.setHeader("Allow", "GET");
    reply.refuse(HTTPResponse::HTTP_METHOD_NOT_ALLOWED, path + " answers GET only.");
    return true;
  }
  Object::Ptr body = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  bool ready = true;
  if (path == kHealthPath) {
    body->set("status", "ok");
  } else {
    Object::Ptr checks = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    if (endpoint_.readiness) {
      for (const ReadinessCheck& check : endpoint_.readiness()) {
        checks->set(check.name, check.problem.empty() ? std::string("ok") : check.problem);
        ready = ready && check.problem.empty();
      }
    }
    body->set("status", ready ? "ready" : "not_ready");
    body->set("checks", checks);
  }
  std::ostringstream text;
  body->stringify(text);
  reply.drainBody();
  reply.json(ready ? HTTPResponse::HTTP_OK : HTTPResponse::HTTP_SERVICE_UNAVAILABLE, text.str());
  return true;
}

void HttpTransport::Impl::serve(HTTPServerRequest& request, Reply& reply, std::string* tenant) {
  if (serveHealth(request, reply)) {
    return;
  }
  if (!hostAllowed(request.get("Host", ""))) {
    reply.refuse(HTTPResponse::HTTP_MISDIRECTED_REQUEST,
                 "this server does not answer for Host '" + request.get("Host", "") +
                     "'; the operator can allow it with --allowed-hosts.");
    return;
  }
  if (request.has("Origin") && !originAllowed(request.get("Origin"))) {
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
  const std::optional<std::string> authenticated = authenticate(request, reply);
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

std::optional<std::string> HttpTransport::Impl::authenticate(HTTPServerRequest& request,
                                                             Reply& reply) const {
  if (!endpoint_.tokens) {
    // Without tokens the server must only be reachable from this host; a proxy in front
    // would open it to everyone the proxy serves.
    if (request.has("Forwarded") || request.has("X-Forwarded-For")) {
      logger().warning("refused a proxied request from " + request.clientAddress().toString() +
                       ": the server has no --token-file");
      reply.refuse(HTTPResponse::HTTP_FORBIDDEN,
                   "this server has no authentication and does not accept requests forwarded "
                   "by a proxy; the operator must give it a --token-file.");
      return std::nullopt;
    }
    return std::string(runs::kLocalTenant);
  }
  const std::string header = trim(request.get("Authorization", ""));
  if (std::optional<std::string> tenant = tenantOfAuthorization(header)) {
    return tenant;
  }
  const bool presented = !header.empty();
  logger().warning("refused a request from " + request.clientAddress().toString() + ": " +
                   (presented ? "the bearer token is not valid" : "no bearer token"));
  std::string challenge = std::string("Bearer realm=\"") + kRealm + "\"";
  if (presented) {
    challenge += ", error=\"invalid_token\"";
  }
  reply.setHeader("WWW-Authenticate", challenge);
  reply.refuse(HTTPResponse::HTTP_UNAUTHORIZED,
               presented ? "the bearer token is not valid."
                         : "this server needs 'Authorization: Bearer <token>'.");
  return std::nullopt;
}

std::optional<std::string> HttpTransport::Impl::tenantOfAuthorization(
    const std::string& text) const {
  const std::string header = trim(text);
  const std::string scheme = lower(header.substr(0, header.find(' ')));
  if (scheme != "bearer" || header.find(' ') == std::string::npos) {
    return std::nullopt;
  }
  return endpoint_.tokens->tenantOf(trim(header.substr(header.find(' '))));
}

net::GateAdmission HttpTransport::Impl::classify(const Poco::Net::HTTPRequest& head) const {
  std::string path;
  try {
    path = Poco::URI(head.getURI()).getPath();
  } catch (const Poco::Exception&) {
    return {kRefusalLane, std::nullopt};  // answered 400 there
  }
  if (path == kHealthPath || path == kReadyPath) {
    return {kProbeLane, std::nullopt};
  }
  if (!endpoint_.tokens) {
    return {kMcpLane, std::string(runs::kLocalTenant)};
  }
  std::optional<std::string> tenant = tenantOfAuthorization(head.get("Authorization", ""));
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
      lower(trim(request.getContentType().substr(0, request.getContentType().find(';'))));
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
  std::string body;
  std::optional<MessageIdScanner> scanner;
  std::size_t read = 0;
  if (!declared_huge) {
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

  const Message message = Server::parse(body);
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

bool HttpTransport::Impl::hostAllowed(const std::string& header) const {
  std::string host;
  std::string port;
  if (!splitHostPort(lower(trim(header)), &host, &port) || host.empty()) {
    return false;
  }
  if (port.empty()) {
    port = "80";
  }
  for (const std::string& allowed : endpoint_.allowed_hosts) {
    std::string allowed_host;
    std::string allowed_port;
    if (allowed == "*") {
      return true;
    }
    if (splitHostPort(allowed, &allowed_host, &allowed_port) && allowed_host == host &&
        (allowed_port.empty() || allowed_port == port)) {
      return true;
    }
  }
  return false;
}

bool HttpTransport::Impl::originAllowed(const std::string& header) const {
  std::string origin = lower(trim(header));
  while (origin.size() > 1 && origin.back() == '/') {
    origin.pop_back();
  }
  return std::any_of(
      endpoint_.allowed_origins.begin(), endpoint_.allowed_origins.end(),
      [&](const std::string& allowed) { return allowed == "*" || allowed == origin; });
}

void HttpTransport::Impl::deriveAllowLists() {
  const std::string port = std::to_string(bound_.port());
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "[::1]"};
  const Poco::Net::IPAddress& address = bound_.host();
  if (!address.isLoopback() && !address.isWildcard()) {
    hosts.push_back(lower(hostText(address)));
  }
  if (endpoint_.allowed_hosts.empty()) {
    for (const std::string& host : hosts) {
      endpoint_.allowed_hosts.push_back(host + ":" + port);
    }
  }
  if (endpoint_.allowed_origins.empty()) {
    for (const std::string& host : hosts) {
      endpoint_.allowed_origins.push_back("http://" + host + ":" + port);
    }
  }
}

HttpTransport::HttpTransport(Server& server, HttpEndpoint endpoint)
    : impl_(std::make_unique<Impl>(server, std::move(endpoint))) {}

HttpTransport::~HttpTransport() {
  stop();
  finish();
}

std::optional<std::string> HttpTransport::start() {
  Impl& impl = *impl_;
  Poco::Net::ServerSocket socket;
  try {
    socket.bind(impl.endpoint_.address, true);
    socket.listen(kListenBacklog);
  } catch (const Poco::Exception& e) {
    return "cannot listen on " + impl.endpoint_.address.toString() + ": " + e.displayText();
  }
  impl.bound_ = socket.address();
  const bool hosts_given = !impl.endpoint_.allowed_hosts.empty();
  impl.deriveAllowLists();
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
  return std::nullopt;
}

Poco::Net::SocketAddress HttpTransport::address() const { return impl_->bound_; }

std::string HttpTransport::url() const {
  return "http://" + hostText(impl_->bound_.host()) + ":" + std::to_string(impl_->bound_.port()) +
         kEndpointPath;
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
