#include <Poco/JSON/Query.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "mocks/mock_backend.h"
#include "pod_readback.h"
#include "policy/posture.h"
#include "sandbox/bring_up.h"
#include "support/manual_clock.h"
#include "support/temp_file.h"

namespace scs::kubernetes {
namespace {

using json::ObjectPtr;
using scs::testing::TempFile;
using ::testing::HasSubstr;
using ::testing::Not;

// The value at `path` ("spec.containers[0].image") as text; "(none)" when absent.
std::string at(const ObjectPtr& pod, const std::string& path) {
  const Poco::Dynamic::Var value = Poco::JSON::Query(pod).find(path);
  if (value.isEmpty()) {
    return "(none)";
  }
  if (value.type() == typeid(Poco::JSON::Array::Ptr)) {
    std::ostringstream out;
    value.extract<Poco::JSON::Array::Ptr>()->stringify(out);
    return out.str();
  }
  return value.toString();
}

ObjectPtr copyOf(const ObjectPtr& pod) { return json::parseObject(json::stringify(pod)); }

// What the API server keeps of a Pod it admitted, as it writes it back: plain booleans that are
// false left out (Go's omitempty), quantities in canonical form, and the defaults it fills in.
ObjectPtr stored(const ObjectPtr& sent) {
  ObjectPtr pod = copyOf(sent);
  ObjectPtr spec = pod->getObject("spec");
  for (const char* key : {"hostNetwork", "hostPID", "hostIPC"}) {
    spec->remove(key);
  }
  spec->set("schedulerName", "default-scheduler");
  Poco::JSON::Array::Ptr tolerations = json::emptyArray();
  for (const char* taint : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    ObjectPtr toleration = json::newObject();  // what DefaultTolerationSeconds adds
    toleration->set("key", taint);
    toleration->set("operator", "Exists");
    toleration->set("effect", "NoExecute");
    toleration->set("tolerationSeconds", 300);
    tolerations->add(toleration);
  }
  spec->set("tolerations", tolerations);
  spec->set("nodeName", "node-1");
  spec->set("serviceAccountName", "default");
  ObjectPtr container = spec->getArray("containers")->getObject(0);
  container->set("terminationMessagePath", "/dev/termination-log");
  container->set("terminationMessagePolicy", "File");
  ObjectPtr resources = container->getObject("resources");
  for (const char* kind : {"limits", "requests"}) {
    ObjectPtr amounts = resources->getObject(kind);
    amounts->set("cpu", "1");  // 1000m, canonical; the bytes stay as they were sent
  }
  Poco::JSON::Array::Ptr volumes = spec->getArray("volumes");
  for (std::size_t i = 0; i < volumes->size(); ++i) {
    ObjectPtr empty_dir = volumes->getObject(static_cast<unsigned>(i))->getObject("emptyDir");
    const auto bytes = parseQuantity(empty_dir->getValue<std::string>("sizeLimit"), 1);
    if (bytes && *bytes % (1 << 20) == 0) {
      empty_dir->set("sizeLimit", std::to_string(*bytes >> 20) + "Mi");
    }
  }
  ObjectPtr metadata = pod->getObject("metadata");
  metadata->set("uid", "6f1c1e9a-0000-4000-8000-000000000001");
  metadata->set("resourceVersion", "4711");
  ObjectPtr status = json::newObject();
  status->set("phase", "Pending");
  pod->set("status", status);
  return pod;
}

class PodTest : public ::testing::Test {
 protected:
  backend::SandboxSpec spec() const {
    return bring_up_.spec("0123abcd", limits_, required_, false);
  }

  ObjectPtr pod() const {
    const PodManifest manifest = podFor(spec(), settings_, 700);
    EXPECT_TRUE(manifest.status.ok()) << manifest.status.message;
    return manifest.pod;
  }

  testing::ManualClock clock_;
  ::testing::NiceMock<mocks::MockRuntimeBackend> backend_;
  policy::SandboxSettings sandbox_;
  policy::Limits limits_{1, 30, 1, 256};  // 1 GB, 30 s, 1 cpu, 256 processes
  backend::Posture required_ = policy::requiredPosture(limits_, sandbox_, sandbox_.uids.first);
  sandbox::SandboxBringUp bring_up_{
      backend_, sandbox_, "inst-9", std::chrono::seconds(300), std::chrono::seconds(300),
      {},       clock_};
  PodSettings settings_;
};

TEST_F(PodTest, TheSpecBecomesOnePodWithEveryControlExplicit) {
  const ObjectPtr p = pod();
  const std::string uid = std::to_string(sandbox_.uids.first);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata.name", "scs-0123abcd"},
      {"metadata.namespace", "scs-sandboxes"},
      {"spec.restartPolicy", "Never"},
      {"spec.activeDeadlineSeconds", "700"},
      {"spec.terminationGracePeriodSeconds", "1"},
      {"spec.automountServiceAccountToken", "false"},
      {"spec.enableServiceLinks", "false"},
      {"spec.hostNetwork", "false"},
      {"spec.hostPID", "false"},
      {"spec.hostIPC", "false"},
      {"spec.shareProcessNamespace", "false"},
      {"spec.dnsPolicy", "None"},
      {"spec.dnsConfig.nameservers", R"(["127.0.0.1"])"},
      {"spec.hostname", "sandbox"},
      {"spec.runtimeClassName", required_.runtime},
      {"spec.securityContext.runAsNonRoot", "true"},
      {"spec.securityContext.runAsUser", uid},
      {"spec.securityContext.seccompProfile.type", "RuntimeDefault"},
      {"spec.containers[0].name", "sandbox"},
      {"spec.containers[0].image", required_.image},
      {"spec.containers[0].stdin", "true"},
      {"spec.containers[0].stdinOnce", "true"},
      {"spec.containers[0].tty", "false"},
      {"spec.containers[0].securityContext.runAsNonRoot", "true"},
      {"spec.containers[0].securityContext.runAsUser", uid},
      {"spec.containers[0].securityContext.runAsGroup", uid},
      {"spec.containers[0].securityContext.privileged", "false"},
      {"spec.containers[0].securityContext.allowPrivilegeEscalation", "false"},
      {"spec.containers[0].securityContext.readOnlyRootFilesystem", "true"},
      {"spec.containers[0].securityContext.capabilities.drop", R"(["ALL"])"},
      {"spec.containers[0].securityContext.procMount", "Default"},
      {"spec.containers[0].securityContext.seccompProfile.type", "RuntimeDefault"},
      {"spec.containers[0].resources.limits.cpu", "1000m"},
      {"spec.containers[0].resources.requests.cpu", "1000m"},
      {"spec.containers[0].resources.limits.memory", std::to_string(required_.memory_bytes)},
      {"spec.containers[0].resources.requests.memory", std::to_string(required_.memory_bytes)},
      {"spec.volumes[0].emptyDir.medium", "Memory"},
  };
  for (const auto& [path, value] : expected) {
    EXPECT_EQ(at(p, path), value) << path;
  }
  const ObjectPtr labels = p->getObject("metadata")->getObject("labels");
  EXPECT_EQ(labels->getValue<std::string>("io.scs.managed"), "true");
  EXPECT_EQ(labels->getValue<std::string>("io.scs.run-id"), "0123abcd");
  EXPECT_EQ(at(p, "spec.containers[0].command[0]"), spec().command[0]);
  EXPECT_EQ(p->getObject("spec")->getArray("containers")->size(), 1u);
}

TEST_F(PodTest, EveryScratchMountAndShmIsAMemoryVolumeOfItsSize) {
  const ObjectPtr p = pod();
  const auto volumes = p->getObject("spec")->getArray("volumes");
  const auto mounts =
      p->getObject("spec")->getArray("containers")->getObject(0)->getArray("volumeMounts");
  ASSERT_EQ(volumes->size(), required_.tmpfs.size() + 1);
  ASSERT_EQ(mounts->size(), volumes->size());
  for (std::size_t i = 0; i < required_.tmpfs.size(); ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(at(p, "spec.containers[0].volumeMounts[" + n + "].mountPath"),
              required_.tmpfs[i].path);
    EXPECT_EQ(at(p, "spec.volumes[" + n + "].emptyDir.sizeLimit"),
              std::to_string(required_.tmpfs[i].size_bytes));
  }
  const std::string shm = std::to_string(required_.tmpfs.size());
  EXPECT_EQ(at(p, "spec.containers[0].volumeMounts[" + shm + "].mountPath"), "/dev/shm");
  EXPECT_EQ(at(p, "spec.volumes[" + shm + "].emptyDir.sizeLimit"),
            std::to_string(required_.shm_bytes));
}

// The Pod is checked against the Kubernetes API's own schema (python3-kubernetes' models), so a
// misspelt or mistyped field fails here, not on a cluster.
int schemaCheck(const ObjectPtr& pod) {
  const TempFile file(json::stringify(pod));
  const std::string command = std::string("/usr/bin/python3 ") + SCS_TESTS_DIR +
                              "/kubernetes/check_pod_schema.py " + file.path();
  return std::system(command.c_str());
}

TEST_F(PodTest, ThePodIsValidAgainstTheKubernetesSchema) { EXPECT_EQ(schemaCheck(pod()), 0); }

TEST_F(PodTest, TheSchemaCheckCatchesAMisspeltField) {
  const ObjectPtr p = pod();
  ObjectPtr context =
      p->getObject("spec")->getArray("containers")->getObject(0)->getObject("securityContext");
  context->remove("readOnlyRootFilesystem");
  context->set("readOnlyRootFileSystem", true);
  EXPECT_NE(schemaCheck(p), 0);
}

TEST_F(PodTest, TheStoredPodReadsBackAsWhatWasSentWhereAFieldCarriesIt) {
  const ObjectPtr p = stored(pod());
  const backend::Posture got = postureFromPod(p, settings_, /*network_isolated=*/true);
  EXPECT_EQ(got.image, required_.image);
  EXPECT_EQ(got.runtime, required_.runtime);
  EXPECT_EQ(got.user, required_.user);
  EXPECT_TRUE(got.network_disabled);
  EXPECT_TRUE(got.read_only_root);
  EXPECT_FALSE(got.privileged);
  EXPECT_TRUE(got.all_capabilities_dropped);
  EXPECT_TRUE(got.added_capabilities.empty());
  EXPECT_TRUE(got.no_new_privileges);
  EXPECT_TRUE(got.seccomp_enabled);
  EXPECT_EQ(got.seccomp_profile, required_.seccomp_profile);
  EXPECT_FALSE(got.engine_init);
  // The launcher's argv, then the resource limits it lowers itself to (none is a Pod field).
  std::vector<std::string> command = spec().command;
  command.insert(command.end(), {"--rlimits", "nofile=1024,nproc=256,fsize=268435456,core=0"});
  command.insert(command.end(),
                 {"--masked",
                  "/proc/acpi,/proc/asound,/proc/interrupts,/proc/kcore,/proc/keys,"
                  "/proc/latency_stats,/proc/sched_debug,/proc/scsi,/proc/timer_list,"
                  "/proc/timer_stats,/sys/devices/virtual/powercap,/sys/firmware",
                  "--readonly", "/proc/bus,/proc/fs,/proc/irq,/proc/sys,/proc/sysrq-trigger",
                  "--no-network", "--confine"});
  EXPECT_EQ(got.init_command, command);
  EXPECT_EQ(got.masked_paths, required_.masked_paths);
  EXPECT_EQ(got.readonly_paths, required_.readonly_paths);
  EXPECT_EQ(got.processes_limit, required_.processes_limit);
  EXPECT_EQ(got.open_files_limit, required_.open_files_limit);
  EXPECT_EQ(got.file_size_limit_bytes, required_.file_size_limit_bytes);
  EXPECT_TRUE(got.core_dumps_disabled);
  EXPECT_TRUE(got.host_namespaces.empty());
  EXPECT_TRUE(got.host_mounts.empty());
  EXPECT_TRUE(got.devices.empty());
  EXPECT_EQ(got.memory_bytes, required_.memory_bytes);
  EXPECT_EQ(got.memory_swap_bytes, got.memory_bytes);  // Guaranteed: no swap
  EXPECT_EQ(got.nano_cpus, 1'000'000'000);             // "1"
  EXPECT_EQ(got.shm_bytes, required_.shm_bytes);
  ASSERT_EQ(got.tmpfs.size(), required_.tmpfs.size());
  for (std::size_t i = 0; i < got.tmpfs.size(); ++i) {
    EXPECT_EQ(got.tmpfs[i].path, required_.tmpfs[i].path);
    EXPECT_EQ(got.tmpfs[i].size_bytes, required_.tmpfs[i].size_bytes);
  }
  EXPECT_THAT(podDeviations(p, settings_, spec(), nullptr), ::testing::IsEmpty());
}

TEST(LauncherLimitsTest, TheLastRlimitsFlagReadsBackAndAMalformedOneReadsAsNone) {
  backend::Posture read;
  readLauncherLimits(
      {"python3", "--rlimits", "nproc=1", "--rlimits", "nproc=7,nofile=8,fsize=9,core=0"}, &read);
  EXPECT_EQ(read.processes_limit, 7);
  EXPECT_EQ(read.open_files_limit, 8);
  EXPECT_EQ(read.file_size_limit_bytes, 9);
  EXPECT_TRUE(read.core_dumps_disabled);
  backend::Posture core_on;
  readLauncherLimits({"python3", "--rlimits", "core=1"}, &core_on);
  EXPECT_FALSE(core_on.core_dumps_disabled);
  for (const std::vector<std::string>& weak :
       std::vector<std::vector<std::string>>{{"python3"},
                                             {"python3", "--rlimits"},
                                             {"python3", "--rlimits", "nproc=-1"},
                                             {"python3", "--rlimits", "nproc=7,stack=1"},
                                             {"python3", "--rlimits", "nproc=7,"},
                                             {"python3", "--rlimits", "nproc=7,nproc=1"},
                                             {"python3", "--rlimits", "nproc=7=1"}}) {
    backend::Posture none;
    readLauncherLimits(weak, &none);
    EXPECT_EQ(none.processes_limit, 0) << weak.back();
    EXPECT_FALSE(none.core_dumps_disabled) << weak.back();
  }
}

TEST(LauncherPathsTest, TheLastFlagsPathsReadBackAndMalformedOnesReadAsNone) {
  EXPECT_EQ(launcherPaths({"python3", "--masked", "/a", "--masked", "/b,/c"}, "--masked"),
            (std::vector<std::string>{"/b", "/c"}));
  EXPECT_TRUE(launcherPaths({"python3", "--masked", "/b"}, "--readonly").empty());
  for (const char* weak : {"", "b", "/b,", "/b,c", ","}) {
    EXPECT_TRUE(launcherPaths({"python3", "--masked", weak}, "--masked").empty()) << weak;
  }
}

TEST_F(PodTest, WithoutTheDenyAllPolicyThePodHasANetwork) {
  EXPECT_FALSE(postureFromPod(stored(pod()), settings_, false).network_disabled);
}

// A Pod has eth0 whatever its policies: without the launcher's own refusal of IP sockets on its
// command line, a Pod the policies isolate still reads as on the network.
TEST_F(PodTest, WithoutTheLaunchersNoNetworkThePodHasANetwork) {
  const ObjectPtr p = stored(pod());
  ASSERT_TRUE(postureFromPod(p, settings_, true).network_disabled);
  const auto command =
      p->getObject("spec")->getArray("containers")->getObject(0)->getArray("command");
  Poco::JSON::Array::Ptr without = json::emptyArray();
  for (std::size_t i = 0; i < command->size(); ++i) {
    if (command->getElement<std::string>(static_cast<unsigned>(i)) != "--no-network") {
      without->add(command->get(static_cast<unsigned>(i)));
    }
  }
  p->getObject("spec")->getArray("containers")->getObject(0)->set("command", without);
  EXPECT_FALSE(postureFromPod(p, settings_, true).network_disabled);
}

// The launcher's refusals come before any attach can read them: the kubelet keeps them.
TEST_F(PodTest, AFailedContainersOutputTailIsKeptAsItsMessage) {
  EXPECT_EQ(at(pod(), "spec.containers[0].terminationMessagePolicy"), "FallbackToLogsOnError");
}

// What the RuntimeClass admission plugin merges into a Pod of a RuntimeClass with scheduling
// (its nodeSelector and tolerations), and the toleration PodTolerationRestriction adds, are the
// operator's own choices: accepted. The same fields without that RuntimeClass, or beyond it, are
// a webhook steering the Pod, and refused.
TEST_F(PodTest, TheRuntimeClassesSchedulingIsAcceptedAndNothingBeyondIt) {
  const ObjectPtr runtime_class = json::parseObject(R"({"metadata":{"name":"runc"},
    "handler":"runc","scheduling":{"nodeSelector":{"scs.example/landlock":"true"},
    "tolerations":[{"key":"scs.example/sandboxes","operator":"Exists","effect":"NoSchedule"}]},
    "overhead":{"podFixed":{"cpu":"100m","memory":"64Mi"}}})");
  const auto admitted = [&](const std::string& selector, const std::string& tolerations) {
    ObjectPtr p = stored(pod());
    p->getObject("spec")->set("nodeSelector", json::parseObject(selector));
    p->getObject("spec")->set("tolerations",
                              json::parseObject(R"({"t":)" + tolerations + "}")->getArray("t"));
    p->getObject("spec")->set("overhead", json::parseObject(R"({"cpu":"100m","memory":"64Mi"})"));
    return p;
  };
  const std::string own_tolerations =
      R"([{"key":"scs.example/sandboxes","operator":"Exists","effect":"NoSchedule"},
          {"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute",
           "tolerationSeconds":300},
          {"key":"node.kubernetes.io/memory-pressure","operator":"Exists","effect":"NoSchedule"}])";
  const ObjectPtr merged = admitted(R"({"scs.example/landlock":"true"})", own_tolerations);
  EXPECT_THAT(podDeviations(merged, settings_, spec(), runtime_class), ::testing::IsEmpty());

  const auto joined = [&](const ObjectPtr& p, const ObjectPtr& rc) {
    std::string all;
    for (const std::string& deviation : podDeviations(p, settings_, spec(), rc)) {
      all += deviation + "\n";
    }
    return all;
  };
  EXPECT_THAT(
      joined(merged, nullptr),
      HasSubstr("selects nodes by scs.example/landlock=true, which its RuntimeClass does not"));
  EXPECT_THAT(joined(merged, nullptr), HasSubstr("tolerates the taint 'scs.example/sandboxes'"));
  EXPECT_THAT(
      joined(admitted(R"({"scs.example/landlock":"false"})", own_tolerations), runtime_class),
      HasSubstr("scs.example/landlock=false"));
  EXPECT_THAT(joined(admitted(R"({"scs.example/landlock":"true","kubernetes.io/hostname":"cp-1"})",
                              own_tolerations),
                     runtime_class),
              HasSubstr("kubernetes.io/hostname=cp-1"));
  EXPECT_THAT(joined(admitted(R"({"scs.example/landlock":"true"})",
                              R"([{"key":"scs.example/sandboxes","operator":"Exists",
                                   "effect":"NoExecute"}])"),
                     runtime_class),
              HasSubstr("tolerates the taint 'scs.example/sandboxes'"));  // another effect
  // A webhook after the RuntimeClass's admission drops what it pinned: the Pod could land on a
  // node without Landlock, or one whose network plugin enforces nothing.
  EXPECT_THAT(joined(admitted("{}", own_tolerations), runtime_class),
              HasSubstr("does not select nodes by scs.example/landlock=true"));
  EXPECT_THAT(joined(admitted(R"({"scs.example/landlock":"true"})", "[]"), runtime_class),
              HasSubstr("lacks its RuntimeClass's toleration of 'scs.example/sandboxes'"));
}

// The stored Pod passes the core's own check: what no Pod field carries reads as weak (the
// emptyDirs' flags, inode caps, owner and mode; the pids limit), and the launcher's `--confine`
// is the one evidence the core takes in its place. Without it the core names each of them.
TEST_F(PodTest, TheCoreAcceptsThePodOnlyWithTheLaunchersConfinement) {
  const backend::Posture got = postureFromPod(stored(pod()), settings_, true);
  EXPECT_THAT(policy::assertPosture(got, required_), ::testing::IsEmpty());
  for (const backend::TmpfsMount& mount : got.tmpfs) {
    EXPECT_FALSE(mount.noexec || mount.nosuid || mount.nodev) << mount.path;
    EXPECT_EQ(mount.max_inodes, 0u) << mount.path;
  }
  EXPECT_EQ(got.pids_limit, 0);

  backend::Posture unconfined = got;
  unconfined.init_command.pop_back();
  ASSERT_NE(got.init_command.back(), unconfined.init_command.back());
  std::string violations;
  for (const std::string& violation : policy::assertPosture(unconfined, required_)) {
    violations += violation + "\n";
  }
  EXPECT_THAT(violations, HasSubstr("tmpfs /workspace must be mounted noexec, nosuid and nodev"));
  EXPECT_THAT(violations, HasSubstr("tmpfs /tmp must cap its size and inodes"));
  EXPECT_THAT(violations, HasSubstr("tmpfs /workspace owner"));
  EXPECT_THAT(violations, HasSubstr("pids_limit must be positive"));
  EXPECT_THAT(violations, Not(HasSubstr("processes_limit")));  // the launcher's, read back
  EXPECT_THAT(violations, Not(HasSubstr("masked_paths")));
}

// A mutating webhook (or anyone) that weakens a field of the stored Pod: each change shows in
// the read-back posture or in the deviations, so the run fails before any code runs.
TEST_F(PodTest, EveryWeakenedFieldOfTheStoredPodIsSeen) {
  const ObjectPtr base = stored(pod());
  const backend::Posture good = postureFromPod(base, settings_, true);
  const auto container = [](const ObjectPtr& p) {
    return p->getObject("spec")->getArray("containers")->getObject(0);
  };
  const auto context = [&](const ObjectPtr& p) {
    return container(p)->getObject("securityContext");
  };
  // Gives the launcher flag `flag` of the stored command another value.
  const auto setFlagValue = [&](const ObjectPtr& p, const std::string& flag,
                                const std::string& value) {
    std::vector<std::string> command = json::strings(container(p)->getArray("command"));
    const auto found = std::find(command.begin(), command.end(), flag);
    ASSERT_NE(found, command.end()) << flag;
    *(found + 1) = value;
    container(p)->set("command", json::arrayOf(command));
  };
  const std::vector<std::pair<std::string, std::function<void(const ObjectPtr&)>>> mutations = {
      {"privileged", [&](const ObjectPtr& p) { context(p)->set("privileged", true); }},
      {"privileged absent", [&](const ObjectPtr& p) { context(p)->remove("privileged"); }},
      {"escalation",
       [&](const ObjectPtr& p) { context(p)->set("allowPrivilegeEscalation", true); }},
      {"writable root", [&](const ObjectPtr& p) { context(p)->remove("readOnlyRootFilesystem"); }},
      {"capability added",
       [&](const ObjectPtr& p) {
         context(p)->getObject("capabilities")->set("add", json::arrayOf({"NET_RAW"}));
       }},
      {"nothing dropped",
       [&](const ObjectPtr& p) { context(p)->getObject("capabilities")->remove("drop"); }},
      {"root user", [&](const ObjectPtr& p) { context(p)->set("runAsUser", 0); }},
      {"seccomp off",
       [&](const ObjectPtr& p) {
         context(p)->getObject("seccompProfile")->set("type", "Unconfined");
       }},
      {"host pid", [&](const ObjectPtr& p) { p->getObject("spec")->set("hostPID", true); }},
      {"host network", [&](const ObjectPtr& p) { p->getObject("spec")->set("hostNetwork", true); }},
      {"shared pid namespace",
       [&](const ObjectPtr& p) { p->getObject("spec")->set("shareProcessNamespace", true); }},
      {"runtime class",
       [&](const ObjectPtr& p) { p->getObject("spec")->remove("runtimeClassName"); }},
      {"image", [&](const ObjectPtr& p) { container(p)->set("image", "evil:latest"); }},
      {"memory",
       [&](const ObjectPtr& p) {
         container(p)->getObject("resources")->getObject("limits")->set("memory", "2Gi");
       }},
      {"token volume",
       [&](const ObjectPtr& p) {
         ObjectPtr projected = json::newObject();
         projected->set("name", "kube-api-access-x");
         projected->set("projected", json::newObject());
         p->getObject("spec")->getArray("volumes")->add(projected);
       }},
      {"disk scratch",
       [&](const ObjectPtr& p) {
         p->getObject("spec")
             ->getArray("volumes")
             ->getObject(0)
             ->getObject("emptyDir")
             ->remove("medium");
       }},
      {"gpu",
       [&](const ObjectPtr& p) {
         container(p)->getObject("resources")->getObject("limits")->set("nvidia.com/gpu", "1");
       }},
      {"token",
       [&](const ObjectPtr& p) {
         p->getObject("spec")->set("automountServiceAccountToken", true);
       }},
      {"service links",
       [&](const ObjectPtr& p) { p->getObject("spec")->remove("enableServiceLinks"); }},
      {"cluster dns",
       [&](const ObjectPtr& p) { p->getObject("spec")->set("dnsPolicy", "ClusterFirst"); }},
      {"restarts",
       [&](const ObjectPtr& p) { p->getObject("spec")->set("restartPolicy", "Always"); }},
      {"no deadline",
       [&](const ObjectPtr& p) { p->getObject("spec")->remove("activeDeadlineSeconds"); }},
      {"sidecar",
       [&](const ObjectPtr& p) {
         ObjectPtr sidecar = json::newObject();
         sidecar->set("name", "proxy");
         sidecar->set("image", "proxy:1");
         p->getObject("spec")->getArray("containers")->add(sidecar);
       }},
      {"init container",
       [&](const ObjectPtr& p) {
         Poco::JSON::Array::Ptr inits = json::emptyArray();
         inits->add(json::newObject());
         p->getObject("spec")->set("initContainers", inits);
       }},
      {"burstable",
       [&](const ObjectPtr& p) {
         container(p)->getObject("resources")->getObject("requests")->set("cpu", "100m");
       }},
      {"namespace", [&](const ObjectPtr& p) { p->getObject("metadata")->set("namespace", "x"); }},
      {"args appended",
       [&](const ObjectPtr& p) {
         container(p)->set("args", json::arrayOf({"--deadline", "99999"}));
       }},
      {"command changed",
       [&](const ObjectPtr& p) { container(p)->set("command", json::arrayOf({"/bin/sh"})); }},
      {"a masked path dropped",
       [&](const ObjectPtr& p) { setFlagValue(p, "--masked", "/proc/acpi"); }},
      {"confinement dropped",
       [&](const ObjectPtr& p) {
         std::vector<std::string> command = json::strings(container(p)->getArray("command"));
         ASSERT_EQ(command.back(), "--confine");
         command.pop_back();
         container(p)->set("command", json::arrayOf(command));
       }},
      {"rlimits raised",
       [&](const ObjectPtr& p) {
         setFlagValue(p, "--rlimits", "nofile=1024,nproc=99999,fsize=268435456,core=0");
       }},
      {"env added",
       [&](const ObjectPtr& p) {
         ObjectPtr secret = json::newObject();
         secret->set("name", "API_KEY");
         secret->set("value", "s3cret");
         container(p)->getArray("env")->add(secret);
       }},
      {"env from a secret",
       [&](const ObjectPtr& p) {
         Poco::JSON::Array::Ptr from = json::emptyArray();
         from->add(json::newObject());
         container(p)->set("envFrom", from);
       }},
      {"runtime annotation",
       [&](const ObjectPtr& p) {
         ObjectPtr annotations = json::newObject();
         annotations->set("dev.gvisor.flag.network", "host");
         p->getObject("metadata")->set("annotations", annotations);
       }},
      {"unmasked proc", [&](const ObjectPtr& p) { context(p)->set("procMount", "Unmasked"); }},
      {"selinux",
       [&](const ObjectPtr& p) { context(p)->set("seLinuxOptions", json::newObject()); }},
      {"supplemental groups",
       [&](const ObjectPtr& p) {
         Poco::JSON::Array::Ptr groups = json::emptyArray();
         groups->add(0);
         p->getObject("spec")->getObject("securityContext")->set("supplementalGroups", groups);
       }},
      {"lifecycle hook",
       [&](const ObjectPtr& p) { container(p)->set("lifecycle", json::newObject()); }},
      {"exec probe",
       [&](const ObjectPtr& p) { container(p)->set("livenessProbe", json::newObject()); }},
      {"stdin kept open", [&](const ObjectPtr& p) { container(p)->set("stdinOnce", false); }},
      {"node selector",
       [&](const ObjectPtr& p) {
         ObjectPtr selector = json::newObject();
         selector->set("type", "virtual-kubelet");
         p->getObject("spec")->set("nodeSelector", selector);
       }},
      {"affinity",
       [&](const ObjectPtr& p) { p->getObject("spec")->set("affinity", json::newObject()); }},
      {"scheduler",
       [&](const ObjectPtr& p) { p->getObject("spec")->set("schedulerName", "mine"); }},
      {"toleration",
       [&](const ObjectPtr& p) {
         ObjectPtr toleration = json::newObject();
         toleration->set("key", "node-role.kubernetes.io/control-plane");
         toleration->set("effect", "NoSchedule");
         Poco::JSON::Array::Ptr tolerations = json::emptyArray();
         tolerations->add(toleration);
         p->getObject("spec")->set("tolerations", tolerations);
       }},
  };
  for (const auto& [name, mutate] : mutations) {
    const ObjectPtr mutated = copyOf(base);
    mutate(mutated);
    const bool seen = postureFromPod(mutated, settings_, true) != good ||
                      !podDeviations(mutated, settings_, spec(), nullptr).empty();
    EXPECT_TRUE(seen) << name;
  }
}

TEST_F(PodTest, ASpecAPodCannotCarryExactlyIsRefused) {
  const auto refused = [&](const std::function<void(backend::SandboxSpec&)>& change,
                           const std::string& why) {
    backend::SandboxSpec s = spec();
    change(s);
    const PodManifest manifest = podFor(s, settings_, 700);
    EXPECT_EQ(manifest.status.code, backend::Code::kUnsupported) << why;
    EXPECT_THAT(manifest.status.message, HasSubstr(why));
  };
  refused([](backend::SandboxSpec& s) { s.posture.user = "0:0"; }, "root");
  refused([](backend::SandboxSpec& s) { s.posture.user = "nobody"; }, "numeric");
  refused([](backend::SandboxSpec& s) { s.posture.seccomp_profile = "{}"; }, "seccomp-localhost");
  refused([](backend::SandboxSpec& s) { s.posture.nano_cpus = 1'500'000'001; }, "millicores");
  refused([](backend::SandboxSpec& s) { s.labels["io.scs.x"] = "not valid!"; }, "label");
  refused([](backend::SandboxSpec& s) { s.posture.added_capabilities = {"NET_RAW"}; }, "weaker");
  refused([](backend::SandboxSpec& s) { s.posture.host_mounts = {"/"}; }, "host");
  settings_.seccomp_localhost = "profiles/scs.json";
  settings_.seccomp_localhost_text = "{\"defaultAction\":\"SCMP_ACT_ERRNO\"}";
  refused([](backend::SandboxSpec& s) { s.posture.seccomp_profile = "{}"; }, "not the one");
}

TEST_F(PodTest, ALocalhostProfileReadsBackAsTheTextTheOperatorInstalled) {
  settings_.seccomp_localhost = "profiles/scs.json";
  settings_.seccomp_localhost_text = "{\"defaultAction\":\"SCMP_ACT_ERRNO\"}";
  backend::SandboxSpec s = spec();
  s.posture.seccomp_profile = settings_.seccomp_localhost_text;
  const PodManifest manifest = podFor(s, settings_, 700);
  ASSERT_TRUE(manifest.status.ok()) << manifest.status.message;
  EXPECT_EQ(at(manifest.pod, "spec.containers[0].securityContext.seccompProfile.localhostProfile"),
            "profiles/scs.json");
  const backend::Posture got = postureFromPod(stored(manifest.pod), settings_, true);
  EXPECT_TRUE(got.seccomp_enabled);
  EXPECT_EQ(got.seccomp_profile, settings_.seccomp_localhost_text);
  PodSettings other = settings_;
  other.seccomp_localhost = "profiles/other.json";
  EXPECT_FALSE(postureFromPod(stored(manifest.pod), other, true).seccomp_enabled);
}

TEST(QuantityTest, ReadsTheForms) {
  const std::vector<std::tuple<std::string, std::int64_t, std::optional<std::int64_t>>> cases = {
      {"2", 1000, 2000},
      {"500m", 1000, 500},
      {"1.5", 1000, 1500},
      {"0.1", 1000, 100},
      {"1Gi", 1, 1 << 30},
      {"64Mi", 1, 64 << 20},
      {"1G", 1, 1'000'000'000},
      {"5368709120", 1, 5368709120},
      {"1e3", 1, 1000},
      {"1k", 1, 1000},
      {"1Ki", 1, 1024},
      {"1m", 1, 1},  // 0.001 rounds up
      {"2", 1'000'000'000, 2'000'000'000},
      {"", 1, std::nullopt},
      {"Gi", 1, std::nullopt},
      {"1Gb", 1, std::nullopt},
      {"-1", 1, std::nullopt},
      {"1e99", 1, std::nullopt},
      {"99999999999Ei", 1, std::nullopt},
  };
  for (const auto& [text, unit, expected] : cases) {
    EXPECT_EQ(parseQuantity(text, unit), expected) << text;
  }
}

}  // namespace
}  // namespace scs::kubernetes
