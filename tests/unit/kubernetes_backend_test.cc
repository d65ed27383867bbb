#include "kubernetes_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

#include "kubernetes_specs.h"
#include "mocks/recording_sink.h"
#include "mocks/test_logs.h"
#include "policy/files.h"
#include "sandbox/leftover_sweep.h"
#include "support/eventually.h"
#include "support/kube_api_double.h"
#include "support/manual_clock.h"
#include "support/temp_file.h"

namespace scs::kubernetes {
namespace {

using scs::testing::Certificates;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kDenyAll =
    R"({"podSelector":{"matchLabels":{"io.scs.managed":"true"}},"policyTypes":["Ingress","Egress"]})";
constexpr auto kPatience = std::chrono::milliseconds(20000);

// The backend's clock, as the test moves it (manual_clock.h).
class TestClock : public Clock {
 public:
  explicit TestClock(const scs::testing::ManualClock& clock) : clock_(clock) {}
  TimePoint now() const override { return clock_.now(); }
  void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline) const override {
    clock_.waitUntil(cv, lock, deadline);
  }

 private:
  const scs::testing::ManualClock& clock_;
};

// The kubernetes backend as the core drives it, against the API server double, whose Pods play
// the fake engine's scripts: a sandbox's whole life, from the Pod's creation to its deletion.
class KubernetesBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Certificates::get().ok());
    api_.addNode("node-1", "4", "16Gi");
  }

  std::unique_ptr<KubernetesBackend> connect(std::string* error) {
    return KubernetesBackend::connect(options_, &log_, error);
  }

  static Options testOptions(const std::string& kubeconfig) {
    Options options;
    options.kube_config = kubeconfig;
    options.api_timeout = std::chrono::milliseconds(3000);
    options.broken_attach_patience = std::chrono::milliseconds(300);
    return options;
  }

  // What a test shows about time it shows by moving clock_: the backend's deadlines, pauses and
  // heartbeat, and the double's watches (timeoutSeconds) and idle cut, all keep it. Its
  // evidence is what the double saw (requests(), pingsSeen()) and ManualClock::awaitWaiters(),
  // the backend's pauses (nothing else of the backend waits on its clock).
  void onTheTestsClock() {
    options_.clock = &test_clock_;
    api_.setClock([this] { return clock_.now(); });
  }

  // How many times the double was asked for the list of the one Pod `id`.
  std::ptrdiff_t listsOf(const std::string& id) const {
    const auto seen = api_.requests();
    return std::count(
        seen.begin(), seen.end(),
        "GET /api/v1/namespaces/scs-sandboxes/pods?fieldSelector=metadata.name%3D" + id);
  }

  // How many watches of the Pod `id` the double was asked for since its attach: the worker's
  // wait for the Pod's end once the output has ended.
  std::ptrdiff_t watchesSinceAttach(const std::string& id) const {
    const auto seen = api_.requests();
    const auto attach = std::find_if(seen.begin(), seen.end(), [&](const std::string& request) {
      return request.rfind("ATTACH ", 0) == 0 &&
             request.find("/pods/" + id + "/attach") != std::string::npos;
    });
    return std::count_if(attach, seen.end(), [&](const std::string& request) {
      return request.find("/pods?fieldSelector=metadata.name%3D" + id + "&watch=1") !=
             std::string::npos;
    });
  }

  std::ptrdiff_t posts() const {
    const auto seen = api_.requests();
    return std::count_if(seen.begin(), seen.end(),
                         [](const std::string& request) { return request.rfind("POST ", 0) == 0; });
  }

  std::unique_ptr<KubernetesBackend> connected() {
    api_.addNetworkPolicy("scs-sandboxes", kDenyAll);
    std::string error;
    auto backend = connect(&error);
    EXPECT_TRUE(backend) << error;
    return backend;
  }

  // The spec the core makes for a run, with its deadline label 600 s from now.
  backend::SandboxSpec spec(const std::string& run_id, bool session = false) const {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::system_clock::now().time_since_epoch());
    return session ? core_.session(run_id, now.count() + 600)
                   : core_.run(run_id, now.count() + 600);
  }

  static std::string archive(const std::string& main_py) {
    return policy::buildArchive({policy::File{"main.py", main_py}}, 1000, 1000);
  }

  std::string createdAndInspected(KubernetesBackend& backend, const std::string& run_id) {
    const backend::CreateReply created = backend.create(spec(run_id));
    EXPECT_TRUE(created.status.ok()) << created.status.message;
    const backend::InspectReply inspected = backend.inspect(created.id);
    EXPECT_TRUE(inspected.status.ok()) << inspected.status.message;
    return created.id;
  }

  static backend::Exit awaitExit(KubernetesBackend& backend, const std::string& id) {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (std::chrono::steady_clock::now() < deadline) {
      const backend::WaitReply reply = backend.wait(id, std::chrono::milliseconds(500));
      EXPECT_TRUE(reply.status.ok()) << reply.status.message;
      if (reply.exit.exited) {
        return reply.exit;
      }
    }
    ADD_FAILURE() << "the sandbox " << id << " never ended";
    return {};
  }

  scs::testing::ManualClock clock_;  // before api_, which reads it until it is gone
  TestClock test_clock_{clock_};
  scs::testing::KubeApiDouble api_;
  scs::testing::TempFile kubeconfig_{api_.kubeconfig("scs-sandboxes")};
  Options options_ = testOptions(kubeconfig_.path());
  std::string error_;
  mocks::RecordingLog log_;
  mocks::RecordingSink sink_;
  CoreSpecs core_;
};

TEST_F(KubernetesBackendTest, ANamespaceWithoutTheDenyAllPolicyIsRefusedAtConnect) {
  std::string error;
  EXPECT_FALSE(connect(&error));
  EXPECT_THAT(error, HasSubstr("namespace scs-sandboxes cannot hold sandboxes"));
  EXPECT_THAT(error, HasSubstr("Ingress"));
}

// The posture a default run needs: a Pod and its launcher carry all of it (SECURITY.md, 2b).
TEST_F(KubernetesBackendTest, ThePostureADefaultRunNeedsIsSupported) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const backend::Status supported = backend->supports(core_.required());
  EXPECT_TRUE(supported.ok()) << supported.message;

  // A profile's text the nodes are not said to hold (no seccomp-localhost): the server would
  // fail every run, so it does not start.
  backend::Posture with_profile = core_.required();
  with_profile.seccomp_profile = R"({"defaultAction":"SCMP_ACT_ERRNO"})";
  const backend::Status refused = backend->supports(with_profile);
  EXPECT_EQ(refused.code, backend::Code::kUnsupported);
  EXPECT_THAT(refused.message, HasSubstr("name the node path that holds the core's profile"));

  // gVisor has no Landlock: every sandbox's launcher would end it (--confine).
  backend::Posture under_gvisor = core_.required();
  under_gvisor.runtime = "runsc";
  EXPECT_THAT(backend->supports(under_gvisor).message,
              HasSubstr("--confine needs Landlock, which gVisor (runsc) does not have"));
  EXPECT_EQ(api_.podCount(), 0u);
}

TEST_F(KubernetesBackendTest, OptionsTheBackendDoesNotKnowOrCannotUseAreRefused) {
  Options options;
  EXPECT_THAT(parseOptions({{"kube-confg", "/x"}}, &options).value_or(""),
              HasSubstr("unknown backend option 'kube-confg'"));
  EXPECT_THAT(parseOptions({{"api-timeout-ms", "0"}}, &options).value_or(""),
              HasSubstr("api-timeout-ms must be a whole number"));
  EXPECT_THAT(parseOptions({{"seccomp-localhost", "profiles/scs.json"}}, &options).value_or(""),
              HasSubstr("go together"));
  options = {};
  EXPECT_EQ(parseOptions({{"kube-config", "/k"}, {"namespace", "n"}, {"start-timeout-ms", "5"}},
                         &options),
            std::nullopt);
  EXPECT_EQ(options.kube_config, "/k");
  EXPECT_EQ(options.namespace_name, "n");
  EXPECT_EQ(options.start_timeout, std::chrono::milliseconds(5));
}

TEST_F(KubernetesBackendTest, CodeDeliveredBeforeStartRunsAndTheExitComesFromThePodsStatus) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0a1b2c3d");
  ASSERT_TRUE(backend
                  ->deliver(id, archive("#fake: stdout=hello\n#fake: stderr=warn\n"
                                        "#fake: exit=3\n"))
                  .ok());
  const backend::Status started = backend->start(id, &sink_);
  ASSERT_TRUE(started.ok()) << started.message;
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_FALSE(exit.killed_outside);
  EXPECT_FALSE(exit.oom_killed);
  EXPECT_EQ(exit.engine_error, "");
  EXPECT_EQ(sink_.out(), "hello");
  EXPECT_EQ(sink_.err(), "warn");
  EXPECT_TRUE(scs::testing::eventually([&] { return sink_.ends() == 1; }));
  EXPECT_EQ(backend->deliver(id, archive("")).code, backend::Code::kRejected);
  EXPECT_TRUE(backend->remove(id).ok());
  EXPECT_EQ(api_.podCount(), 0u);
  EXPECT_EQ(backend->wait(id, {}).status.code, backend::Code::kNotFound);
}

// Each busy answer (503) is waited out for kBusyPause before the Pod is read again.
TEST_F(KubernetesBackendTest, AStartWaitsOutABusyApiServer) {
  onTheTestsClock();
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0a1b2c44");
  ASSERT_TRUE(backend->deliver(id, archive("#fake: exit=0\n")).ok());
  api_.failNext(3, 503);
  backend::Status started;
  std::thread starting([&] { started = backend->start(id, &sink_); });
  for (int busy = 1; busy <= 3; ++busy) {
    EXPECT_TRUE(clock_.awaitWaiters(1)) << "no pause after busy answer " << busy;
    EXPECT_EQ(listsOf(id), busy);  // not read again before the pause has passed
    clock_.advance(kBusyPause);
  }
  starting.join();
  EXPECT_TRUE(started.ok()) << started.message;
  EXPECT_EQ(awaitExit(*backend, id).exit_code, 0);
  EXPECT_TRUE(backend->remove(id).ok());
}

TEST_F(KubernetesBackendTest, ARemoveWhileStartWaitsForThePodEndsTheStartAndNothingReachesTheSink) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  api_.holdPending(true);
  const std::string id = createdAndInspected(*backend, "0a1b2c45");
  backend::Status started;
  std::thread starting([&] { started = backend->start(id, &sink_); });
  EXPECT_TRUE(scs::testing::eventually([&] {  // it watches the Pod, waiting for it to run
    const auto seen = api_.requests();
    return std::any_of(seen.begin(), seen.end(), [&](const std::string& request) {
      return request.find("/pods?fieldSelector=metadata.name%3D" + id + "&watch=1") !=
             std::string::npos;
    });
  }));
  EXPECT_TRUE(backend->remove(id).ok());
  starting.join();
  EXPECT_EQ(started.code, backend::Code::kNotFound);
  EXPECT_EQ(sink_.writes(), 0);
  EXPECT_EQ(sink_.ends(), 0);
  EXPECT_EQ(api_.podCount(), 0u);
}

TEST_F(KubernetesBackendTest, APreparedSandboxIdlesAttachedUntilItsCodeArrives) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0a1b2c3e");
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  EXPECT_FALSE(backend->wait(id, {}).exit.exited);
  ASSERT_TRUE(backend->deliver(id, archive("#fake: stdout=late\n")).ok());
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(sink_.out(), "late");
  EXPECT_TRUE(backend->remove(id).ok());
}

TEST_F(KubernetesBackendTest, AnOomKillIsReadFromTheContainersReason) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0a1b2c3f");
  ASSERT_TRUE(backend->deliver(id, archive("#fake: oom\n")).ok());
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_TRUE(exit.oom_killed);
  EXPECT_EQ(exit.exit_code, 137);
  EXPECT_TRUE(backend->remove(id).ok());
}

// At once, as the double deletes by default, or gracefully, as a real API server does: the Pod
// stays with a deletionTimestamp until the kubelet has ended its container, and is gone after.
TEST_F(KubernetesBackendTest, AKillDeletesThePodAndTheEndIsThisBackendsOwn) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  for (const bool graceful : {false, true}) {
    scs::testing::KubeApiDouble::Modes modes;
    modes.graceful_deletion = graceful;
    api_.setModes(modes);
    mocks::RecordingSink sink;
    const std::string id = createdAndInspected(*backend, graceful ? "0a1b2c49" : "0a1b2c40");
    ASSERT_TRUE(backend->deliver(id, archive("#fake: stdout=before\n#fake: hang\n")).ok());
    ASSERT_TRUE(backend->start(id, &sink).ok());
    ASSERT_TRUE(scs::testing::eventually([&] { return sink.out() == "before"; }));
    EXPECT_TRUE(backend->kill(id).ok());
    const backend::Exit exit = awaitExit(*backend, id);
    EXPECT_FALSE(exit.killed_outside) << graceful;
    EXPECT_EQ(exit.engine_error, "") << graceful;
    EXPECT_TRUE(backend->remove(id).ok());
    EXPECT_EQ(backend->kill(id).code, backend::Code::kNotFound);
    EXPECT_TRUE(scs::testing::eventually([&] { return api_.podCount() == 0; })) << graceful;
  }
}

TEST_F(KubernetesBackendTest, AnAttachThatDropsIsAnEngineErrorAndThePodIsDeleted) {
  onTheTestsClock();
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0a1b2c41");
  api_.dropNextAttach();
  ASSERT_TRUE(backend->deliver(id, archive("#fake: hang\n")).ok());
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  // The container may run on unseen: its end is waited for broken_attach_patience (one watch of
  // the Pod), and no longer.
  EXPECT_TRUE(scs::testing::eventually([&] { return watchesSinceAttach(id) == 1; }));
  EXPECT_FALSE(backend->wait(id, {}).exit.exited);
  clock_.advance(std::chrono::seconds(1));  // past the patience, and the watch's timeoutSeconds
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_THAT(exit.engine_error, HasSubstr("the attach connection to " + id + " broke"));
  EXPECT_TRUE(scs::testing::eventually([&] { return api_.podCount() == 0; }));
  EXPECT_TRUE(backend->remove(id).ok());
}

// The container ended soon after its attach dropped: its exit is kept, with the reason the
// output may be cut, and the Pod is left for remove().
TEST_F(KubernetesBackendTest, AnAttachThatDropsKeepsAnExitThatFollowsIt) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0a1b2c48");
  api_.dropNextAttach();
  ASSERT_TRUE(backend->deliver(id, archive("#fake: sleep_ms=50\n#fake: exit=4\n")).ok());
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_EQ(exit.exit_code, 4);
  EXPECT_THAT(exit.engine_error, HasSubstr("broke before the end of its output"));
  EXPECT_EQ(api_.podCount(), 1u);
  EXPECT_TRUE(backend->remove(id).ok());
  EXPECT_EQ(api_.podCount(), 0u);
}

TEST_F(KubernetesBackendTest, ASessionTakesItsFramesOneByOneOverOneAttach) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const backend::CreateReply created = backend->create(spec("0a1b2c42", true));
  ASSERT_TRUE(created.status.ok()) << created.status.message;
  const std::string& id = created.id;
  ASSERT_TRUE(backend->inspect(id).status.ok());
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  for (const char* code : {"#fake: stdout=one\n", "#fake: stdout=two\n#fake: die\n"}) {
    const std::string bundle = archive(code);
    const backend::Status delivered =
        backend->deliver(id, "SCS-RUN " + std::to_string(bundle.size()) + "\n" + bundle);
    ASSERT_TRUE(delivered.ok()) << delivered.message;
  }
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_EQ(exit.exit_code, 137);
  EXPECT_THAT(sink_.out(), HasSubstr("one"));
  EXPECT_THAT(sink_.out(), HasSubstr("two"));
  EXPECT_TRUE(backend->remove(id).ok());
}

TEST_F(KubernetesBackendTest, LeftoversAreListedByLabelAndCapacityComesFromTheNodes) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0a1b2c43");
  const backend::ListReply listed = backend->list(backend::kManagedLabel);
  ASSERT_TRUE(listed.status.ok());
  ASSERT_EQ(listed.sandboxes.size(), 1u);
  EXPECT_EQ(listed.sandboxes[0].id, id);
  const backend::CapacityReply capacity = backend->capacity();
  ASSERT_TRUE(capacity.status.ok());
  EXPECT_EQ(capacity.capacity.cores, 4);  // the sandbox's own Pod is the core's to count
  EXPECT_TRUE(backend->remove(id).ok());
  EXPECT_TRUE(backend->list(backend::kManagedLabel).sandboxes.empty());
}

// The core's startup sweep over this backend, as a restarted server runs it: a backend that did
// not create the Pods lists them by label and deletes the expired one, and leaves the live one.
TEST_F(KubernetesBackendTest, TheStartupSweepOfARestartedServerDeletesOnlyExpiredPods) {
  auto before = connected();
  ASSERT_TRUE(before);
  const auto now = std::chrono::system_clock::now();
  const std::int64_t now_unix =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  ASSERT_TRUE(before->create(core_.run("0a1b2c46", now_unix - 5)).status.ok());
  const backend::CreateReply live = before->create(core_.run("0a1b2c47", now_unix + 600));
  ASSERT_TRUE(live.status.ok());
  before.reset();  // the server is gone; its Pods stay

  std::string error;
  auto after = connect(&error);
  ASSERT_TRUE(after) << error;
  const sandbox::SweepResult swept = sandbox::sweepLeftovers(*after, "a-new-instance", now);
  EXPECT_EQ(swept.removed, 1u);
  const backend::ListReply left = after->list(backend::kManagedLabel);
  ASSERT_EQ(left.sandboxes.size(), 1u);
  EXPECT_EQ(left.sandboxes[0].id, live.id);
}

// Against the double's faithful modes (issue 30): each is what a real API server, kubelet or
// container runtime does where the double is kinder by default, and each test failed on the
// backend before it met them.
class FaithfulClusterTest : public KubernetesBackendTest {
 protected:
  void SetUp() override {
    KubernetesBackendTest::SetUp();
    api_.setModes(scs::testing::KubeApiDouble::faithful());
  }

  // Runs `code` one-shot in a new sandbox; its exit, or the reason start() gave.
  struct Ran {
    backend::Status started;
    backend::Exit exit;
  };
  Ran run(KubernetesBackend& backend, const std::string& run_id, const std::string& code) {
    Ran ran;
    const std::string id = createdAndInspected(backend, run_id);
    EXPECT_TRUE(backend.deliver(id, archive(code)).ok());
    ran.started = backend.start(id, &sink_);
    if (ran.started.ok()) {
      ran.exit = awaitExit(backend, id);
    }
    EXPECT_TRUE(backend.remove(id).ok());
    return ran;
  }
};

// An operator pins the RuntimeClass to the nodes that have Landlock (docs/SCALING.md): its
// admission merges the nodeSelector and tolerations into every Pod, default admission adds its
// own tolerations, and the Pod still reads back as the core's.
TEST_F(FaithfulClusterTest, APodTheRuntimeClassesAdmissionSchedulesRuns) {
  api_.addRuntimeClass("runc",
                       R"({"nodeSelector":{"scs.example/landlock":"true"},
          "tolerations":[{"key":"scs.example/sandboxes","operator":"Exists","effect":"NoSchedule"}]})",
                       R"({"cpu":"100m","memory":"32Mi"})");
  auto backend = connected();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(backend->supports(core_.required()).ok());
  const Ran ran = run(*backend, "0b1b2c01", "#fake: stdout=pinned\n#fake: exit=0\n");
  ASSERT_TRUE(ran.started.ok()) << ran.started.message;
  EXPECT_EQ(ran.exit.exit_code, 0);
  EXPECT_EQ(sink_.out(), "pinned");
}

// Without the RuntimeClass every Pod would be refused at admission: the server does not start.
TEST_F(FaithfulClusterTest, ARuntimeClassTheClusterLacksStopsTheServer) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  backend::Posture elsewhere = core_.required();
  elsewhere.runtime = "kata";
  const backend::Status supported = backend->supports(elsewhere);
  EXPECT_EQ(supported.code, backend::Code::kUnsupported);
  EXPECT_THAT(supported.message, HasSubstr("RuntimeClass kata cannot be read"));
}

// Since 1.30 the API server upgrades first: a kubelet it cannot reach is a Failure Status on
// channel 3, which is the run's reason at once, not a 30 s wait for a status that never says.
TEST_F(FaithfulClusterTest, AnAttachFailureAfterTheUpgradeIsTheRunsReason) {
  onTheTestsClock();
  auto backend = connected();
  ASSERT_TRUE(backend);
  api_.failNextAttach(
      "error dialing backend: dial tcp 10.0.0.5:10250: connect: connection refused");
  const std::string id = createdAndInspected(*backend, "0b1b2c02");
  ASSERT_TRUE(backend->deliver(id, archive("#fake: hang\n")).ok());
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  // The Pod's status is waited for broken_attach_patience (one watch), not the 30 s of
  // exit_patience: past the one, and the watch's timeoutSeconds, the run has its reason.
  EXPECT_TRUE(scs::testing::eventually([&] { return watchesSinceAttach(id) == 1; }));
  clock_.advance(std::chrono::seconds(1));
  const backend::WaitReply reply = backend->wait(id, std::chrono::milliseconds(10000));
  ASSERT_TRUE(reply.exit.exited) << "still waiting for a status that never comes";
  EXPECT_THAT(reply.exit.engine_error, HasSubstr("the attach to " + id + " failed"));
  EXPECT_THAT(reply.exit.engine_error, HasSubstr("dial tcp 10.0.0.5:10250"));
  // The container it could not attach to may run on: it is ended, not left unseen.
  EXPECT_TRUE(scs::testing::eventually([&] { return api_.podCount() == 0; }));
  EXPECT_TRUE(backend->remove(id).ok());
}

// The launcher refuses before it reads stdin, and no attach replays that: the kubelet's message
// (FallbackToLogsOnError) carries its words to the run.
TEST_F(FaithfulClusterTest, ALauncherRefusalBeforeTheAttachIsTheRunsReason) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  api_.refuseNextLauncher("setup: --confine: Landlock is unavailable (ENOSYS)");
  const Ran ran = run(*backend, "0b1b2c03", "#fake: exit=0\n");
  const std::string reason = ran.started.ok() ? ran.exit.engine_error : ran.started.message;
  EXPECT_THAT(reason, HasSubstr("sandbox launcher: rejected setup: --confine: Landlock is "
                                "unavailable (ENOSYS)"));
}

// A program's own words, on its own exit with the launcher's code, are the program's output and
// never the launcher's refusal: the message of the kubelet is read only where no code ran.
TEST_F(FaithfulClusterTest, AProgramThatExitsAsTheLauncherRefusesIsNotTakenForIt) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const Ran ran = run(*backend, "0b1b2c0d",
                      "#fake: stderr=sandbox\\slauncher:\\srejected\\sforged\n#fake: exit=125\n");
  ASSERT_TRUE(ran.started.ok()) << ran.started.message;
  EXPECT_EQ(ran.exit.exit_code, 125);
  EXPECT_EQ(ran.exit.engine_error, "");
  EXPECT_THAT(sink_.err(), HasSubstr("sandbox launcher: rejected forged"));
}

// client-go's heartbeat: a ping every few seconds keeps an idle attach (a prepared sandbox, a
// session between runs) through an intermediary that cuts idle connections.
TEST_F(FaithfulClusterTest, AnIdleAttachOutlivesAnIntermediarysIdleTimeout) {
  scs::testing::KubeApiDouble::Modes modes = scs::testing::KubeApiDouble::faithful();
  modes.idle_cut_ms = 1000;
  api_.setModes(modes);
  options_.heartbeat.ping_interval = std::chrono::milliseconds(200);
  onTheTestsClock();
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string id = createdAndInspected(*backend, "0b1b2c04");
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  // Idle, prepared, for 2.6 s of the intermediary's clock, which cuts after 1 s without a
  // frame: a ping reaches it every ping_interval, each once that has passed.
  for (int pinged = 1; pinged <= 13; ++pinged) {
    clock_.advance(options_.heartbeat.ping_interval);
    ASSERT_TRUE(scs::testing::eventually([&] { return api_.pingsSeen() == pinged; })) << pinged;
  }
  ASSERT_FALSE(backend->wait(id, {}).exit.exited) << backend->wait(id, {}).exit.engine_error;
  ASSERT_TRUE(backend->deliver(id, archive("#fake: stdout=still_here\n")).ok());
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(exit.engine_error, "");
  EXPECT_EQ(sink_.out(), "still_here");
  EXPECT_TRUE(backend->remove(id).ok());
}

// A half-open connection says nothing, ever: the read deadline finds it, and the run ends with
// that reason instead of waiting until it is removed.
TEST_F(FaithfulClusterTest, AHalfOpenAttachIsFoundByTheReadDeadline) {
  options_.heartbeat.ping_interval = std::chrono::milliseconds(200);
  options_.heartbeat.read_deadline = std::chrono::milliseconds(1000);
  onTheTestsClock();
  auto backend = connected();
  ASSERT_TRUE(backend);
  api_.silenceNextAttach();
  const std::string id = createdAndInspected(*backend, "0b1b2c05");
  ASSERT_TRUE(backend->deliver(id, archive("#fake: hang\n")).ok());
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  // start() wrote the code and ended stdin before the clock moved, so the attach was silent
  // before the first ping; the one frame before its silence, the API server's first (empty)
  // message, is read. Then a ping every ping_interval, none answered, and up to the read
  // deadline the run goes on.
  EXPECT_TRUE(scs::testing::eventually([&] { return sink_.writes() == 1; }));
  for (int pinged = 1; pinged <= 5; ++pinged) {
    clock_.advance(options_.heartbeat.ping_interval);
    EXPECT_TRUE(scs::testing::eventually([&] { return api_.pingsSeen() == pinged; })) << pinged;
  }
  EXPECT_FALSE(backend->wait(id, {}).exit.exited) << "ended at its read deadline, not after it";
  // Past it, the attach is given up; the Pod's end is then waited for broken_attach_patience.
  clock_.advance(options_.heartbeat.ping_interval);
  EXPECT_TRUE(scs::testing::eventually([&] { return watchesSinceAttach(id) == 1; }));
  EXPECT_EQ(api_.pingsSeen(), 5);
  clock_.advance(std::chrono::seconds(1));  // past the patience, and the watch's timeoutSeconds
  const backend::WaitReply reply = backend->wait(id, std::chrono::milliseconds(10000));
  ASSERT_TRUE(reply.exit.exited) << "the half-open attach was read forever";
  EXPECT_THAT(reply.exit.engine_error, HasSubstr("fell silent"));
  EXPECT_TRUE(backend->remove(id).ok());
}

// The API server's close is answered (RFC 6455), so neither side waits out a timeout.
TEST_F(FaithfulClusterTest, TheServersCloseIsAnswered) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const Ran ran = run(*backend, "0b1b2c06", "#fake: stdout=x\n");
  ASSERT_TRUE(ran.started.ok()) << ran.started.message;
  EXPECT_TRUE(scs::testing::eventually([&] { return api_.closeReplies() == 1; }));
}

// memory.oom.group: a child's OOM kill ends every process of the sandbox, its launcher too.
// The run is out of memory (the engine's record), and the session is over: its next run is
// refused with that reason, not delivered to nothing.
TEST_F(FaithfulClusterTest, AChildsOomKillEndsTheWholeSessionUnderTheKubeletsOomGroup) {
  auto backend = connected();
  ASSERT_TRUE(backend);
  const backend::CreateReply created = backend->create(spec("0b1b2c07", true));
  ASSERT_TRUE(created.status.ok()) << created.status.message;
  const std::string& id = created.id;
  ASSERT_TRUE(backend->inspect(id).status.ok());
  ASSERT_TRUE(backend->start(id, &sink_).ok());
  const std::string bundle = archive("#fake: stdout=one\n#fake: child_oom\n");
  ASSERT_TRUE(
      backend->deliver(id, "SCS-RUN " + std::to_string(bundle.size()) + "\n" + bundle).ok());
  const backend::Exit exit = awaitExit(*backend, id);
  EXPECT_TRUE(exit.oom_killed);
  EXPECT_EQ(exit.exit_code, 137);
  EXPECT_FALSE(exit.killed_outside);
  EXPECT_EQ(backend->deliver(id, "SCS-INTERRUPT\n").code, backend::Code::kUnavailable);
  EXPECT_TRUE(backend->remove(id).ok());
}

// The quota admission plugin answers 403 "exceeded quota" while other sandboxes hold the
// namespace's quota: the create waits for room, as the core's own queue would, and is refused
// only once the start timeout has passed.
TEST_F(FaithfulClusterTest, ACreateBeyondTheQuotaWaitsUntilThereIsRoom) {
  const std::int64_t memory = core_.required().memory_bytes;
  api_.addResourceQuota("scs-sandboxes",
                        R"({"limits.memory":")" + std::to_string(memory) + R"("})");
  options_.start_timeout = std::chrono::milliseconds(8000);
  onTheTestsClock();
  auto backend = connected();
  ASSERT_TRUE(backend);
  const std::string first = createdAndInspected(*backend, "0b1b2c09");
  // The quota's use is the sandbox's own, which the core counts: all of it is the sandboxes'.
  EXPECT_EQ(backend->capacity().capacity.memory_bytes, memory);
  backend::CreateReply second;
  std::thread creating([&] { second = backend->create(spec("0b1b2c0a")); });
  // Refused while the first sandbox holds the quota, it asks again each kQuotaPause.
  EXPECT_TRUE(clock_.awaitWaiters(1));
  EXPECT_EQ(posts(), 2);
  clock_.advance(kQuotaPause);
  EXPECT_TRUE(clock_.awaitWaiters(1));
  EXPECT_EQ(posts(), 3);
  EXPECT_EQ(api_.podCount(), 1u);  // still waiting
  EXPECT_TRUE(backend->remove(first).ok());
  EXPECT_TRUE(scs::testing::eventually([&] { return api_.podCount() == 0; }));  // quota freed
  clock_.advance(kQuotaPause);
  creating.join();
  ASSERT_TRUE(second.status.ok()) << second.status.message;
  EXPECT_EQ(posts(), 4);
  EXPECT_TRUE(backend->remove(second.id).ok());
  EXPECT_TRUE(scs::testing::eventually([&] { return api_.podCount() == 0; }));

  options_.start_timeout = std::chrono::milliseconds(1000);
  auto impatient = connect(&error_);
  ASSERT_TRUE(impatient) << error_;
  const std::string holder = createdAndInspected(*impatient, "0b1b2c0b");
  backend::CreateReply refused;
  std::thread refusing([&] { refused = impatient->create(spec("0b1b2c0c")); });
  // Asked, and again after kQuotaPause; a third ask would come after the start timeout.
  EXPECT_TRUE(clock_.awaitWaiters(1));
  const std::ptrdiff_t asked = posts();
  clock_.advance(kQuotaPause);
  refusing.join();
  EXPECT_EQ(posts(), asked + 1);
  EXPECT_EQ(refused.status.code, backend::Code::kUnavailable);
  EXPECT_THAT(refused.status.message, HasSubstr("ResourceQuota stayed exceeded"));
  EXPECT_THAT(refused.status.message, HasSubstr("exceeded quota: quota"));
  EXPECT_TRUE(impatient->remove(holder).ok());
}

// A sandbox larger than the quota allows at all: no wait could make room, so none is made.
TEST_F(FaithfulClusterTest, ASandboxLargerThanTheWholeQuotaFailsAtOnce) {
  const std::int64_t memory = core_.required().memory_bytes;
  api_.addResourceQuota("scs-sandboxes",
                        R"({"limits.memory":")" + std::to_string(memory / 2) + R"("})");
  auto backend = connected();
  ASSERT_TRUE(backend);
  const backend::CreateReply refused = backend->create(spec("0b1b2c0e"));
  EXPECT_EQ(refused.status.code, backend::Code::kUnavailable);
  EXPECT_THAT(refused.status.message, HasSubstr("more than the namespace's ResourceQuota allows"));
  const auto seen = api_.requests();
  EXPECT_EQ(std::count_if(seen.begin(), seen.end(),
                          [](const std::string& r) { return r.rfind("POST ", 0) == 0; }),
            1)
      << "the create was tried again, for a Pod that can never fit";
}

// A localhostProfile is a path beneath the kubelet's seccomp directory: an absolute one would
// fail every create with 422, so the option is refused before the server starts.
TEST_F(FaithfulClusterTest, AnAbsoluteSeccompProfilePathIsRefusedAsAnOption) {
  Options options;
  EXPECT_THAT(parseOptions({{"seccomp-localhost", "/var/lib/kubelet/seccomp/scs.json"},
                            {"seccomp-localhost-file", "/x"}},
                           &options)
                  .value_or(""),
              HasSubstr("relative to the kubelet's seccomp directory"));
  EXPECT_THAT(parseOptions({{"seccomp-localhost", "profiles/../../etc/x.json"},
                            {"seccomp-localhost-file", "/x"}},
                           &options)
                  .value_or(""),
              HasSubstr("without '..'"));
  EXPECT_EQ(
      parseOptions({{"seccomp-localhost", "profiles/scs.json"}, {"seccomp-localhost-file", "/x"}},
                   &options),
      std::nullopt);
}

}  // namespace
}  // namespace scs::kubernetes
