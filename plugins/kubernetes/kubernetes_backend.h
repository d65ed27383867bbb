#pragma once

// The kubernetes backend (issue 16): one Pod per sandbox, in one namespace, through the API
// server. PodApi makes the plain REST calls; this adds the sandbox's life around them: start()
// waits for the Pod to run and attaches to its container (code in over stdin, output back), a
// worker thread per sandbox pumps the output to the core's sink and reads the exit from the
// Pod's status once the output ends.

#include <scs/backend/backend.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "attach_stream.h"
#include "clock.h"
#include "kube_client.h"
#include "pod_api.h"

namespace scs::kubernetes {

// Backend options (`--backend-option KEY=VALUE`).
struct Options {
  std::string kube_config;     // a kubeconfig file; empty: the Pod's own service account
  std::string kube_context;    // its context; empty: the current one
  std::string namespace_name;  // empty: the kubeconfig context's, or the service account's
  std::string nameserver = "127.0.0.1";
  std::string seccomp_localhost;  // the core's profile, beneath the kubelet's seccomp directory
  std::string seccomp_localhost_file;            // a file here with the text the nodes hold there
  std::chrono::milliseconds api_timeout{10000};  // one API request
  std::chrono::milliseconds start_timeout{120000};  // a Pod's scheduling, pull and start
  // How long the Pod's status may take to show how the container ended once its output has:
  // the kubelet reports within its sync (about 10 s); after an attach that broke, less, since
  // the container may run on unseen (then it is deleted). Not options: tests shorten them.
  std::chrono::milliseconds exit_patience{30000};
  std::chrono::milliseconds broken_attach_patience{5000};
  Heartbeat heartbeat;  // of every attach (attach_stream.h)
  // The time of every deadline, pause and heartbeat above (clock.h); null: real time. Not an
  // option either: a test passes its own, which must outlive the backend.
  const Clock* clock = nullptr;
  // Where in-cluster credentials are (the service account's mount); for tests.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

// Parses BackendContext::options; an error sentence for an unknown key or a bad value.
std::optional<std::string> parseOptions(const std::map<std::string, std::string>& raw,
                                        Options* options);

class KubernetesBackend : public backend::RuntimeBackend {
 public:
  // Null with `*error` set when the cluster cannot be reached as configured or its namespace
  // cannot hold sandboxes (PodApi::clusterProblems): the server does not start.
  static std::unique_ptr<KubernetesBackend> connect(const Options& options, backend::LogSink* log,
                                                    std::string* error);
  ~KubernetesBackend() override;

  backend::CapacityReply capacity() override;
  // A Pod carries every control of a posture, with its fields and with the launcher's command
  // line for what no field says (containerCommand()), unless unsupportedReason() finds one it
  // cannot: then kUnsupported with that reason, and the server does not start.
  backend::Status supports(const backend::Posture& posture) override;
  backend::CreateReply create(const backend::SandboxSpec& spec) override;
  backend::InspectReply inspect(const std::string& id) override;
  backend::Status deliver(const std::string& id, const std::string& archive) override;
  backend::Status start(const std::string& id, backend::OutputSink* sink) override;
  // `timeout` is real time, whatever the clock: the caller's bound on its wait for the worker,
  // whose exit the API server's answers bring.
  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override;
  backend::ProgressReply progress(const std::string& id) override;
  backend::Status kill(const std::string& id) override;
  backend::Status remove(const std::string& id) override;
  backend::ListReply list(const std::string& label_key) override;

 private:
  // One sandbox's Pod as this backend drives it. The flags, `held`, `exit` and `stream` are
  // guarded by mu_; `worker` is set under mu_ and joined by remove() alone.
  struct Sandbox {
    bool session = false;
    std::string held;  // delivered before start(), written once attached
    bool delivered = false;
    bool started = false;
    bool killed = false;   // by this backend: its exit is not killed_outside
    bool removed = false;  // remove() was called: never started, attached or reported again
    bool ended = false;
    backend::Exit exit;
    std::shared_ptr<AttachStream> stream;
    std::mutex stdin_order;  // a session's deliveries reach stdin in the order they came
    std::mutex removal;      // one remove() at a time
    std::thread worker;
  };

  KubernetesBackend(const Options& options, std::unique_ptr<KubeClient> client,
                    PodSettings settings, backend::LogSink* log);
  std::shared_ptr<Sandbox> find(const std::string& id);
  bool removed(const Sandbox& sandbox);
  // Polls the Pod until its sandbox container runs (a slow API server is waited out within
  // start-timeout-ms); the reason when it cannot, kNotFound once it is removed.
  backend::Status awaitRunning(const std::string& id, const Sandbox& sandbox);
  // Writes to the attached stdin, ending it unless a session's; the caller holds stdin_order.
  static backend::Status writeStdin(AttachStream& stream, bool session, const std::string& id,
                                    const std::string& bytes);
  // The worker: output to `sink` until the attach ends, then the exit from the Pod's status.
  void pump(const std::string& id, std::shared_ptr<Sandbox> sandbox, backend::OutputSink* sink);
  backend::Exit exitAfterOutput(const std::string& id, const Sandbox& sandbox,
                                const AttachEnd& end);
  void log(backend::LogLevel level, const std::string& message);

  const Options options_;
  std::unique_ptr<KubeClient> client_;
  PodApi pods_;
  backend::LogSink* const log_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
};

}  // namespace scs::kubernetes
