#include "runs/run_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mocks/mock_backend.h"
#include "support/manual_clock.h"

namespace scs::runs {
namespace {

using namespace std::chrono_literals;
using ::testing::_;
using ::testing::AtLeast;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Return;
using ::testing::Throw;

constexpr auto kPatience = 10s;

using TestClock = testing::ManualClock;

// An in-memory engine behind the mock's default actions: a started sandbox runs until the
// test finishes it or something kills or removes it.
class FakeEngine {
 public:
  struct Sandbox {
    std::string run_id;
    backend::SandboxSpec spec;
    std::string archive;
    backend::OutputSink* sink = nullptr;
    bool started = false;
    bool ended = false;
    bool killed = false;
    bool removed = false;
    backend::Exit exit;
  };

  FakeEngine(mocks::MockRuntimeBackend& mock, const Clock& clock) : clock_(clock) {
    ON_CALL(mock, create(_)).WillByDefault([this](const backend::SandboxSpec& spec) {
      return create(spec);
    });
    ON_CALL(mock, inspect(_)).WillByDefault([this](const std::string& id) { return inspect(id); });
    ON_CALL(mock, deliver(_, _))
        .WillByDefault([this](const std::string& id, const std::string& archive) {
          return deliver(id, archive);
        });
    ON_CALL(mock, start(_, _))
        .WillByDefault(
            [this](const std::string& id, backend::OutputSink* sink) { return start(id, sink); });
    ON_CALL(mock, wait(_, _))
        .WillByDefault([this](const std::string& id, std::chrono::milliseconds timeout) {
          return wait(id, timeout);
        });
    ON_CALL(mock, kill(_)).WillByDefault([this](const std::string& id) { return kill(id); });
    ON_CALL(mock, remove(_)).WillByDefault([this](const std::string& id) { return remove(id); });
    ON_CALL(mock, list(_)).WillByDefault([this](const std::string&) { return list_; });
  }

  // Scripting; set before any run starts.
  void failAt(const std::string& call) { fail_at_ = call; }
  void tamperReadBack(std::function<void(backend::Posture&)> tamper) {
    tamper_ = std::move(tamper);
  }
  void ignoreKill() { ignore_kill_ = true; }
  void setList(backend::ListReply list) { list_ = std::move(list); }

  // Ends a started run's sandbox as if its main process exited with `exit_code`.
  void finish(const std::string& run_id, int exit_code, const std::string& out = "",
              const std::string& err = "") {
    std::lock_guard lock(mutex_);
    Sandbox& sandbox = byRun(run_id);
    if (!out.empty()) {
      sandbox.sink->write(backend::Stream::kStdout, out);
    }
    if (!err.empty()) {
      sandbox.sink->write(backend::Stream::kStderr, err);
    }
    sandbox.ended = true;
    sandbox.exit.exit_code = exit_code;
    changed_.notify_all();
  }

  bool waitStarted(const std::string& run_id) {
    return waitFor([&] { return has(run_id) && byRun(run_id).started; });
  }
  bool waitStartedCount(std::size_t count) {
    return waitFor([&] { return startedCountLocked() == count; });
  }
  bool waitKilled(const std::string& run_id) {
    return waitFor([&] { return has(run_id) && byRun(run_id).killed; });
  }

  bool waitRemoved(const std::string& run_id) {
    return waitFor([&] { return has(run_id) && byRun(run_id).removed; });
  }
  bool waitRemovedCount(std::size_t count) {
    return waitFor([&] { return removedCountLocked() == count; });
  }
  // For sandboxes made before their run existed (prepared), by sandbox id.
  bool waitSandbox(const std::string& id, const std::function<bool(const Sandbox&)>& condition) {
    return waitFor([&] { return sandboxes_.count(id) != 0 && condition(sandboxes_.at(id)); });
  }
  // The id of a sandbox for which `condition` holds, once one does; empty after kPatience.
  std::string waitAnySandbox(const std::function<bool(const Sandbox&)>& condition) {
    std::string found;
    waitFor([&] {
      for (const auto& [id, sandbox] : sandboxes_) {
        if (condition(sandbox)) {
          found = id;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::optional<Sandbox> sandbox(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto found = sandboxes_.find(id);
    if (found == sandboxes_.end()) {
      return std::nullopt;
    }
    return found->second;
  }
  void finishSandbox(const std::string& id, int exit_code, const std::string& out = "") {
    std::lock_guard lock(mutex_);
    Sandbox& sandbox = sandboxes_.at(id);
    if (!out.empty()) {
      sandbox.sink->write(backend::Stream::kStdout, out);
    }
    sandbox.ended = true;
    sandbox.exit.exit_code = exit_code;
    changed_.notify_all();
  }
  // remove() blocks until releaseRemovals().
  void holdRemovals() {
    std::lock_guard lock(mutex_);
    hold_removals_ = true;
  }
  void releaseRemovals() {
    std::lock_guard lock(mutex_);
    hold_removals_ = false;
    changed_.notify_all();
  }

  std::optional<Sandbox> sandboxOf(const std::string& run_id) {
    std::lock_guard lock(mutex_);
    if (!has(run_id)) {
      return std::nullopt;
    }
    return byRun(run_id);
  }
  std::size_t createdCount() {
    std::lock_guard lock(mutex_);
    return sandboxes_.size();
  }
  std::size_t removedCount() {
    std::lock_guard lock(mutex_);
    return removedCountLocked();
  }
  // Sandboxes a run's thread waits on: started with their code and not ended.
  std::size_t waitedOnCount() {
    std::lock_guard lock(mutex_);
    std::size_t count = 0;
    for (const auto& [id, sandbox] : sandboxes_) {
      count += sandbox.started && !sandbox.ended && !sandbox.archive.empty() ? 1 : 0;
    }
    return count;
  }

 private:
  std::size_t removedCountLocked() {
    std::size_t count = 0;
    for (const auto& [id, sandbox] : sandboxes_) {
      count += sandbox.removed ? 1 : 0;
    }
    return count;
  }

  backend::CreateReply create(const backend::SandboxSpec& spec) {
    std::lock_guard lock(mutex_);
    if (fail_at_ == "create") {
      return {{backend::Code::kUnavailable, "engine unreachable"}, ""};
    }
    const std::string id = "sb-" + std::to_string(sandboxes_.size() + 1);
    sandboxes_[id].run_id = spec.run_id;
    sandboxes_[id].spec = spec;
    run_to_sandbox_[spec.run_id] = id;
    changed_.notify_all();
    return {{}, id};
  }

  backend::InspectReply inspect(const std::string& id) {
    std::lock_guard lock(mutex_);
    if (fail_at_ == "inspect") {
      return {{backend::Code::kTimeout, "inspect timed out"}, {}};
    }
    backend::Posture posture = sandboxes_.at(id).spec.posture;
    if (tamper_) {
      tamper_(posture);
    }
    return {{}, posture};
  }

  backend::Status deliver(const std::string& id, const std::string& archive) {
    std::lock_guard lock(mutex_);
    if (fail_at_ == "deliver") {
      return {backend::Code::kRejected, "copy refused"};
    }
    sandboxes_.at(id).archive = archive;
    changed_.notify_all();
    return {};
  }

  backend::Status start(const std::string& id, backend::OutputSink* sink) {
    std::lock_guard lock(mutex_);
    if (fail_at_ == "start") {
      return {backend::Code::kInternal, "start exploded"};
    }
    Sandbox& sandbox = sandboxes_.at(id);
    sandbox.sink = sink;
    sandbox.started = true;
    changed_.notify_all();
    return {};
  }

  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (fail_at_ == "wait") {
      return {{backend::Code::kUnavailable, "connection reset"}, {}};
    }
    clock_.waitFor(changed_, lock, timeout, [&] { return sandboxes_.at(id).ended; });
    backend::WaitReply reply;
    if (sandboxes_.at(id).ended) {
      reply.exit = sandboxes_.at(id).exit;
      reply.exit.exited = true;
    }
    return reply;
  }

  backend::Status kill(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto found = sandboxes_.find(id);
    if (found == sandboxes_.end() || found->second.removed) {
      return {backend::Code::kNotFound, "no such sandbox"};
    }
    found->second.killed = true;
    if (!ignore_kill_ && !found->second.ended) {
      found->second.ended = true;
      found->second.exit.exit_code = 137;
    }
    changed_.notify_all();
    return {};
  }

  backend::Status remove(const std::string& id) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !hold_removals_; });
    Sandbox& sandbox = sandboxes_.at(id);
    sandbox.removed = true;
    sandbox.ended = true;
    changed_.notify_all();
    return {};
  }

  bool has(const std::string& run_id) { return run_to_sandbox_.count(run_id) != 0; }
  Sandbox& byRun(const std::string& run_id) { return sandboxes_.at(run_to_sandbox_.at(run_id)); }
  std::size_t startedCountLocked() {
    std::size_t count = 0;
    for (const auto& [id, sandbox] : sandboxes_) {
      count += sandbox.started ? 1 : 0;
    }
    return count;
  }
  bool waitFor(const std::function<bool()>& condition) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kPatience, condition);
  }

  const Clock& clock_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Sandbox> sandboxes_;
  std::map<std::string, std::string> run_to_sandbox_;
  std::string fail_at_;
  std::function<void(backend::Posture&)> tamper_;
  bool ignore_kill_ = false;
  bool hold_removals_ = false;
  backend::ListReply list_;
};

template <typename Condition>
bool eventually(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

StartRequest request(double memory_gb = 1, double timeout_seconds = 30, double cpus = 1) {
  StartRequest request;
  request.files = {{"main.py", "print('hi')\n"}, {"data/input.txt", "42\n"}};
  request.limits = {memory_gb, timeout_seconds, cpus, 256};
  return request;
}

class RunManagerTest : public ::testing::Test {
 protected:
  RunManagerTest() { settings_.instance_id = "test-instance"; }

  RunManager& manager() {
    if (!manager_) {
      manager_ = std::make_unique<RunManager>(backend_, settings_, sandbox_, clock_);
    }
    return *manager_;
  }

  RunSnapshot startOk(StartRequest start_request = request()) {
    auto started = manager().start(std::move(start_request));
    EXPECT_TRUE(std::holds_alternative<RunSnapshot>(started))
        << std::get<StartRefusal>(started).message;
    return std::get<RunSnapshot>(started);
  }

  std::string startRunning(StartRequest start_request = request()) {
    const RunSnapshot snapshot = startOk(std::move(start_request));
    EXPECT_EQ(snapshot.status, policy::RunStatus::kRunning);
    EXPECT_TRUE(engine_.waitStarted(snapshot.run_id));
    return snapshot.run_id;
  }

  RunSnapshot finalOf(const std::string& run_id) {
    std::optional<RunSnapshot> snapshot = manager().get(kLocalTenant, run_id, kPatience);
    EXPECT_TRUE(snapshot.has_value());
    if (!snapshot) {
      return {};
    }
    EXPECT_TRUE(policy::isFinal(snapshot->status)) << policy::statusName(snapshot->status);
    return *snapshot;
  }

  // Moves the server's clock once every thread that waits on it is waiting: the maintenance
  // thread and the thread of each run whose sandbox runs.
  void advance(std::chrono::milliseconds by) {
    ASSERT_TRUE(clock_.awaitWaiters(1 + engine_.waitedOnCount()));
    clock_.advance(by);
  }

  policy::RunStatus statusOf(const std::string& run_id) {
    const auto snapshot = manager().get(kLocalTenant, run_id);
    return snapshot ? snapshot->status : policy::RunStatus::kSandboxError;
  }

  TestClock clock_;
  ::testing::NiceMock<mocks::MockRuntimeBackend> backend_;
  FakeEngine engine_{backend_, clock_};
  RunSettings settings_;
  policy::SandboxSettings sandbox_;
  std::unique_ptr<RunManager> manager_;  // last: it stops before the engine goes away
};

TEST_F(RunManagerTest, ASuccessfulRunDrivesTheBackendInOrder) {
  {
    InSequence in_order;
    EXPECT_CALL(backend_, create(_));
    EXPECT_CALL(backend_, inspect(_));
    EXPECT_CALL(backend_, deliver(_, _));
    EXPECT_CALL(backend_, start(_, _));
    EXPECT_CALL(backend_, wait(_, _)).Times(AtLeast(1));
    EXPECT_CALL(backend_, remove("sb-1"));
  }
  EXPECT_CALL(backend_, kill(_)).Times(0);

  const std::string id = startRunning();
  advance(2500ms);
  engine_.finish(id, 0, "hello\n", "a warning\n");

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
  EXPECT_EQ(report.started_at, TestClock::wallStart());
  EXPECT_EQ(report.finished_at, TestClock::wallStart() + 2500ms);
  EXPECT_EQ(report.limits, request().limits);
  EXPECT_FALSE(report.queue_position.has_value());
  EXPECT_FALSE(report.prepared_sandbox);
  EXPECT_TRUE(engine_.waitRemoved(id));
}

TEST_F(RunManagerTest, TheSpecCarriesTheCommandEnvironmentLabelsAndPosture) {
  const StartRequest start_request = request(2, 29.5, 1.5);
  const std::string id = startRunning(start_request);
  const auto sandbox = engine_.sandboxOf(id);
  ASSERT_TRUE(sandbox.has_value());
  const backend::SandboxSpec& spec = sandbox->spec;

  EXPECT_EQ(spec.run_id, id);
  EXPECT_EQ(spec.command,
            (std::vector<std::string>{"/usr/bin/timeout", "-s", "KILL", "40", "/usr/bin/python3",
                                      "-I", "/opt/scs/launcher.py"}));
  EXPECT_EQ(spec.env, (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp",
                                                "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1",
                                                "PYTHONUNBUFFERED=1", "MPLBACKEND=Agg",
                                                "OMP_NUM_THREADS=2", "OPENBLAS_NUM_THREADS=2"}));
  EXPECT_EQ(spec.working_dir, "/workspace");
  EXPECT_EQ(spec.hostname, "sandbox");
  const long long start_unix = 1'700'000'000;
  EXPECT_EQ(spec.labels, (std::map<std::string, std::string>{
                             {kLabelManaged, "true"},
                             {kLabelInstance, "test-instance"},
                             {kLabelRunId, id},
                             {kLabelOwnerPid, std::to_string(getpid())},
                             {kLabelDeadline, std::to_string(start_unix + 40 + 60)}}));
  EXPECT_EQ(spec.posture, policy::requiredPosture(start_request.limits, sandbox_));

  EXPECT_THAT(sandbox->archive, HasSubstr("main.py"));
  EXPECT_THAT(sandbox->archive, HasSubstr("print('hi')\n"));
  EXPECT_THAT(sandbox->archive, HasSubstr("data/input.txt"));
  engine_.finish(id, 0);
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);
}

TEST_F(RunManagerTest, APostureDifferenceInTheReadBackFailsBeforeAnyCodeIsDelivered) {
  engine_.tamperReadBack([](backend::Posture& posture) { posture.read_only_root = false; });
  EXPECT_CALL(backend_, create(_));
  EXPECT_CALL(backend_, inspect(_));
  EXPECT_CALL(backend_, deliver(_, _)).Times(0);
  EXPECT_CALL(backend_, start(_, _)).Times(0);
  EXPECT_CALL(backend_, remove("sb-1")).Times(1);

  const RunSnapshot report = finalOf(startOk().run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr("posture check failed"));
  EXPECT_THAT(report.reason, HasSubstr("read"));
  EXPECT_FALSE(report.exit_code.has_value());
}

TEST_F(RunManagerTest, ASpecThatFailsThePostureCheckNeverReachesTheBackend) {
  sandbox_.user = "0:0";
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
  engine_.failAt(point.call);
  EXPECT_CALL(backend_, remove(_)).Times(point.removes);
  if (point.call != "wait") {
    EXPECT_CALL(backend_, wait(_, _)).Times(0);
  }

  const RunSnapshot report = finalOf(startOk().run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr(point.reason));
  EXPECT_TRUE(engine_.waitRemovedCount(static_cast<std::size_t>(point.removes)));
}

INSTANTIATE_TEST_SUITE_P(
    EveryCall, RunManagerFailureTest,
    ::testing::Values(FailurePoint{"create", "create failed: engine unreachable", 0},
                      FailurePoint{"inspect", "inspect failed: inspect timed out", 1},
                      FailurePoint{"deliver", "delivery failed: copy refused", 1},
                      FailurePoint{"start", "start failed: start exploded", 1},
                      FailurePoint{"wait", "lost the sandbox while waiting: connection reset", 1}),
    [](const auto& info) { return info.param.call; });

TEST_F(RunManagerTest, AnExceptionFromTheBackendIsASandboxErrorAndTheSandboxIsRemoved) {
  EXPECT_CALL(backend_, deliver(_, _)).WillOnce(Throw(std::runtime_error("bad archive")));
  EXPECT_CALL(backend_, start(_, _)).Times(0);
  EXPECT_CALL(backend_, remove("sb-1")).Times(1);

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
  EXPECT_CALL(backend_, remove("sb-1"))
      .Times(3)
      .WillOnce(fail)
      .WillOnce(fail)
      .WillOnce(::testing::DoDefault());
  const std::string id = startRunning();
  engine_.finish(id, 0);
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);

  // Retried at once, then after a pause of 1 s on the server's clock.
  ASSERT_TRUE(eventually([&] { return failures == 2; }));
  ASSERT_TRUE(clock_.awaitWaiters(1));  // the maintenance thread waits for the next retry
  EXPECT_FALSE(engine_.sandboxOf(id)->removed);
  advance(1s);
  EXPECT_TRUE(engine_.waitRemoved(id));
}

TEST_F(RunManagerTest, ShutdownTriesAFailedRemovalOnceMoreAndLeavesTheRestToTheSweep) {
  std::atomic<int> attempts{0};
  EXPECT_CALL(backend_, remove("sb-1")).WillRepeatedly(::testing::InvokeWithoutArgs([&] {
    ++attempts;
    return backend::Status{backend::Code::kUnavailable, "engine gone"};
  }));
  const std::string id = startRunning();
  engine_.finish(id, 0);
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);
  ASSERT_TRUE(eventually([&] { return attempts == 2; }));

  const auto before = std::chrono::steady_clock::now();
  manager().shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);
  EXPECT_EQ(attempts, 3);
}

TEST_F(RunManagerTest, TheServerTimerKillsARunThatOutlivesItsTimeout) {
  EXPECT_CALL(backend_, kill("sb-1")).Times(AtLeast(1));
  EXPECT_CALL(backend_, remove("sb-1")).Times(1);
  const std::string id = startRunning(request(1, 5));
  advance(4900ms);
  EXPECT_EQ(statusOf(id), policy::RunStatus::kRunning);
  advance(200ms);

  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.status, policy::RunStatus::kTimedOut);
  EXPECT_EQ(report.signal, "SIGKILL");
  EXPECT_TRUE(engine_.sandboxOf(id)->killed);
  EXPECT_GE(report.duration_seconds, 5.0);
}

TEST_F(RunManagerTest, TheTimeoutClockStartsWhenTheRunStartsExecuting) {
  settings_.max_concurrent = 1;
  const std::string first = startRunning(request(1, 300));
  const RunSnapshot second = startOk(request(1, 5));
  ASSERT_EQ(second.status, policy::RunStatus::kQueued);

  advance(100s);
  engine_.finish(first, 0);
  ASSERT_TRUE(engine_.waitStarted(second.run_id));
  advance(4s);
  engine_.finish(second.run_id, 0);

  const RunSnapshot report = finalOf(second.run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSucceeded);
  EXPECT_DOUBLE_EQ(report.queued_seconds, 100);
  EXPECT_DOUBLE_EQ(report.duration_seconds, 4);
  EXPECT_FALSE(engine_.sandboxOf(second.run_id)->killed);
}

TEST_F(RunManagerTest, ASandboxThatIgnoresKillIsGivenUpAfterTenSeconds) {
  engine_.ignoreKill();
  const std::string id = startRunning(request(1, 5));
  advance(6s);
  ASSERT_TRUE(engine_.waitKilled(id));
  advance(9s);
  ASSERT_TRUE(clock_.awaitWaiters(2));  // the run's thread and the maintenance thread
  EXPECT_EQ(statusOf(id), policy::RunStatus::kRunning);
  advance(2s);

  const RunSnapshot report = finalOf(id);
  EXPECT_TRUE(engine_.waitRemoved(id));
  EXPECT_EQ(report.status, policy::RunStatus::kTimedOut);
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

  engine_.finish(running, 0);
  ASSERT_TRUE(engine_.waitStarted(third.run_id));
  EXPECT_FALSE(engine_.sandboxOf(second.run_id).has_value());
  EXPECT_EQ(engine_.createdCount(), 2u);
}

TEST_F(RunManagerTest, StoppingARunningRunKillsItAndReturnsOnceItIsRemoved) {
  EXPECT_CALL(backend_, kill("sb-1")).Times(AtLeast(1));
  const std::string id = startRunning();

  const auto stopped = manager().stop(kLocalTenant, id);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_EQ(stopped->signal, "SIGKILL");
  EXPECT_TRUE(engine_.sandboxOf(id)->removed);
  EXPECT_TRUE(engine_.sandboxOf(id)->killed);

  const auto again = manager().stop(kLocalTenant, id);
  EXPECT_EQ(again->status, policy::RunStatus::kStopped);
  EXPECT_EQ(again->reason, stopped->reason);
}

TEST_F(RunManagerTest, StoppingAFinishedRunChangesNothing) {
  EXPECT_CALL(backend_, kill(_)).Times(0);
  const std::string id = startRunning();
  engine_.finish(id, 3, "", "Traceback\n");
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
  ASSERT_TRUE(engine_.waitStartedCount(4));
  EXPECT_EQ(engine_.createdCount(), 4u);
  EXPECT_FALSE(engine_.sandboxOf(runs[4].run_id).has_value());

  engine_.finish(runs[1].run_id, 0);
  ASSERT_TRUE(engine_.waitStarted(runs[4].run_id));
  EXPECT_EQ(statusOf(runs[4].run_id), policy::RunStatus::kRunning);
  EXPECT_EQ(manager().get(kLocalTenant, runs[5].run_id)->queue_position, 1u);
  EXPECT_EQ(engine_.createdCount(), 5u);

  engine_.finish(runs[0].run_id, 0);
  ASSERT_TRUE(engine_.waitStarted(runs[5].run_id));
  EXPECT_EQ(engine_.createdCount(), 6u);
}

StartRequest requestOf(const std::string& tenant) {
  StartRequest start_request = request();
  start_request.tenant = tenant;
  return start_request;
}

TEST_F(RunManagerTest, ARunIsUnknownToEveryTenantButItsOwner) {
  const RunSnapshot mine = startOk(requestOf("alice"));
  EXPECT_FALSE(manager().get("bob", mine.run_id).has_value());
  EXPECT_FALSE(manager().get(kLocalTenant, mine.run_id).has_value());
  EXPECT_FALSE(manager().stop("bob", mine.run_id).has_value());
  ASSERT_TRUE(engine_.waitStarted(mine.run_id));
  EXPECT_FALSE(engine_.sandboxOf(mine.run_id)->killed);  // bob's stop touched nothing
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

  engine_.finish(first, 0);
  ASSERT_TRUE(engine_.waitStarted(modest.run_id));
  EXPECT_FALSE(engine_.sandboxOf(greedy[0].run_id).has_value());
  engine_.finish(modest.run_id, 0);
  // FIFO within a tenant.
  ASSERT_TRUE(engine_.waitStarted(greedy[0].run_id));
  EXPECT_FALSE(engine_.sandboxOf(greedy[1].run_id).has_value());
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
    engine_.finish(running, 0);
    ASSERT_TRUE(engine_.waitStarted(expected[i].second)) << i;
    EXPECT_EQ(engine_.createdCount(), i + 2);  // nothing else started meanwhile
    running = expected[i].second;
  }
}

TEST_F(RunManagerTest, TheQueueBoundIsPerTenant) {
  settings_.max_concurrent = 1;
  settings_.max_queue = 2;
  startRunning(requestOf("a"));
  startOk(requestOf("a"));
  startOk(requestOf("a"));
  EXPECT_TRUE(std::holds_alternative<StartRefusal>(manager().start(requestOf("a"))));
  const RunSnapshot other = startOk(requestOf("b"));
  EXPECT_EQ(other.status, policy::RunStatus::kQueued);
  EXPECT_EQ(other.queue_position, 1u);
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
  engine_.finish(holder, 0);
  ASSERT_TRUE(engine_.waitStarted(waiting.run_id));
  ASSERT_TRUE(engine_.waitStarted(small.run_id));
}

TEST_F(RunManagerTest, AStartBeyondTheQueueBoundIsRefused) {
  settings_.max_concurrent = 1;
  settings_.max_queue = 2;
  startRunning();
  startOk();
  startOk();
  const auto refused = manager().start(request());
  ASSERT_TRUE(std::holds_alternative<StartRefusal>(refused));
  EXPECT_EQ(std::get<StartRefusal>(refused).message,
            "The queue is full: 2 runs are waiting behind 1 running. Try again when a run "
            "finishes.");
  EXPECT_EQ(engine_.createdCount(), 1u);
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
  ASSERT_TRUE(std::holds_alternative<StartRefusal>(too_big));
  EXPECT_THAT(std::get<StartRefusal>(too_big).message, HasSubstr("9 GB"));

  engine_.finish(big, 0);
  ASSERT_TRUE(engine_.waitStarted(second_big.run_id));
  ASSERT_TRUE(engine_.waitStarted(small.run_id));
  EXPECT_EQ(statusOf(small.run_id), policy::RunStatus::kRunning);
}

TEST_F(RunManagerTest, ReportsExpireAfterTheRetentionPeriod) {
  settings_.retention = 60s;
  const std::string id = startRunning();
  engine_.finish(id, 0);
  finalOf(id);

  advance(59s);
  EXPECT_TRUE(manager().get(kLocalTenant, id).has_value());
  advance(2s);
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
    engine_.finish(id, 0);
    finalOf(id);
    finished.push_back(id);
  }
  EXPECT_FALSE(manager().get(kLocalTenant, finished[0]).has_value());
  EXPECT_TRUE(manager().get(kLocalTenant, finished[1]).has_value());
  EXPECT_TRUE(manager().get(kLocalTenant, finished[2]).has_value());
  EXPECT_EQ(statusOf(live), policy::RunStatus::kRunning);
}

TEST_F(RunManagerTest, ReportsOverTheRetainedBytesAreForgottenOldestFirstButNeverTheNewest) {
  settings_.max_retained_bytes = 2u << 20;
  const std::string big(900u << 10, 'x');  // about 0.9 MiB kept per report
  std::vector<std::string> finished;
  for (int i = 0; i < 3; ++i) {
    const std::string id = startRunning();
    engine_.finish(id, 0, big);
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
  engine_.finish(huge, 0, huge_output);
  EXPECT_EQ(finalOf(huge).stdout_output.bytes, huge_output.size());
  EXPECT_TRUE(manager().get(kLocalTenant, huge).has_value());
}

TEST_F(RunManagerTest, GetLongPollsUntilTheRunFinishes) {
  const std::string id = startRunning();
  // The wait ends when the server's clock reaches it.
  auto waited = std::async(std::launch::async, [&] { return manager().get(kLocalTenant, id, 5s); });
  ASSERT_TRUE(clock_.awaitWaiters(3));  // the poll, the run's thread, the maintenance thread
  clock_.advance(4s);
  ASSERT_TRUE(clock_.awaitWaiters(3));
  EXPECT_EQ(waited.wait_for(0s), std::future_status::timeout);
  advance(1s);
  EXPECT_EQ(waited.get()->status, policy::RunStatus::kRunning);

  auto polled =
      std::async(std::launch::async, [&] { return manager().get(kLocalTenant, id, kPatience); });
  engine_.finish(id, 0, "done\n");
  const auto report = polled.get();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(report->stdout_output.text, "done\n");
}

TEST_F(RunManagerTest, OutputIsCappedPerStream) {
  settings_.output_cap_bytes = 16;
  const std::string id = startRunning();
  engine_.finish(id, 0, std::string(100, 'x') + "END\n");
  const RunSnapshot report = finalOf(id);
  EXPECT_TRUE(report.stdout_output.truncated);
  EXPECT_EQ(report.stdout_output.bytes, 104u);
  EXPECT_THAT(report.stdout_output.text, ::testing::EndsWith("END\n"));
  EXPECT_FALSE(report.stderr_output.truncated);
}

int impossiblePid() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  int pid_max = 0;
  in >> pid_max;
  return pid_max + 1;
}

backend::SandboxInfo leftover(const std::string& id, std::map<std::string, std::string> labels) {
  labels[kLabelManaged] = "true";
  return {id, std::move(labels)};
}

TEST_F(RunManagerTest, SweepRemovesLeftoversOfDeadOrExpiredInstancesOnly) {
  const std::string live_pid = std::to_string(getpid());
  const std::string dead_pid = std::to_string(impossiblePid());
  const std::string future = std::to_string(1'700'000'000 + 3600);
  const std::string past = std::to_string(1'700'000'000 - 1);
  backend::ListReply list;
  list.sandboxes = {
      leftover(
          "ours",
          {{kLabelInstance, "test-instance"}, {kLabelOwnerPid, dead_pid}, {kLabelDeadline, past}}),
      leftover("live",
               {{kLabelInstance, "other"}, {kLabelOwnerPid, live_pid}, {kLabelDeadline, future}}),
      leftover("dead-owner",
               {{kLabelInstance, "other"}, {kLabelOwnerPid, dead_pid}, {kLabelDeadline, future}}),
      leftover("unlabelled", {{kLabelInstance, "other"}}),
      leftover("garbled", {{kLabelInstance, "other"}, {kLabelOwnerPid, "12abc"}}),
      leftover("group", {{kLabelInstance, "other"}, {kLabelOwnerPid, "-1"}}),
      leftover("expired",
               {{kLabelInstance, "other"}, {kLabelOwnerPid, live_pid}, {kLabelDeadline, past}}),
  };
  engine_.setList(list);
  EXPECT_CALL(backend_, list(kLabelManaged));
  EXPECT_CALL(backend_, remove("ours")).Times(0);
  EXPECT_CALL(backend_, remove("live")).Times(0);
  for (const char* gone : {"dead-owner", "unlabelled", "garbled", "group", "expired"}) {
    EXPECT_CALL(backend_, remove(gone)).WillOnce(Return(backend::Status{}));
  }
  EXPECT_EQ(manager().sweepLeftovers(), 5u);
}

TEST_F(RunManagerTest, SweepCountsOnlyWhatItRemoved) {
  backend::ListReply list;
  list.sandboxes = {leftover("a", {}), leftover("b", {})};
  engine_.setList(list);
  EXPECT_CALL(backend_, remove("a")).WillOnce(Return(backend::Status{}));
  EXPECT_CALL(backend_, remove("b"))
      .WillOnce(Return(backend::Status{backend::Code::kUnavailable, "busy"}));
  EXPECT_EQ(manager().sweepLeftovers(), 1u);

  EXPECT_CALL(backend_, list(_))
      .WillOnce(Return(backend::ListReply{{backend::Code::kUnavailable, "down"}, {}}));
  EXPECT_EQ(manager().sweepLeftovers(), 0u);
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

  EXPECT_EQ(engine_.createdCount(), 4u);
  EXPECT_EQ(engine_.removedCount(), 4u);
  for (const std::string& id : running) {
    EXPECT_EQ(statusOf(id), policy::RunStatus::kStopped);
    EXPECT_TRUE(engine_.sandboxOf(id)->killed);
  }
  const auto stopped = manager().get(kLocalTenant, queued.run_id);
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_THAT(stopped->reason, HasSubstr("before it started"));

  const auto refused = manager().start(request());
  ASSERT_TRUE(std::holds_alternative<StartRefusal>(refused));
  EXPECT_EQ(std::get<StartRefusal>(refused).message, "The server is shutting down.");

  manager().shutdown();
  EXPECT_EQ(engine_.removedCount(), 4u);
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
    ASSERT_TRUE(manager().awaitPrepared(count, kPatience));
  }
};

TEST_F(PreparedRunManagerTest, APreparedSandboxIsCheckedAndStartedIdleBeforeAnyRun) {
  {
    InSequence in_order;
    EXPECT_CALL(backend_, create(_));
    EXPECT_CALL(backend_, inspect("sb-1"));
    EXPECT_CALL(backend_, start("sb-1", _));
  }
  EXPECT_CALL(backend_, deliver(_, _)).Times(0);
  waitPrepared();

  const backend::SandboxSpec spec = engine_.sandbox("sb-1")->spec;
  EXPECT_EQ(spec.posture, policy::requiredPosture(request().limits, sandbox_));
  // The watchdog and the deadline label allow for the idle time: 30 + 10 + 300.
  EXPECT_EQ(spec.command[3], "340");
  EXPECT_EQ(spec.labels.at(kLabelDeadline), std::to_string(1'700'000'000 + 340 + 60));
  EXPECT_EQ(spec.labels.at(kLabelPrepared), "true");
  EXPECT_EQ(spec.labels.at(kLabelManaged), "true");
  EXPECT_EQ(spec.labels.at(kLabelInstance), "test-instance");
  EXPECT_THAT(spec.labels.at(kLabelRunId), ::testing::StartsWith("prepared-"));
  EXPECT_TRUE(engine_.sandbox("sb-1")->archive.empty());
}

TEST_F(PreparedRunManagerTest, ARunWithTheSameLimitsGetsItsCodeInThePreparedSandbox) {
  waitPrepared();
  const RunSnapshot started = startOk();
  ASSERT_EQ(started.status, policy::RunStatus::kRunning);
  ASSERT_TRUE(engine_.waitSandbox("sb-1", [](const auto& sandbox) {
    return sandbox.archive.find("print('hi')\n") != std::string::npos;
  }));
  advance(1500ms);
  engine_.finishSandbox("sb-1", 0, "hello\n");

  const RunSnapshot report = finalOf(started.run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(report.stdout_output.text, "hello\n");
  EXPECT_DOUBLE_EQ(report.duration_seconds, 1.5);
  EXPECT_TRUE(report.prepared_sandbox);
  EXPECT_TRUE(engine_.waitSandbox("sb-1", [](const auto& sandbox) { return sandbox.removed; }));
  // The pool replaces what the run used; the run itself created nothing.
  EXPECT_TRUE(engine_.waitSandbox("sb-2", [](const auto& sandbox) { return sandbox.started; }));
  EXPECT_THAT(engine_.sandbox("sb-2")->spec.labels.at(kLabelRunId),
              ::testing::StartsWith("prepared-"));
}

TEST_F(PreparedRunManagerTest, ThePoolRefillsOnlyOnceTheRunThatTookItsSandboxEndsOrHasRunASecond) {
  waitPrepared();
  const std::string first = startOk().run_id;
  ASSERT_TRUE(
      engine_.waitSandbox("sb-1", [](const auto& sandbox) { return !sandbox.archive.empty(); }));
  advance(999ms);
  ASSERT_TRUE(clock_.awaitWaiters(2));  // the run's thread and the maintenance thread
  EXPECT_EQ(engine_.createdCount(), 1u) << "the pool competed with the run for the CPU";
  engine_.finishSandbox("sb-1", 0);
  EXPECT_EQ(finalOf(first).status, policy::RunStatus::kSucceeded);
  EXPECT_TRUE(engine_.waitSandbox("sb-2", [](const auto& sandbox) { return sandbox.started; }));

  // A long run does not hold the pool back for longer than a second.
  waitPrepared();
  const std::string second = startOk().run_id;
  ASSERT_TRUE(
      engine_.waitSandbox("sb-2", [](const auto& sandbox) { return !sandbox.archive.empty(); }));
  advance(999ms);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_EQ(engine_.createdCount(), 2u);
  advance(1ms);
  EXPECT_TRUE(engine_.waitSandbox("sb-3", [](const auto& sandbox) { return sandbox.started; }));
  engine_.finishSandbox("sb-2", 0);
  EXPECT_EQ(finalOf(second).status, policy::RunStatus::kSucceeded);
}

TEST_F(PreparedRunManagerTest, OutputTheIdleLauncherWroteReachesTheRunThatTakesIt) {
  waitPrepared();
  engine_.sandbox("sb-1")->sink->write(backend::Stream::kStderr, "a warning while idle\n");
  const std::string id = startOk().run_id;
  ASSERT_TRUE(
      engine_.waitSandbox("sb-1", [](const auto& sandbox) { return !sandbox.archive.empty(); }));
  engine_.finishSandbox("sb-1", 0, "done\n");
  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.stderr_output.text, "a warning while idle\n");
  EXPECT_EQ(report.stdout_output.text, "done\n");
}

TEST_F(PreparedRunManagerTest, RunsWithOtherLimitsTakeTheNormalPathAndAShorterTimeoutDoesNot) {
  waitPrepared();
  const std::string more_memory = startRunning(request(2, 30, 1));
  EXPECT_EQ(engine_.sandboxOf(more_memory)->spec.posture,
            policy::requiredPosture(request(2, 30, 1).limits, sandbox_));
  const std::string longer = startRunning(request(1, 31, 1));
  EXPECT_TRUE(engine_.sandbox("sb-1")->archive.empty());

  const std::string shorter = startOk(request(1, 5, 1)).run_id;
  ASSERT_TRUE(
      engine_.waitSandbox("sb-1", [](const auto& sandbox) { return !sandbox.archive.empty(); }));
  EXPECT_FALSE(engine_.sandboxOf(shorter).has_value());  // nothing was created for it

  // Its own timeout holds, not the longer one the prepared sandbox's watchdog allows.
  EXPECT_CALL(backend_, kill("sb-1")).Times(AtLeast(1));
  advance(6s);
  EXPECT_EQ(finalOf(shorter).status, policy::RunStatus::kTimedOut);
  engine_.finish(more_memory, 0);
  engine_.finish(longer, 0);
  EXPECT_EQ(finalOf(more_memory).status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(finalOf(longer).status, policy::RunStatus::kSucceeded);
}

TEST_F(PreparedRunManagerTest, ASandboxThatFailsItsPostureCheckIsRemovedAndNeverUsed) {
  engine_.tamperReadBack([](backend::Posture& posture) { posture.read_only_root = false; });
  EXPECT_CALL(backend_, start(_, _)).Times(0);
  EXPECT_CALL(backend_, deliver(_, _)).Times(0);
  manager();
  ASSERT_TRUE(engine_.waitRemovedCount(1));
  EXPECT_THAT(engine_.sandbox("sb-1")->spec.labels.at(kLabelRunId),
              ::testing::StartsWith("prepared-"));

  // The run is refused on its own check; the pool waits before trying again.
  const RunSnapshot report = finalOf(startOk().run_id);
  EXPECT_EQ(report.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(report.reason, HasSubstr("posture check failed"));
  EXPECT_TRUE(engine_.waitRemovedCount(2));
  EXPECT_EQ(engine_.createdCount(), 2u);
}

TEST_F(PreparedRunManagerTest, ASandboxThatEndedWhileIdleIsNeverGivenARunsCode) {
  EXPECT_CALL(backend_, deliver(_, _)).Times(::testing::AnyNumber());
  EXPECT_CALL(backend_, deliver("sb-1", _)).Times(0);
  waitPrepared();
  engine_.finishSandbox("sb-1", 125);
  // The run finds it dead and creates a sandbox, or the pool has replaced it already.
  const std::string id = startOk().run_id;
  const std::string used = engine_.waitAnySandbox(
      [](const auto& sandbox) { return sandbox.started && !sandbox.archive.empty(); });
  ASSERT_FALSE(used.empty());
  EXPECT_NE(used, "sb-1");
  engine_.finishSandbox(used, 0, "fine\n");
  const RunSnapshot report = finalOf(id);
  EXPECT_EQ(report.status, policy::RunStatus::kSucceeded);
  EXPECT_EQ(report.stdout_output.text, "fine\n");
  // A sandbox created for the run carries its run id; the pool's replacement does not.
  EXPECT_EQ(report.prepared_sandbox, !engine_.sandboxOf(id).has_value());
  EXPECT_TRUE(engine_.waitSandbox("sb-1", [](const auto& sandbox) { return sandbox.removed; }));
}

TEST_F(PreparedRunManagerTest, AnIdleSandboxThatEndsIsReplacedBeforeARunNeedsIt) {
  waitPrepared();
  engine_.finishSandbox("sb-1", 125);
  advance(1s);  // the pool checks its idle sandboxes every second
  EXPECT_TRUE(engine_.waitSandbox("sb-1", [](const auto& sandbox) { return sandbox.removed; }));
  EXPECT_TRUE(engine_.waitSandbox("sb-2", [](const auto& sandbox) { return sandbox.started; }));
  EXPECT_TRUE(engine_.sandbox("sb-1")->archive.empty());
}

TEST_F(PreparedRunManagerTest, PreparedSandboxesCountAgainstHostMemoryAndGiveWayToARun) {
  settings_.host_memory_bytes = 2 * policy::kBytesPerGb;  // the prepared sandbox holds 1 GB
  waitPrepared();
  const std::string big = startRunning(request(2, 30, 1));
  EXPECT_TRUE(engine_.waitSandbox("sb-1", [](const auto& sandbox) { return sandbox.removed; }));
  EXPECT_TRUE(engine_.sandbox("sb-1")->archive.empty());
  // While the big run holds all the memory the pool makes nothing.
  advance(5s);
  ASSERT_TRUE(clock_.awaitWaiters(2));
  EXPECT_EQ(engine_.createdCount(), 2u);

  engine_.finish(big, 0);
  EXPECT_EQ(finalOf(big).status, policy::RunStatus::kSucceeded);
  EXPECT_TRUE(engine_.waitSandbox("sb-3", [](const auto& sandbox) { return sandbox.started; }));
}

TEST_F(PreparedRunManagerTest, AnIdleSandboxIsReplacedAfterTheLongestIdleTime) {
  waitPrepared();
  advance(299s);
  ASSERT_TRUE(clock_.awaitWaiters(1));
  EXPECT_FALSE(engine_.sandbox("sb-1")->removed);
  advance(1s);
  EXPECT_TRUE(engine_.waitSandbox("sb-1", [](const auto& sandbox) { return sandbox.removed; }));
  EXPECT_TRUE(engine_.waitSandbox("sb-2", [](const auto& sandbox) { return sandbox.started; }));
}

TEST_F(PreparedRunManagerTest, StoppingARunInAPreparedSandboxKillsItAndWaitsForItsRemoval) {
  waitPrepared();
  const std::string id = startOk().run_id;
  ASSERT_TRUE(
      engine_.waitSandbox("sb-1", [](const auto& sandbox) { return !sandbox.archive.empty(); }));
  const auto stopped = manager().stop(kLocalTenant, id);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_TRUE(engine_.sandbox("sb-1")->killed);
  EXPECT_TRUE(engine_.sandbox("sb-1")->removed);
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
    EXPECT_LE(engine_.createdCount() - engine_.removedCount(), 1u) << "round " << i;
  }
  manager().shutdown();
  EXPECT_EQ(engine_.removedCount(), engine_.createdCount());
}

TEST_F(PreparedRunManagerTest, ShutdownRemovesEveryPreparedSandbox) {
  settings_.prepared = 2;
  waitPrepared(2);
  manager().shutdown();
  EXPECT_EQ(engine_.createdCount(), 2u);
  EXPECT_EQ(engine_.removedCount(), 2u);
}

TEST_F(RunManagerTest, ARunIsReportedBeforeItsSandboxIsRemovedAndStopWaitsForTheRemoval) {
  const std::string id = startRunning();
  engine_.holdRemovals();
  engine_.finish(id, 0, "out\n");
  EXPECT_EQ(finalOf(id).status, policy::RunStatus::kSucceeded);
  EXPECT_FALSE(engine_.sandboxOf(id)->removed);

  auto stopped = std::async(std::launch::async, [&] { return manager().stop(kLocalTenant, id); });
  EXPECT_EQ(stopped.wait_for(100ms), std::future_status::timeout);
  engine_.releaseRemovals();
  ASSERT_EQ(stopped.wait_for(kPatience), std::future_status::ready);
  const auto report = stopped.get();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->status, policy::RunStatus::kSucceeded);
  EXPECT_TRUE(engine_.sandboxOf(id)->removed);
}

}  // namespace
}  // namespace scs::runs
