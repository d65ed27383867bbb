#pragma once

// Requests to the Kubernetes API server over HTTPS (issue 16), with Poco's NetSSL: the server's
// certificate must chain to the access's CA and name its host; the credential is a bearer token
// or a client certificate. One connection per request; thread-safe (nothing is shared but the
// TLS context, which OpenSSL guards).

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <scs/backend/backend.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "clock.h"
#include "cluster_access.h"
#include "json_access.h"

namespace scs::kubernetes {

// How often a token from a file is read again, as client-go does (token() below).
inline constexpr std::chrono::milliseconds kTokenReread = std::chrono::minutes(1);

struct ApiReply {
  backend::Status status;  // kOk for 2xx; otherwise the code below, and the API's message
  int http_status = 0;     // 0 when no answer came
  json::ObjectPtr body;    // the answer's JSON object; null when it was not one
};

class KubeClient {
 public:
  // Builds the TLS context from `access`; `error` is set (and every call fails) when the CA, the
  // client certificate or its key cannot be read, or the server is not an https URL. A token
  // from a file is read again from it every `token_reread` of `clock`, which must outlive the
  // client.
  KubeClient(ClusterAccess access, std::chrono::milliseconds timeout,
             std::chrono::milliseconds token_reread = kTokenReread,
             const Clock& clock = systemClock());

  const std::string& error() const { return error_; }
  const ClusterAccess& access() const { return access_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The time of the client's callers too: their deadlines, pauses and heartbeats (clock.h).
  const Clock& clock() const { return clock_; }

  // `method` on `path_and_query` ("/api/v1/namespaces/x/pods?labelSelector=..."), with `body`
  // as JSON when given. The status: kOk for 2xx; kNotFound for 404; kRejected for 409 (a
  // conflict) and other 4xx; kUnavailable for 429, 5xx and a connection or TLS failure;
  // kTimeout when no answer came within the timeout. Its message is the API's Status message
  // when it sent one.
  ApiReply call(const std::string& method, const std::string& path_and_query,
                const json::ObjectPtr& body = nullptr) const;

  // A watch (GET `path_and_query`, which asks for watch=1): each event the API server streams
  // ({"type": ADDED|MODIFIED|DELETED, "object": ...}) goes to `on_event` as it arrives, until the
  // server ends the watch (its timeoutSeconds) or `on_event` returns false. `expired` when the
  // server answered that the resourceVersion asked for is too old (410, as an ERROR event or the
  // answer's status): the caller reads the object again and watches from there.
  struct WatchReply {
    backend::Status status;
    bool expired = false;
  };
  WatchReply watch(const std::string& path_and_query,
                   const std::function<bool(const json::ObjectPtr& event)>& on_event) const;

  // For a request the caller makes itself (the upgrade to attach's WebSocket): a new session to
  // the API server with the client's TLS context and timeout (null when error() is set), and
  // the credential on `request`.
  std::unique_ptr<Poco::Net::HTTPSClientSession> session() const;
  void authorize(Poco::Net::HTTPRequest& request) const;

 private:
  // Sends `method` on `path_and_query`, with `body` as JSON when given, over a new session, and
  // has `read` take the answer: its head, its body, and the session (networkException()).
  // Answers itself what call() and watch() answer alike: the client's own set-up error, no
  // answer in time (kTimeout, `silence`), a server that cannot be reached (kUnavailable).
  using Reader = std::function<backend::Status(Poco::Net::HTTPSClientSession&,
                                               Poco::Net::HTTPResponse&, std::istream&)>;
  backend::Status exchange(const std::string& method, const std::string& path_and_query,
                           const json::ObjectPtr& body, const std::string& silence,
                           const Reader& read) const;

  // The bearer token now: the access's, read again from its file once a minute, as client-go
  // does, since a service account's token is rotated (about hourly); the last one read while
  // the file cannot be.
  std::string token() const;

  ClusterAccess access_;
  mutable std::mutex token_mutex_;
  mutable std::string token_;
  mutable std::chrono::steady_clock::time_point token_read_;
  std::chrono::milliseconds token_reread_;
  std::chrono::milliseconds timeout_;
  const Clock& clock_;
  std::string host_;
  unsigned short port_ = 0;
  Poco::Net::Context::Ptr context_;
  std::string error_;
};

// Maps an HTTP status to the plugin contract's code (as call() does).
backend::Code codeOfHttpStatus(int http_status);

}  // namespace scs::kubernetes
