// Reply: JSON, empty and SSE answers on a Poco response, and the request body drained (or the
// connection marked to close) before an early answer.
#include "mcp/http/reply.h"

#include <cstddef>

#include "mcp/http/mcp_sessions.h"
#include "mcp/server.h"

namespace scs::mcp::http {
namespace {

using Poco::Net::HTTPResponse;

}  // namespace

void Reply::json(HTTPResponse::HTTPStatus status, const std::string& body,
                 const std::string& session_id) {
  response_.setStatusAndReason(status);
  if (!session_id.empty()) {
    response_.set(kSessionHeader, session_id);
  }
  response_.setContentType("application/json");
  response_.setContentLength(static_cast<std::streamsize>(body.size()));
  response_.send() << body;
}

void Reply::empty(HTTPResponse::HTTPStatus status) {
  response_.setStatusAndReason(status);
  if (status == HTTPResponse::HTTP_NO_CONTENT) {
    // A 204 carries no Content-Length; Poco then ends the connection after it.
    response_.send();
    return;
  }
  response_.setContentLength(0);
  response_.send();
}

void Reply::refuse(HTTPResponse::HTTPStatus status, const std::string& message, std::size_t drain) {
  drainBody(drain);
  json(status, Server::refusal(message));
}

void Reply::sseEvent(const std::string& data) {
  std::ostream& out = sseStream();
  out << "event: message\ndata: " << data << "\n\n";
  out.flush();
}

void Reply::sseComment(const std::string& text) {
  std::ostream& out = sseStream();
  out << ": " << text << "\n\n";
  out.flush();
}

void Reply::drainBody(std::size_t up_to) {
  if (drained_) {
    return;
  }
  drained_ = true;
  // Without a length or chunking a request has no body (and reading would wait for EOF).
  if (!request_.getChunkedTransferEncoding() && !request_.hasContentLength()) {
    return;
  }
  if (request_.hasContentLength() &&
      request_.getContentLength64() > static_cast<Poco::Int64>(up_to)) {
    response_.setKeepAlive(false);
    return;
  }
  std::istream& body = request_.stream();
  char buffer[8192];
  std::size_t total = 0;
  while (body.read(buffer, sizeof(buffer)) || body.gcount() > 0) {
    total += static_cast<std::size_t>(body.gcount());
    if (total > up_to) {
      response_.setKeepAlive(false);
      return;
    }
  }
}

std::ostream& Reply::sseStream() {
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

}  // namespace scs::mcp::http
