// The Kubernetes API server double as a program, to run the real server against by hand
// (docs/SCALING.md, "Trying it without a cluster"):
//   kube-api-double KUBECONFIG_OUT
// It serves over TLS on a free port of 127.0.0.1, in its faithful modes (KubeApiDouble::
// faithful(): as a cluster of Kubernetes 1.30 or later behaves), with one node (8 cpus, 32 GiB),
// the RuntimeClass runc and the namespace scs-sandboxes isolated by the deny-all NetworkPolicy,
// writes a kubeconfig that
// reaches it to KUBECONFIG_OUT, and runs until SIGINT or SIGTERM. Its Pods play the fake
// engine's `#fake:` scripts (plugins/fake), not Python.

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "support/kube_api_double.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kube-api-double KUBECONFIG_OUT\n";
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the server's threads start

  scs::testing::KubeApiDouble api;
  api.setModes(scs::testing::KubeApiDouble::faithful());
  api.addNode("node-1", "8", "32Gi");
  api.addNetworkPolicy(
      "scs-sandboxes",
      R"({"podSelector":{"matchLabels":{"io.scs.managed":"true"}},"policyTypes":["Ingress","Egress"]})");
  // Whole or not at all: a reader that sees the file sees all of it.
  const std::string partial = std::string(argv[1]) + ".partial";
  std::ofstream out(partial);
  out << api.kubeconfig("scs-sandboxes");
  out.close();
  if (!out || std::rename(partial.c_str(), argv[1]) != 0) {
    std::cerr << "kube-api-double: cannot write " << argv[1] << std::endl;
    return 1;
  }
  std::cerr << "kube-api-double: serving " << api.url() << "; kubeconfig in " << argv[1]
            << std::endl;
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  std::cerr << "kube-api-double: stopped with " << api.podCount() << " Pods" << std::endl;
  return 0;
}
