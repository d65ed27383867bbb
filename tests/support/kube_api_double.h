#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
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
//   GET    /api/v1/namespaces/{ns}/resourcequotas                   ResourceQuotaList, each
//          with status.used from the namespace's Pods that have not ended; a create beyond a
//          quota's hard is 403 "exceeded quota", as the quota admission plugin answers
//   GET    /api/v1/pods?fieldSelector=status.phase!=...               every namespace's Pods
//   GET    /apis/node.k8s.io/v1/runtimeclasses/{name}                 RuntimeClass or 404
//   GET    /apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies  NetworkPolicyList
//   POST   /api/v1/namespaces/{ns}/pods                             201, 409 when the name is
//          taken, 400 when the body is not a Pod of this namespace, 422 without a container or
//          with a localhostProfile that is absolute or has "..", 403 for an unknown
//          RuntimeClass or an exceeded quota
//   GET    /api/v1/namespaces/{ns}/pods/{name}                      200 or 404
//   GET    /api/v1/namespaces/{ns}/pods?labelSelector=...           PodList (k=v, k!=v, k, !k;
//          and fieldSelector metadata.name=...)
//   GET    /api/v1/namespaces/{ns}/pods?watch=1&resourceVersion=RV  the changes after RV as a
//          JSON stream (fieldSelector metadata.name=..., labelSelector, timeoutSeconds); 410 Gone
//          (an ERROR event) from a version older than the last 256 changes kept
//   DELETE /api/v1/namespaces/{ns}/pods/{name}                      200 (gone at once), or 404
//   GET    /api/v1/namespaces/{ns}/pods/{name}/attach               a WebSocket upgrade to
//          v5.channel.k8s.io (stdin, stdout, stderr as the query asks for them, the Status on
//          3, v5's close of stdin, pings answered); 400 when the Pod does not run or was
//          attached before (a Failure Status after the upgrade in the faithful mode)
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

  // Where the real components differ from what this double does by default (issue 30), each
  // a mode; faithful() is every one of them, as a cluster of Kubernetes 1.30 or later behaves.
  struct Modes {
    // The API server upgrades an attach before the kubelet is reached (1.30, KEP-4006), so a
    // container that does not run, or any kubelet-side failure, comes as a Failure Status on
    // channel 3 after the upgrade, not as a 400 before it.
    bool attach_failure_after_upgrade = false;
    // containerd's attach replays nothing written before it: the output goes only to the
    // container's log, whose tail becomes the terminated state's message when the container
    // fails under terminationMessagePolicy FallbackToLogsOnError (2048 bytes or 80 lines).
    bool no_output_before_attach = false;
    // The kubelet on cgroup v2 sets memory.oom.group (1.28; singleProcessOOMKill false): an OOM
    // kill of any process ends every process of the container, which reads OOMKilled, 137.
    bool oom_group = false;
    // A DELETE with a grace period keeps the Pod, with a deletionTimestamp, until the kubelet
    // has ended its container; only then is it gone (a DELETED event).
    bool graceful_deletion = false;
    // Admission's tolerations: DefaultTolerationSeconds (on by default: not-ready and
    // unreachable, NoExecute, 300 s) on every Pod, and PodTolerationRestriction's (where an
    // operator enables it) memory-pressure NoSchedule on every Pod that is not BestEffort.
    bool admission_tolerations = false;
    // An intermediary (a load balancer, a proxy) that cuts an attach connection after this long
    // without a frame either way; 0: none.
    int idle_cut_ms = 0;
  };
  static Modes faithful();
  void setModes(const Modes& modes);
  // A RuntimeClass; `scheduling_json` is its scheduling ({nodeSelector, tolerations}) or
  // empty, `overhead_json` its overhead.podFixed or empty. The double holds "runc", without
  // either, from the start. Its admission, like the RuntimeClass admission plugin (on by
  // default), refuses a Pod of a RuntimeClass it does not hold (403) and merges the scheduling
  // into the Pod, and the overhead as spec.overhead.
  void addRuntimeClass(const std::string& name, const std::string& scheduling_json,
                       const std::string& overhead_json);
  // The next attach is upgraded and at once answered a Failure Status with `message` on
  // channel 3, as when the API server cannot reach the kubelet.
  void failNextAttach(const std::string& message);
  // The next attach goes silent once stdin has ended (a half-open connection): it reads and
  // answers nothing, pings included, and never closes.
  void silenceNextAttach();
  // The launcher of the next Pod refuses as it starts, before it reads stdin: "sandbox
  // launcher: rejected <why>" on stderr and exit 125.
  void refuseNextLauncher(const std::string& why);
  // Stores `pod` as it is (no admission), for a Pod of another namespace or tenant that holds
  // a node's resources.
  void addPod(const std::string& ns, const std::string& pod_json);
  // How many attaches answered the double's close frame with their own (RFC 6455 5.5.1).
  int closeReplies() const;
  // How many pings reached its attaches, a silent attach's (unanswered) too.
  int pingsSeen() const;
  // The time a watch's timeoutSeconds runs on, from the request's arrival, and the idle cut
  // (Modes::idle_cut_ms): real time unless a test gives its own clock, which must outlive the
  // double; a watch and an attach see that clock move within 10 ms.
  void setClock(std::function<std::chrono::steady_clock::time_point()> now);

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
