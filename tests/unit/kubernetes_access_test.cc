#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/SecureStreamSocket.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>

#include "cluster_access.h"
#include "kube_client.h"
#include "support/base64.h"
#include "support/temp_file.h"
#include "support/tls_server.h"

namespace scs::kubernetes {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void spit(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

using scs::testing::Certificates;

// What the test API server saw of the last request.
struct Seen {
  std::mutex mutex;
  std::string authorization;
  std::string client_subject;  // the client certificate's subject; empty when none
  std::string method;
  std::string body;
  // /slow answers once the test lets it (after the client gave up), not after a sleep.
  std::condition_variable slow_released;
  bool release_slow = false;
  void releaseSlow() {
    std::lock_guard lock(mutex);
    release_slow = true;
    slow_released.notify_all();
  }
};

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(Seen& seen) : seen_(seen) {}

  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    const std::string body((std::istreambuf_iterator<char>(request.stream())),
                           std::istreambuf_iterator<char>());
    {
      std::lock_guard lock(seen_.mutex);
      seen_.authorization = request.get("Authorization", "");
      seen_.method = request.getMethod();
      seen_.body = body;
      Poco::Net::SecureStreamSocket socket(
          static_cast<Poco::Net::HTTPServerRequestImpl&>(request).socket());
      seen_.client_subject =
          socket.havePeerCertificate() ? socket.peerCertificate().subjectName() : "";
    }
    const std::string path = request.getURI();
    const auto status = [&](int code, const std::string& message) {
      response.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(code));
      response.setContentType("application/json");
      response.send() << R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")"
                      << message << R"(","code":)" << code << "}";
    };
    if (path == "/missing") {
      status(404, "pods \\\"scs-x\\\" not found");
    } else if (path == "/conflict") {
      status(409, "pods \\\"scs-x\\\" already exists");
    } else if (path == "/busy") {
      status(429, "too many requests");
    } else if (path == "/broken") {
      status(500, "etcdserver: request timed out");
    } else if (path.rfind("/watch-", 0) == 0) {
      // A watch's JSON stream: whole events, one cut off by a clean close, or the 410 of an
      // expired version as an ERROR event or as the answer's status.
      if (path == "/watch-gone") {
        status(410, "too old resource version");
        return;
      }
      response.setChunkedTransferEncoding(true);
      response.setContentType("application/json");
      std::ostream& out = response.send();
      const std::string event = R"({"type":"MODIFIED","object":{"metadata":{"name":"scs-x"}}})";
      if (path == "/watch-events") {
        out << R"({"type":"ADDED","object":{"metadata":{"name":"scs-x"}}})"
            << "\n"
            << event << "\n";
      } else if (path == "/watch-cut") {
        out << event << "\n" << event.substr(0, 20);
      } else if (path == "/watch-expired") {
        out << R"({"type":"ERROR","object":{"kind":"Status","code":410}})"
            << "\n";
      } else if (path == "/watch-error") {
        out << R"({"type":"ERROR","object":{"kind":"Status","code":500,"message":"etcd"}})"
            << "\n";
      }
    } else if (path == "/slow") {
      {
        std::unique_lock lock(seen_.mutex);
        // Bounded, so that a client that never times out fails its test instead of hanging.
        seen_.slow_released.wait_for(lock, std::chrono::seconds(10),
                                     [&] { return seen_.release_slow; });
      }
      status(200, "late");
    } else {
      response.setContentType("application/json");
      response.send() << R"({"kind":"Pod","metadata":{"name":"scs-x"},"echo":)"
                      << (body.empty() ? "null" : body) << "}";
    }
  }

 private:
  Seen& seen_;
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(Seen& seen) : seen_(seen) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new Handler(seen_);
  }

 private:
  Seen& seen_;
};

// The test API server: a TLS server whose handlers record what they saw.
class ApiServer {
 public:
  ApiServer() : server_(new Factory(seen_)) {}
  std::string url(const std::string& host = "localhost") const { return server_.url(host); }
  Seen& seen() { return seen_; }

 private:
  Seen seen_;
  scs::testing::TlsServer server_;
};

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Certificates::get().ok()) << "openssl could not make the certificates";
  }

  ClusterAccess tokenAccess() const {
    ClusterAccess access;
    access.server = server_.url();
    access.ca_pem = Certificates::get().pem("ca.crt");
    access.token = "t0ken";
    return access;
  }

  ApiServer server_;
  std::chrono::milliseconds timeout_{3000};
};

TEST_F(KubeClientTest, ABearerTokenOverAVerifiedConnection) {
  const KubeClient client(tokenAccess(), timeout_);
  ASSERT_EQ(client.error(), "");
  const ApiReply reply = client.call("GET", "/api/v1/namespaces/scs/pods/scs-x");
  ASSERT_TRUE(reply.status.ok()) << reply.status.message;
  EXPECT_EQ(reply.http_status, 200);
  EXPECT_EQ(json::string(json::object(reply.body, "metadata"), "name"), "scs-x");
  std::lock_guard lock(server_.seen().mutex);
  EXPECT_EQ(server_.seen().authorization, "Bearer t0ken");
  EXPECT_EQ(server_.seen().client_subject, "");
}

// A service account's token rotates: the file is read again, and a file that cannot be read
// leaves the last token in use.
TEST_F(KubeClientTest, ATokenFromAFileIsReadAgainAsItRotates) {
  scs::testing::TempFile file("first\n");
  ClusterAccess access = tokenAccess();
  access.token = "first";
  access.token_file = file.path();
  const KubeClient client(access, timeout_, std::chrono::milliseconds(0));
  const auto bearer = [&] {
    EXPECT_TRUE(client.call("GET", "/api/v1/nodes").status.ok());
    std::lock_guard lock(server_.seen().mutex);
    return server_.seen().authorization;
  };
  EXPECT_EQ(bearer(), "Bearer first");
  std::ofstream(file.path(), std::ios::trunc) << "second\n";
  EXPECT_EQ(bearer(), "Bearer second");
  std::remove(file.path().c_str());
  EXPECT_EQ(bearer(), "Bearer second");
}

TEST_F(KubeClientTest, AWatchStreamsEachEventAndTellsItsEndsApart) {
  const KubeClient client(tokenAccess(), timeout_);
  std::vector<std::string> types;
  const auto watch = [&](const std::string& path) {
    types.clear();
    return client.watch(path, [&](const json::ObjectPtr& event) {
      types.push_back(json::string(event, "type").value_or(""));
      return true;
    });
  };
  KubeClient::WatchReply reply = watch("/watch-events");
  EXPECT_TRUE(reply.status.ok()) << reply.status.message;  // ended by the server
  EXPECT_FALSE(reply.expired);
  EXPECT_THAT(types, ::testing::ElementsAre("ADDED", "MODIFIED"));

  reply = watch("/watch-cut");  // the whole event, then a broken one: retried, not final
  EXPECT_EQ(reply.status.code, backend::Code::kUnavailable);
  EXPECT_THAT(types, ::testing::ElementsAre("MODIFIED"));

  for (const char* expired : {"/watch-expired", "/watch-gone"}) {
    reply = watch(expired);
    EXPECT_TRUE(reply.status.ok()) << expired;
    EXPECT_TRUE(reply.expired) << expired;
    EXPECT_THAT(types, IsEmpty()) << expired;
  }

  reply = watch("/watch-error");
  EXPECT_EQ(reply.status.code, backend::Code::kUnavailable);
  EXPECT_THAT(reply.status.message, HasSubstr("etcd"));

  // The caller stops at the event it waited for.
  reply = client.watch("/watch-events", [&](const json::ObjectPtr&) { return false; });
  EXPECT_TRUE(reply.status.ok());
}

TEST_F(KubeClientTest, AClientCertificateInsteadOfAToken) {
  ClusterAccess access = tokenAccess();
  access.token.clear();
  access.client_cert_pem = Certificates::get().pem("client.crt");
  access.client_key_pem = Certificates::get().pem("client.key");
  const KubeClient client(access, timeout_);
  ASSERT_EQ(client.error(), "");
  const ApiReply reply = client.call("GET", "/api/v1/nodes");
  ASSERT_TRUE(reply.status.ok()) << reply.status.message;
  std::lock_guard lock(server_.seen().mutex);
  EXPECT_EQ(server_.seen().authorization, "");
  EXPECT_THAT(server_.seen().client_subject, HasSubstr("CN=scs"));
}

TEST_F(KubeClientTest, AJsonBodyIsSent) {
  const KubeClient client(tokenAccess(), timeout_);
  json::ObjectPtr pod = json::newObject();
  pod->set("kind", "Pod");
  const ApiReply reply = client.call("POST", "/api/v1/namespaces/scs/pods", pod);
  ASSERT_TRUE(reply.status.ok()) << reply.status.message;
  EXPECT_EQ(json::string(json::object(reply.body, "echo"), "kind"), "Pod");
  std::lock_guard lock(server_.seen().mutex);
  EXPECT_EQ(server_.seen().method, "POST");
}

TEST_F(KubeClientTest, AServerTheClustersCaDidNotSignIsRefused) {
  ClusterAccess access = tokenAccess();
  access.ca_pem = Certificates::get().pem("other.crt");
  const ApiReply reply = KubeClient(access, timeout_).call("GET", "/api/v1/nodes");
  EXPECT_EQ(reply.status.code, backend::Code::kUnavailable);
  EXPECT_EQ(reply.http_status, 0);
  std::lock_guard lock(server_.seen().mutex);
  EXPECT_EQ(server_.seen().authorization, "") << "the token went to an unverified server";
}

TEST_F(KubeClientTest, AServerWhoseCertificateNamesAnotherHostIsRefused) {
  ClusterAccess access = tokenAccess();
  access.server = server_.url("127.0.0.1");  // the certificate names only localhost
  const ApiReply reply = KubeClient(access, timeout_).call("GET", "/api/v1/nodes");
  EXPECT_EQ(reply.status.code, backend::Code::kUnavailable) << reply.status.message;
  std::lock_guard lock(server_.seen().mutex);
  EXPECT_EQ(server_.seen().authorization, "") << "the token went to a server of another name";
}

TEST_F(KubeClientTest, EachHttpStatusBecomesTheContractsCodeWithTheApisMessage) {
  const KubeClient client(tokenAccess(), timeout_);
  const std::vector<std::tuple<std::string, backend::Code, std::string>> cases = {
      {"/missing", backend::Code::kNotFound, "not found"},
      {"/conflict", backend::Code::kRejected, "already exists"},
      {"/busy", backend::Code::kUnavailable, "too many requests"},
      {"/broken", backend::Code::kUnavailable, "etcdserver"},
  };
  for (const auto& [path, code, message] : cases) {
    const ApiReply reply = client.call("GET", path);
    EXPECT_EQ(reply.status.code, code) << path;
    EXPECT_THAT(reply.status.message, HasSubstr(message)) << path;
  }
}

TEST_F(KubeClientTest, NoAnswerWithinTheTimeoutIsATimeout) {
  const ApiReply reply =
      KubeClient(tokenAccess(), std::chrono::milliseconds(150)).call("GET", "/slow");
  server_.seen().releaseSlow();
  EXPECT_EQ(reply.status.code, backend::Code::kTimeout) << reply.status.message;
}

TEST_F(KubeClientTest, UnusableSettingsFailEveryCall) {
  ClusterAccess plain = tokenAccess();
  plain.server = "http://localhost:8080";
  EXPECT_THAT(KubeClient(plain, timeout_).error(), HasSubstr("https"));
  ClusterAccess no_ca = tokenAccess();
  no_ca.ca_pem = "not a certificate";
  const KubeClient client(no_ca, timeout_);
  EXPECT_THAT(client.error(), HasSubstr("CA"));
  EXPECT_EQ(client.call("GET", "/api/v1/nodes").status.code, backend::Code::kInternal);
}

class KubeconfigTest : public ::testing::Test {
 protected:
  KubeconfigTest()
      : dir_(fs::temp_directory_path() / ("scs-kubeconfig-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~KubeconfigTest() override { fs::remove_all(dir_); }

  AccessReply load(const std::string& yaml, const std::string& context = "") {
    spit(dir_ / "config", yaml);
    return kubeconfigAccess((dir_ / "config").string(), context);
  }

  static std::string config(const std::string& cluster, const std::string& user,
                            const std::string& extra_context = "") {
    return "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
           "clusters:\n- name: c\n  cluster:\n" +
           cluster + "users:\n- name: u\n  user:\n" + user +
           "contexts:\n- name: main\n  context:\n    cluster: c\n    user: u\n"
           "    namespace: scs-sandboxes\n" +
           extra_context;
  }

  fs::path dir_;
};

TEST_F(KubeconfigTest, InlineDataAndAToken) {
  const AccessReply reply =
      load(config("    server: https://k8s.example:6443\n"
                  "    certificate-authority-data: " +
                      scs::testing::base64Encode("CA PEM") + "\n",
                  "    token: abc.def\n"));
  ASSERT_EQ(reply.error, "");
  EXPECT_EQ(reply.access.server, "https://k8s.example:6443");
  EXPECT_EQ(reply.access.ca_pem, "CA PEM");
  EXPECT_EQ(reply.access.token, "abc.def");
  EXPECT_EQ(reply.access.namespace_name, "scs-sandboxes");
}

TEST_F(KubeconfigTest, FilesRelativeToTheKubeconfigAndAClientCertificate) {
  spit(dir_ / "ca.crt", "CA FILE");
  spit(dir_ / "me.crt", "CERT FILE");
  spit(dir_ / "me.key", "KEY FILE");
  const AccessReply reply =
      load(config("    server: https://k8s.example:6443\n"
                  "    certificate-authority: ca.crt\n",
                  "    client-certificate: me.crt\n"
                  "    client-key: " +
                      (dir_ / "me.key").string() + "\n"));
  ASSERT_EQ(reply.error, "");
  EXPECT_EQ(reply.access.ca_pem, "CA FILE");
  EXPECT_EQ(reply.access.client_cert_pem, "CERT FILE");
  EXPECT_EQ(reply.access.client_key_pem, "KEY FILE");
  EXPECT_EQ(reply.access.token, "");
}

TEST_F(KubeconfigTest, ATokenFileAndANamedContext) {
  spit(dir_ / "token", "from-file\n");
  const std::string other =
      "- name: other\n  context:\n    cluster: c\n    user: u\n    namespace: elsewhere\n";
  const AccessReply reply = load(config("    server: https://k8s.example:6443\n"
                                        "    certificate-authority-data: " +
                                            scs::testing::base64Encode("CA") + "\n",
                                        "    tokenFile: token\n", other),
                                 "other");
  ASSERT_EQ(reply.error, "");
  EXPECT_EQ(reply.access.token, "from-file");
  EXPECT_EQ(reply.access.token_file, (dir_ / "token").string());
  EXPECT_EQ(reply.access.namespace_name, "elsewhere");
}

TEST_F(KubeconfigTest, WhatWouldWeakenOrEscapeTheConnectionIsRefused) {
  const std::string ca =
      "    certificate-authority-data: " + scs::testing::base64Encode("CA") + "\n";
  const std::string https = "    server: https://k8s.example:6443\n";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {https + ca, "    exec:\n      command: aws\n", "credential plugin"},
      {https + ca, "    auth-provider:\n      name: gcp\n", "credential plugin"},
      {https + "    insecure-skip-tls-verify: true\n", "    token: t\n", "skips TLS"},
      {"    server: http://k8s.example:8080\n" + ca, "    token: t\n", "https"},
      {https, "    token: t\n", "certificate authority"},
      {https + ca, "    username: admin\n", "neither a token nor a client certificate"},
      {https + "    certificate-authority: missing.crt\n", "    token: t\n", "cannot be read"},
  };
  for (const auto& [cluster, user, why] : cases) {
    EXPECT_THAT(load(config(cluster, user)).error, HasSubstr(why)) << cluster << user;
  }
  EXPECT_THAT(load(config(https + ca, "    token: t\n"), "nowhere").error,
              HasSubstr("no context nowhere"));
  EXPECT_THAT(load("{not: [valid").error, HasSubstr("cannot be read"));
  EXPECT_THAT(
      load(config(https + "    certificate-authority-data: not*base64!\n", "    token: t\n")).error,
      HasSubstr("malformed"));
}

TEST(InClusterTest, TheServiceAccountsFilesAndTheServiceAddress) {
  const fs::path dir = fs::temp_directory_path() / ("scs-sa-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  spit(dir / "token", "sa-token\n");
  spit(dir / "ca.crt", "CLUSTER CA");
  spit(dir / "namespace", "scs-sandboxes");
  const AccessReply reply = inClusterAccess(
      dir.string(), {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  ASSERT_EQ(reply.error, "");
  EXPECT_EQ(reply.access.server, "https://10.96.0.1:443");
  EXPECT_EQ(reply.access.token, "sa-token");
  EXPECT_EQ(reply.access.token_file, (dir / "token").string());
  EXPECT_EQ(reply.access.ca_pem, "CLUSTER CA");
  EXPECT_EQ(reply.access.namespace_name, "scs-sandboxes");
  EXPECT_EQ(inClusterAccess(dir.string(), {{"KUBERNETES_SERVICE_HOST", "fd00::1"},
                                           {"KUBERNETES_SERVICE_PORT", "443"}})
                .access.server,
            "https://[fd00::1]:443");
  EXPECT_THAT(inClusterAccess(dir.string(), {}).error, HasSubstr("not in a cluster"));
  fs::remove(dir / "token");
  EXPECT_THAT(inClusterAccess(dir.string(), {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                             {"KUBERNETES_SERVICE_PORT", "443"}})
                  .error,
              HasSubstr("cannot be read"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace scs::kubernetes
