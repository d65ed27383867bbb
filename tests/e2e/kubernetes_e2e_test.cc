#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/kube_api_double.h"
#include "support/mcp_client.h"
#include "support/temp_file.h"

// The real server binary with the kubernetes plugin, against the API server double (issue 16):
// the tools served from Pods, and what an operator sees when the cluster or the Pods it makes
// fall short of a sandbox.
namespace scs::testing {
namespace {

using namespace std::chrono_literals;
using Poco::JSON::Object;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kBinary = SCS_BINARY;
constexpr const char* kSeccompProfile = SCS_SECCOMP_PROFILE;
constexpr const char* kChecklist = SCS_CHECKLIST;
constexpr const char* kDenyAll =
    R"({"podSelector":{"matchLabels":{"io.scs.managed":"true"}},"policyTypes":["Ingress","Egress"]})";

class KubernetesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Certificates::get().ok());
    api_.addNode("node-1", "8", "32Gi");
  }

  // The server's flags: the core's own seccomp profile, which the nodes hold at
  // profiles/scs.json.
  std::vector<std::string> args(const std::string& kubeconfig_path) const {
    return {"--backend",         "kubernetes",
            "--log-level",       "debug",
            "--seccomp-profile", kSeccompProfile,
            "--backend-option",  "kube-config=" + kubeconfig_path,
            "--backend-option",  "seccomp-localhost=profiles/scs.json",
            "--backend-option",  std::string("seccomp-localhost-file=") + kSeccompProfile};
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

// A profile the nodes are not said to hold: every Pod would be refused, so the server does not
// start, and says why, before any Pod exists.
TEST_F(KubernetesE2eTest, ASeccompProfileNoNodeHoldsStopsTheServer) {
  api_.addNetworkPolicy("scs-sandboxes", kDenyAll);
  McpProcess process(kBinary, {"--backend", "kubernetes", "--seccomp-profile", kSeccompProfile,
                               "--backend-option", "kube-config=" + kubeconfig_.path()});
  EXPECT_EQ(process.waitExit(20s), 1);
  const std::string log = process.stderrText();
  EXPECT_THAT(log, HasSubstr("cannot start: the backend cannot give sandboxes every control"));
  EXPECT_THAT(log, HasSubstr("name the node path that holds the core's profile"));
  EXPECT_EQ(api_.podCount(), 0u);
}

// With the namespace isolated, the server serves the tools: each run is a Pod of the double,
// whose kubelet plays the `#fake:` script of the code it was given over attach.
class ServingKubernetesE2eTest : public KubernetesE2eTest {
 protected:
  void SetUp() override {
    KubernetesE2eTest::SetUp();
    api_.addNetworkPolicy("scs-sandboxes", kDenyAll);
  }

  // The server, initialised; `extra` flags after the kubernetes ones.
  std::unique_ptr<McpProcess> serve(std::vector<std::string> extra = {}) {
    std::vector<std::string> all = args(kubeconfig_.path());
    all.insert(all.end(), extra.begin(), extra.end());
    auto process = std::make_unique<McpProcess>(kBinary, all);
    process->initialize();
    return process;
  }

  // Starts `code` and long-polls until its report is final.
  static Object::Ptr runToEnd(McpProcess& process, const std::string& code,
                              Object::Ptr limits = nullptr) {
    Object::Ptr arguments = object({{"code", code}});
    if (limits) {
      arguments->set("limits", limits);
    }
    return finalReport(process,
                       callOk(process, "start_run", arguments)->getValue<std::string>("run_id"));
  }
};

TEST_F(ServingKubernetesE2eTest, EveryStatusOfARunComesFromItsPod) {
  // Every Pod the server makes carries the launcher's confinement (SECURITY.md, 2b).
  std::mutex mutex;
  std::vector<std::string> last_arguments;
  api_.setAdmission([&](Object::Ptr& pod) {
    const auto command =
        pod->getObject("spec")->getArray("containers")->getObject(0)->getArray("command");
    std::lock_guard lock(mutex);
    last_arguments.push_back(command->getElement<std::string>(command->size() - 1));
  });
  auto server = serve();
  const Object::Ptr ok = runToEnd(*server, "#fake: stdout=hello-from-a-pod\n");
  EXPECT_EQ(ok->getValue<std::string>("status"), "succeeded");
  EXPECT_THAT(ok->getValue<std::string>("stdout"), HasSubstr("hello-from-a-pod"));
  EXPECT_EQ(ok->getValue<int>("exit_code"), 0);

  const Object::Ptr failed = runToEnd(*server, "#fake: stderr=broke\n#fake: exit=3\n");
  EXPECT_EQ(failed->getValue<std::string>("status"), "failed");
  EXPECT_EQ(failed->getValue<int>("exit_code"), 3);
  EXPECT_THAT(failed->getValue<std::string>("stderr"), HasSubstr("broke"));

  EXPECT_EQ(runToEnd(*server, "#fake: oom\n")->getValue<std::string>("status"), "out_of_memory");

  const Object::Ptr late = runToEnd(*server, "#fake: hang\n", object({{"timeout_seconds", 1}}));
  EXPECT_EQ(late->getValue<std::string>("status"), "timed_out");

  const std::string hanging =
      callOk(*server, "start_run", object({{"code", "#fake: stdout=started\n#fake: hang\n"}}))
          ->getValue<std::string>("run_id");
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (callOk(*server, "get_result", object({{"run_id", hanging}}))
                 ->getValue<std::string>("status") != "running" &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  callOk(*server, "stop_run", object({{"run_id", hanging}}));
  const Object::Ptr stopped =
      callOk(*server, "get_result", object({{"run_id", hanging}, {"wait_seconds", 20}}));
  EXPECT_EQ(stopped->getValue<std::string>("status"), "stopped");

  server->closeStdin();
  EXPECT_EQ(server->waitExit(30s), 0) << server->stderrText();
  EXPECT_EQ(api_.podCount(), 0u) << "the server exited and left a Pod";
  std::lock_guard lock(mutex);
  EXPECT_GE(last_arguments.size(), 5u);
  EXPECT_THAT(last_arguments, ::testing::Each(std::string("--confine")));
}

// A mutating webhook that weakens the Pod after the server sent it: the run ends before any
// code runs, saying which control the stored Pod lacks.
TEST_F(ServingKubernetesE2eTest, APodAWebhookWeakenedRunsNoCode) {
  api_.setAdmission([](Object::Ptr& pod) {
    pod->getObject("spec")
        ->getArray("containers")
        ->getObject(0)
        ->getObject("securityContext")
        ->set("allowPrivilegeEscalation", true);
  });
  auto server = serve({"--prepared", "0"});
  const Object::Ptr report = runToEnd(*server, "#fake: stdout=never\n");
  EXPECT_EQ(report->getValue<std::string>("status"), "sandbox_error");
  EXPECT_THAT(report->getValue<std::string>("reason"), HasSubstr("no_new_privileges"));
  EXPECT_FALSE(report->has("stdout"));  // nothing ran, so nothing was written
  EXPECT_THAT(api_.requests(), Not(Contains(HasSubstr("/attach"))))
      << "code reached a Pod the core refused";
  server->closeStdin();
  EXPECT_EQ(server->waitExit(30s), 0) << server->stderrText();
  EXPECT_EQ(api_.podCount(), 0u);
}

// The same server against the double's faithful modes, as a cluster of Kubernetes 1.30 or later
// behaves, with the RuntimeClass pinned to the nodes that have Landlock: runs succeed, and a
// launcher that refuses before its attach tells the run why.
TEST_F(ServingKubernetesE2eTest, AgainstAFaithfulClusterARunSaysWhyItsLauncherRefused) {
  api_.setModes(KubeApiDouble::faithful());
  api_.addRuntimeClass("runc", R"({"nodeSelector":{"scs.example/landlock":"true"}})", "");
  auto server = serve({"--prepared", "0"});
  const Object::Ptr ok = runToEnd(*server, "#fake: stdout=pinned\n");
  EXPECT_EQ(ok->getValue<std::string>("status"), "succeeded")
      << ok->getValue<std::string>("reason");
  EXPECT_THAT(ok->getValue<std::string>("stdout"), HasSubstr("pinned"));

  api_.refuseNextLauncher("setup: --confine: Landlock is unavailable (ENOSYS)");
  const Object::Ptr refused = runToEnd(*server, "#fake: stdout=never\n");
  EXPECT_EQ(refused->getValue<std::string>("status"), "sandbox_error");
  EXPECT_THAT(refused->getValue<std::string>("reason"),
              HasSubstr("rejected setup: --confine: Landlock is unavailable (ENOSYS)"));
  server->closeStdin();
  EXPECT_EQ(server->waitExit(30s), 0) << server->stderrText();
  const auto deadline = std::chrono::steady_clock::now() + 10s;  // gracefully deleted
  while (api_.podCount() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(api_.podCount(), 0u) << "the server exited and left a Pod";
}

// scripts/kubernetes-checklist, an operator's first step on a real cluster, against the double:
// the server starts and one sandbox Pod is admitted, read back and attached, which hold; the
// audit inside it cannot run, since the double's Pods play fake scripts, not Python, and the
// script says that this fails, with the table; and it leaves no Pod.
TEST_F(ServingKubernetesE2eTest, TheClusterChecklistRunsAgainstTheDouble) {
  api_.setModes(KubeApiDouble::faithful());
  // The script with `flags` after the kubeconfig: its exit code and what it printed.
  const auto checklist = [&](const std::string& flags) {
    const std::string command = std::string("SCS_BINARY=") + kBinary + " " + kChecklist + " " +
                                kubeconfig_.path() + " --seccomp-profile " + kSeccompProfile +
                                flags + " 2>&1";
    std::pair<int, std::string> result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      return result;
    }
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
      result.second.append(buffer, n);
    }
    result.first = WEXITSTATUS(pclose(pipe));
    return result;
  };
  const auto [code, output] =
      checklist(std::string(" --backend-option seccomp-localhost=profiles/scs.json") +
                " --backend-option seccomp-localhost-file=" + kSeccompProfile);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("HOLDS  the server starts"));
  EXPECT_THAT(output, HasSubstr("HOLDS  a sandbox Pod is admitted, read back as sent"));
  EXPECT_THAT(output, HasSubstr("FAILS  every check from inside the sandbox"));
  EXPECT_THAT(output, HasSubstr("audit_complete"));
  EXPECT_THAT(output, HasSubstr("Only the cluster's operator can check"));
  EXPECT_EQ(api_.podCount(), 0u) << "the checklist left a Pod";

  // Without the node path of the core's profile, the server does not start: the script stops
  // there, saying why.
  const auto [refused_code, refused] = checklist("");
  EXPECT_EQ(refused_code, 1) << refused;
  EXPECT_THAT(refused, HasSubstr("FAILS  the server starts against this cluster"));
  EXPECT_THAT(refused, HasSubstr("name the node path that holds the core's profile"));
  EXPECT_THAT(refused, Not(HasSubstr("HOLDS")));
}

}  // namespace
}  // namespace scs::testing
