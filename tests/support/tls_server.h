#pragma once

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/SSLManager.h>
#include <Poco/Net/SecureServerSocket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

namespace scs::testing {

// A CA, a server certificate for "localhost" and a client certificate ("CN=scs") it signed, and
// a second CA that signed nothing, made with openssl once per test process (EC keys: fast).
class Certificates {
 public:
  static const Certificates& get() {
    static const Certificates* made = new Certificates;
    return *made;
  }

  bool ok() const { return ok_; }
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }
  std::string pem(const std::string& name) const {
    std::ifstream in(dir_ / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  Certificates()
      : dir_(std::filesystem::temp_directory_path() /
             ("scs-test-certs-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "server.ext") << "subjectAltName=DNS:localhost\n";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string sign = " -CA ca.crt -CAkey ca.key -CAcreateserial -days 1";
    const std::string script =
        "(cd " + dir_.string() + " && openssl req -x509" + key +
        " -keyout ca.key -out ca.crt -days 1 -subj /CN=test-ca && openssl req -x509" + key +
        " -keyout other.key -out other.crt -days 1 -subj /CN=other-ca && openssl req" + key +
        " -keyout server.key -out server.csr -subj /CN=localhost && openssl x509 -req -in "
        "server.csr" +
        sign + " -out server.crt -extfile server.ext && openssl req" + key +
        " -keyout client.key -out client.csr -subj /CN=scs && openssl x509 -req -in client.csr" +
        sign + " -out client.crt) >/dev/null 2>&1";
    ok_ = std::system(script.c_str()) == 0;
  }

  std::filesystem::path dir_;
  bool ok_ = false;
};

// An HTTPS server on 127.0.0.1 (its certificate names "localhost") serving `factory`'s
// handlers; it asks for a client certificate signed by the CA but does not require one.
class TlsServer {
 public:
  explicit TlsServer(Poco::Net::HTTPRequestHandlerFactory* factory) {
    Poco::Net::initializeSSL();
    const Certificates& c = Certificates::get();
    Poco::Net::Context::Ptr context =
        new Poco::Net::Context(Poco::Net::Context::TLS_SERVER_USE, c.path("server.key").string(),
                               c.path("server.crt").string(), c.path("ca.crt").string(),
                               Poco::Net::Context::VERIFY_RELAXED, 9, false);
    Poco::Net::SecureServerSocket socket(Poco::Net::SocketAddress("127.0.0.1", 0), 64, context);
    port_ = socket.address().port();
    Poco::Net::HTTPServerParams::Ptr params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(64);  // an attach holds its thread for the sandbox's life
    server_ = std::make_unique<Poco::Net::HTTPServer>(factory, socket, params);
    server_->start();
  }
  ~TlsServer() { server_->stopAll(true); }
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;

  std::string url(const std::string& host = "localhost") const {
    return "https://" + host + ":" + std::to_string(port_);
  }

 private:
  unsigned short port_ = 0;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
};

}  // namespace scs::testing
