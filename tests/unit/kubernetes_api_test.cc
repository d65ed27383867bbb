#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api_reading.h"

namespace scs::kubernetes {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const Labels kSandbox = {{"io.scs.managed", "true"}, {"io.scs.instance", "inst-9"}};

json::ObjectPtr parsed(const std::string& text) {
  json::ObjectPtr object = json::parseObject(text);
  EXPECT_FALSE(object.isNull()) << text;
  return object;
}

TEST(SelectorTest, MatchLabelsAndEveryOperator) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {R"({})", true},  // the empty selector selects every Pod
      {R"({"matchLabels":{"io.scs.managed":"true"}})", true},
      {R"({"matchLabels":{"io.scs.managed":"false"}})", false},
      {R"({"matchLabels":{"app":"web"}})", false},
      {R"({"matchExpressions":[{"key":"io.scs.managed","operator":"In","values":["true"]}]})",
       true},
      {R"({"matchExpressions":[{"key":"io.scs.managed","operator":"NotIn","values":["true"]}]})",
       false},
      {R"({"matchExpressions":[{"key":"app","operator":"NotIn","values":["web"]}]})", true},
      {R"({"matchExpressions":[{"key":"io.scs.instance","operator":"Exists"}]})", true},
      {R"({"matchExpressions":[{"key":"io.scs.instance","operator":"DoesNotExist"}]})", false},
      {R"({"matchExpressions":[{"key":"io.scs.managed","operator":"Exists","values":["x"]}]})",
       false},  // malformed: selects nothing
      {R"({"matchExpressions":[{"key":"io.scs.managed","operator":"Like"}]})", false},
      {R"({"matchExpressions":[7]})", false},
  };
  for (const auto& [selector, expected] : cases) {
    EXPECT_EQ(selects(parsed(selector), kSandbox), expected) << selector;
  }
  EXPECT_FALSE(selects(nullptr, kSandbox));
}

std::string policyList(const std::vector<std::string>& specs) {
  std::string items;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    items += (i ? "," : "") + std::string(R"({"metadata":{"name":"p)") + std::to_string(i) +
             R"("},"spec":)" + specs[i] + "}";
  }
  return R"({"kind":"NetworkPolicyList","items":[)" + items + "]}";
}

constexpr const char* kDenyAll =
    R"({"podSelector":{"matchLabels":{"io.scs.managed":"true"}},"policyTypes":["Ingress","Egress"]})";

TEST(IsolationTest, ADenyAllPolicyIsolatesSandboxPods) {
  EXPECT_THAT(isolationProblems(parsed(policyList({kDenyAll})), kSandbox), IsEmpty());
  // One policy per direction does as well; the empty selector selects the sandbox Pods too.
  EXPECT_THAT(
      isolationProblems(parsed(policyList({R"({"podSelector":{},"policyTypes":["Ingress"]})",
                                           R"({"podSelector":{},"policyTypes":["Egress"]})"})),
                        kSandbox),
      IsEmpty());
}

TEST(IsolationTest, NoPolicyOrOneThatSelectsOtherPodsLeavesThemOpen) {
  EXPECT_THAT(isolationProblems(parsed(policyList({})), kSandbox),
              ElementsAre(HasSubstr("Ingress"), HasSubstr("Egress")));
  EXPECT_THAT(
      isolationProblems(
          parsed(policyList(
              {R"({"podSelector":{"matchLabels":{"app":"web"}},"policyTypes":["Ingress","Egress"]})"})),
          kSandbox),
      ElementsAre(HasSubstr("Ingress"), HasSubstr("Egress")));
  EXPECT_THAT(
      isolationProblems(parsed(policyList({R"({"podSelector":{},"policyTypes":["Ingress"]})"})),
                        kSandbox),
      ElementsAre(HasSubstr("Egress")));
}

// NetworkPolicies add up: an allow rule in any policy that selects the Pods opens what the
// deny-all closed, so the deny-all alone proves nothing.
TEST(IsolationTest, AnAllowRuleBesideTheDenyAllOpensThePods) {
  const std::string allow_dns =
      R"({"podSelector":{},"policyTypes":["Egress"],"egress":[{"ports":[{"port":53,"protocol":"UDP"}]}]})";
  EXPECT_THAT(isolationProblems(parsed(policyList({kDenyAll, allow_dns})), kSandbox),
              ElementsAre(HasSubstr("p1 allows egress")));
  const std::string allow_in =
      R"({"podSelector":{"matchLabels":{"io.scs.managed":"true"}},"policyTypes":["Ingress"],"ingress":[{}]})";
  EXPECT_THAT(isolationProblems(parsed(policyList({kDenyAll, allow_in})), kSandbox),
              ElementsAre(HasSubstr("p1 allows ingress")));
  // An allow rule for other Pods is theirs.
  const std::string other =
      R"({"podSelector":{"matchLabels":{"app":"web"}},"policyTypes":["Egress"],"egress":[{}]})";
  EXPECT_THAT(isolationProblems(parsed(policyList({kDenyAll, other})), kSandbox), IsEmpty());
  // An explicitly empty rule list allows nothing.
  const std::string empty_rules =
      R"({"podSelector":{},"policyTypes":["Ingress","Egress"],"ingress":[],"egress":[]})";
  EXPECT_THAT(isolationProblems(parsed(policyList({empty_rules})), kSandbox), IsEmpty());
}

std::string podWithStatus(const std::string& status) {
  return R"({"metadata":{"name":"scs-1"},"status":)" + status + "}";
}

// The exit read from a Pod with `status` for its container "sandbox".
backend::Exit exitOfStatus(const std::string& status) {
  return exitOf(parsed(podWithStatus(status)), "sandbox");
}

// The kubelet's message of a failed container (FallbackToLogsOnError: its log's tail) gives the
// run only the launcher's own refusal, its last line, whole characters of it.
TEST(LauncherRefusalTest, OnlyTheLaunchersLastLineWithinItsBound) {
  const auto pod = [](const std::string& message) {
    Poco::JSON::Object::Ptr record =
        parsed(R"({"name":"sandbox","state":{"terminated":{"exitCode":125,"reason":"Error"}}})");
    record->getObject("state")->getObject("terminated")->set("message", message);
    Poco::JSON::Object::Ptr p = parsed(R"({"status":{"containerStatuses":[]}})");
    p->getObject("status")->getArray("containerStatuses")->add(record);
    return p;
  };
  EXPECT_EQ(launcherRefusal(pod("warming\nsandbox launcher: rejected setup: --confine: x\n \n"),
                            "sandbox"),
            "sandbox launcher: rejected setup: --confine: x");
  EXPECT_EQ(launcherRefusal(pod("sandbox launcher: rejected x\nTraceback (most recent call last)"),
                            "sandbox"),
            "");  // its last line is not the launcher's
  EXPECT_EQ(launcherRefusal(pod("anything a program printed"), "sandbox"), "");
  EXPECT_EQ(launcherRefusal(pod("sandbox launcher: rejected x"), "other"), "");
  const std::string long_line = "sandbox launcher: rejected " + std::string(484, 'a') + "\xc3\xa9z";
  const std::string cut = launcherRefusal(pod(long_line), "sandbox");
  EXPECT_EQ(cut.size(), 511u);  // the 512th byte would split the two of \u00e9
  EXPECT_EQ(cut.back(), 'a');
}

TEST(ExitTest, FromTheContainerRecordAndThePodsPhase) {
  const backend::Exit succeeded = exitOfStatus(
      R"({"phase":"Succeeded","containerStatuses":[{"name":"sandbox","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]})");
  EXPECT_TRUE(succeeded.exited);
  EXPECT_EQ(succeeded.exit_code, 0);
  EXPECT_FALSE(succeeded.oom_killed);
  EXPECT_FALSE(succeeded.killed_outside);

  const backend::Exit oom = exitOfStatus(
      R"({"phase":"Failed","containerStatuses":[{"name":"sandbox","state":{"terminated":{"exitCode":137,"reason":"OOMKilled"}}}]})");
  EXPECT_TRUE(oom.exited);
  EXPECT_EQ(oom.exit_code, 137);
  EXPECT_TRUE(oom.oom_killed);

  const backend::Exit running = exitOfStatus(
      R"({"phase":"Running","containerStatuses":[{"name":"sandbox","state":{"running":{"startedAt":"2026-12-01T00:00:00Z"}}}]})");
  EXPECT_FALSE(running.exited);

  const backend::Exit deadline = exitOfStatus(
      R"({"phase":"Failed","reason":"DeadlineExceeded","message":"Pod was active on the node longer than the specified deadline"})");
  EXPECT_TRUE(deadline.exited);
  EXPECT_TRUE(deadline.killed_outside);
  EXPECT_THAT(deadline.engine_error, HasSubstr("DeadlineExceeded"));

  const backend::Exit pull = exitOfStatus(
      R"({"phase":"Pending","containerStatuses":[{"name":"sandbox","state":{"waiting":{"reason":"ImagePullBackOff","message":"Back-off pulling image"}}}]})");
  EXPECT_TRUE(pull.exited);
  EXPECT_THAT(pull.engine_error, HasSubstr("ImagePullBackOff"));

  const backend::Exit creating = exitOfStatus(
      R"({"phase":"Pending","containerStatuses":[{"name":"sandbox","state":{"waiting":{"reason":"ContainerCreating"}}}]})");
  EXPECT_FALSE(creating.exited);

  // A container killed at the Pod's deadline, by an eviction or a delete left 137 of its own:
  // the Pod's reason, deletion or disruption says it came from outside.
  for (
      const std::string& status :
      {std::string(
           R"({"phase":"Failed","reason":"DeadlineExceeded","containerStatuses":[{"name":"sandbox","state":{"terminated":{"exitCode":137,"reason":"Error"}}}]})"),
       std::string(
           R"({"phase":"Failed","reason":"Evicted","containerStatuses":[{"name":"sandbox","state":{"terminated":{"exitCode":137}}}]})"),
       std::string(
           R"({"phase":"Running","conditions":[{"type":"DisruptionTarget","status":"True"}],"containerStatuses":[{"name":"sandbox","state":{"terminated":{"exitCode":137}}}]})")}) {
    const backend::Exit killed = exitOfStatus(status);
    EXPECT_TRUE(killed.exited) << status;
    EXPECT_EQ(killed.exit_code, 137) << status;
    EXPECT_TRUE(killed.killed_outside) << status;
  }
  const backend::Exit deleted = exitOf(
      parsed(
          R"({"metadata":{"name":"scs-1","deletionTimestamp":"2026-12-01T00:00:00Z"},)"
          R"("status":{"containerStatuses":[{"name":"sandbox","state":{"terminated":{"exitCode":137}}}]}})"),
      "sandbox");
  EXPECT_TRUE(deleted.killed_outside);
  EXPECT_FALSE(succeeded.killed_outside);

  // Another container's record is not the sandbox's.
  const backend::Exit other = exitOfStatus(
      R"({"phase":"Running","containerStatuses":[{"name":"proxy","state":{"terminated":{"exitCode":0}}}]})");
  EXPECT_FALSE(other.exited);
}

// No Pod is this server's.
bool noneOwn(const std::string&, const std::string&) { return false; }

TEST(CapacityTest, SchedulableNodesAllocatableLoweredByTheQuota) {
  const std::string nodes = R"({"items":[
    {"metadata":{"name":"a"},"status":{"allocatable":{"cpu":"3900m","memory":"15Gi"},
     "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"b"},"status":{"allocatable":{"cpu":"4","memory":"16Gi"},
     "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"not-ready"},"status":{"allocatable":{"cpu":"64","memory":"256Gi"},
     "conditions":[{"type":"Ready","status":"False"}]}},
    {"metadata":{"name":"cordoned"},"spec":{"unschedulable":true},"status":{"allocatable":
     {"cpu":"64","memory":"256Gi"},"conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"gpu"},"spec":{"taints":[{"key":"gpu","effect":"NoSchedule"}]},
     "status":{"allocatable":{"cpu":"64","memory":"256Gi"},
     "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"draining"},"spec":{"taints":[{"key":"x","effect":"NoExecute"}]},
     "status":{"allocatable":{"cpu":"64","memory":"256Gi"},
     "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"preferred-off"},"spec":{"taints":[{"key":"y","effect":"PreferNoSchedule"}]},
     "status":{"allocatable":{"cpu":"1","memory":"1Gi"},
     "conditions":[{"type":"Ready","status":"True"}]}}]})";
  const auto empty = parsed(R"({"items":[]})");
  const backend::Capacity nodes_only = capacityOf(parsed(nodes), empty, empty, noneOwn);
  EXPECT_EQ(nodes_only.cores, 8);  // 8.9, rounded down: a PreferNoSchedule taint still takes Pods
  EXPECT_EQ(nodes_only.memory_bytes, std::int64_t{32} << 30);

  const backend::Capacity quota = capacityOf(
      parsed(nodes), empty,
      parsed(
          R"({"items":[{"spec":{"hard":{"limits.cpu":"4","limits.memory":"8Gi","pods":"20"}}}]})"),
      noneOwn);
  EXPECT_EQ(quota.cores, 4);
  EXPECT_EQ(quota.memory_bytes, std::int64_t{8} << 30);

  const backend::Capacity none = capacityOf(empty, nullptr, nullptr, noneOwn);
  EXPECT_EQ(none.cores, 0);
  EXPECT_EQ(none.memory_bytes, 0);
}

// What the scheduler counts as taken (resource.PodRequests), and what a quota's status says is
// used: the cluster's free room, not its size.
TEST(CapacityTest, RequestsPlacedOnTheNodesAndTheQuotasUseAreTaken) {
  const auto nodes = parsed(R"({"items":[
    {"metadata":{"name":"a"},"status":{"allocatable":{"cpu":"4","memory":"16Gi"},
     "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"b"},"status":{"allocatable":{"cpu":"2","memory":"4Gi"},
     "conditions":[{"type":"Ready","status":"True"}]}}]})");
  // On a: two containers (1.5 cores, 3 GiB), an init container asking more memory than both
  // (5 GiB), and the RuntimeClass's overhead (250m, 1 GiB): 1.75 cores and 6 GiB. On b: more
  // than it has, which leaves it nothing, not less than nothing. Unscheduled: nowhere. This
  // server's own sandbox's Pod on a: not taken, since the core counts its runs itself; another
  // replica's (the same labels, its own Pod) on b, or one in another namespace: taken.
  const auto pods = parsed(R"({"items":[
    {"spec":{"nodeName":"a","overhead":{"cpu":"250m","memory":"1Gi"},
      "containers":[{"resources":{"requests":{"cpu":"1","memory":"1Gi"}}},
                    {"resources":{"requests":{"cpu":"500m","memory":"2Gi"}}}],
      "initContainers":[{"resources":{"requests":{"cpu":"100m","memory":"5Gi"}}}]}},
    {"spec":{"nodeName":"b","containers":[{"resources":{"requests":{"cpu":"3","memory":"8Gi"}}}]}},
    {"metadata":{"namespace":"sandboxes","name":"scs-mine","labels":{"io.scs.managed":"true"}},
      "spec":{"nodeName":"a","containers":[{"resources":{"requests":{"cpu":"2","memory":"4Gi"}}}]}},
    {"metadata":{"namespace":"sandboxes","name":"scs-replica","labels":{"io.scs.managed":"true"}},
      "spec":{"nodeName":"a","containers":[{"resources":{"requests":{"cpu":"1","memory":"1Gi"}}}]}},
    {"metadata":{"namespace":"other","name":"scs-mine","labels":{"io.scs.managed":"true"}},
      "spec":{"nodeName":"a","containers":[{"resources":{"requests":{"cpu":"250m","memory":"1Gi"}}}]}},
    {"spec":{"containers":[{"resources":{"requests":{"cpu":"8","memory":"64Gi"}}}]}}]})");
  const auto mine = [](const std::string& namespace_name, const std::string& name) {
    return namespace_name == "sandboxes" && name == "scs-mine";
  };
  const backend::Capacity placed = capacityOf(nodes, pods, parsed(R"({"items":[]})"), mine);
  EXPECT_EQ(placed.cores, 1);  // 4 - 1.75 - 1 - 0.25: 1, rounded down
  EXPECT_EQ(placed.memory_bytes, std::int64_t{8} << 30);

  // Of the quota's use, the sandboxes' own (a limit of 1 core and 2 GiB) is not taken either.
  const auto sandbox = parsed(R"({"items":[{"metadata":{"namespace":"sandboxes","name":"scs-mine",
    "labels":{"io.scs.managed":"true"}},
    "spec":{"containers":[{"resources":{"limits":{"cpu":"1","memory":"2Gi"},
                                        "requests":{"cpu":"1","memory":"2Gi"}}}]}}]})");
  const backend::Capacity quota = capacityOf(nodes, sandbox, parsed(R"({"items":[
    {"spec":{"hard":{"limits.cpu":"10","limits.memory":"20Gi"}},
     "status":{"used":{"limits.cpu":"7500m","limits.memory":"18Gi"}}},
    {"spec":{"hard":{"requests.memory":"4Gi"}},"status":{"used":{"requests.memory":"7Gi"}}}]})"),
                                             mine);
  EXPECT_EQ(quota.cores, 3);         // 10 less the 6.5 others use
  EXPECT_EQ(quota.memory_bytes, 0);  // the second is used past its hard by others
}

TEST(SandboxesTest, EachPodByNameWithItsLabels) {
  const auto sandboxes = sandboxesOf(parsed(R"({"items":[
    {"metadata":{"name":"scs-a","labels":{"io.scs.managed":"true","io.scs.run-id":"a"}}},
    {"metadata":{"labels":{"io.scs.managed":"true"}}},
    {"metadata":{"name":"scs-b"}}]})"));
  ASSERT_EQ(sandboxes.size(), 2u);
  EXPECT_EQ(sandboxes[0].id, "scs-a");
  EXPECT_EQ(sandboxes[0].labels.at("io.scs.run-id"), "a");
  EXPECT_EQ(sandboxes[1].id, "scs-b");
  EXPECT_TRUE(sandboxes[1].labels.empty());
}

}  // namespace
}  // namespace scs::kubernetes
