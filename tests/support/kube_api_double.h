#pragma once

#include <Poco/JSON/Object.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/tls_server.h"

namespace scs::testing {

// A Kubernetes API server double for the kubernetes backend's tests (issue 16), over TLS with
// the suite's certificates (tls_server.h) and a bearer token. It keeps the REST subset the
// backend uses with the real API's semantics:
//   GET    /api/v1/nodes                                           NodeList
//   GET    /api/v1/namespaces/{ns}/resourcequotas                   ResourceQuotaList
//   GET    /apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies  NetworkPolicyList
//   POST   /api/v1/namespaces/{ns}/pods                             201, 409 when the name is
//          taken, 400 when the body is not a Pod of this namespace, 422 without a container
//   GET    /api/v1/namespaces/{ns}/pods/{name}                      200 or 404
//   GET    /api/v1/namespaces/{ns}/pods?labelSelector=...           PodList (k=v, k!=v, k, !k)
//   DELETE /api/v1/namespaces/{ns}/pods/{name}                      200 (gone at once), or 404
// A Pod is stored as the API server stores one: a uid, a resourceVersion from one counter
// shared by every object, plain booleans that are false left out, memory and cpu quantities in
// canonical form, after the admission hook (a mutating webhook) has had it. Its status says
// Running, with the sandbox container running. A request without the token is 401, an unknown
// path 404; every error is a Status object.
class KubeApiDouble {
 public:
  explicit KubeApiDouble(std::string token = "t0ken");
  ~KubeApiDouble();
  KubeApiDouble(const KubeApiDouble&) = delete;
  KubeApiDouble& operator=(const KubeApiDouble&) = delete;

  std::string url() const;
  const std::string& token() const { return token_; }

  // Cluster state.
  void addNode(const std::string& name, const std::string& cpu, const std::string& memory);
  void addNetworkPolicy(const std::string& ns, const std::string& spec_json);
  void addResourceQuota(const std::string& ns, const std::string& hard_json);
  // Called on each Pod before it is stored; may change it.
  void setAdmission(std::function<void(Poco::JSON::Object::Ptr& pod)> admission);
  // The next `count` requests answer `status` (429, 500, 503, ...) before doing anything.
  void failNext(int count, int status);

  // What it holds and saw.
  Poco::JSON::Object::Ptr pod(const std::string& ns, const std::string& name) const;
  std::size_t podCount() const;
  std::vector<std::string> requests() const;  // "METHOD /path?query", in order

  // Defined in the .cc: what it holds, and the handler that serves it.
  struct State;
  class Handler;

 private:
  std::string token_;
  std::unique_ptr<State> state_;
  std::unique_ptr<TlsServer> server_;
};

}  // namespace scs::testing
