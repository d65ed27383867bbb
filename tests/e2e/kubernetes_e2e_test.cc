#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/kube_api_double.h"
#include "support/mcp_client.h"
#include "support/temp_file.h"

// The real server binary with the kubernetes plugin, against the API server double (issue 16):
// what an operator sees when the cluster or the Pods it can make fall short of a sandbox.
namespace scs::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kBinary = SCS_BINARY;
constexpr const char* kDenyAll =
    R"({"podSelector":{"matchLabels":{"io.scs.managed":"true"}},"policyTypes":["Ingress","Egress"]})";

class KubernetesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Certificates::get().ok());
    api_.addNode("node-1", "8", "32Gi");
  }

  std::vector<std::string> args(const std::string& kubeconfig_path) const {
    return {"--backend", "kubernetes",       "--log-level",
            "debug",     "--backend-option", "kube-config=" + kubeconfig_path};
  }

  KubeApiDouble api_;
  TempFile kubeconfig_{api_.kubeconfig("scs-sandboxes")};
};

TEST_F(KubernetesE2eTest, ANamespaceWithoutTheDenyAllPolicyStopsTheServer) {
  McpProcess process(kBinary, args(kubeconfig_.path()));
  EXPECT_EQ(process.waitExit(20s), 1);
  EXPECT_THAT(process.stderrText(), HasSubstr("namespace scs-sandboxes cannot hold sandboxes"));
  EXPECT_EQ(api_.podCount(), 0u);
}

TEST_F(KubernetesE2eTest, AClusterWhoseCertificateIsNotCheckedIsRefused) {
  TempFile insecure(
      "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n"
      "  cluster:\n    server: " +
      api_.url() +
      "\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n"
      "    token: t0ken\ncontexts:\n- name: c\n  context:\n    cluster: c\n"
      "    user: u\n    namespace: scs-sandboxes\n");
  McpProcess process(kBinary, args(insecure.path()));
  EXPECT_EQ(process.waitExit(20s), 1);
  EXPECT_THAT(process.stderrText(),
              HasSubstr("skips TLS verification, which the server never does"));
  EXPECT_THAT(api_.requests(), ::testing::IsEmpty());
}

// With the namespace isolated, the server still refuses to start, naming every control of a
// sandbox that no Pod field carries (docs/SECURITY.md, Kubernetes), before any Pod exists.
TEST_F(KubernetesE2eTest, TheControlsAPodCannotCarryStopTheServerAndAreNamed) {
  api_.addNetworkPolicy("scs-sandboxes", kDenyAll);
  McpProcess process(kBinary, args(kubeconfig_.path()));
  EXPECT_EQ(process.waitExit(20s), 1);
  const std::string log = process.stderrText();
  EXPECT_THAT(log, HasSubstr("cannot start: the backend cannot give sandboxes every control"));
  EXPECT_THAT(log, HasSubstr("noexec"));
  EXPECT_THAT(log, HasSubstr("podPidsLimit"));
  EXPECT_THAT(log, HasSubstr("/dev/termination-log"));
  EXPECT_THAT(log, Not(HasSubstr("/proc")));  // the launcher checks it (SECURITY.md, 2b)
  EXPECT_THAT(log, Not(HasSubstr("cannot hold sandboxes")));
  EXPECT_EQ(api_.podCount(), 0u);
}

}  // namespace
}  // namespace scs::testing
