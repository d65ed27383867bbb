// KubeClient: one HTTPS session per request with the access's CA and credential, answers read
// within a size cap, HTTP statuses mapped to backend codes, watches streamed, tokens reread.

#include "kube_client.h"

#include <Poco/Crypto/EVPPKey.h>
#include <Poco/Crypto/X509Certificate.h>
#include <Poco/Exception.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SSLManager.h>
#include <Poco/URI.h>

#include <istream>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "text.h"

namespace scs::kubernetes {
namespace {

using backend::Code;
using backend::Status;

// More than any list of one namespace's sandbox Pods, nodes or policies the backend reads.
constexpr std::size_t kMaxAnswerBytes = 32u << 20;

// The whole body of an answer; nullopt when it is over kMaxAnswerBytes.
std::optional<std::string> readCapped(std::istream& in) {
  std::string text;
  char chunk[16 << 10];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxAnswerBytes) {
      return std::nullopt;
    }
  }
  return text;
}

void initializeOnce() {
  static std::once_flag once;
  std::call_once(once, [] { Poco::Net::initializeSSL(); });
}

// The certificates of a PEM bundle, one X509Certificate each.
std::vector<Poco::Crypto::X509Certificate> certificates(const std::string& pem) {
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  std::vector<Poco::Crypto::X509Certificate> result;
  for (std::size_t at = pem.find("-----BEGIN CERTIFICATE-----"); at != std::string::npos;
       at = pem.find("-----BEGIN CERTIFICATE-----", at)) {
    const std::size_t end = pem.find(kEnd, at);
    if (end == std::string::npos) {
      break;
    }
    std::istringstream block(pem.substr(at, end + kEnd.size() - at) + "\n");
    result.emplace_back(block);
    at = end + kEnd.size();
  }
  return result;
}

std::string statusMessage(const json::ObjectPtr& body, const std::string& fallback) {
  return json::string(body, "message").value_or(fallback);
}

}  // namespace

backend::Code codeOfHttpStatus(int http_status) {
  if (http_status >= 200 && http_status < 300) {
    return Code::kOk;
  }
  if (http_status == 404) {
    return Code::kNotFound;
  }
  if (http_status == 429 || http_status >= 500) {
    return Code::kUnavailable;
  }
  return Code::kRejected;
}

KubeClient::KubeClient(ClusterAccess access, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds token_reread, const Clock& clock)
    : access_(std::move(access)), token_reread_(token_reread), timeout_(timeout), clock_(clock) {
  initializeOnce();
  try {
    const Poco::URI uri(access_.server);
    if (uri.getScheme() != "https" || uri.getHost().empty()) {
      error_ = "the API server " + access_.server + " is not an https URL";
      return;
    }
    host_ = uri.getHost();
    port_ = uri.getPort();
    // No default CAs: only the cluster's CA may vouch for its API server.
    context_ = new Poco::Net::Context(Poco::Net::Context::TLS_CLIENT_USE, "", "", "",
                                      Poco::Net::Context::VERIFY_STRICT, 9, false);
    const std::vector<Poco::Crypto::X509Certificate> cas = certificates(access_.ca_pem);
    if (cas.empty()) {
      error_ = "the cluster's CA bundle holds no certificate";
      return;
    }
    for (const auto& ca : cas) {
      context_->addCertificateAuthority(ca);
    }
    if (!access_.client_cert_pem.empty()) {
      const std::vector<Poco::Crypto::X509Certificate> mine = certificates(access_.client_cert_pem);
      if (mine.empty()) {
        error_ = "the client certificate cannot be read";
        return;
      }
      context_->useCertificate(mine.front());
      for (std::size_t i = 1; i < mine.size(); ++i) {
        context_->addChainCertificate(mine[i]);
      }
      std::istringstream key(access_.client_key_pem);
      context_->usePrivateKey(Poco::Crypto::EVPPKey(nullptr, &key));
    }
  } catch (const Poco::Exception& error) {
    error_ = "the TLS settings for " + access_.server + " cannot be used: " + error.displayText();
    context_ = nullptr;
  }
}

std::unique_ptr<Poco::Net::HTTPSClientSession> KubeClient::session() const {
  if (!error_.empty()) {
    return nullptr;
  }
  auto session = std::make_unique<Poco::Net::HTTPSClientSession>(host_, port_, context_);
  session->setTimeout(
      Poco::Timespan(std::chrono::duration_cast<std::chrono::microseconds>(timeout_).count()));
  return session;
}

std::string KubeClient::token() const {
  std::lock_guard lock(token_mutex_);
  const auto now = clock_.now();
  if (token_.empty()) {
    token_ = access_.token;
    token_read_ = now;
  }
  if (!access_.token_file.empty() && now - token_read_ >= token_reread_) {
    token_read_ = now;
    const std::string read = text::trimmedEnd(text::readFile(access_.token_file).value_or(""));
    if (!read.empty()) {
      token_ = read;
    }
  }
  return token_;
}

void KubeClient::authorize(Poco::Net::HTTPRequest& request) const {
  if (const std::string bearer = token(); !bearer.empty()) {
    request.set("Authorization", "Bearer " + bearer);
  }
}

Status KubeClient::exchange(const std::string& method, const std::string& path_and_query,
                            const json::ObjectPtr& body, const std::string& silence,
                            const Reader& read) const {
  if (!error_.empty()) {
    return {Code::kInternal, "kubernetes: " + error_};
  }
  try {
    const std::unique_ptr<Poco::Net::HTTPSClientSession> connection = session();
    Poco::Net::HTTPRequest request(method, path_and_query, Poco::Net::HTTPMessage::HTTP_1_1);
    request.set("Accept", "application/json");
    authorize(request);
    const std::string payload = body ? json::stringify(body) : std::string();
    if (body) {
      request.setContentType("application/json");
      request.setContentLength(static_cast<std::streamsize>(payload.size()));
    }
    connection->sendRequest(request) << payload;
    Poco::Net::HTTPResponse response;
    std::istream& in = connection->receiveResponse(response);
    return read(*connection, response, in);
  } catch (const Poco::TimeoutException&) {
    return {Code::kTimeout, "kubernetes: " + silence};
  } catch (const Poco::Exception& error) {
    return {Code::kUnavailable,
            "kubernetes: the API server cannot be reached: " + error.displayText()};
  }
}

ApiReply KubeClient::call(const std::string& method, const std::string& path_and_query,
                          const json::ObjectPtr& body) const {
  ApiReply reply;
  reply.status = exchange(
      method, path_and_query, body, "the API server did not answer " + method + " in time",
      [&](Poco::Net::HTTPSClientSession&, Poco::Net::HTTPResponse& response,
          std::istream& in) -> Status {
        const std::optional<std::string> text = readCapped(in);
        if (!text) {
          return {Code::kInternal, "kubernetes: the API server's answer to " + method +
                                       " is over " + std::to_string(kMaxAnswerBytes >> 20) +
                                       " MiB"};
        }
        reply.http_status = static_cast<int>(response.getStatus());
        reply.body = json::parseObject(*text);
        const Code code = codeOfHttpStatus(reply.http_status);
        if (code != Code::kOk) {
          return {code, "kubernetes: " + method + " " + Poco::URI(path_and_query).getPath() + ": " +
                            std::to_string(reply.http_status) + " " +
                            statusMessage(reply.body, response.getReason())};
        }
        return {};
      });
  return reply;
}

KubeClient::WatchReply KubeClient::watch(
    const std::string& path_and_query,
    const std::function<bool(const json::ObjectPtr& event)>& on_event) const {
  WatchReply reply;
  reply.status = exchange(
      "GET", path_and_query, nullptr, "the API server's watch went silent",
      [&](Poco::Net::HTTPSClientSession& connection, Poco::Net::HTTPResponse& response,
          std::istream& in) -> Status {
        const int http_status = static_cast<int>(response.getStatus());
        if (http_status != 200) {
          const std::string text = readCapped(in).value_or("");
          if (http_status == 410) {
            reply.expired = true;
            return {};
          }
          return {codeOfHttpStatus(http_status),
                  "kubernetes: watch " + Poco::URI(path_and_query).getPath() + ": " +
                      std::to_string(http_status) + " " +
                      statusMessage(json::parseObject(text), response.getReason())};
        }
        // One event per line (the API server's JSON stream), each at most the cap of any
        // answer. Poco's stream keeps a failure while the body is read to itself
        // (networkException()), so an end that is not the server's is told apart here: a broken
        // stream, or a last line cut short, is kUnavailable, and the caller lists again.
        std::string line;
        while (true) {
          line.clear();
          int c = 0;
          while ((c = in.get()) != std::char_traits<char>::eof() && c != '\n' &&
                 line.size() <= kMaxAnswerBytes) {
            line.push_back(static_cast<char>(c));
          }
          if (line.size() > kMaxAnswerBytes) {
            return {Code::kInternal, "kubernetes: a watch event is over the answer cap"};
          }
          if (c == std::char_traits<char>::eof()) {
            if (in.bad() || connection.networkException() != nullptr || !line.empty()) {
              return {Code::kUnavailable,
                      "kubernetes: the watch broke before the API server ended it"};
            }
            return {};  // ended by the server (its timeoutSeconds)
          }
          if (line.empty()) {
            continue;
          }
          const json::ObjectPtr event = json::parseObject(line);
          if (!event) {
            return {Code::kUnavailable,
                    "kubernetes: the API server sent a watch event that is not a JSON object"};
          }
          if (json::string(event, "type") == std::string("ERROR")) {
            const json::ObjectPtr status = json::object(event, "object");
            reply.expired = json::integer(status, "code") == 410;
            if (!reply.expired) {
              return {Code::kUnavailable,
                      "kubernetes: the watch ended in error: " + statusMessage(status, "")};
            }
            return {};
          }
          if (!on_event(event)) {
            return {};  // the caller has what it waited for; the connection closes here
          }
        }
      });
  return reply;
}

}  // namespace scs::kubernetes
