#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>

#include "kubernetes_specs.h"
#include "pod_api.h"
#include "support/eventually.h"
#include "support/kube_api_double.h"

namespace scs::kubernetes {
namespace {

using scs::testing::Certificates;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr const char* kDenyAll =
    R"({"podSelector":{"matchLabels":{"io.scs.managed":"true"}},"policyTypes":["Ingress","Egress"]})";
constexpr std::int64_t kNow = 1'796'000'000;

PodSettings inNamespace(const std::string& name) {
  PodSettings settings;
  settings.namespace_name = name;
  return settings;
}

// The backend's REST calls against the API server double: what a cluster does with the Pods
// the core's specs become.
class PodApiTest : public ::testing::Test {
 protected:
  PodApiTest() {
    api_.addNode("node-1", "4", "16Gi");
    api_.addNode("node-2", "3900m", "15Gi");
    api_.addNetworkPolicy("scs-sandboxes", kDenyAll);
  }

  void SetUp() override { ASSERT_TRUE(Certificates::get().ok()); }

  static ClusterAccess access(const scs::testing::KubeApiDouble& api) {
    ClusterAccess a;
    a.server = api.url();
    a.ca_pem = Certificates::get().pem("ca.crt");
    a.token = api.token();
    return a;
  }

  // The spec the core makes for a run, with its deadline label 600 s from kNow.
  backend::SandboxSpec spec(const std::string& run_id = "0123abcd") const {
    return core_.run(run_id, kNow + 600);
  }

  std::string created(const backend::SandboxSpec& s) {
    const backend::CreateReply reply = pods_.create(s, kNow, {});
    EXPECT_TRUE(reply.status.ok()) << reply.status.message;
    return reply.id;
  }

  scs::testing::KubeApiDouble api_;
  KubeClient client_{access(api_), std::chrono::milliseconds(3000)};
  PodApi pods_{client_, PodSettings{}};

  CoreSpecs core_;
  const backend::Posture& required_ = core_.required();
};

TEST_F(PodApiTest, ANamespaceWithTheDenyAllPolicyHoldsSandboxes) {
  EXPECT_THAT(pods_.clusterProblems(), IsEmpty());
}

TEST_F(PodApiTest, ANamespaceWithoutItIsRefusedWithTheReason) {
  const PodApi elsewhere(client_, inNamespace("open-namespace"));
  EXPECT_THAT(elsewhere.clusterProblems(),
              ::testing::ElementsAre(HasSubstr("Ingress"), HasSubstr("Egress")));
  api_.addNetworkPolicy(
      "scs-sandboxes",
      R"({"podSelector":{},"policyTypes":["Egress"],"egress":[{"ports":[{"port":53}]}]})");
  EXPECT_THAT(pods_.clusterProblems(), ::testing::ElementsAre(HasSubstr("allows egress")));
}

TEST_F(PodApiTest, CapacityIsTheReadyNodesLoweredByTheQuota) {
  const auto none = [](const std::string&) { return false; };
  backend::CapacityReply reply = pods_.capacity(none);
  ASSERT_TRUE(reply.status.ok()) << reply.status.message;
  EXPECT_EQ(reply.capacity.cores, 7);
  EXPECT_EQ(reply.capacity.memory_bytes, std::int64_t{31} << 30);
  api_.addResourceQuota("scs-sandboxes", R"({"limits.cpu":"4","limits.memory":"8Gi"})");
  reply = pods_.capacity(none);
  EXPECT_EQ(reply.capacity.cores, 4);
  EXPECT_EQ(reply.capacity.memory_bytes, std::int64_t{8} << 30);
}

// The API validates a localhostProfile as a path beneath the kubelet's seccomp directory, as the
// double does: an absolute one is refused at create (422), which parseOptions() keeps from ever
// being sent.
TEST_F(PodApiTest, AnAbsoluteLocalhostProfileIsInvalid) {
  PodSettings settings;
  settings.seccomp_localhost = "/var/lib/kubelet/seccomp/profiles/scs.json";
  settings.seccomp_localhost_text = R"({"defaultAction":"SCMP_ACT_ERRNO"})";
  const PodApi absolute(client_, settings);
  backend::SandboxSpec s = spec();
  s.posture.seccomp_profile = settings.seccomp_localhost_text;
  const backend::CreateReply reply = absolute.create(s, kNow, {});
  EXPECT_EQ(reply.status.code, backend::Code::kRejected);
  EXPECT_THAT(reply.status.message, HasSubstr("must be a relative path"));
  EXPECT_EQ(api_.podCount(), 0u);
}

TEST_F(PodApiTest, ACreatedPodReadsBackAndPassesTheCoresCheck) {
  const std::string id = created(spec());
  EXPECT_EQ(id, "scs-0123abcd");
  const auto stored = api_.pod("scs-sandboxes", id);
  ASSERT_TRUE(stored);
  EXPECT_EQ(json::integer(json::object(stored, "spec"), "activeDeadlineSeconds"),
            600 + kDeadlineGraceSeconds);
  const backend::InspectReply inspected = pods_.inspect(id);
  ASSERT_TRUE(inspected.status.ok()) << inspected.status.message;
  EXPECT_TRUE(inspected.posture.network_disabled);
  EXPECT_EQ(inspected.posture.memory_bytes, required_.memory_bytes);
  EXPECT_THAT(policy::assertPosture(inspected.posture, required_), ::testing::IsEmpty());
}

// A mutating webhook that weakens the Pod after the backend sent it: the read-back shows it,
// and the run fails before any code runs.
TEST_F(PodApiTest, APodAMutatingWebhookWeakenedIsSeen) {
  api_.setAdmission([](Poco::JSON::Object::Ptr& pod) {
    pod->getObject("spec")
        ->getArray("containers")
        ->getObject(0)
        ->getObject("securityContext")
        ->set("privileged", true);
  });
  const backend::InspectReply privileged = pods_.inspect(created(spec("aaaa")));
  EXPECT_TRUE(privileged.posture.privileged);
  EXPECT_FALSE(policy::assertPosture(privileged.posture, required_).empty());

  api_.setAdmission([](Poco::JSON::Object::Ptr& pod) {
    Poco::JSON::Object::Ptr proxy = new Poco::JSON::Object;
    proxy->set("name", "istio-proxy");
    proxy->set("image", "proxy:1");
    pod->getObject("spec")->getArray("containers")->add(proxy);
  });
  const backend::InspectReply sidecar = pods_.inspect(created(spec("bbbb")));
  EXPECT_EQ(sidecar.status.code, backend::Code::kRejected);
  EXPECT_THAT(sidecar.status.message, HasSubstr("other containers"));

  api_.setAdmission([](Poco::JSON::Object::Ptr& pod) {
    pod->getObject("spec")->set("automountServiceAccountToken", true);
  });
  const backend::InspectReply token = pods_.inspect(created(spec("cccc")));
  EXPECT_EQ(token.status.code, backend::Code::kRejected);
  EXPECT_THAT(token.status.message, HasSubstr("service-account token"));
}

TEST_F(PodApiTest, APodTheNamespaceDoesNotIsolateMayNotRunCode) {
  const PodApi open(client_, inNamespace("open-namespace"));
  const backend::CreateReply reply = open.create(spec(), kNow, {});
  ASSERT_TRUE(reply.status.ok()) << reply.status.message;
  const backend::InspectReply inspected = open.inspect(reply.id);
  EXPECT_EQ(inspected.status.code, backend::Code::kRejected);
  EXPECT_THAT(inspected.status.message, HasSubstr("NetworkPolicy"));
  EXPECT_FALSE(inspected.posture.network_disabled);
}

TEST_F(PodApiTest, TheApisErrorsInTheContractsCodes) {
  created(spec());
  EXPECT_EQ(pods_.create(spec(), kNow, {}).status.code, backend::Code::kRejected);  // 409
  api_.failNext(1, 429);
  EXPECT_EQ(pods_.create(spec("dddd"), kNow, {}).status.code, backend::Code::kUnavailable);
  api_.failNext(1, 500);
  EXPECT_EQ(pods_.inspect("scs-0123abcd").status.code, backend::Code::kUnavailable);
  EXPECT_EQ(pods_.inspect("scs-none").status.code, backend::Code::kNotFound);
  backend::SandboxSpec undated = spec("eeee");
  undated.labels.erase(backend::kDeadlineLabel);
  EXPECT_EQ(pods_.create(undated, kNow, {}).status.code, backend::Code::kUnsupported);
}

// A watch of one Pod from the version read: the kubelet's change comes as an event, a watch of
// another Pod's name sees none, and after compaction the old version is told 410 Gone.
TEST_F(PodApiTest, AWatchFromAVersionSeesTheChangesAfterItAndAnExpiredOneIs410) {
  api_.holdPending(true);
  const std::string id = created(spec());
  const std::string version = pods_.stateNow(id).resource_version;
  ASSERT_FALSE(version.empty());
  api_.holdPending(false);
  const auto watch = [&](const std::string& name, std::vector<std::string>* seen) {
    return client_.watch(
        "/api/v1/namespaces/scs-sandboxes/pods?fieldSelector=metadata.name%3D" + name +
            "&watch=1&resourceVersion=" + version + "&timeoutSeconds=1",
        [&](const json::ObjectPtr& event) {
          seen->push_back(
              json::string(event, "type").value_or("") + " " +
              json::string(json::object(json::object(event, "object"), "status"), "phase")
                  .value_or(""));
          return true;
        });
  };
  std::vector<std::string> seen;
  const KubeClient::WatchReply mine = watch(id, &seen);
  EXPECT_TRUE(mine.status.ok()) << mine.status.message;
  EXPECT_FALSE(mine.expired);
  EXPECT_THAT(seen, ::testing::ElementsAre("MODIFIED Running"));
  std::vector<std::string> others;
  EXPECT_TRUE(watch("scs-other", &others).status.ok());
  EXPECT_THAT(others, IsEmpty());

  api_.expireWatchHistory();
  std::vector<std::string> after;
  const KubeClient::WatchReply expired = watch(id, &after);
  EXPECT_TRUE(expired.expired);
  EXPECT_THAT(after, IsEmpty());
}

// A wait whose watch the API server expired reads the Pod again and goes on from there.
TEST_F(PodApiTest, AWaitOutlivesAnExpiredWatch) {
  api_.holdPending(true);
  const std::string id = created(spec());
  std::optional<PodApi::State> reached;
  std::thread waiting([&] {
    reached = pods_.awaitState(
        id, [](const PodApi::State& s) { return s.running; },
        std::chrono::steady_clock::now() + std::chrono::seconds(20), [] { return false; });
  });
  const auto gets = [&] {
    const auto seen = api_.requests();
    return std::count(
        seen.begin(), seen.end(),
        "GET /api/v1/namespaces/scs-sandboxes/pods?fieldSelector=metadata.name%3D" + id);
  };
  const auto watching = [&] {
    const auto seen = api_.requests();
    return std::count_if(seen.begin(), seen.end(), [](const std::string& request) {
      return request.find("&watch=1") != std::string::npos;
    });
  };
  EXPECT_TRUE(scs::testing::eventually([&] { return gets() == 1 && watching() == 1; }));
  api_.expireWatchHistory();
  // Once the watch ends, the next from the same version is told 410, and the Pod is read again.
  EXPECT_TRUE(scs::testing::eventually([&] { return gets() == 2; }));
  api_.holdPending(false);
  waiting.join();
  ASSERT_TRUE(reached);
  EXPECT_TRUE(reached->status.ok()) << reached->status.message;
  EXPECT_TRUE(reached->running);
}

TEST_F(PodApiTest, RemoveDeletesAtOnceAndListFindsByLabel) {
  const std::string first = created(spec("1111"));
  const std::string second = created(spec("2222"));
  const backend::ListReply listed = pods_.list(backend::kManagedLabel);
  ASSERT_TRUE(listed.status.ok()) << listed.status.message;
  ASSERT_EQ(listed.sandboxes.size(), 2u);
  EXPECT_EQ(listed.sandboxes[0].labels.at(backend::kManagedLabel), "true");
  EXPECT_TRUE(pods_.list("io.scs.no-such-label").sandboxes.empty());

  EXPECT_TRUE(pods_.remove(first).ok());
  EXPECT_TRUE(pods_.remove(first).ok()) << "removing a sandbox that is gone is kOk";
  EXPECT_EQ(pods_.inspect(first).status.code, backend::Code::kNotFound);
  EXPECT_EQ(api_.podCount(), 1u);
  EXPECT_THAT(api_.requests(),
              ::testing::Contains("DELETE /api/v1/namespaces/scs-sandboxes/pods/scs-1111?"
                                  "gracePeriodSeconds=1"));
  EXPECT_FALSE(pods_.stateNow(second).exit.exited);
  EXPECT_TRUE(scs::testing::eventually([&] { return pods_.stateNow(second).running; }));
}

TEST_F(PodApiTest, AWrongTokenIsRefused) {
  ClusterAccess wrong = access(api_);
  wrong.token = "stolen";
  const KubeClient client(wrong, std::chrono::milliseconds(3000));
  EXPECT_EQ(
      PodApi(client, PodSettings{}).capacity([](const std::string&) { return false; }).status.code,
      backend::Code::kRejected);
}

}  // namespace
}  // namespace scs::kubernetes
