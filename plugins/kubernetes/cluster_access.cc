// ClusterAccess read from a service account's mounted secrets or from a kubeconfig's context,
// inline data or files, refusing what would weaken TLS or run an exec or auth-provider plugin.

#include "cluster_access.h"

#include <Poco/Exception.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <optional>

#include "json_access.h"
#include "text.h"

namespace scs::kubernetes {
namespace {

namespace fs = std::filesystem;

// The entry of a kubeconfig list ("clusters", "users", "contexts") named `name`: its inner
// map ("cluster", "user", "context"); a null node when there is none.
YAML::Node named(const YAML::Node& root, const char* list, const char* inner,
                 const std::string& name) {
  for (const YAML::Node& entry : root[list]) {
    if (entry["name"] && entry["name"].as<std::string>() == name) {
      return entry[inner];
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::string text(const YAML::Node& map, const char* key) {
  const YAML::Node value = map[key];
  return value && value.IsScalar() ? value.as<std::string>() : std::string();
}

// The value of `data_key` (base64) or the file named by `file_key` (relative to `base`).
// Sets `*error` when the file cannot be read.
std::string inlineOrFile(const YAML::Node& map, const char* data_key, const char* file_key,
                         const fs::path& base, std::string* error) {
  if (const std::string data = text(map, data_key); !data.empty()) {
    return json::decodeBase64(data);
  }
  const std::string file = text(map, file_key);
  if (file.empty()) {
    return {};
  }
  const fs::path path = fs::path(file).is_absolute() ? fs::path(file) : base / file;
  const std::optional<std::string> content = text::readFile(path.string());
  if (!content) {
    *error = "the kubeconfig's " + std::string(file_key) + " " + path.string() + " cannot be read";
    return {};
  }
  return *content;
}

}  // namespace

AccessReply inClusterAccess(const std::string& secrets_dir,
                            const std::map<std::string, std::string>& environment) {
  AccessReply reply;
  const auto host = environment.find("KUBERNETES_SERVICE_HOST");
  const auto port = environment.find("KUBERNETES_SERVICE_PORT");
  if (host == environment.end() || port == environment.end() || host->second.empty() ||
      port->second.empty()) {
    reply.error =
        "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set";
    return reply;
  }
  const bool ipv6 = host->second.find(':') != std::string::npos;
  reply.access.server =
      "https://" + (ipv6 ? "[" + host->second + "]" : host->second) + ":" + port->second;
  const fs::path dir(secrets_dir);
  const std::optional<std::string> token = text::readFile((dir / "token").string());
  const std::optional<std::string> ca = text::readFile((dir / "ca.crt").string());
  if (!token || !ca) {
    reply.error = "the service account's token or ca.crt cannot be read in " + secrets_dir;
    return reply;
  }
  reply.access.token = text::trimmedEnd(*token);
  reply.access.token_file = (dir / "token").string();
  reply.access.ca_pem = *ca;
  reply.access.namespace_name =
      text::trimmedEnd(text::readFile((dir / "namespace").string()).value_or(""));
  return reply;
}

AccessReply kubeconfigAccess(const std::string& path, const std::string& context) {
  AccessReply reply;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& error) {
    reply.error = "the kubeconfig " + path + " cannot be read: " + error.what();
    return reply;
  }
  try {
    const std::string chosen = context.empty() ? text(root, "current-context") : context;
    if (chosen.empty()) {
      reply.error = "the kubeconfig " + path + " names no current context";
      return reply;
    }
    const YAML::Node ctx = named(root, "contexts", "context", chosen);
    if (!ctx || !ctx.IsMap()) {
      reply.error = "the kubeconfig " + path + " has no context " + chosen;
      return reply;
    }
    const YAML::Node cluster = named(root, "clusters", "cluster", text(ctx, "cluster"));
    const YAML::Node user = named(root, "users", "user", text(ctx, "user"));
    if (!cluster || !cluster.IsMap() || !user || !user.IsMap()) {
      reply.error = "the kubeconfig's context " + chosen + " names a cluster or user it lacks";
      return reply;
    }
    if (user["exec"] || user["auth-provider"]) {
      reply.error = "the kubeconfig's user for " + chosen +
                    " runs a credential plugin (exec or auth-provider), which the server does "
                    "not run: give it a token or a client certificate";
      return reply;
    }
    if (cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>()) {
      reply.error = "the kubeconfig's cluster for " + chosen +
                    " skips TLS verification, which the server never does";
      return reply;
    }
    ClusterAccess& access = reply.access;
    access.server = text(cluster, "server");
    if (access.server.rfind("https://", 0) != 0) {
      reply.error = "the kubeconfig's cluster for " + chosen + " is not served over https";
      return reply;
    }
    const fs::path base = fs::path(path).parent_path();
    access.ca_pem = inlineOrFile(cluster, "certificate-authority-data", "certificate-authority",
                                 base, &reply.error);
    access.client_cert_pem =
        inlineOrFile(user, "client-certificate-data", "client-certificate", base, &reply.error);
    access.client_key_pem = inlineOrFile(user, "client-key-data", "client-key", base, &reply.error);
    access.token = text(user, "token");
    if (access.token.empty()) {
      access.token = text::trimmedEnd(inlineOrFile(user, "", "tokenFile", base, &reply.error));
      if (const std::string file = text(user, "tokenFile"); !file.empty()) {
        access.token_file = (fs::path(file).is_absolute() ? fs::path(file) : base / file).string();
      }
    }
    access.namespace_name = text(ctx, "namespace");
    if (!reply.error.empty()) {
      return reply;
    }
    if (access.ca_pem.empty()) {
      reply.error = "the kubeconfig's cluster for " + chosen +
                    " names no certificate authority; the server verifies the API server";
    } else if (access.token.empty() &&
               (access.client_cert_pem.empty() || access.client_key_pem.empty())) {
      reply.error = "the kubeconfig's user for " + chosen +
                    " has neither a token nor a client certificate and key";
    }
  } catch (const YAML::Exception& error) {
    reply.error = "the kubeconfig " + path + " is malformed: " + error.what();
  } catch (const Poco::Exception& error) {  // base64 that does not decode
    reply.error = "the kubeconfig " + path + " is malformed: " + error.displayText();
  }
  return reply;
}

}  // namespace scs::kubernetes
