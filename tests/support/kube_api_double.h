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
//   GET    /api/v1/namespaces/{ns}/pods?labelSelector=...           PodList (k=v, k!=v, k, !k;
//          and fieldSelector metadata.name=...)
//   GET    /api/v1/namespaces/{ns}/pods?watch=1&resourceVersion=RV  the changes after RV as a
//          JSON stream (fieldSelector metadata.name=..., labelSelector, timeoutSeconds); 410 Gone
//          (an ERROR event) from a version older than the last 256 changes kept
//   DELETE /api/v1/namespaces/{ns}/pods/{name}                      200 (gone at once), or 404
//   GET    /api/v1/namespaces/{ns}/pods/{name}/attach               a WebSocket upgrade to
//          v5.channel.k8s.io (stdin, stdout, stderr, the Status on 3, v5's close of stdin); 400
//          when the Pod does not run or was attached before
// A Pod is stored as the API server stores one: a uid, a resourceVersion from one counter
// shared by every object, plain booleans that are false left out, memory and cpu quantities in
// canonical form, after the admission hook (a mutating webhook) has had it. Its status says
// Pending, with the container waiting (ContainerCreating), until its kubelet (a thread of the
// double, every 10 ms) runs it.
// Its first container is a sandbox of the fake engine (plugins/fake), started at once, which
// plays the `#fake:` script of the code attach brings as the launcher would; once it ends, the
// Pod reads as Succeeded or Failed with the container terminated (its exit code, OOMKilled). A
// request without the token is 401, an unknown path 404; every error is a Status object.
class KubeApiDouble {
 public:
  explicit KubeApiDouble(std::string token = "t0ken");
  ~KubeApiDouble();
  KubeApiDouble(const KubeApiDouble&) = delete;
  KubeApiDouble& operator=(const KubeApiDouble&) = delete;

  std::string url() const;
  const std::string& token() const { return token_; }
  // A kubeconfig (YAML) that reaches this server: its CA inline, its token, `ns` as the
  // context's namespace.
  std::string kubeconfig(const std::string& ns) const;

  // Cluster state.
  void addNode(const std::string& name, const std::string& cpu, const std::string& memory);
  void addNetworkPolicy(const std::string& ns, const std::string& spec_json);
  void addResourceQuota(const std::string& ns, const std::string& hard_json);
  // Called on each Pod before it is stored; may change it.
  void setAdmission(std::function<void(Poco::JSON::Object::Ptr& pod)> admission);
  // The next `count` requests answer `status` (429, 500, 503, ...) before doing anything.
  void failNext(int count, int status);
  // The changes kept for watches are dropped and the version moves on (other objects of the
  // cluster changed): a watch from any version read before is told 410 Gone, as after the API
  // server's compaction.
  void expireWatchHistory();
  // While held, Pods stay Pending (not scheduled, or their image pulling).
  void holdPending(bool hold);
  // The next attach drops its connection, without a close, once stdin has ended.
  void dropNextAttach();

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
