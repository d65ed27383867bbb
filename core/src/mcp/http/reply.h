// The answer to one HTTP request, written once: a JSON body, an empty one, or an SSE stream;
// and the unwanted request body drained so a kept-alive connection stays in step.
#pragma once

#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include <ostream>
#include <string>

namespace scs::mcp::http {

// The answer to one request, written once: a JSON body, an empty one, or an SSE stream
// started on the first event.
class Reply {
 public:
  Reply(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response)
      : request_(request), response_(response) {}

  void json(Poco::Net::HTTPResponse::HTTPStatus status, const std::string& body,
            const std::string& session_id = {});

  void empty(Poco::Net::HTTPResponse::HTTPStatus status);

  // Bytes of an unwanted request body read (and dropped) to keep a connection in step;
  // beyond, it is closed.
  static constexpr std::size_t kMaxDrainBytes = 64 * 1024;

  // An early JSON-RPC refusal: the body the client sent is read first (up to `drain` bytes,
  // dropped as they come), or, when it is bigger, the connection is closed after the answer.
  void refuse(Poco::Net::HTTPResponse::HTTPStatus status, const std::string& message,
              std::size_t drain = kMaxDrainBytes);

  void sseEvent(const std::string& data);

  // An SSE comment: keeps the stream (and any proxy on the way) alive without an event.
  void sseComment(const std::string& text);

  bool streaming() const { return sse_ != nullptr; }

  void setHeader(const std::string& name, const std::string& value) { response_.set(name, value); }

  // The connection is closed after the answer (part of the request is left unread).
  void closeAfter() { response_.setKeepAlive(false); }

  void drainBody(std::size_t up_to = kMaxDrainBytes);

  void markDrained() { drained_ = true; }

 private:
  std::ostream& sseStream();

  Poco::Net::HTTPServerRequest& request_;
  Poco::Net::HTTPServerResponse& response_;
  std::ostream* sse_ = nullptr;
  bool drained_ = false;
};

}  // namespace scs::mcp::http
