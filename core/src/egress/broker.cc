#include "egress/broker.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace scs::egress {
namespace {

using Clock = std::chrono::steady_clock;

// The most either direction holds before the broker stops reading its source.
constexpr std::size_t kMaxBuffered = 256 << 10;
constexpr std::size_t kReadChunk = 64 << 10;
// What the rewriter is given at once: small enough that its output (a head per 30 bytes, each
// grown by the credential) stays near kMaxBuffered.
constexpr std::size_t kFeedSlice = 1 << 10;

std::string sslErrors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    std::array<char, 256> buffer{};
    ERR_error_string_n(code, buffer.data(), buffer.size());
    if (!text.empty()) {
      text += "; ";
    }
    text += buffer.data();
  }
  return text.empty() ? "unknown TLS failure" : text;
}

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

bool addExtension(X509* certificate, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
  if (extension == nullptr) {
    return false;
  }
  const bool added = X509_add_ext(certificate, extension, -1) == 1;
  X509_EXTENSION_free(extension);
  return added;
}

// A v3 certificate for `subject`, valid from an hour ago for `seconds`, with a random serial.
X509* newCertificate(const std::string& common_name, std::time_t now, std::time_t seconds) {
  X509* certificate = X509_new();
  if (certificate == nullptr) {
    return nullptr;
  }
  X509_set_version(certificate, 2);
  std::array<unsigned char, 16> serial{};
  RAND_bytes(serial.data(), static_cast<int>(serial.size()));
  serial[0] &= 0x7f;  // positive
  BIGNUM* number = BN_bin2bn(serial.data(), static_cast<int>(serial.size()), nullptr);
  BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate));
  BN_free(number);
  X509_time_adj_ex(X509_getm_notBefore(certificate), 0, -3600, &now);
  X509_time_adj_ex(X509_getm_notAfter(certificate), 0, static_cast<long>(seconds), &now);
  X509_NAME* name = X509_get_subject_name(certificate);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  return certificate;
}

std::time_t systemNow() { return std::time(nullptr); }

}  // namespace

Result<std::unique_ptr<CertificateAuthority>> CertificateAuthority::make(
    const std::vector<std::string>& hosts, const std::string& upstream_ca, Clock clock) {
  std::unique_ptr<CertificateAuthority> authority(new CertificateAuthority);
  authority->clock_ = clock ? std::move(clock) : Clock(&systemNow);
  authority->hosts_ = hosts;
  if (hosts.empty()) {
    return internal("a brokering CA needs at least one host");
  }
  authority->key_ = EVP_EC_gen("P-256");
  authority->leaf_key_ = EVP_EC_gen("P-256");
  if (authority->key_ == nullptr || authority->leaf_key_ == nullptr) {
    return internal("cannot make the brokering CA's keys: " + sslErrors());
  }
  const std::time_t now = authority->clock_();
  // Ten years: the CA lives as long as this process, whose memory alone holds its key.
  X509* certificate = newCertificate("Safe Code Sandbox egress CA (this server only)", now,
                                     std::time_t{10} * 365 * 24 * 3600);
  authority->certificate_ = certificate;
  if (certificate == nullptr) {
    return internal("cannot make the brokering CA: " + sslErrors());
  }
  X509_set_issuer_name(certificate, X509_get_subject_name(certificate));
  X509_set_pubkey(certificate, authority->key_);
  std::string permitted = "critical";
  for (const std::string& host : hosts) {
    permitted += ",permitted;DNS:" + host;
  }
  // Names of other kinds are unconstrained unless named: every address is excluded.
  permitted += ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0";
  if (!addExtension(certificate, certificate, NID_basic_constraints,
                    "critical,CA:TRUE,pathlen:0") ||
      !addExtension(certificate, certificate, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !addExtension(certificate, certificate, NID_subject_key_identifier, "hash") ||
      !addExtension(certificate, certificate, NID_authority_key_identifier, "keyid:always") ||
      !addExtension(certificate, certificate, NID_name_constraints, permitted) ||
      X509_sign(certificate, authority->key_, EVP_sha256()) == 0) {
    return internal("cannot make the brokering CA: " + sslErrors());
  }
  BIO* pem = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(pem, certificate);
  char* data = nullptr;
  const long size = BIO_get_mem_data(pem, &data);
  authority->certificate_pem_.assign(data, static_cast<std::size_t>(size));
  BIO_free(pem);

  authority->upstream_.reset(SSL_CTX_new(TLS_client_method()));
  SSL_CTX* upstream = authority->upstream_.get();
  if (upstream == nullptr || SSL_CTX_set_min_proto_version(upstream, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_default_verify_paths(upstream) != 1) {
    return internal("cannot make the TLS client context: " + sslErrors());
  }
  if (!upstream_ca.empty() &&
      SSL_CTX_load_verify_locations(upstream, upstream_ca.c_str(), nullptr) != 1) {
    return invalid("--egress-upstream-ca " + upstream_ca +
                   " cannot be read as PEM certificates: " + sslErrors());
  }
  SSL_CTX_set_verify(upstream, SSL_VERIFY_PEER, nullptr);
  // The broker appends to a buffer while a write of its start waits: the retry may see it moved.
  SSL_CTX_set_mode(upstream, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(upstream, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  static constexpr unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(upstream, kAlpn, sizeof kAlpn);
  return authority;
}

CertificateAuthority::~CertificateAuthority() {
  X509_free(certificate_);
  EVP_PKEY_free(key_);
  EVP_PKEY_free(leaf_key_);
}

std::size_t CertificateAuthority::certificatesMade() const {
  std::lock_guard lock(mutex_);
  return made_;
}

Result<std::shared_ptr<SSL_CTX>> CertificateAuthority::serverContext(const std::string& host) {
  if (std::find(hosts_.begin(), hosts_.end(), host) == hosts_.end()) {
    return invalid(host + " has no credential, so the server holds no certificate for it");
  }
  const std::time_t now = clock_();
  std::lock_guard lock(mutex_);
  const auto found = leaves_.find(host);
  if (found != leaves_.end() && found->second.expires - now > kRenewSeconds) {
    return found->second.context;
  }
  std::unique_ptr<X509, X509Free> leaf(newCertificate(host, now, kLeafSeconds));
  if (!leaf) {
    return internal("cannot make a certificate for " + host + ": " + sslErrors());
  }
  X509_set_issuer_name(leaf.get(), X509_get_subject_name(certificate_));
  X509_set_pubkey(leaf.get(), leaf_key_);
  if (!addExtension(leaf.get(), certificate_, NID_basic_constraints, "critical,CA:FALSE") ||
      !addExtension(leaf.get(), certificate_, NID_key_usage, "critical,digitalSignature") ||
      !addExtension(leaf.get(), certificate_, NID_ext_key_usage, "serverAuth") ||
      !addExtension(leaf.get(), certificate_, NID_subject_alt_name, "DNS:" + host) ||
      !addExtension(leaf.get(), certificate_, NID_subject_key_identifier, "hash") ||
      !addExtension(leaf.get(), certificate_, NID_authority_key_identifier, "keyid:always") ||
      X509_sign(leaf.get(), key_, EVP_sha256()) == 0) {
    return internal("cannot make a certificate for " + host + ": " + sslErrors());
  }
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!context || SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate(context.get(), leaf.get()) != 1 ||
      SSL_CTX_use_PrivateKey(context.get(), leaf_key_) != 1 ||
      SSL_CTX_add1_chain_cert(context.get(), certificate_) != 1) {
    return internal("cannot make a TLS context for " + host + ": " + sslErrors());
  }
  SSL_CTX_set_options(context.get(),
                      SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
  SSL_CTX_set_mode(context.get(), SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // No session tickets: the program's next connection costs a handshake with this server (a
  // few milliseconds), and no ticket is written between its handshake and its first answer.
  SSL_CTX_set_num_tickets(context.get(), 0);
  // HTTP/1.1 only: a program offering h2 and http/1.1 gets http/1.1; one offering only h2 gets
  // no ALPN, and its HTTP/2 preface is refused by the rewriter with the reason.
  SSL_CTX_set_alpn_select_cb(
      context.get(),
      [](SSL*, const unsigned char** out, unsigned char* out_size, const unsigned char* in,
         unsigned int in_size, void*) {
        static constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
        unsigned char* selected = nullptr;
        if (SSL_select_next_proto(&selected, out_size, kHttp11, sizeof kHttp11, in, in_size) ==
            OPENSSL_NPN_NEGOTIATED) {
          *out = selected;
          return SSL_TLSEXT_ERR_OK;
        }
        return SSL_TLSEXT_ERR_NOACK;
      },
      nullptr);
  ++made_;
  leaves_[host] = Leaf{context, now + kLeafSeconds};
  return context;
}

namespace {

// One side of a brokered stream: a non-blocking fd, with TLS over it or without.
class Side {
 public:
  Side(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  ~Side() {
    if (ssl_ != nullptr) {
      SSL_free(ssl_);
    }
    ::close(fd_);
  }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  int fd() const { return fd_; }
  SSL* ssl() const { return ssl_; }
  bool pending() const { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }

  // > 0 bytes; 0 at the end of the stream; -1 not now (events() says what it waits for);
  // -2 failed (error()).
  long read(char* buffer, std::size_t size) {
    read_wants_ = POLLIN;
    if (ssl_ == nullptr) {
      const ssize_t n = ::recv(fd_, buffer, size, 0);
      if (n >= 0) {
        return n;
      }
      return wouldBlock() ? -1 : fail(std::string("reading failed: ") + std::strerror(errno));
    }
    std::size_t done = 0;
    const int result = SSL_read_ex(ssl_, buffer, size, &done);
    if (result == 1) {
      return static_cast<long>(done);
    }
    return sslResult(result, &read_wants_, true);
  }
  long write(const char* data, std::size_t size) {
    write_wants_ = POLLOUT;
    if (ssl_ == nullptr) {
      const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
      if (n >= 0) {
        return n;
      }
      return wouldBlock() ? -1 : fail(std::string("writing failed: ") + std::strerror(errno));
    }
    std::size_t done = 0;
    const int result = SSL_write_ex(ssl_, data, size, &done);
    if (result == 1) {
      return static_cast<long>(done);
    }
    const long status = sslResult(result, &write_wants_, false);
    return status == 0 ? fail("the connection closed") : status;
  }
  // A TLS handshake step: 1 done, -1 not yet, -2 failed.
  long handshake() {
    read_wants_ = POLLIN;
    const int result = SSL_do_handshake(ssl_);
    if (result == 1) {
      return 1;
    }
    const long status = sslResult(result, &read_wants_, false);
    return status == 0 ? fail("the connection closed during the TLS handshake") : status;
  }
  // No more from this side's writer: TLS close_notify, or a shutdown of the socket's sending half.
  void shutdownWrite() {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
    }
    ::shutdown(fd_, SHUT_WR);
  }
  short readEvents() const { return read_wants_; }
  short writeEvents() const { return write_wants_; }
  const std::string& error() const { return error_; }

 private:
  static bool wouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }
  long fail(std::string why) {
    error_ = std::move(why);
    return -2;
  }
  long sslResult(int result, short* wants, bool eof_is_end) {
    switch (SSL_get_error(ssl_, result)) {
      case SSL_ERROR_WANT_READ:
        *wants = POLLIN;
        return -1;
      case SSL_ERROR_WANT_WRITE:
        *wants = POLLOUT;
        return -1;
      case SSL_ERROR_ZERO_RETURN:
        return 0;
      case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0 && (errno == 0 || errno == ECONNRESET || errno == EPIPE)) {
          return eof_is_end ? 0 : fail("the connection closed");
        }
        return fail(errno != 0 ? std::strerror(errno) : sslErrors());
      default: {
        const long verify = SSL_get_verify_result(ssl_);
        if (verify != X509_V_OK) {
          ERR_clear_error();
          return fail(std::string("its certificate failed verification: ") +
                      X509_verify_cert_error_string(verify));
        }
        return fail(sslErrors());
      }
    }
  }

  const int fd_;
  SSL* ssl_;
  short read_wants_ = POLLIN;
  short write_wants_ = POLLOUT;
  std::string error_;
};

int millisUntil(Clock::time_point at) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 60'000));
}

// Waits for `side`'s `events` until `until`; false at `until` or on a poll failure.
bool waitFor(const Side& side, short events, Clock::time_point until) {
  pollfd fd{side.fd(), events, 0};
  while (true) {
    const int ready = ::poll(&fd, 1, millisUntil(until));
    if (ready > 0) {
      return true;
    }
    if ((ready == 0 && Clock::now() >= until) || (ready < 0 && errno != EINTR)) {
      return false;
    }
  }
}

// Runs `side`'s handshake to its end; empty when done, else why not.
std::string handshake(Side& side, Clock::time_point until) {
  while (true) {
    const long step = side.handshake();
    if (step == 1) {
      return "";
    }
    if (step == -2) {
      return side.error();
    }
    if (!waitFor(side, side.readEvents(), until)) {
      return "the TLS handshake did not finish in time";
    }
  }
}

// Writes all of `bytes` to `side` within `until`; false when it cannot.
bool writeAll(Side& side, std::string_view bytes, Clock::time_point until) {
  while (!bytes.empty()) {
    const long n = side.write(bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (n == -2 || !waitFor(side, side.writeEvents(), until)) {
      return false;
    }
  }
  return true;
}

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// The request head's end in what the program sent: the point at which a refusal may be
// answered without the program being mid-write (best effort, bounded by the handshake time).
void awaitRequestHead(Side& program, Clock::time_point until) {
  std::string head;
  std::array<char, 4096> buffer{};
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < (64 << 10)) {
    const long n = program.read(buffer.data(), buffer.size());
    if (n > 0) {
      head.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n != -1 || !waitFor(program, program.readEvents(), until)) {
      return;
    }
  }
}

}  // namespace

void runBroker(int program_fd, int upstream_fd, CertificateAuthority* authority,
               const BrokerSettings& settings, RequestRules rules, const BrokerEvents& events) {
  setNonBlocking(program_fd);
  setNonBlocking(upstream_fd);
  // The broker writes whole TLS records (a handshake's Finished, then a request): Nagle's
  // algorithm would hold the second behind the host's delayed ACK, 40 ms a connection.
  const int one = 1;
  ::setsockopt(upstream_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  SSL* program_ssl = nullptr;
  SSL* upstream_ssl = nullptr;
  // Before either side owns its descriptor and TLS: what a failed start lets go.
  const auto failStart = [&](const std::string& why) {
    SSL_free(program_ssl);
    SSL_free(upstream_ssl);
    ::close(program_fd);
    ::close(upstream_fd);
    events.refused(why);
  };
  if (settings.terminate) {
    const Result<std::shared_ptr<SSL_CTX>> context = authority->serverContext(settings.host);
    if (const Error* error = std::get_if<Error>(&context)) {
      failStart(error->message);
      return;
    }
    program_ssl = SSL_new(std::get<std::shared_ptr<SSL_CTX>>(context).get());
    upstream_ssl = SSL_new(authority->upstreamContext());
    if (program_ssl == nullptr || upstream_ssl == nullptr ||
        SSL_set_fd(program_ssl, program_fd) != 1 || SSL_set_fd(upstream_ssl, upstream_fd) != 1 ||
        SSL_set_tlsext_host_name(upstream_ssl, settings.host.c_str()) != 1 ||
        SSL_set1_host(upstream_ssl, settings.host.c_str()) != 1) {
      failStart("the server could not start TLS for " + settings.host + ": " + sslErrors());
      return;
    }
    SSL_set_accept_state(program_ssl);
    SSL_set_connect_state(upstream_ssl);
  }
  Side program(program_fd, program_ssl);
  Side upstream(upstream_fd, upstream_ssl);
  // The rules hold the secret, and so do the rewritten bytes on their way to the host: wiped
  // when the stream ends, however it ends (the rewriter wipes its own copy of the rules).
  std::string to_upstream;
  std::string rewritten;
  to_upstream.reserve(2 * kMaxBuffered);
  struct Wipe {
    RequestRules& rules;
    std::string& to_upstream;
    std::string& rewritten;
    ~Wipe() {
      for (HeaderRule& rule : rules.set) {
        OPENSSL_cleanse(rule.value.data(), rule.value.size());
      }
      for (Substitution& substitution : rules.substitute) {
        OPENSSL_cleanse(substitution.value.data(), substitution.value.size());
      }
      OPENSSL_cleanse(to_upstream.data(), to_upstream.capacity());
      OPENSSL_cleanse(rewritten.data(), rewritten.capacity());
    }
  } wipe{rules, to_upstream, rewritten};

  if (settings.terminate) {
    const auto until = Clock::now() + settings.handshake;
    if (const std::string problem = handshake(program, until); !problem.empty()) {
      events.refused("the program's TLS handshake with the server failed (" + problem +
                     "); the program must trust this server's CA, which SSL_CERT_FILE names");
      return;
    }
    if (const std::string problem = handshake(upstream, until); !problem.empty()) {
      const std::string why = "the TLS connection to " + settings.host + " failed: " + problem;
      events.refused(why);
      awaitRequestHead(program, until);
      writeAll(program, refusalResponse({502, "upstream-tls", why}), until);
      program.shutdownWrite();
      return;
    }
  }

  RequestRewriter rewriter(rules);
  std::string unfed;  // read from the program, not yet given to the rewriter
  std::string to_program;
  std::vector<char> buffer(kReadChunk);
  bool program_eof = false;
  bool upstream_eof = false;
  bool upstream_shut = false;
  std::uint64_t counted = 0;
  auto idle_until = Clock::now() + settings.idle;
  while (true) {
    bool progress = false;
    // The program's bytes, rewritten, toward the host, fed in slices so that what a read turns
    // into (a head grows by the credential) stays near kMaxBuffered. After a request with a
    // body, the connection's last, they are still read (the rewriter drops them), so that the
    // program's end never closes with bytes unread, which would reset the relay's end before
    // it has read the host's answer.
    while (!unfed.empty() && to_upstream.size() < kMaxBuffered) {
      const std::size_t slice = std::min(unfed.size(), kFeedSlice);
      rewritten.clear();
      const std::optional<RequestRewriter::Refused> refusal =
          rewriter.feed(std::string_view(unfed).substr(0, slice), rewritten);
      unfed.erase(0, slice);
      to_upstream += rewritten;
      if (rewriter.credentialed() > counted) {
        events.requests(rewriter.credentialed() - counted);
        counted = rewriter.credentialed();
      }
      if (refusal) {
        events.refused(refusal->reason);
        const auto until = Clock::now() + settings.handshake;
        writeAll(upstream, to_upstream, until);
        writeAll(program, to_program, until);
        writeAll(program, refusalResponse(*refusal), until);
        program.shutdownWrite();
        return;
      }
      progress = true;
    }
    const bool reading = !program_eof && unfed.empty();
    if (reading && to_upstream.size() < kMaxBuffered) {
      const long n = program.read(buffer.data(), buffer.size());
      if (n > 0) {
        unfed.assign(buffer.data(), static_cast<std::size_t>(n));
        progress = true;
      } else if (n == 0) {
        program_eof = true;
        progress = true;
      } else if (n == -2) {
        return;
      }
    }
    if (!to_upstream.empty()) {
      const long n = upstream.write(to_upstream.data(), to_upstream.size());
      if (n > 0) {
        to_upstream.erase(0, static_cast<std::size_t>(n));
        progress = true;
      } else if (n == -2) {
        return;
      }
    }
    if (program_eof && to_upstream.empty() && !upstream_shut) {
      upstream.shutdownWrite();
      upstream_shut = true;
    }
    // The host's bytes, as they are, toward the program.
    if (!upstream_eof && to_program.size() < kMaxBuffered) {
      const long n = upstream.read(buffer.data(), buffer.size());
      if (n > 0) {
        to_program.append(buffer.data(), static_cast<std::size_t>(n));
        progress = true;
      } else if (n == 0) {
        upstream_eof = true;
        progress = true;
      } else if (n == -2) {
        writeAll(program, to_program, Clock::now() + settings.handshake);
        return;
      }
    }
    if (!to_program.empty()) {
      const long n = program.write(to_program.data(), to_program.size());
      if (n > 0) {
        to_program.erase(0, static_cast<std::size_t>(n));
        progress = true;
      } else if (n == -2) {
        return;
      }
    }
    if (upstream_eof && to_program.empty()) {
      program.shutdownWrite();
      return;
    }
    if (progress || program.pending() || upstream.pending()) {
      idle_until = Clock::now() + settings.idle;
      continue;
    }
    short program_events = 0;
    short upstream_events = 0;
    if (reading && to_upstream.size() < kMaxBuffered) {
      program_events |= program.readEvents();
    }
    if (!to_program.empty()) {
      program_events |= program.writeEvents();
    }
    if (!upstream_eof && to_program.size() < kMaxBuffered) {
      upstream_events |= upstream.readEvents();
    }
    if (!to_upstream.empty()) {
      upstream_events |= upstream.writeEvents();
    }
    if (Clock::now() >= idle_until) {
      return;
    }
    // The host's side is not polled while the broker waits for nothing from it (a hang-up
    // there would wake it at once, again and again). The program's side always is: a hang-up
    // there, when nothing is to be read from it, means the relay has let the stream go (a
    // reset, the sandbox's end), and nothing more can reach the program.
    std::array<pollfd, 2> fds{
        pollfd{program.fd(), program_events, 0},
        pollfd{upstream_events != 0 ? upstream.fd() : -1, upstream_events, 0}};
    const int ready = ::poll(fds.data(), fds.size(), millisUntil(idle_until));
    if (ready < 0 && errno != EINTR) {
      return;
    }
    if ((fds[0].revents & (POLLHUP | POLLERR)) != 0 && (program_eof || program_events == 0)) {
      return;
    }
    // Any other hang-up is read as the end of its side's stream on the next pass.
  }
}

}  // namespace scs::egress
