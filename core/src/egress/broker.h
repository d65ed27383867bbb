#pragma once

// The brokering end of egress (issue 48). For a host with a credential the server ends the
// program's TLS itself, with a certificate for that host from a CA it made at startup (its key
// only in this process's memory, its name constraints only the brokered hosts, so that even a
// leaked key could vouch for nothing else), opens its own TLS to the host, verified against the
// host's trust store and the operator's --egress-upstream-ca, and passes the program's HTTP/1.1
// requests through a RequestRewriter (http_requests.h), which adds the credential. Written on
// OpenSSL directly: neither Poco's NetSSL nor Boost.Asio's ssl stream runs a TLS server on a
// certificate made in memory over an fd the relay owns without more glue than this.
//
// The relay hands the broker one end of a socketpair in place of the host's socket, so that its
// frames, credit, caps and idle timer work as for any stream; the broker runs on a thread of its
// own between that end and the host's socket.

#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "egress/http_requests.h"
#include "result.h"

namespace scs::egress {

struct SslContextFree {
  void operator()(SSL_CTX* context) const { SSL_CTX_free(context); }
};
using SslContext = std::unique_ptr<SSL_CTX, SslContextFree>;

// The per-server CA, the certificates it makes for brokered hosts, and the context that
// verifies the real hosts. Thread-safe.
class CertificateAuthority {
 public:
  // Seconds since the epoch; tests move it.
  using Clock = std::function<std::time_t()>;
  static constexpr std::time_t kLeafSeconds = 24 * 3600;  // a host certificate's life
  static constexpr std::time_t kRenewSeconds = 3600;      // made again with this much left

  // `hosts`: the only names it may vouch for (its nameConstraints). `upstream_ca`: a PEM file of
  // the operator's CAs, trusted beside the system's for the hosts' own certificates.
  static Result<std::unique_ptr<CertificateAuthority>> make(const std::vector<std::string>& hosts,
                                                            const std::string& upstream_ca = {},
                                                            Clock clock = nullptr);
  ~CertificateAuthority();

  // The CA's certificate, PEM: what the sandbox trusts.
  const std::string& certificatePem() const { return certificate_pem_; }

  // A server context presenting a certificate for `host` (one of the constructor's): made on
  // first use and kept until it has less than kRenewSeconds left. Shared with the streams using
  // it, so that a renewal never pulls it from under one.
  Result<std::shared_ptr<SSL_CTX>> serverContext(const std::string& host);
  // How many host certificates were made so far (the cache's tests).
  std::size_t certificatesMade() const;

  // The client context for the hosts themselves: peer verification on, TLS 1.2 at least.
  SSL_CTX* upstreamContext() const { return upstream_.get(); }

 private:
  CertificateAuthority() = default;
  struct Leaf {
    std::shared_ptr<SSL_CTX> context;
    std::time_t expires = 0;
  };
  Clock clock_;
  std::vector<std::string> hosts_;
  EVP_PKEY* key_ = nullptr;       // the CA's
  EVP_PKEY* leaf_key_ = nullptr;  // every host certificate's
  X509* certificate_ = nullptr;
  std::string certificate_pem_;
  SslContext upstream_;
  mutable std::mutex mutex_;
  std::map<std::string, Leaf, std::less<>> leaves_;
  std::size_t made_ = 0;
};

// One brokered stream: `program_fd` (the socketpair's end; TLS from the program when
// `terminate`, else plain HTTP) and `upstream_fd` (the host's socket, TLS to `host` when
// `terminate`). Both are closed when it returns.
struct BrokerSettings {
  std::string host;  // the name the host's certificate must carry, and the SNI sent
  bool terminate = true;
  std::chrono::seconds handshake{10};
  std::chrono::seconds idle{60};
};
struct BrokerEvents {
  std::function<void(std::uint64_t requests)> requests;    // more requests got a credential
  std::function<void(const std::string& reason)> refused;  // a request or handshake refused
};
void runBroker(int program_fd, int upstream_fd, CertificateAuthority* authority,
               const BrokerSettings& settings, RequestRules rules, const BrokerEvents& events);

}  // namespace scs::egress
