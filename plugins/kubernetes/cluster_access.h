#pragma once

// How the Kubernetes backend reaches its API server (issue 16): the server's address, the CA
// that must have signed its certificate, the credential, and the namespace of sandbox Pods,
// from the Pod's own service account (in-cluster) or from a kubeconfig file.

#include <map>
#include <string>

namespace scs::kubernetes {

struct ClusterAccess {
  std::string server;           // "https://host:port"; plain http is refused
  std::string ca_pem;           // the CA bundle the server's certificate must chain to
  std::string token;            // a bearer token, or
  std::string token_file;       // where the token was read: it is read again as it rotates
  std::string client_cert_pem;  // a client certificate and its key
  std::string client_key_pem;
  std::string namespace_name;  // from the context, or the service account's; may be empty
};

struct AccessReply {
  std::string error;  // one sentence naming what is missing or refused; empty when ok
  ClusterAccess access;
};

// The credentials Kubernetes mounts into a Pod of a service account: `secrets_dir` holds
// token, ca.crt and namespace; `environment` must name KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT (an IPv6 host is bracketed).
AccessReply inClusterAccess(const std::string& secrets_dir,
                            const std::map<std::string, std::string>& environment);

// A kubeconfig file (YAML, as kubectl writes it): `context`, or the current context when empty,
// gives the cluster, the user and the namespace. The CA and a client certificate come inline
// (*-data, base64) or from files, relative to the kubeconfig's directory; a token inline or from
// tokenFile. What would weaken or escape the connection is refused with the reason: a cluster
// without a CA or with insecure-skip-tls-verify, a plain http server, and the exec and
// auth-provider plugins (they run programs the server should not run).
AccessReply kubeconfigAccess(const std::string& path, const std::string& context);

}  // namespace scs::kubernetes
