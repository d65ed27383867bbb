#include "runs/run_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fake_backend.h"
#include "mocks/mock_backend.h"
#include "mocks/recording_sink.h"
#include "mocks/test_logs.h"
#include "sandbox/prepared_pool.h"
#include "support/eventually.h"
#include "support/manual_clock.h"

namespace scs::runs {
namespace {

using namespace std::chrono_literals;
using fake::FakeBackend;
using ::testing::_;
using ::testing::AtLeast;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Throw;
using View = FakeBackend::View;

constexpr auto kPatience = 10s;

// A run whose program keeps running until the test finishes it (or something kills it).
constexpr const char* kHangingCode = "print('hi')\n#fake:hang\n";

StartRequest request(double memory_gb = 1, double timeout_seconds = 30, double cpus = 1,
                     const std::string& code = kHangingCode) {
  StartRequest request;
  request.files = {{"main.py", code}, {"data/input.txt", "42\n"}};
  request.limits = {memory_gb, timeout_seconds, cpus, 256};
  return request;
}

StartRequest requestOf(const std::string& tenant) {
  StartRequest start_request = request();
  start_request.tenant = tenant;
  return start_request;
}

std::uint32_t uidOf(const backend::SandboxSpec& spec) {
  return static_cast<std::uint32_t>(std::stoul(spec.labels.at(sandbox::kLabelUid)));
}

using scs::testing::eventually;

// The run manager over the fake backend, in-process, on a clock only the test moves. The mock
// in between passes every call to the fake unless a test expects otherwise.
class RunManagerTest : public ::testing::Test {
 protected:
  RunManagerTest() {
    settings_.instance_id = "test-instance";
    fake_options_.keep_removed = true;
  }

  FakeBackend& fake() {
    if (!fake_) {
      fake_.emplace(fake_options_, nullptr, &clock_);
      backend_.delegateTo(*fake_);
    }
    return *fake_;
  }

  RunManager& manager() {
    fake();
    if (!manager_) {
      manager_ = std::make_unique<RunManager>(backend_, settings_, sandbox_, clock_);
    }
    return *manager_;
  }

  RunSnapshot startOk(StartRequest start_request = request()) {
    auto started = manager().start(std::move(start_request));
    EXPECT_TRUE(std::holds_alternative<RunSnapshot>(started)) << std::get<Error>(started).message;
    return std::get<RunSnapshot>(started);
  }

  std::string startRunning(StartRequest start_request = request()) {
    const RunSnapshot snapshot = startOk(std::move(start_request));
    EXPECT_EQ(snapshot.status, policy::RunStatus::kRunning);
    EXPECT_TRUE(awaitStarted(snapshot.run_id));
    return snapshot.run_id;
  }

  // Polls, in real time, until the run is final.
  RunSnapshot finalOf(const std::string& run_id, const std::string& tenant = kLocalTenant) {
    std::optional<RunSnapshot> snapshot;
    EXPECT_TRUE(eventually([&] {
      snapshot = manager().get(tenant, run_id);
      return !snapshot || policy::isFinal(snapshot->status);
    })) << "run "
        << run_id << " never ended";
    EXPECT_TRUE(snapshot.has_value());
    return snapshot.value_or(RunSnapshot{});
  }

  policy::RunStatus statusOf(const std::string& run_id) {
    const auto snapshot = manager().get(kLocalTenant, run_id);
    return snapshot ? snapshot->status : policy::RunStatus::kSandboxError;
  }

  // The sandbox created for `run_id` (not a prepared one), if there is one.
  std::optional<View> sandboxOfRun(const std::string& run_id) {
    for (View& view : fake().sandboxes()) {
      if (view.spec.run_id == run_id) {
        return std::move(view);
      }
    }
    return std::nullopt;
  }

  bool awaitSandbox(const std::string& id, const std::function<bool(const View&)>& condition) {
    return fake().awaitSandboxes([&](const std::vector<View>& views) {
      for (const View& view : views) {
        if (view.id == id) {
          return condition(view);
        }
      }
      return false;
    });
  }

  bool awaitRun(const std::string& run_id, const std::function<bool(const View&)>& condition) {
    return fake().awaitSandboxes([&](const std::vector<View>& views) {
      for (const View& view : views) {
        if (view.spec.run_id == run_id) {
          return condition(view);
        }
      }
      return false;
    });
  }

  // The run's sandbox runs its code and the run's thread waits on it.
  bool awaitStarted(const std::string& run_id) {
    return awaitRun(run_id, [](const View& view) { return view.running && view.waits > 0; });
  }

  bool awaitCount(const std::function<bool(const View&)>& condition, std::size_t count) {
    return fake().awaitSandboxes([&](const std::vector<View>& views) {
      return static_cast<std::size_t>(std::count_if(views.begin(), views.end(), condition)) ==
             count;
    });
  }

  void finish(const std::string& run_id, int exit_code, const std::string& out = "",
              const std::string& err = "") {
    const auto view = sandboxOfRun(run_id);
    ASSERT_TRUE(view.has_value()) << "run " << run_id << " has no sandbox";
    ASSERT_TRUE(fake().finish(view->id, exit_code, out, err));
  }

  std::size_t created() { return fake().sandboxes().size(); }
  std::size_t removed() {
    const auto views = fake().sandboxes();
    return static_cast<std::size_t>(
        std::count_if(views.begin(), views.end(), [](const View& view) { return view.removed; }));
  }

  // Moves the server's clock once every thread that waits on it is waiting: the maintenance
  // thread, the thread of each run whose program runs, and `others` (long polls).
  void advance(std::chrono::milliseconds by, std::size_t others = 0) {
    const auto views = fake().sandboxes();
    const auto running = static_cast<std::size_t>(
        std::count_if(views.begin(), views.end(), [](const View& view) { return view.running; }));
    ASSERT_TRUE(clock_.awaitWaiters(1 + running + others));
    clock_.advance(by);
  }

  testing::ManualClock clock_;
  fake::Options fake_options_;
  std::optional<FakeBackend> fake_;
  ::testing::NiceMock<mocks::MockRuntimeBackend> backend_;
  RunSettings settings_;
  policy::SandboxSettings sandbox_;
  std::unique_ptr<RunManager> manager_;  // last: it stops before the backend goes away
};

TEST_F(RunManagerTest, ASuccessfulRunDrivesTheBackendInOrder) {
  {
    InSequence in_order;
    EXPECT_CALL(backend_, create(_));
    EXPECT_CALL(backend_, inspect(_));
    EXPECT_CALL(backend_, deliver(_, _));
    EXPECT_CALL(backend_, start(_, _));
    EXPECT_CALL(backend_, wait(_, _)).Times(AtLeast(1));
    EXPECT_CALL(backend_, remove("fake-1"));
  }
  EXPECT_CALL(backend_, kill(_)).Times(0);

  const std::string id = startRunning();
  advance(2500ms);
  finish(id, 0, "hello\n", "a warning\n");

  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(report.exit_code, 0);
  EXPECT_FALSE(report.signal.has_value());
  EXPECT_EQ(report.stdout_output.text, "hello\n");
  EXPECT_EQ(report.stdout_output.bytes, 6u);
  EXPECT_FALSE(report.stdout_output.truncated);
  EXPECT_EQ(report.stderr_output.text, "a warning\n");
  EXPECT_DOUBLE_EQ(report.duration_seconds, 2.5);
  EXPECT_DOUBLE_EQ(report.queued_seconds, 0);
  EXPECT_EQ(report.started_at, testing::ManualClock::wallStart());
  EXPECT_EQ(report.finished_at, testing::ManualClock::wallStart() + 2500ms);
  EXPECT_EQ(report.limits, request().limits);
  EXPECT_FALSE(report.queue_position.has_value());
  EXPECT_FALSE(report.prepared_sandbox);
  EXPECT_TRUE(awaitRun(id, [](const View& view) { return view.removed; }));
}

TEST_F(RunManagerTest, TheSpecCarriesTheCommandEnvironmentLabelsAndPosture) {
  const StartRequest start_request = request(2, 29.5, 1.5);
  const std::string id = startRunning(start_request);
  const auto sandbox = sandboxOfRun(id);
  ASSERT_TRUE(sandbox.has_value());
  const backend::SandboxSpec& spec = sandbox->spec;

  EXPECT_EQ(spec.run_id, id);
  // The launcher is PID 1 and ends the sandbox 10 s after the run's timeout.
  EXPECT_EQ(spec.command, (std::vector<std::string>{"/usr/bin/python3", "-I",
                                                    "/opt/scs/launcher.py", "--deadline", "40"}));
  EXPECT_EQ(spec.env,
            (std::vector<std::string>{
                "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "USER=sandbox", "LOGNAME=sandbox",
                "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "MPLBACKEND=Agg",
                "OMP_NUM_THREADS=2", "OPENBLAS_NUM_THREADS=2"}));
  EXPECT_EQ(spec.working_dir, "/workspace");
  EXPECT_EQ(spec.hostname, "sandbox");
  const long long start_unix = 1'700'000'000;
  EXPECT_EQ(spec.labels, (std::map<std::string, std::string>{
                             {sandbox::kLabelManaged, "true"},
                             {sandbox::kLabelInstance, "test-instance"},
                             {sandbox::kLabelRunId, id},
                             {sandbox::kLabelOwnerPid, std::to_string(getpid())},
                             {sandbox::kLabelDeadline, std::to_string(start_unix + 40 + 60)},
                             {sandbox::kLabelUid, std::to_string(sandbox_.uids.first)}}));
  backend::Posture required = policy::requiredPosture(start_request.limits, sandbox_, uidOf(spec));
  required.init_command = spec.command;
  EXPECT_EQ(spec.posture, required);

  EXPECT_THAT(sandbox->archive, HasSubstr("main.py"));
  EXPECT_THAT(sandbox->archive, HasSubstr(kHangingCode));
  EXPECT_THAT(sandbox->archive, HasSubstr("data/input.txt"));
  finish(id, 0);
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);
}

TEST_F(RunManagerTest, EverySandboxThatExistsAtOnceHasItsOwnUidAndAUidReturnsOnlyWhenItsIsGone) {
  sandbox_.uids = {1900000000, 1900000003};  // four uids
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(startRunning());
  }
  std::set<std::string> users;
  for (const std::string& id : ids) {
    const auto view = sandboxOfRun(id);
    ASSERT_TRUE(view.has_value());
    EXPECT_EQ(view->spec.posture.user,
              std::to_string(uidOf(view->spec)) + ":" + std::to_string(uidOf(view->spec)));
    EXPECT_EQ(view->spec.posture.tmpfs[0].owner, view->spec.posture.user);
    users.insert(view->spec.posture.user);
  }
  EXPECT_EQ(users.size(), 4u);

  // With every uid in use, a fifth run cannot be given a sandbox until one is removed.
  settings_.max_concurrent = 5;
  manager_.reset();
  fake_.reset();
  ids.clear();
  for (int i = 0; i < 4; ++i) {
    ids.push_back(startRunning());
  }
  fake().holdRemovals(true);
  finish(ids[0], 0);
  ASSERT_TRUE(awaitRun(ids[0], [](const View& view) { return view.removing; }));
  const RunSnapshot fifth = finalOf(startOk().run_id);
  EXPECT_EQ(fifth.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(fifth.reason, HasSubstr("every uid of the sandbox range is in use"));
  fake().holdRemovals(false);
  // stop() on a finished run returns once its sandbox is removed and its uid given back.
  EXPECT_EQ(manager().stop(kLocalTenant, ids[0])->status, policy::RunStatus::kSucceeded);
  const std::string sixth = startRunning();
  EXPECT_EQ(sandboxOfRun(sixth)->spec.posture.user, sandboxOfRun(ids[0])->spec.posture.user);
}

TEST_F(RunManagerTest, APostureDifferenceInTheReadBackFailsBeforeAnyCodeIsDelivered) {
  fake_options_.posture_field = "read_only_root";
  EXPECT_CALL(backend_, create(_));
  EXPECT_CALL(backend_, inspect(_));
  EXPECT_CALL(backend_, deliver(_, _)).Times(0);
  EXPECT_CALL(backend_, start(_, _)).Times(0);
  EXPECT_CALL(backend_, remove("fake-1")).Times(1);

  const RunSnapshot report = finalOf(startOk().run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr("posture check failed"));
  EXPECT_THAT(report.reason, HasSubstr("read"));
  EXPECT_FALSE(report.exit_code.has_value());
}

TEST_F(RunManagerTest, ASpecThatFailsThePostureCheckNeverReachesTheBackend) {
  sandbox_.uids = {0, 0};  // root: the spec fails its own check
  EXPECT_CALL(backend_, create(_)).Times(0);
  EXPECT_CALL(backend_, remove(_)).Times(0);

  const RunSnapshot report = finalOf(startOk().run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr("posture check"));
  EXPECT_THAT(report.reason, HasSubstr("user"));
}

struct FailurePoint {
  std::string call;
  std::string reason;
  int removes;
};

void PrintTo(const FailurePoint& point, std::ostream* out) { *out << point.call; }

class RunManagerFailureTest : public RunManagerTest,
                              public ::testing::WithParamInterface<FailurePoint> {};

TEST_P(RunManagerFailureTest, ABackendFailureIsASandboxErrorAndTheSandboxIsRemovedOnce) {
  const FailurePoint& point = GetParam();
  StartRequest start_request = request();
  if (point.call == "create" || point.call == "inspect") {
    fake_options_.fail = {point.call};
  } else {
    start_request = request(1, 30, 1, std::string(kHangingCode) + "#fake:fail=" + point.call);
  }
  EXPECT_CALL(backend_, remove(_)).Times(point.removes);
  if (point.call != "wait") {
    EXPECT_CALL(backend_, wait(_, _)).Times(0);
  }

  const RunSnapshot report = finalOf(startOk(start_request).run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr(point.reason));
  EXPECT_TRUE(awaitCount([](const View& view) { return view.removed; },
                         static_cast<std::size_t>(point.removes)));
}

INSTANTIATE_TEST_SUITE_P(
    EveryCall, RunManagerFailureTest,
    ::testing::Values(
        FailurePoint{"create", "create failed: fake: create failed as scripted", 0},
        FailurePoint{"inspect", "inspect failed: fake: inspect failed as scripted", 1},
        FailurePoint{"deliver", "delivery failed: fake: deliver failed as scripted", 1},
        FailurePoint{"start", "start failed: fake: start failed as scripted", 1},
        FailurePoint{"wait", "lost the sandbox while waiting: fake: wait failed as scripted", 1}),
    [](const auto& info) { return info.param.call; });

TEST_F(RunManagerTest, AnExceptionFromTheBackendIsASandboxErrorAndTheSandboxIsRemoved) {
  EXPECT_CALL(backend_, deliver(_, _)).WillOnce(Throw(std::runtime_error("bad archive")));
  EXPECT_CALL(backend_, start(_, _)).Times(0);
  EXPECT_CALL(backend_, remove("fake-1")).Times(1);

  const RunSnapshot report = finalOf(startOk().run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr("bad archive"));
}

TEST_F(RunManagerTest, AFailedRemoveIsRetriedWithAGrowingPauseUntilItSucceeds) {
  const backend::Status gone{backend::Code::kUnavailable, "engine gone"};
  std::atomic<int> failures{0};
  const auto fail = ::testing::InvokeWithoutArgs([&] {
    ++failures;
    return gone;
  });
  EXPECT_CALL(backend_, remove("fake-1"))
      .Times(3)
      .WillOnce(fail)
      .WillOnce(fail)
      .WillOnce(::testing::DoDefault());
  const std::string id = startRunning();
  finish(id, 0);
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);

  // Retried at once, then after a pause of 1 s on the server's clock.
  ASSERT_TRUE(eventually([&] { return failures == 2; }));
  advance(999ms);
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_FALSE(sandboxOfRun(id)->removed);
  advance(1ms);
  EXPECT_TRUE(awaitRun(id, [](const View& view) { return view.removed; }));
}

TEST_F(RunManagerTest, ShutdownTriesAFailedRemovalOnceMoreAndLeavesTheRestToTheSweep) {
  std::atomic<int> attempts{0};
  EXPECT_CALL(backend_, remove("fake-1")).WillRepeatedly(::testing::InvokeWithoutArgs([&] {
    ++attempts;
    return backend::Status{backend::Code::kUnavailable, "engine gone"};
  }));
  const std::string id = startRunning();
  finish(id, 0);
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);
  ASSERT_TRUE(eventually([&] { return attempts == 2; }));

  const auto before = std::chrono::steady_clock::now();
  manager().shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);
  EXPECT_EQ(attempts, 3);
}

TEST_F(RunManagerTest, TheServerTimerKillsARunThatOutlivesItsTimeout) {
  EXPECT_CALL(backend_, kill("fake-1")).Times(AtLeast(1));
  EXPECT_CALL(backend_, remove("fake-1")).Times(1);
  const std::string id = startRunning(request(1, 5));
  advance(4999ms);
  ASSERT_TRUE(clock_.awaitWaiters(2));  // the run's thread and the maintenance thread
  EXPECT_EQ(statusOf(id), policy::RunStatus::kRunning);
  EXPECT_FALSE(sandboxOfRun(id)->killed);
  advance(1ms);

  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.status, policy::RunStatus::kTimedOut);
  EXPECT_EQ(report.signal, "SIGKILL");
  EXPECT_TRUE(sandboxOfRun(id)->killed);
  EXPECT_DOUBLE_EQ(report.duration_seconds, 5.0);
}

TEST_F(RunManagerTest, TheTimeoutClockStartsWhenTheRunStartsExecuting) {
  settings_.max_concurrent = 1;
  const std::string first = startRunning(request(1, 300));
  const RunSnapshot second = startOk(request(1, 5));
  ASSERT_EQ(second.status, policy::RunStatus::kQueued);

  advance(100s);
  finish(first, 0);
  ASSERT_TRUE(awaitStarted(second.run_id));
  advance(4s);
  finish(second.run_id, 0);

  const RunSnapshot report = finalOf(second.run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSucceeded);
  EXPECT_DOUBLE_EQ(report.queued_seconds, 100);
  EXPECT_DOUBLE_EQ(report.duration_seconds, 4);
  EXPECT_FALSE(sandboxOfRun(second.run_id)->killed);
}

TEST_F(RunManagerTest, ASandboxThatIgnoresKillIsGivenUpAfterTenSeconds) {
  const std::string id = startRunning(request(1, 5, 1, "#fake:hang\n#fake:ignore_kill\n"));
  advance(5s);
  ASSERT_TRUE(awaitRun(id, [](const View& view) { return view.killed; }));
  advance(9999ms);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_EQ(statusOf(id), policy::RunStatus::kRunning);
  advance(1ms);

  const RunSnapshot report = finalOf(id);
  EXPECT_TRUE(awaitRun(id, [](const View& view) { return view.removed; }));
  EXPECT_EQ(report.status, policy::RunStatus::kTimedOut);
  EXPECT_DOUBLE_EQ(report.duration_seconds, 15);
}

// Issue 14: the launcher's complete record (the program's exit code, all of its output) is the
// evidence; the engine's end of the container adds nothing to it.
TEST_F(RunManagerTest, ARunIsReportedFromItsLaunchersRecordBeforeItsSandboxEnds) {
  const std::string id = startRunning(request(1, 30, 1, "#fake: stdout=hi\\n exit=3 linger\n"));
  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.status, policy::RunStatus::kFailed);
  EXPECT_EQ(report.exit_code, 3);
  EXPECT_EQ(report.reason, "Exited with code 3.");
  EXPECT_EQ(report.stdout_output.text, "hi\n");
  EXPECT_DOUBLE_EQ(report.duration_seconds, 0);
  EXPECT_FALSE(sandboxOfRun(id)->exited);
  // A sandbox that does not end by itself is removed two seconds after the report.
  advance(1999ms);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_FALSE(sandboxOfRun(id)->removed);
  advance(1ms);
  EXPECT_TRUE(awaitRun(id, [](const View& view) { return view.removed; }));
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kFailed);
}

// The launcher has reported, but its record cannot tell the whole story: the run waits for its
// sandbox's end (here, for the stop that ends a sandbox that never ends by itself).
class WaitsForTheEndTest : public RunManagerTest {
 protected:
  void expectWaitsForTheEnd(const std::string& code, const std::string& why) {
    Poco::AutoPtr<mocks::LogCapture> log(
        new mocks::LogCapture("scs.runs", Poco::Message::PRIO_DEBUG));
    const std::string id = startRunning(request(1, 30, 1, code));
    ASSERT_TRUE(eventually([&] { return log->has(why + "; waiting for the sandbox's end"); }));
    EXPECT_EQ(statusOf(id), policy::RunStatus::kRunning);
    ASSERT_TRUE(manager().stop(kLocalTenant, id).has_value());
    EXPECT_EQ(finalOf(id).status, policy::RunStatus::kStopped);
    EXPECT_FALSE(log->has("reported from its launcher's record"));
  }
};

TEST_F(WaitsForTheEndTest, WhenASignalEndedTheProgramForItMayBeTheOomKillers) {
  expectWaitsForTheEnd("#fake: signal=9 linger\n", "its program was killed by a signal");
}

TEST_F(WaitsForTheEndTest, WhenTheOomKillerHasFiredInTheSandbox) {
  expectWaitsForTheEnd("#fake: child_oom linger\n", "the OOM killer has fired");
}

TEST_F(WaitsForTheEndTest, WhenTheBackendCannotYetRuleOutAnOomKill) {
  fake();  // delegates every call to the fake; then progress() alone is overridden
  ON_CALL(backend_, progress(_)).WillByDefault(::testing::Return(backend::ProgressReply{}));
  expectWaitsForTheEnd("#fake: exit=0 linger\n", "the backend cannot rule out an OOM kill yet");
}

TEST_F(WaitsForTheEndTest, WhenTheRecordHoldsNoExit) {
  expectWaitsForTheEnd("#fake: trailer={\"files\":[]} linger\n", "its record holds no exit");
}

TEST_F(RunManagerTest, StoppingAQueuedRunTakesItOutOfTheQueueBeforeTheBackendSeesIt) {
  settings_.max_concurrent = 1;
  const std::string running = startRunning();
  const RunSnapshot second = startOk();
  const RunSnapshot third = startOk();
  EXPECT_EQ(second.queue_position, 1u);
  EXPECT_EQ(third.queue_position, 2u);
  advance(3s);

  const auto stopped = manager().stop(kLocalTenant, second.run_id);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_EQ(stopped->reason, "Stopped by stop_run before it started.");
  EXPECT_FALSE(stopped->queue_position.has_value());
  EXPECT_FALSE(stopped->started_at.has_value());
  EXPECT_DOUBLE_EQ(stopped->queued_seconds, 3);
  EXPECT_EQ(manager().get(kLocalTenant, third.run_id)->queue_position, 1u);

  const auto again = manager().stop(kLocalTenant, second.run_id);
  EXPECT_EQ(again->status, policy::RunStatus::kStopped);
  EXPECT_EQ(again->reason, stopped->reason);

  finish(running, 0);
  ASSERT_TRUE(awaitStarted(third.run_id));
  EXPECT_FALSE(sandboxOfRun(second.run_id).has_value());
  EXPECT_EQ(created(), 2u);
}

TEST_F(RunManagerTest, StoppingARunningRunKillsItAndReturnsOnceItIsRemoved) {
  EXPECT_CALL(backend_, kill("fake-1")).Times(1);
  const std::string id = startRunning();

  const auto stopped = manager().stop(kLocalTenant, id);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_EQ(stopped->signal, "SIGKILL");
  EXPECT_TRUE(sandboxOfRun(id)->removed);
  EXPECT_TRUE(sandboxOfRun(id)->killed);

  const auto again = manager().stop(kLocalTenant, id);
  EXPECT_EQ(again->status, policy::RunStatus::kStopped);
  EXPECT_EQ(again->reason, stopped->reason);
}

TEST_F(RunManagerTest, StoppingAFinishedRunChangesNothing) {
  EXPECT_CALL(backend_, kill(_)).Times(0);
  const std::string id = startRunning();
  finish(id, 3, "", "Traceback\n");
  const RunSnapshot report = finalOf(id);
  ASSERT_EQ(report.status, policy::RunStatus::kFailed);

  for (int i = 0; i < 2; ++i) {
    const auto stopped = manager().stop(kLocalTenant, id);
    ASSERT_TRUE(stopped.has_value());
    EXPECT_EQ(stopped->status, policy::RunStatus::kFailed);
    EXPECT_EQ(stopped->exit_code, 3);
    EXPECT_EQ(stopped->reason, report.reason);
    EXPECT_EQ(stopped->stderr_output.text, "Traceback\n");
  }
}

TEST_F(RunManagerTest, UnknownRunIdsAreNotFound) {
  EXPECT_FALSE(manager().get(kLocalTenant, "0123456789abcdef0123456789abcdef").has_value());
  EXPECT_FALSE(manager().stop(kLocalTenant, "nope").has_value());
}

TEST_F(RunManagerTest, RunIdsAreUnguessable128BitHex) {
  const std::string first = startOk().run_id;
  const std::string second = startOk().run_id;
  EXPECT_THAT(first, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_THAT(second, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(first, second);

  RunManager unnamed(backend_, RunSettings{}, sandbox_, clock_);
  EXPECT_THAT(unnamed.instanceId(), ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(manager().instanceId(), "test-instance");
}

TEST_F(RunManagerTest, AtMostFourRunsExecuteAndTheRestWaitInFifoOrder) {
  std::vector<RunSnapshot> runs;
  for (int i = 0; i < 6; ++i) {
    runs.push_back(startOk());
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(runs[i].status, policy::RunStatus::kRunning);
  }
  EXPECT_EQ(runs[4].status, policy::RunStatus::kQueued);
  EXPECT_EQ(runs[4].queue_position, 1u);
  EXPECT_EQ(runs[5].queue_position, 2u);
  ASSERT_TRUE(awaitCount([](const View& view) { return view.running; }, 4));
  EXPECT_EQ(created(), 4u);
  EXPECT_FALSE(sandboxOfRun(runs[4].run_id).has_value());

  finish(runs[1].run_id, 0);
  ASSERT_TRUE(awaitStarted(runs[4].run_id));
  EXPECT_EQ(statusOf(runs[4].run_id), policy::RunStatus::kRunning);
  EXPECT_EQ(manager().get(kLocalTenant, runs[5].run_id)->queue_position, 1u);
  EXPECT_EQ(created(), 5u);

  finish(runs[0].run_id, 0);
  ASSERT_TRUE(awaitStarted(runs[5].run_id));
  EXPECT_EQ(created(), 6u);
}

TEST_F(RunManagerTest, ARunIsUnknownToEveryTenantButItsOwner) {
  const RunSnapshot mine = startOk(requestOf("alice"));
  EXPECT_FALSE(manager().get("bob", mine.run_id).has_value());
  EXPECT_FALSE(manager().get(kLocalTenant, mine.run_id).has_value());
  EXPECT_FALSE(manager().stop("bob", mine.run_id).has_value());
  ASSERT_TRUE(awaitStarted(mine.run_id));
  EXPECT_FALSE(sandboxOfRun(mine.run_id)->killed);  // bob's stop touched nothing
  EXPECT_EQ(manager().get("alice", mine.run_id)->status, policy::RunStatus::kRunning);
  EXPECT_EQ(manager().stop("alice", mine.run_id)->status, policy::RunStatus::kStopped);
}

TEST_F(RunManagerTest, ATenantWithFiftyQueuedRunsCannotStarveAnotherTenantsOneRun) {
  settings_.max_concurrent = 1;
  settings_.max_queue = 50;
  const std::string first = startRunning(requestOf("greedy"));
  std::vector<RunSnapshot> greedy;
  for (int i = 0; i < 50; ++i) {
    greedy.push_back(startOk(requestOf("greedy")));
    EXPECT_EQ(greedy.back().queue_position, static_cast<std::size_t>(i) + 1);
  }
  const RunSnapshot modest = startOk(requestOf("modest"));
  EXPECT_EQ(modest.status, policy::RunStatus::kQueued);
  EXPECT_EQ(modest.queue_position, 1u);
  EXPECT_EQ(manager().get("greedy", greedy[0].run_id)->queue_position, 2u);
  EXPECT_EQ(manager().get("greedy", greedy[1].run_id)->queue_position, 3u);

  finish(first, 0);
  ASSERT_TRUE(awaitStarted(modest.run_id));
  EXPECT_FALSE(sandboxOfRun(greedy[0].run_id).has_value());
  finish(modest.run_id, 0);
  // FIFO within a tenant.
  ASSERT_TRUE(awaitStarted(greedy[0].run_id));
  EXPECT_FALSE(sandboxOfRun(greedy[1].run_id).has_value());
  EXPECT_EQ(manager().get("greedy", greedy[1].run_id)->queue_position, 1u);
}

TEST_F(RunManagerTest, FreeSlotsGoRoundRobinBetweenTenantsAndPositionsPredictTheOrder) {
  settings_.max_concurrent = 1;
  const std::string a0 = startRunning(requestOf("a"));
  const RunSnapshot a1 = startOk(requestOf("a"));
  const RunSnapshot a2 = startOk(requestOf("a"));
  const RunSnapshot b1 = startOk(requestOf("b"));
  const RunSnapshot b2 = startOk(requestOf("b"));
  const RunSnapshot c1 = startOk(requestOf("c"));
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"b", b1.run_id}, {"c", c1.run_id}, {"a", a1.run_id}, {"b", b2.run_id}, {"a", a2.run_id}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(manager().get(expected[i].first, expected[i].second)->queue_position, i + 1);
  }
  std::string running = a0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    finish(running, 0);
    ASSERT_TRUE(awaitStarted(expected[i].second)) << i;
    EXPECT_EQ(created(), i + 2);  // nothing else started meanwhile
    running = expected[i].second;
  }
}

TEST_F(RunManagerTest, TheQueueBoundIsPerTenant) {
  settings_.max_concurrent = 1;
  settings_.max_queue = 2;
  startRunning(requestOf("a"));
  startOk(requestOf("a"));
  startOk(requestOf("a"));
  EXPECT_TRUE(std::holds_alternative<Error>(manager().start(requestOf("a"))));
  const RunSnapshot other = startOk(requestOf("b"));
  EXPECT_EQ(other.status, policy::RunStatus::kQueued);
  EXPECT_EQ(other.queue_position, 1u);
}

TEST_F(RunManagerTest, AtTheTotalQueueBoundTheTenantWithTheMostWaitingGivesWay) {
  settings_.max_concurrent = 1;
  settings_.max_queue = 10;
  settings_.max_queue_total = 4;
  startRunning(requestOf("a"));
  std::vector<std::string> a_queued;
  for (int i = 0; i < 4; ++i) {
    a_queued.push_back(startOk(requestOf("a")).run_id);
  }
  // Past the total, a's own next run is refused: a has the most waiting.
  const auto refused = manager().start(requestOf("a"));
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_EQ(std::get<Error>(refused).message,
            "The server's queue is full: 4 runs are waiting, 4 of them yours, the most of "
            "anyone's. Try again when one of your runs finishes.");
  // b's run is queued; a's newest waiting run makes room, and says why.
  const RunSnapshot b = startOk(requestOf("b"));
  EXPECT_EQ(b.status, policy::RunStatus::kQueued);
  const RunSnapshot pushed_out = *manager().get("a", a_queued.back());
  EXPECT_EQ(pushed_out.status, policy::RunStatus::kStopped);
  EXPECT_THAT(pushed_out.reason, HasSubstr("the server's queue was full"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(manager().get("a", a_queued[i])->status, policy::RunStatus::kQueued) << i;
  }
  // a 2, b 2 after one more of b's: even, so b's third is refused and a keeps its runs.
  startOk(requestOf("b"));
  const RunSnapshot a_next = *manager().get("a", a_queued[2]);
  EXPECT_EQ(a_next.status, policy::RunStatus::kStopped);
  const auto b_refused = manager().start(requestOf("b"));
  ASSERT_TRUE(std::holds_alternative<Error>(b_refused));
  EXPECT_THAT(std::get<Error>(b_refused).message, HasSubstr("2 of them yours"));
  EXPECT_EQ(manager().get("a", a_queued[0])->status, policy::RunStatus::kQueued);
  EXPECT_EQ(manager().get("a", a_queued[1])->status, policy::RunStatus::kQueued);
}

TEST_F(RunManagerTest, MemoryAdmissionStillHoldsTheChosenRunAcrossTenants) {
  settings_.host_memory_bytes = 8 * policy::kBytesPerGb;
  StartRequest first_big = requestOf("a");
  first_big.limits.memory_gb = 5;
  StartRequest second_big = requestOf("b");
  second_big.limits.memory_gb = 5;
  const std::string holder = startRunning(first_big);
  const RunSnapshot waiting = startOk(second_big);  // 5 + 5 > 8: waits
  EXPECT_EQ(waiting.status, policy::RunStatus::kQueued);
  // A small run of a third tenant does not overtake the waiting big one.
  const RunSnapshot small = startOk(requestOf("c"));
  EXPECT_EQ(small.status, policy::RunStatus::kQueued);
  EXPECT_EQ(small.queue_position, 2u);
  finish(holder, 0);
  ASSERT_TRUE(awaitStarted(waiting.run_id));
  ASSERT_TRUE(awaitStarted(small.run_id));
}

TEST_F(RunManagerTest, AStartBeyondTheQueueBoundIsRefused) {
  settings_.max_concurrent = 1;
  settings_.max_queue = 2;
  startRunning();
  startOk();
  startOk();
  const auto refused = manager().start(request());
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_EQ(std::get<Error>(refused).message,
            "The queue is full: 2 runs are waiting behind 1 running. Try again when a run "
            "finishes.");
  EXPECT_EQ(created(), 1u);
}

TEST_F(RunManagerTest, MemoryAdmissionHoldsRunsInOrderUntilMemoryFrees) {
  settings_.host_memory_bytes = 8 * policy::kBytesPerGb;
  const std::string big = startRunning(request(5));
  const RunSnapshot second_big = startOk(request(5));
  const RunSnapshot small = startOk(request(1));
  EXPECT_EQ(second_big.status, policy::RunStatus::kQueued);
  EXPECT_EQ(second_big.queue_position, 1u);
  EXPECT_EQ(small.status, policy::RunStatus::kQueued);
  EXPECT_EQ(small.queue_position, 2u);

  const auto too_big = manager().start(request(9));
  ASSERT_TRUE(std::holds_alternative<Error>(too_big));
  EXPECT_THAT(std::get<Error>(too_big).message, HasSubstr("9 GB"));

  finish(big, 0);
  ASSERT_TRUE(awaitStarted(second_big.run_id));
  ASSERT_TRUE(awaitStarted(small.run_id));
  EXPECT_EQ(statusOf(small.run_id), policy::RunStatus::kRunning);
}

TEST_F(RunManagerTest, ReportsExpireAfterTheRetentionPeriod) {
  settings_.retention = 60s;
  const std::string id = startRunning();
  finish(id, 0);
  finalOf(id);

  advance(60s);
  EXPECT_TRUE(manager().get(kLocalTenant, id).has_value());
  advance(1ms);
  EXPECT_FALSE(manager().get(kLocalTenant, id).has_value());
  EXPECT_FALSE(manager().stop(kLocalTenant, id).has_value());
}

TEST_F(RunManagerTest, TheOldestFinishedReportsAreForgottenFirstButNeverALiveRun) {
  settings_.max_retained = 2;
  const std::string live = startRunning();
  std::vector<std::string> finished;
  for (int i = 0; i < 3; ++i) {
    const std::string id = startRunning();
    advance(1s);
    finish(id, 0);
    finalOf(id);
    finished.push_back(id);
  }
  EXPECT_FALSE(manager().get(kLocalTenant, finished[0]).has_value());
  EXPECT_TRUE(manager().get(kLocalTenant, finished[1]).has_value());
  EXPECT_TRUE(manager().get(kLocalTenant, finished[2]).has_value());
  EXPECT_EQ(statusOf(live), policy::RunStatus::kRunning);
}

TEST_F(RunManagerTest, OneTenantsReportsNeverPushOutTheReportOfATenantHoldingLess) {
  settings_.max_retained = 6;
  settings_.max_retained_per_tenant = 4;
  settings_.max_retained_bytes = 4u << 20;
  settings_.max_retained_bytes_per_tenant = 2u << 20;
  const std::string big(900u << 10, 'x');  // about 0.9 MiB kept per report
  const auto finishedRun = [&](const std::string& tenant, const std::string& out) {
    const std::string id = startRunning(requestOf(tenant));
    finish(id, 0, out);
    EXPECT_EQ(finalOf(id, tenant).status, policy::RunStatus::kSucceeded);
    return id;
  };
  const std::string alice_big = finishedRun("alice", big);
  const std::string alice_small = finishedRun("alice", "");
  std::vector<std::string> bob;
  for (int i = 0; i < 12; ++i) {
    bob.push_back(finishedRun("bob", i % 2 == 0 ? big : ""));
  }
  // Bob's own budgets (four reports, 2 MiB) forgot his oldest; Alice's are untouched.
  EXPECT_TRUE(manager().get("alice", alice_big).has_value());
  EXPECT_TRUE(manager().get("alice", alice_small).has_value());
  for (std::size_t i = 0; i < bob.size(); ++i) {
    EXPECT_EQ(manager().get("bob", bob[i]).has_value(), i >= 8) << i;
  }
  // Carol's report, past the total count of six, forgets Bob's oldest: he holds the most.
  const std::string carol = finishedRun("carol", "");
  EXPECT_TRUE(manager().get("alice", alice_big).has_value());
  EXPECT_TRUE(manager().get("alice", alice_small).has_value());
  EXPECT_FALSE(manager().get("bob", bob[8]).has_value());
  EXPECT_TRUE(manager().get("bob", bob[9]).has_value());
  EXPECT_TRUE(manager().get("carol", carol).has_value());
}

TEST_F(RunManagerTest, ReportsOverTheRetainedBytesAreForgottenOldestFirstButNeverTheNewest) {
  settings_.max_retained_bytes = 2u << 20;
  settings_.output_window_chars = 0;       // the whole capture in each report
  const std::string big(900u << 10, 'x');  // about 0.9 MiB kept per report
  std::vector<std::string> finished;
  for (int i = 0; i < 3; ++i) {
    const std::string id = startRunning();
    finish(id, 0, big);
    EXPECT_EQ(finalOf(id).stdout_output.text, big);
    finished.push_back(id);
  }
  EXPECT_FALSE(manager().get(kLocalTenant, finished[0]).has_value());
  EXPECT_TRUE(manager().get(kLocalTenant, finished[1]).has_value());
  EXPECT_TRUE(manager().get(kLocalTenant, finished[2]).has_value());

  // One report over the whole budget is still kept while it is the newest.
  settings_.output_cap_bytes = 4u << 20;
  manager_.reset();
  const std::string huge_output(3u << 20, 'y');
  const std::string huge = startRunning();
  finish(huge, 0, huge_output);
  EXPECT_EQ(finalOf(huge).stdout_output.bytes, huge_output.size());
  EXPECT_TRUE(manager().get(kLocalTenant, huge).has_value());
}

TEST_F(RunManagerTest, GetWaitsOnTheServersClockAndReturnsWhenTheRunFinishes) {
  const std::string id = startRunning();
  auto waited = std::async(std::launch::async, [&] { return manager().get(kLocalTenant, id, 5s); });
  advance(4999ms, 1);
  ASSERT_TRUE(clock_.awaitWaiters(3));  // the poll, the run's thread, the maintenance thread
  EXPECT_EQ(waited.wait_for(0s), std::future_status::timeout);
  advance(1ms, 1);
  EXPECT_EQ(waited.get()->status, policy::RunStatus::kRunning);

  auto polled =
      std::async(std::launch::async, [&] { return manager().get(kLocalTenant, id, kPatience); });
  ASSERT_TRUE(clock_.awaitWaiters(3));
  finish(id, 0, "done\n");
  const auto report = polled.get();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(report->stdout_output.text, "done\n");
}

TEST_F(RunManagerTest, OutputIsCappedPerStream) {
  settings_.output_cap_bytes = 16;
  const std::string id = startRunning();
  finish(id, 0, std::string(100, 'x') + "END\n");
  const RunSnapshot report = finalOf(id);
  EXPECT_TRUE(report.stdout_output.truncated);
  EXPECT_EQ(report.stdout_output.bytes, 104u);
  EXPECT_THAT(report.stdout_output.text, ::testing::EndsWith("END\n"));
  EXPECT_FALSE(report.stderr_output.truncated);
}

TEST_F(RunManagerTest, TheLaunchersTrailerBecomesTheRunsResultsAndIsNotOutput) {
  const std::string code =
      "#fake:stdout=out\\n\n#fake:exception=ValueError:bad\n#fake:outfile=plot.txt:data\n";
  const std::string id = startOk(request(1, 30, 1, code)).run_id;
  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.status, policy::RunStatus::kFailed);
  EXPECT_EQ(report.stdout_output.text, "out\n");
  ASSERT_TRUE(report.results.exception.has_value());
  EXPECT_EQ(report.results.exception->type, "ValueError");
  ASSERT_EQ(report.results.files.size(), 1u);
  EXPECT_EQ(report.results.files[0].path, "plot.txt");
  EXPECT_EQ(report.results.files[0].content, "data");
}

TEST_F(RunManagerTest, ShutdownStopsEverythingRemovesEverySandboxAndJoins) {
  std::vector<std::string> running;
  for (int i = 0; i < 4; ++i) {
    running.push_back(startRunning());
  }
  const RunSnapshot queued = startOk();
  ASSERT_EQ(queued.status, policy::RunStatus::kQueued);

  const auto before = std::chrono::steady_clock::now();
  manager().shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);

  EXPECT_EQ(created(), 4u);
  EXPECT_EQ(removed(), 4u);
  for (const std::string& id : running) {
    EXPECT_EQ(statusOf(id), policy::RunStatus::kStopped);
    EXPECT_TRUE(sandboxOfRun(id)->killed);
  }
  const auto stopped = manager().get(kLocalTenant, queued.run_id);
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_THAT(stopped->reason, HasSubstr("before it started"));

  const auto refused = manager().start(request());
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_EQ(std::get<Error>(refused).message, "The server is shutting down.");

  manager().shutdown();
  EXPECT_EQ(removed(), 4u);
}

TEST_F(RunManagerTest, ARunIsReportedBeforeItsSandboxIsRemovedAndStopWaitsForTheRemoval) {
  const std::string id = startRunning();
  fake().holdRemovals(true);
  finish(id, 0, "out\n");
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);
  ASSERT_TRUE(awaitRun(id, [](const View& view) { return view.removing; }));

  // While the removal is held, stop() cannot answer; it answers once the sandbox is gone.
  auto stopped = std::async(std::launch::async, [&] { return manager().stop(kLocalTenant, id); });
  EXPECT_EQ(stopped.wait_for(0s), std::future_status::timeout);
  EXPECT_FALSE(sandboxOfRun(id)->removed);
  fake().holdRemovals(false);
  ASSERT_EQ(stopped.wait_for(kPatience), std::future_status::ready);
  const auto report = stopped.get();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->status, policy::RunStatus::kSucceeded);
  EXPECT_TRUE(sandboxOfRun(id)->removed);
}

// Prepared sandboxes (issue 6): made ahead of need, each used by one run, never weaker.
class PreparedRunManagerTest : public RunManagerTest {
 protected:
  PreparedRunManagerTest() {
    settings_.prepared = 1;
    settings_.prepared_limits = request().limits;
    settings_.prepared_max_idle = 300s;
  }

  // Starts the manager and waits until `count` prepared sandboxes are ready.
  void waitPrepared(std::size_t count = 1) {
    RunManager& runs = manager();
    ASSERT_TRUE(eventually([&] { return runs.awaitPrepared(count, 0ms); }));
  }
};

// GET /readyz asks preparedHealthy(): a run holding the only prepared sandbox must not make the
// server look unready (nor tell a stranger that a run started); a pool that cannot make one is.
TEST_F(PreparedRunManagerTest, ThePoolStaysHealthyWhileARunHoldsItsOnlySandbox) {
  waitPrepared();
  EXPECT_TRUE(manager().preparedHealthy());
  const std::string id = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.waits > 0; }));
  EXPECT_FALSE(manager().awaitPrepared(1, 0ms));  // taken; the refill waits for the clock
  EXPECT_TRUE(manager().preparedHealthy());
  manager().stop(kLocalTenant, id);
}

TEST_F(PreparedRunManagerTest, APoolWhoseLastAttemptFailedIsNotHealthy) {
  waitPrepared();
  backend::CreateReply refused;
  refused.status = {backend::Code::kRejected, "no such image"};
  ON_CALL(backend_, create(_)).WillByDefault(::testing::Return(refused));
  const std::string id = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.waits > 0; }));
  EXPECT_TRUE(manager().preparedHealthy());
  // The refill, once its delay has passed, fails.
  ASSERT_TRUE(eventually([&] {
    advance(1s);
    return !manager().preparedHealthy();
  }));
  manager().stop(kLocalTenant, id);
}

TEST_F(PreparedRunManagerTest, APreparedSandboxIsCheckedAndStartedIdleBeforeAnyRun) {
  {
    InSequence in_order;
    EXPECT_CALL(backend_, create(_));
    EXPECT_CALL(backend_, inspect("fake-1"));
    EXPECT_CALL(backend_, start("fake-1", _));
  }
  EXPECT_CALL(backend_, deliver(_, _)).Times(0);
  waitPrepared();

  const backend::SandboxSpec spec = fake().sandbox("fake-1")->spec;
  backend::Posture required = policy::requiredPosture(request().limits, sandbox_, uidOf(spec));
  required.init_command = spec.command;
  EXPECT_EQ(spec.posture, required);
  // The deadline allows for the idle time: 30 + 10 + 300; its label for that and then a
  // session's lifetime and grace, should it become a session's at the last moment: 3600 + 10.
  EXPECT_EQ(spec.command.back(), "340");
  EXPECT_EQ(spec.labels.at(sandbox::kLabelDeadline),
            std::to_string(1'700'000'000 + 340 + 3610 + 60));
  EXPECT_TRUE(spec.session);  // it takes the session frame and then a session's runs
  EXPECT_EQ(spec.labels.at(sandbox::kLabelPrepared), "true");
  EXPECT_EQ(spec.labels.at(sandbox::kLabelManaged), "true");
  EXPECT_EQ(spec.labels.at(sandbox::kLabelInstance), "test-instance");
  EXPECT_THAT(spec.labels.at(sandbox::kLabelRunId), ::testing::StartsWith("prepared-"));
  EXPECT_TRUE(fake().sandbox("fake-1")->archive.empty());
}

TEST_F(PreparedRunManagerTest, ARunWithTheSameLimitsGetsItsCodeInThePreparedSandbox) {
  waitPrepared();
  const RunSnapshot started = startOk();
  ASSERT_EQ(started.status, policy::RunStatus::kRunning);
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.waits > 0; }));
  EXPECT_THAT(fake().sandbox("fake-1")->archive, HasSubstr(kHangingCode));
  advance(1500ms);
  ASSERT_TRUE(fake().finish("fake-1", 0, "hello\n"));

  const RunSnapshot report = finalOf(started.run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(report.stdout_output.text, "hello\n");
  EXPECT_DOUBLE_EQ(report.duration_seconds, 1.5);
  EXPECT_TRUE(report.prepared_sandbox);
  EXPECT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.removed; }));
  // The pool replaces what the run used; the run itself created nothing.
  EXPECT_TRUE(awaitSandbox("fake-2", [](const View& view) { return view.started; }));
  EXPECT_THAT(fake().sandbox("fake-2")->spec.labels.at(sandbox::kLabelRunId),
              ::testing::StartsWith("prepared-"));
}

TEST_F(PreparedRunManagerTest, ThePoolRefillsOnlyOnceTheRunThatTookItsSandboxEndsOrHasRunASecond) {
  waitPrepared();
  const std::string first = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.waits > 0; }));
  advance(999ms);
  ASSERT_TRUE(clock_.awaitWaiters(2));  // the run's thread and the maintenance thread
  EXPECT_EQ(created(), 1u) << "the pool competed with the run for the CPU";
  ASSERT_TRUE(fake().finish("fake-1", 0));
  EXPECT_EQ(finalOf(first).status, policy::RunStatus::kSucceeded);
  EXPECT_TRUE(awaitSandbox("fake-2", [](const View& view) { return view.started; }));

  // A long run does not hold the pool back for longer than a second.
  waitPrepared();
  const std::string second = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-2", [](const View& view) { return view.waits > 0; }));
  advance(999ms);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_EQ(created(), 2u);
  advance(1ms);
  EXPECT_TRUE(awaitSandbox("fake-3", [](const View& view) { return view.started; }));
  ASSERT_TRUE(fake().finish("fake-2", 0));
  EXPECT_EQ(finalOf(second).status, policy::RunStatus::kSucceeded);
}

TEST_F(PreparedRunManagerTest, OutputTheIdleLauncherWroteReachesTheRunThatTakesIt) {
  waitPrepared();
  ASSERT_TRUE(fake().write("fake-1", backend::Stream::kStderr, "a warning while idle\n"));
  const std::string id = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.waits > 0; }));
  ASSERT_TRUE(fake().finish("fake-1", 0, "done\n"));
  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.stderr_output.text, "a warning while idle\n");
  EXPECT_EQ(report.stdout_output.text, "done\n");
}

TEST_F(PreparedRunManagerTest, RunsWithOtherLimitsTakeTheNormalPathAndAShorterTimeoutDoesNot) {
  waitPrepared();
  const std::string more_memory = startRunning(request(2));
  const std::string longer = startRunning(request(1, 60));
  EXPECT_TRUE(fake().sandbox("fake-1")->archive.empty());
  EXPECT_EQ(created(), 3u);
  const RunSnapshot shorter = startOk(request(1, 10));
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return !view.archive.empty(); }));
  EXPECT_FALSE(sandboxOfRun(shorter.run_id).has_value());
  finish(more_memory, 0);
  finish(longer, 0);
  EXPECT_EQ(finalOf(more_memory).status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(finalOf(longer).status, policy::RunStatus::kSucceeded);
}

TEST_F(PreparedRunManagerTest, ASandboxThatFailsItsPostureCheckIsRemovedAndNeverUsed) {
  fake_options_.posture_field = "read_only_root";
  EXPECT_CALL(backend_, start(_, _)).Times(0);
  EXPECT_CALL(backend_, deliver(_, _)).Times(0);
  manager();
  ASSERT_TRUE(awaitCount([](const View& view) { return view.removed; }, 1));
  EXPECT_THAT(fake().sandbox("fake-1")->spec.labels.at(sandbox::kLabelRunId),
              ::testing::StartsWith("prepared-"));

  // The run is refused on its own check; the pool waits before trying again.
  const RunSnapshot report = finalOf(startOk().run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr("posture check failed"));
  EXPECT_TRUE(awaitCount([](const View& view) { return view.removed; }, 2));
  EXPECT_EQ(created(), 2u);
}

TEST_F(PreparedRunManagerTest, ASandboxThatEndedWhileIdleIsNeverGivenARunsCode) {
  EXPECT_CALL(backend_, deliver(_, _)).Times(::testing::AnyNumber());
  EXPECT_CALL(backend_, deliver("fake-1", _)).Times(0);
  waitPrepared();
  ASSERT_TRUE(fake().finish("fake-1", 125));
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.exited; }));
  // The run finds it dead and creates a sandbox, or the pool has replaced it already.
  const std::string id = startOk().run_id;
  std::string used;
  ASSERT_TRUE(fake().awaitSandboxes([&](const std::vector<View>& views) {
    for (const View& view : views) {
      if (view.running && view.waits > 0) {
        used = view.id;
        return true;
      }
    }
    return false;
  }));
  EXPECT_NE(used, "fake-1");
  ASSERT_TRUE(fake().finish(used, 0, "fine\n"));
  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(report.stdout_output.text, "fine\n");
  // A sandbox created for the run carries its run id; the pool's replacement does not.
  EXPECT_EQ(report.prepared_sandbox, !sandboxOfRun(id).has_value());
  EXPECT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.removed; }));
}

TEST_F(PreparedRunManagerTest, AnIdleSandboxThatEndsIsReplacedBeforeARunNeedsIt) {
  waitPrepared();
  ASSERT_TRUE(fake().finish("fake-1", 125));
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.exited; }));
  advance(1s);  // the pool checks its idle sandboxes every second
  EXPECT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.removed; }));
  EXPECT_TRUE(awaitSandbox("fake-2", [](const View& view) { return view.started; }));
  EXPECT_TRUE(fake().sandbox("fake-1")->archive.empty());
}

TEST_F(PreparedRunManagerTest, PreparedSandboxesCountAgainstHostMemoryAndGiveWayToARun) {
  settings_.host_memory_bytes = 2 * policy::kBytesPerGb;  // the prepared sandbox holds 1 GB
  waitPrepared();
  const std::string big = startRunning(request(2, 30, 1));
  EXPECT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.removed; }));
  EXPECT_TRUE(fake().sandbox("fake-1")->archive.empty());
  // While the big run holds all the memory the pool makes nothing.
  advance(5s);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_EQ(created(), 2u);

  finish(big, 0);
  EXPECT_EQ(finalOf(big).status, policy::RunStatus::kSucceeded);
  EXPECT_TRUE(awaitSandbox("fake-3", [](const View& view) { return view.started; }));
}

// Issue 25: an idle prepared sandbox holds its whole memory limit in admission until a run that
// took one whose warm imports were done (here there are none) has told the engine's peak of it
// idle; from then on that and a quarter, so that one is made beside a run where a limit's worth
// would not fit. A run that takes one is still charged its whole limit.
TEST_F(PreparedRunManagerTest, AnIdleSandboxHoldsItsMeasuredFootprintOnceARunHasToldIt) {
  fake_options_.idle_peak_bytes = std::int64_t{80} << 20;
  settings_.host_memory_bytes = 3 * policy::kBytesPerGb / 2;  // a run's 1 GB and half a run
  const auto executing = [](const View& view) { return view.running && view.waits > 0; };
  waitPrepared();
  const std::string first = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-1", executing));
  advance(5s);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_EQ(created(), 1u);  // 1 GB executing and 1 GB held would not fit
  ASSERT_TRUE(fake().finish("fake-1", 0));
  EXPECT_EQ(finalOf(first).status, policy::RunStatus::kSucceeded);
  ASSERT_TRUE(awaitSandbox("fake-2", [](const View& view) { return view.started; }));
  waitPrepared();

  const std::string second = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-2", executing));
  advance(5s);
  ASSERT_TRUE(awaitSandbox("fake-3", [](const View& view) { return view.started; }));
  waitPrepared();  // 1 GB executing and 100 MiB held fit

  // A third run may take fake-3 only with its whole 1 GB free: it waits for the second.
  const std::string third = startOk().run_id;
  EXPECT_EQ(statusOf(third), policy::RunStatus::kQueued);
  ASSERT_TRUE(fake().finish("fake-2", 0));
  EXPECT_EQ(finalOf(second).status, policy::RunStatus::kSucceeded);
  ASSERT_TRUE(awaitSandbox("fake-3", executing));
  manager().stop(kLocalTenant, third);
  EXPECT_EQ(finalOf(third).status, policy::RunStatus::kStopped);
}

// Issue 14: the pool follows the most runs it could serve that were in flight at once, within
// its ceiling, and shrinks back to --prepared once that is out of its memory.
TEST_F(PreparedRunManagerTest, ABurstGrowsThePoolUpToItsCeilingAndThePoolShrinksWhenItIsGone) {
  settings_.prepared_max = 3;
  settings_.prepared_max_idle = 3600s;
  waitPrepared();
  std::vector<std::string> burst;
  for (int i = 0; i < 4; ++i) {
    burst.push_back(startOk().run_id);  // four in flight at once
  }
  // The first took the prepared sandbox; each of the others has its own running.
  ASSERT_TRUE(
      awaitSandbox("fake-1", [](const View& view) { return view.running && view.waits > 0; }));
  for (std::size_t i = 1; i < burst.size(); ++i) {
    ASSERT_TRUE(awaitStarted(burst[i]));
  }
  for (const std::string& id : burst) {
    ASSERT_TRUE(manager().stop(kLocalTenant, id).has_value());
    EXPECT_EQ(finalOf(id).status, policy::RunStatus::kStopped);
  }
  waitPrepared(3);
  ASSERT_TRUE(clock_.awaitWaiters(1));  // the maintenance thread wants no more
  EXPECT_FALSE(manager().awaitPrepared(4, 0ms));
  EXPECT_EQ(created(), 1u + 3u + 3u);  // the first, three runs' own, three prepared after

  // The burst is remembered for five minutes, then the pool is back to one.
  advance(300s);
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_EQ(removed(), 1u + 3u);
  advance(1s);
  EXPECT_TRUE(eventually([&] { return removed() == 1u + 3u + 2u; }));
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_TRUE(manager().awaitPrepared(1, 0ms));
  EXPECT_EQ(created(), 7u);
}

TEST_F(PreparedRunManagerTest, ThePoolGrowsPastItsTargetOnlyWhileNoRunWaits) {
  settings_.prepared_max = 3;
  settings_.max_concurrent = 1;
  waitPrepared();
  const std::string first = startOk().run_id;
  ASSERT_TRUE(
      awaitSandbox("fake-1", [](const View& view) { return view.running && view.waits > 0; }));
  const RunSnapshot second = startOk();
  const RunSnapshot third = startOk();
  ASSERT_EQ(third.status, policy::RunStatus::kQueued);
  // The first run took the prepared sandbox; the pool makes its target again, no more.
  advance(1s);
  waitPrepared(1);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_FALSE(manager().awaitPrepared(2, 0ms));
  EXPECT_EQ(created(), 2u);
  ASSERT_TRUE(manager().stop(kLocalTenant, first).has_value());
  ASSERT_TRUE(manager().stop(kLocalTenant, second.run_id).has_value());
  ASSERT_TRUE(manager().stop(kLocalTenant, third.run_id).has_value());
}

TEST_F(PreparedRunManagerTest, RunsThePoolCannotServeAreNotItsDemand) {
  settings_.prepared_max = 3;
  waitPrepared();
  std::vector<std::string> burst;
  for (int i = 0; i < 3; ++i) {
    burst.push_back(startOk(request(2, 30, 1, "#fake: exit=0\n")).run_id);
  }
  for (const std::string& id : burst) {
    EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);
  }
  advance(1s);
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_FALSE(manager().awaitPrepared(2, 0ms));
  EXPECT_EQ(created(), 1u + 3u);
}

TEST(DemandTest, TheLargestIsTheMostInFlightAtOnceInTheLastFiveMinutes) {
  sandbox::Demand demand;
  const common::SteadyTime t0{std::chrono::hours(1)};
  EXPECT_EQ(demand.largest(t0), 0u);
  demand.record(t0, 1);
  demand.record(t0 + 10ms, 2);
  demand.record(t0 + 20ms, 3);
  demand.record(t0 + 5s, 1);  // one after another from here: one in flight each time
  demand.record(t0 + 6s, 1);
  EXPECT_EQ(demand.largest(t0 + 6s), 3u);
  EXPECT_EQ(demand.largest(t0 + 300s + 20ms), 3u);
  EXPECT_EQ(demand.largest(t0 + 300s + 21ms), 1u);  // the three at once are forgotten
  EXPECT_EQ(demand.largest(t0 + 306s + 1ms), 0u);
}

TEST(DemandTest, TheRateIsArrivalsPerSecondOverTheLastMinuteAndAtLeastTenSeconds) {
  sandbox::Demand demand;
  const common::SteadyTime t0{std::chrono::hours(1)};
  EXPECT_EQ(demand.rate(t0), 0);
  demand.record(t0, 1);
  demand.record(t0 + 500ms, 1);
  EXPECT_DOUBLE_EQ(demand.rate(t0 + 500ms), 0.2);  // two over the ten-second floor
  for (int i = 2; i < 40; ++i) {
    demand.record(t0 + i * 500ms, 1);
  }
  EXPECT_DOUBLE_EQ(demand.rate(t0 + 19500ms), 40 / 19.5);  // two a second
  EXPECT_DOUBLE_EQ(demand.rate(t0 + 79500ms), 1 / 60.0);   // the last one, a minute ago
  EXPECT_EQ(demand.rate(t0 + 80s), 0);
}

// Runs one after another at a pace faster than a sandbox is made need more than one ready: as
// many as arrive while one is made, counted as a Poisson count (runs that arrive at random come
// close together as often as not), so that they outnumber the pool at most one time in ten.
TEST(PreparedPoolTest, ThePoolWantsEnoughForTheRunsThatArriveWhileOneIsMade) {
  sandbox::PoolSettings settings;
  settings.target = 1;
  settings.ceiling = 8;
  sandbox::PreparedPool pool(settings);
  const common::SteadyTime t0{std::chrono::hours(1)};
  EXPECT_EQ(pool.wanted(t0), 1u);
  pool.making(t0);
  pool.made(std::make_unique<sandbox::PreparedSandbox>(), t0 + 1500ms);
  EXPECT_DOUBLE_EQ(pool.bringUp().count(), 1.5);
  // One run every 2 s: 0.75 arrive while one is made on average, and two or fewer 96 times in
  // a hundred (one or none 83).
  common::SteadyTime at = t0 + 2s;
  for (int i = 0; i < 10; ++i, at += 2s) {
    pool.demanded(at);
    pool.demandEnded();
  }
  EXPECT_EQ(pool.wanted(at), 2u);
  // Two a second: three on average, five or fewer 91 times in a hundred.
  for (int i = 0; i < 120; ++i, at += 500ms) {
    pool.demanded(at);
    pool.demandEnded();
  }
  EXPECT_EQ(pool.wanted(at), 5u);
  // A faster engine: fewer.
  pool.making(at);
  pool.made(std::make_unique<sandbox::PreparedSandbox>(), at + 500ms);
  EXPECT_NEAR(pool.bringUp().count(), 1.2, 1e-9);  // smoothed: 0.7 x 1.5 + 0.3 x 0.5
  EXPECT_EQ(pool.wanted(at + 500ms), 4u);
  // Its sandboxes then import for 0.8 s before they are warm, as a run's trailer says: ready
  // only after 2 s, so four arrive on average meanwhile, seven or fewer 95 times in a hundred.
  pool.claimEnded(0.8);
  EXPECT_NEAR(pool.bringUp().count(), 2.0, 1e-9);
  pool.claimEnded(std::nullopt);  // a run that found the imports still going says nothing
  EXPECT_NEAR(pool.bringUp().count(), 2.0, 1e-9);
  EXPECT_EQ(pool.wanted(at + 500ms), 7u);
  // Never past the ceiling; and a minute without runs brings it back to its target.
  for (int i = 0; i < 200; ++i, at += 100ms) {
    pool.demanded(at);
    pool.demandEnded();
  }
  EXPECT_EQ(pool.wanted(at), 8u);
  EXPECT_EQ(pool.wanted(at + 301s), 1u);
}

TEST(DeferredSinkTest, HoldsWhatTheIdleSandboxWroteAndItsEndUntilBoundAndThenForwards) {
  sandbox::DeferredSink deferred;
  mocks::RecordingSink target;
  deferred.write(backend::Stream::kStdout, "idle ");
  deferred.write(backend::Stream::kStderr, "warn");
  deferred.ended();
  EXPECT_EQ(target.ends(), 0);
  deferred.bind(&target);
  EXPECT_EQ(target.out(), "idle ");
  EXPECT_EQ(target.err(), "warn");
  EXPECT_EQ(target.ends(), 1);

  sandbox::DeferredSink live;
  mocks::RecordingSink later;
  live.bind(&later);
  live.write(backend::Stream::kStdout, "run");
  EXPECT_EQ(later.ends(), 0);
  live.ended();
  EXPECT_EQ(later.out(), "run");
  EXPECT_EQ(later.ends(), 1);
}

// Sequential runs, however close together, are demand for one sandbox.
TEST_F(PreparedRunManagerTest, RunsOneAfterAnotherKeepThePoolAtItsTarget) {
  settings_.prepared_max = 3;
  waitPrepared();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(finalOf(startOk(request(1, 30, 1, "#fake: exit=0\n")).run_id).status,
              policy::RunStatus::kSucceeded);
    waitPrepared(1);
  }
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_FALSE(manager().awaitPrepared(2, 0ms));
  EXPECT_EQ(created(), 4u);
}

TEST_F(PreparedRunManagerTest, AnIdleSandboxIsReplacedAfterTheLongestIdleTime) {
  waitPrepared();
  advance(299s);
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_FALSE(fake().sandbox("fake-1")->removed);
  advance(1s);
  EXPECT_TRUE(awaitSandbox("fake-1", [](const View& view) { return view.removed; }));
  EXPECT_TRUE(awaitSandbox("fake-2", [](const View& view) { return view.started; }));
}

TEST_F(PreparedRunManagerTest, StoppingARunInAPreparedSandboxKillsItAndWaitsForItsRemoval) {
  waitPrepared();
  const std::string id = startOk().run_id;
  ASSERT_TRUE(awaitSandbox("fake-1", [](const View& view) { return !view.archive.empty(); }));
  const auto stopped = manager().stop(kLocalTenant, id);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_TRUE(fake().sandbox("fake-1")->killed);
  EXPECT_TRUE(fake().sandbox("fake-1")->removed);
}

TEST_F(PreparedRunManagerTest, ARunStoppedAsSoonAsItTookAPreparedSandboxStillRemovesIt) {
  // The stop races the run's thread: some runs are stopped before they begin executing.
  for (int i = 0; i < 30; ++i) {
    waitPrepared();
    const std::string id = startOk().run_id;
    const auto stopped = manager().stop(kLocalTenant, id);
    ASSERT_TRUE(stopped.has_value());
    EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
    // stop() returns once the run's sandbox is removed: at most the pool's next one is left.
    EXPECT_LE(created() - removed(), 1u) << "round " << i;
  }
  manager().shutdown();
  EXPECT_EQ(removed(), created());
}

TEST_F(PreparedRunManagerTest, ShutdownRemovesEveryPreparedSandbox) {
  settings_.prepared = 2;
  waitPrepared(2);
  manager().shutdown();
  EXPECT_EQ(created(), 2u);
  EXPECT_EQ(removed(), 2u);
}

// SPEC §5: a stopping server exits within 2 s. Its sandboxes are removed at once, and with a
// deadline the shutdown waits for the engine only until then; the manager's destructor waits
// for the rest.
TEST_F(PreparedRunManagerTest,
       ShutdownRemovesEverySandboxAtOnceAndWaitsForTheEngineOnlyUntilItsDeadline) {
  settings_.prepared = 3;
  waitPrepared(3);
  fake().holdRemovals(true);
  std::thread stopping([&] { manager().shutdown(1500ms); });
  ASSERT_TRUE(fake().awaitSandboxes([](const std::vector<View>& views) {
    return std::count_if(views.begin(), views.end(), [](const View& v) { return v.removing; }) == 3;
  })) << "the three removals are not under way together";
  ASSERT_TRUE(clock_.awaitWaiters(1));  // the shutdown waits for them, on the clock
  clock_.advance(1500ms);
  stopping.join();
  EXPECT_EQ(removed(), 0u) << "the engine has removed none: the shutdown returned at its deadline";
  fake().holdRemovals(false);
  manager_.reset();  // waits for the removals left
  EXPECT_EQ(removed(), 3u);
}

// Issue 29: a run of a package set runs its layer's image, and the set gets prepared sandboxes
// of that image for as long as its demand lasts, as the operator's image's pool does.
StartRequest withPackages(const std::string& image) {
  StartRequest start_request = request();
  start_request.packages = PackageLayerUse{image, {"purepkg==2.0"}, false, 0};
  return start_request;
}

TEST_F(PreparedRunManagerTest, APackageSetsRunsGetPreparedSandboxesOfItsLayer) {
  settings_.prepared_max_idle = 3600s;
  waitPrepared();
  const std::string first = startRunning(withPackages("layer:a"));
  // Not the operator's prepared sandbox: one of the layer's image, made for it.
  EXPECT_TRUE(fake().sandbox("fake-1")->archive.empty());
  EXPECT_EQ(sandboxOfRun(first)->spec.posture.image, "layer:a");
  finish(first, 0);
  EXPECT_EQ(finalOf(first).packages->image, "layer:a");

  // The set's pool makes one of its own, and the set's next run takes it.
  const auto preparedOfLayer = [](const View& view) {
    return view.spec.posture.image == "layer:a" &&
           view.spec.labels.at(sandbox::kLabelRunId).rfind("prepared-", 0) == 0;
  };
  ASSERT_TRUE(fake().awaitSandboxes([&](const std::vector<View>& views) {
    return std::any_of(views.begin(), views.end(), [&](const View& view) {
      return preparedOfLayer(view) && view.started && !view.removed;
    });
  }));
  const std::string second = startOk(withPackages("layer:a")).run_id;
  ASSERT_TRUE(fake().awaitSandboxes([&](const std::vector<View>& views) {
    return std::any_of(views.begin(), views.end(), [&](const View& view) {
      return preparedOfLayer(view) && view.archive.find(kHangingCode) != std::string::npos;
    });
  }));
  EXPECT_FALSE(sandboxOfRun(second).has_value());  // it created nothing of its own
  const auto stopped = manager().stop(kLocalTenant, second);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_TRUE(stopped->prepared_sandbox);

  // Five minutes without a run of the set: none of its sandboxes is kept.
  advance(301s);
  EXPECT_TRUE(eventually([&] {
    const auto views = fake().sandboxes();
    return std::none_of(views.begin(), views.end(), [](const View& view) {
      return !view.removed && view.spec.posture.image == "layer:a";
    });
  }));
}

TEST_F(PreparedRunManagerTest, TheSetAskedForLastTakesThePlaceOfAnIdleSetsPool) {
  settings_.prepared_package_sets = 1;
  settings_.prepared_max_idle = 3600s;
  waitPrepared();
  const auto live = [&](const std::string& image) {
    const auto views = fake().sandboxes();
    return std::count_if(views.begin(), views.end(), [&](const View& view) {
      return !view.removed && view.spec.posture.image == image &&
             view.spec.labels.at(sandbox::kLabelRunId).rfind("prepared-", 0) == 0;
    });
  };
  // While a run of layer a executes, its pool serves it: layer b's run gets no pool.
  const std::string a = startRunning(withPackages("layer:a"));
  ASSERT_TRUE(eventually([&] { return live("layer:a") == 1; }));
  const std::string b = startRunning(withPackages("layer:b"));
  finish(b, 0);
  EXPECT_EQ(finalOf(b).status, policy::RunStatus::kSucceeded);
  ASSERT_TRUE(clock_.awaitWaiters(2));  // a's run and the maintenance thread
  EXPECT_EQ(live("layer:b"), 0);

  // Once a's pool is idle, the next run of b takes its place: a's sandbox goes, b's comes.
  finish(a, 0);
  EXPECT_EQ(finalOf(a).status, policy::RunStatus::kSucceeded);
  const std::string again = startRunning(withPackages("layer:b"));
  EXPECT_TRUE(eventually([&] { return live("layer:a") == 0 && live("layer:b") == 1; }));
  finish(again, 0);
  EXPECT_EQ(finalOf(again).status, policy::RunStatus::kSucceeded);
}

TEST_F(PreparedRunManagerTest, ARunThePoolsCannotServeMakesNoPoolForItsSet) {
  waitPrepared();
  StartRequest bigger = withPackages("layer:a");
  bigger.limits = request(2).limits;  // more memory than prepared sandboxes have
  const std::string run = startRunning(std::move(bigger));
  finish(run, 0);
  EXPECT_EQ(finalOf(run).status, policy::RunStatus::kSucceeded);
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_EQ(created(), 2u);  // the main pool's and the run's own: none of the layer's
}

TEST_F(PreparedRunManagerTest, WithPreparationOffAPackageSetGetsNoPool) {
  settings_.prepared = 0;
  const std::string run = startRunning(withPackages("layer:a"));
  finish(run, 0);
  EXPECT_EQ(finalOf(run).status, policy::RunStatus::kSucceeded);
  advance(1s);
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_EQ(created(), 1u);
}

}  // namespace
}  // namespace scs::runs
