// Brokered credentials (issue 48) without a sandbox: the operator's entries (CredentialStore),
// the per-server CA and its certificate cache (CertificateAuthority), and a brokered stream
// (runBroker) between an OpenSSL client standing for the program and an OpenSSL server standing
// for the host, over socketpairs, with a second CA the test makes as the host's.

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "egress/broker.h"
#include "egress/credentials.h"

namespace scs::egress {
namespace {

using namespace std::chrono_literals;

constexpr char kSecret[] = "Bearer ghp_TheRealSecretValue0123456789";
constexpr char kToken[] = "ghp_TokenForThePlaceholder987";

std::string fakeEnvironment(const char* name, bool* found) {
  *found = std::string(name) == "ALICE_TOKEN";
  return *found ? kToken : "";
}

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ =
        std::filesystem::temp_directory_path() / ("scs-credentials-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
    secret_file_ = write("github", std::string(kSecret) + "\n", 0600);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string write(const std::string& name, const std::string& content, mode_t mode) {
    const std::string path = (directory_ / name).string();
    std::ofstream(path) << content;
    ::chmod(path.c_str(), mode);
    return path;
  }
  static std::string errorOf(const Result<Done>& result) {
    const Error* error = std::get_if<Error>(&result);
    return error != nullptr ? error->message : "";
  }

  std::filesystem::path directory_;
  std::string secret_file_;
};

TEST_F(CredentialsTest, AHeaderFromAFileAndAPlaceholderFromTheEnvironment) {
  CredentialStore store(&fakeEnvironment);
  ASSERT_EQ(errorOf(store.add("alice=api.github.com:Authorization=file:" + secret_file_)), "");
  ASSERT_EQ(errorOf(store.add("alice=uploads.example.com:8443:$ALICE_TOKEN=env:ALICE_TOKEN")), "");
  ASSERT_EQ(errorOf(store.add("bob=keys.example.com:$KEY@X-Api-Key=file:" + secret_file_)), "");
  ASSERT_EQ(store.all().size(), 3u);
  const Credential& header = store.all()[0];
  EXPECT_EQ(header.target(), "api.github.com:443");
  EXPECT_EQ(header.secret->reveal(), kSecret);  // the file's newline is not part of it
  const Credential& placeholder = store.all()[1];
  EXPECT_EQ(placeholder.target(), "uploads.example.com:8443");
  EXPECT_EQ(placeholder.secret->reveal(), kToken);
  EXPECT_TRUE(placeholder.placeholder.starts_with(kPlaceholderPrefix));
  EXPECT_EQ(placeholder.placeholder.size(), kPlaceholderPrefix.size() + 32);
  EXPECT_EQ(placeholder.header, "Authorization");  // where it is replaced, unless named
  EXPECT_EQ(store.all()[2].header, "X-Api-Key");
  EXPECT_EQ(store.all()[2].variable, "KEY");

  EXPECT_TRUE(store.brokered("alice", "api.github.com", 443));
  EXPECT_FALSE(store.brokered("alice", "api.github.com", 8443));
  EXPECT_FALSE(store.brokered("bob", "api.github.com", 443));

  const RequestRules github = store.rulesFor("alice", "api.github.com", 443);
  ASSERT_EQ(github.set.size(), 1u);
  EXPECT_EQ(github.set[0].name, "Authorization");
  EXPECT_EQ(github.set[0].value, kSecret);
  EXPECT_EQ(github.host, "api.github.com");
  EXPECT_EQ(github.port, 443);
  EXPECT_TRUE(github.substitute.empty());
  EXPECT_EQ(github.foreign, std::vector<std::string>{placeholder.placeholder});
  const RequestRules uploads = store.rulesFor("alice", "uploads.example.com", 8443);
  EXPECT_TRUE(uploads.set.empty());
  ASSERT_EQ(uploads.substitute.size(), 1u);
  EXPECT_EQ(uploads.substitute[0].placeholder, placeholder.placeholder);
  EXPECT_EQ(uploads.substitute[0].value, kToken);
  EXPECT_EQ(uploads.substitute[0].header, "Authorization");
  EXPECT_EQ(store.rulesFor("bob", "keys.example.com", 443).substitute[0].header, "X-Api-Key");
  EXPECT_TRUE(uploads.foreign.empty());
  // Another tenant's rules hold only its own placeholders, never alice's.
  EXPECT_EQ(store.rulesFor("bob", "uploads.example.com", 8443).foreign,
            std::vector<std::string>{store.all()[2].placeholder});

  const auto environment = store.environmentFor("alice");
  ASSERT_EQ(environment.size(), 1u);
  EXPECT_EQ(environment[0].first, "ALICE_TOKEN");
  EXPECT_EQ(environment[0].second, placeholder.placeholder);
  EXPECT_EQ(store.environmentFor("bob").size(), 1u);
  EXPECT_TRUE(store.environmentFor("carol").empty());
  EXPECT_EQ(store.hosts(), (std::vector<std::string>{"api.github.com", "uploads.example.com",
                                                     "keys.example.com"}));
}

TEST_F(CredentialsTest, EveryRefusalNamesTheEntryAndNeverTheValue) {
  const std::string open_file = write("open", std::string(kSecret), 0644);
  const std::string empty_file = write("empty", "\n", 0600);
  const std::string control_file = write("control", "Bearer a\r\nX-Evil: 1", 0600);
  const std::string long_file = write("long", std::string(9000, 'a'), 0600);
  const std::map<std::string, std::string> refused = {
      {"alice=api.github.com:Authorization=" + std::string(kSecret), "file:PATH or env:NAME"},
      {"alice=api.github.com:Authorization=file:" + open_file, "chmod 600"},
      {"alice=api.github.com:Authorization=file:" + empty_file, "is empty"},
      {"alice=api.github.com:Authorization=file:" + control_file, "control character"},
      {"alice=api.github.com:Authorization=file:" + long_file, "8192"},
      {"alice=api.github.com:Authorization=file:relative", "absolute path"},
      {"alice=api.github.com:Authorization=file:/nonexistent/x", "No such file"},
      {"alice=api.github.com:Authorization=env:UNSET_HERE", "has no UNSET_HERE"},
      {"alice=*.github.com:Authorization=file:" + secret_file_, "named exactly"},
      {"alice=10.0.0.1:Authorization=file:" + secret_file_, "named exactly"},
      {"alice=api.github.com:Host=file:" + secret_file_, "frames the request"},
      {"alice=api.github.com:Proxy-Authorization=file:" + secret_file_, "frames the request"},
      {"alice=api.github.com:Bad Header=file:" + secret_file_, "not an HTTP token"},
      {"alice=api.github.com:Content_Length=file:" + secret_file_, "frames the request"},
      {"alice=api.github.com:$KEY@Host=file:" + secret_file_, "frames the request"},
      {"alice=api.github.com:$KEY@=file:" + secret_file_, "not an HTTP token"},
      {"alice=api.github.com:Authorization:Bearer ghp_typed", "write TENANT=HOST"},
      {"alice=api.github.com:$PATH=file:" + secret_file_, "depend on"},
      {"alice=api.github.com:$LD_PRELOAD=file:" + secret_file_, "depend on"},
      {"alice=api.github.com:$OPENSSL_CONF=file:" + secret_file_, "depend on"},
      {"alice=api.github.com:$SSL_CERT_FILE=file:" + secret_file_, "depend on"},
      {"alice=api.github.com:$lower=file:" + secret_file_, "variable name"},
      {"alice=api.github.com=file:" + secret_file_, "no header"},
      {"api.github.com:Authorization", "write TENANT=HOST"},
      {"ghp_pasted_alone", "write TENANT=HOST"},
  };
  for (const auto& [entry, why] : refused) {
    CredentialStore store(&fakeEnvironment);
    const std::string error = errorOf(store.add(entry));
    EXPECT_NE(error.find(why), std::string::npos) << entry << ": " << error;
    EXPECT_EQ(error.find("ghp_"), std::string::npos) << error;
    EXPECT_EQ(error.find("X-Evil"), std::string::npos) << error;
    EXPECT_TRUE(store.empty());
  }
  CredentialStore store(&fakeEnvironment);
  ASSERT_EQ(errorOf(store.add("alice=api.github.com:Authorization=file:" + secret_file_)), "");
  EXPECT_NE(errorOf(store.add("alice=api.github.com:authorization=file:" + secret_file_))
                .find("set for this host already"),
            std::string::npos);
  EXPECT_NE(errorOf(store.add("alice=api.github.com:$OTHER=file:" + secret_file_))
                .find("set for this host already"),
            std::string::npos);
  ASSERT_EQ(errorOf(store.add("alice=a.example.com:$TOKEN=env:ALICE_TOKEN")), "");
  EXPECT_NE(errorOf(store.add("alice=b.example.com:$TOKEN=env:ALICE_TOKEN"))
                .find("given to this tenant's programs already"),
            std::string::npos);
  EXPECT_EQ(errorOf(store.add("bob=b.example.com:$TOKEN=env:ALICE_TOKEN")), "");
}

// ---- the CA and its certificates

struct Ssl {
  SSL* ssl = nullptr;
  ~Ssl() { SSL_free(ssl); }
};

std::string pemFileOf(const std::string& pem, const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()) + ".pem"))
          .string();
  std::ofstream(path) << pem;
  return path;
}

// Whether `pem` (a CA) verifies `context`'s certificate as one for `host`.
std::string verify(const std::string& ca_pem, SSL_CTX* context, const std::string& host) {
  X509* leaf = SSL_CTX_get0_certificate(context);
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* verifying = X509_STORE_CTX_new();
  X509_STORE_CTX_init(verifying, store, leaf, nullptr);
  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(verifying), host.c_str(), 0);
  const bool ok = X509_verify_cert(verifying) == 1;
  const std::string why =
      ok ? "" : X509_verify_cert_error_string(X509_STORE_CTX_get_error(verifying));
  X509_STORE_CTX_free(verifying);
  X509_STORE_free(store);
  X509_free(ca);
  return why;
}

TEST(CertificateAuthorityTest, ACertificatePerHostIsMadeOnceAndAgainNearItsEnd) {
  std::time_t now = 1'800'000'000;
  auto made = CertificateAuthority::make({"api.github.com", "uploads.example.com"}, "",
                                         [&] { return now; });
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<CertificateAuthority>>(made));
  CertificateAuthority& authority = *std::get<0>(made);
  EXPECT_TRUE(authority.certificatePem().starts_with("-----BEGIN CERTIFICATE-----\n"));

  const auto first = std::get<std::shared_ptr<SSL_CTX>>(authority.serverContext("api.github.com"));
  const auto again = std::get<std::shared_ptr<SSL_CTX>>(authority.serverContext("api.github.com"));
  EXPECT_EQ(first, again);
  EXPECT_EQ(authority.certificatesMade(), 1u);
  const auto other =
      std::get<std::shared_ptr<SSL_CTX>>(authority.serverContext("uploads.example.com"));
  EXPECT_NE(other, first);
  EXPECT_EQ(authority.certificatesMade(), 2u);

  // Verified as a certificate for its host, by the CA alone; never for another name.
  now = std::time(nullptr);  // the verifier's clock is the real one
  auto fresh = CertificateAuthority::make({"api.github.com"}, "", [&] { return now; });
  CertificateAuthority& real = *std::get<0>(fresh);
  const auto context = std::get<std::shared_ptr<SSL_CTX>>(real.serverContext("api.github.com"));
  EXPECT_EQ(verify(real.certificatePem(), context.get(), "api.github.com"), "");
  EXPECT_NE(verify(real.certificatePem(), context.get(), "evil.example.com"), "");
  EXPECT_NE(verify(authority.certificatePem(), context.get(), "api.github.com"), "");  // other CA

  // Renewed with less than kRenewSeconds left; the old context stays valid for its holders.
  now = 1'800'000'000 + CertificateAuthority::kLeafSeconds - CertificateAuthority::kRenewSeconds;
  const auto renewed =
      std::get<std::shared_ptr<SSL_CTX>>(authority.serverContext("api.github.com"));
  EXPECT_NE(renewed, first);
  EXPECT_EQ(authority.certificatesMade(), 3u);
  EXPECT_NE(SSL_CTX_get0_certificate(first.get()), nullptr);

  const auto unknown = authority.serverContext("example.org");
  ASSERT_TRUE(std::holds_alternative<Error>(unknown));
  EXPECT_NE(std::get<Error>(unknown).message.find("no credential"), std::string::npos);
}

TEST(CertificateAuthorityTest, ItsNameConstraintsPermitOnlyTheBrokeredHosts) {
  auto made = CertificateAuthority::make({"api.github.com"});
  const std::string& pem = std::get<0>(made)->certificatePem();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  int critical = 0;
  auto* constraints = static_cast<NAME_CONSTRAINTS*>(
      X509_get_ext_d2i(ca, NID_name_constraints, &critical, nullptr));
  ASSERT_NE(constraints, nullptr);
  EXPECT_EQ(critical, 1);
  ASSERT_EQ(sk_GENERAL_SUBTREE_num(constraints->permittedSubtrees), 1);
  const GENERAL_NAME* name = sk_GENERAL_SUBTREE_value(constraints->permittedSubtrees, 0)->base;
  ASSERT_EQ(name->type, GEN_DNS);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.dNSName))),
            "api.github.com");
  NAME_CONSTRAINTS_free(constraints);
  X509_free(ca);
}

TEST(CertificateAuthorityTest, AnUpstreamCaFileThatIsNotPemIsRefused) {
  const std::string path = pemFileOf("not a certificate", "bad-ca");
  auto made = CertificateAuthority::make({"api.github.com"}, path);
  ASSERT_TRUE(std::holds_alternative<Error>(made));
  EXPECT_NE(std::get<Error>(made).message.find("--egress-upstream-ca"), std::string::npos);
  std::filesystem::remove(path);
}

// ---- a brokered stream

// The host: a TLS server on one end of a socketpair, answering each request on the connection
// with a small response and recording the heads it saw.
struct Host {
  std::vector<std::string> heads;
  std::string error;
  std::thread thread;
  void serve(int fd, SSL_CTX* context, int requests) {
    thread = std::thread([this, fd, context, requests] {
      Ssl ssl{SSL_new(context)};
      SSL_set_fd(ssl.ssl, fd);
      if (SSL_accept(ssl.ssl) != 1) {
        error = "accept failed";
        ::close(fd);
        return;
      }
      std::string buffer;
      char chunk[4096];
      for (int served = 0; served < requests; ++served) {
        std::size_t end;
        while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
          const int n = SSL_read(ssl.ssl, chunk, sizeof chunk);
          if (n <= 0) {
            ::close(fd);
            return;
          }
          buffer.append(chunk, static_cast<std::size_t>(n));
        }
        heads.push_back(buffer.substr(0, end + 4));
        buffer.erase(0, end + 4);
        const std::string body = "answer " + std::to_string(served);
        const std::string answer =
            "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        SSL_write(ssl.ssl, answer.data(), static_cast<int>(answer.size()));
      }
      SSL_shutdown(ssl.ssl);
      ::close(fd);
    });
  }
};

class BrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The host's own CA, which the broker trusts through its upstream CA file.
    auto host_ca = CertificateAuthority::make({"api.test"});
    host_ca_ = std::move(std::get<0>(host_ca));
    upstream_ca_file_ = pemFileOf(host_ca_->certificatePem(), "host-ca");
    auto broker_ca = CertificateAuthority::make({"api.test"}, upstream_ca_file_);
    authority_ = std::move(std::get<0>(broker_ca));
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, program_), 0);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, upstream_), 0);
  }
  void TearDown() override { std::filesystem::remove(upstream_ca_file_); }

  // The program: a TLS client trusting the broker's CA, sending `requests` and reading what
  // comes back until the connection ends.
  std::string program(const std::string& requests) {
    SSL_CTX* context = SSL_CTX_new(TLS_client_method());
    BIO* bio = BIO_new_mem_buf(authority_->certificatePem().data(),
                               static_cast<int>(authority_->certificatePem().size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(context), ca);
    X509_free(ca);
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    Ssl ssl{SSL_new(context)};
    SSL_set_fd(ssl.ssl, program_[0]);
    SSL_set_tlsext_host_name(ssl.ssl, "api.test");
    SSL_set1_host(ssl.ssl, "api.test");
    std::string received;
    if (SSL_connect(ssl.ssl) != 1) {
      received = "connect failed";
    } else {
      SSL_write(ssl.ssl, requests.data(), static_cast<int>(requests.size()));
      char chunk[4096];
      int n;
      while ((n = SSL_read(ssl.ssl, chunk, sizeof chunk)) > 0) {
        received.append(chunk, static_cast<std::size_t>(n));
      }
    }
    ::close(program_[0]);
    SSL_CTX_free(context);
    return received;
  }

  std::unique_ptr<CertificateAuthority> host_ca_;
  std::unique_ptr<CertificateAuthority> authority_;
  std::string upstream_ca_file_;
  int program_[2]{};
  int upstream_[2]{};
};

TEST_F(BrokerTest, EveryRequestOnAKeptAliveConnectionGetsTheCredential) {
  Host host;
  const auto host_context = std::get<std::shared_ptr<SSL_CTX>>(host_ca_->serverContext("api.test"));
  host.serve(upstream_[1], host_context.get(), 3);
  RequestRules rules;
  rules.host = "api.test";
  rules.set.push_back({"Authorization", kSecret});
  rules.substitute.push_back(
      {"scs-placeholder-00000000000000000000000000000000", kToken, "X-Token"});
  std::uint64_t counted = 0;
  std::vector<std::string> refusals;
  BrokerSettings settings;
  settings.host = "api.test";
  std::thread broker([&] {
    runBroker(program_[1], upstream_[0], authority_.get(), settings, rules,
              {[&](std::uint64_t n) { counted += n; },
               [&](const std::string& why) { refusals.push_back(why); }});
  });
  // A request with a body is a connection's last (it goes out with Connection: close).
  const std::string request =
      "GET /user HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer forged\r\n\r\n"
      "GET /again HTTP/1.1\r\nHost: api.test\r\n\r\n"
      "POST /upload HTTP/1.1\r\nHost: api.test\r\nX-Token: "
      "scs-placeholder-00000000000000000000000000000000\r\nContent-Length: 5\r\n\r\nhello";
  const std::string received = program(request);
  broker.join();
  host.thread.join();
  EXPECT_EQ(host.error, "");
  ASSERT_EQ(host.heads.size(), 3u);
  for (const std::string& head : host.heads) {
    EXPECT_NE(head.find(std::string("\r\nAuthorization: ") + kSecret + "\r\n"), std::string::npos)
        << head;
    EXPECT_EQ(head.find("forged"), std::string::npos) << head;
  }
  EXPECT_NE(host.heads[2].find(std::string("X-Token: ") + kToken + "\r\n"), std::string::npos);
  EXPECT_NE(host.heads[2].find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_EQ(counted, 3u);
  EXPECT_TRUE(refusals.empty());
  EXPECT_NE(received.find("answer 0"), std::string::npos);
  EXPECT_NE(received.find("answer 2"), std::string::npos);
  EXPECT_EQ(received.find("ghp_"), std::string::npos);
}

TEST_F(BrokerTest, AHostWhoseCertificateFailsIsAnsweredWithTheReason) {
  // The host presents a certificate from a CA the broker does not trust.
  auto stranger = CertificateAuthority::make({"api.test"});
  const auto stranger_context =
      std::get<std::shared_ptr<SSL_CTX>>(std::get<0>(stranger)->serverContext("api.test"));
  Host host;
  host.serve(upstream_[1], stranger_context.get(), 1);
  std::vector<std::string> refusals;
  BrokerSettings settings;
  settings.host = "api.test";
  std::thread broker([&] {
    runBroker(program_[1], upstream_[0], authority_.get(), settings, {},
              {[](std::uint64_t) {}, [&](const std::string& why) { refusals.push_back(why); }});
  });
  const std::string received = program("GET / HTTP/1.1\r\nHost: api.test\r\n\r\n");
  broker.join();
  host.thread.join();
  EXPECT_TRUE(received.starts_with("HTTP/1.1 502 ")) << received;
  EXPECT_NE(received.find("X-Proxy-Error: upstream-tls"), std::string::npos) << received;
  EXPECT_NE(received.find("certificate"), std::string::npos) << received;
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_NE(refusals[0].find("the TLS connection to api.test failed"), std::string::npos);
  EXPECT_TRUE(host.heads.empty());
}

TEST_F(BrokerTest, AForeignPlaceholderIsRefusedBeforeItReachesTheHost) {
  Host host;
  const auto host_context = std::get<std::shared_ptr<SSL_CTX>>(host_ca_->serverContext("api.test"));
  host.serve(upstream_[1], host_context.get(), 1);
  RequestRules rules;
  rules.set.push_back({"Authorization", kSecret});
  rules.foreign.push_back("scs-placeholder-11111111111111111111111111111111");
  std::vector<std::string> refusals;
  BrokerSettings settings;
  settings.host = "api.test";
  std::thread broker([&] {
    runBroker(program_[1], upstream_[0], authority_.get(), settings, rules,
              {[](std::uint64_t) {}, [&](const std::string& why) { refusals.push_back(why); }});
  });
  const std::string received = program(
      "GET /?t=scs-placeholder-11111111111111111111111111111111 HTTP/1.1\r\nHost: "
      "api.test\r\n\r\n");
  broker.join();
  ::shutdown(upstream_[0], SHUT_RDWR);
  host.thread.join();
  EXPECT_TRUE(received.starts_with("HTTP/1.1 403 ")) << received;
  EXPECT_EQ(refusals.size(), 1u);
  EXPECT_TRUE(host.heads.empty());
}

TEST_F(BrokerTest, AProgramThatDoesNotTrustTheCaIsToldWhy) {
  BrokerSettings settings;
  settings.host = "api.test";
  std::vector<std::string> refusals;
  std::thread broker([&] {
    runBroker(program_[1], upstream_[0], authority_.get(), settings, {},
              {[](std::uint64_t) {}, [&](const std::string& why) { refusals.push_back(why); }});
  });
  // A client with no CA at all: it rejects the broker's certificate.
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  Ssl ssl{SSL_new(context)};
  SSL_set_fd(ssl.ssl, program_[0]);
  SSL_set_tlsext_host_name(ssl.ssl, "api.test");
  EXPECT_NE(SSL_connect(ssl.ssl), 1);
  ::close(program_[0]);
  broker.join();
  ::close(upstream_[1]);
  SSL_CTX_free(context);
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_NE(refusals[0].find("SSL_CERT_FILE"), std::string::npos) << refusals[0];
}

}  // namespace
}  // namespace scs::egress
