// Sessions in the run manager (runs/sessions.cc) over the in-process fake backend, on a clock
// only the test moves: state carried between runs, the session's own queue, interrupts at a
// timeout or a stop, the ends of a session (closed, idle, too old, its interpreter gone), the
// caps, tenancy and memory admission.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "fake_backend.h"
#include "runs/run_manager.h"
#include "sessions/session_store.h"
#include "support/eventually.h"
#include "support/manual_clock.h"

namespace scs::runs {
namespace {

using namespace std::chrono_literals;
using fake::FakeBackend;
using ::testing::HasSubstr;
using View = FakeBackend::View;

using scs::testing::eventually;
using sessions::SavedSession;
using sessions::SessionSnapshot;
using sessions::SessionStore;

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() {
    settings_.instance_id = "test-instance";
    settings_.sessions.idle = 60s;
    settings_.sessions.max_lifetime = 600s;
    settings_.sessions.max_open = 3;
    settings_.sessions.max_open_per_tenant = 2;
    options_.keep_removed = true;
  }

  FakeBackend& fake() {
    if (!fake_) {
      fake_.emplace(options_, nullptr, &clock_);
    }
    return *fake_;
  }

  RunManager& manager() {
    fake();
    if (!manager_) {
      manager_ = std::make_unique<RunManager>(*fake_, settings_, sandbox_, clock_, &events_);
    }
    return *manager_;
  }

  // The refusals the manager counts (what /metrics shows), by category.
  struct Refusals : RunEvents {
    void refused(const std::string&, Refusal why) override {
      std::lock_guard lock(mutex);
      seen.push_back(why);
    }
    void accepted(const std::string&) override {}
    void finished(const std::string&, policy::RunStatus, std::optional<double>,
                  std::optional<double>) override {}
    void preparedTaken(bool) override {}
    std::vector<Refusal> taken() {
      std::lock_guard lock(mutex);
      return seen;
    }
    std::mutex mutex;
    std::vector<Refusal> seen;
  };

  Result<SessionSnapshot> tryOpen(const std::string& tenant = kLocalTenant, double memory_gb = 1) {
    OpenSessionRequest request;
    request.tenant = tenant;
    request.limits = {memory_gb, 30, 1, 256};
    request.files = {{"data/input.txt", "42\n"}};
    return manager().openSession(std::move(request));
  }

  std::string open(const std::string& tenant = kLocalTenant, double memory_gb = 1) {
    auto opened = tryOpen(tenant, memory_gb);
    EXPECT_TRUE(std::holds_alternative<SessionSnapshot>(opened)) << std::get<Error>(opened).message;
    return std::holds_alternative<SessionSnapshot>(opened)
               ? std::get<SessionSnapshot>(opened).session_id
               : std::string();
  }

  Result<RunSnapshot> tryRun(const std::string& session_id, const std::string& code,
                             double timeout_seconds = 30,
                             const std::string& tenant = kLocalTenant) {
    StartRequest request;
    request.files = {{"main.py", code}};
    request.limits = {8, timeout_seconds, 4, 256};  // memory and cpus are the session's
    request.tenant = tenant;
    Result<SessionTicket> ticket = manager().sessionForRun(tenant, session_id, {});
    if (Error* refusal = std::get_if<Error>(&ticket)) {
      return *refusal;
    }
    request.session = std::get<SessionTicket>(ticket).session;
    return manager().start(std::move(request));
  }

  std::string run(const std::string& session_id, const std::string& code,
                  double timeout_seconds = 30) {
    auto started = tryRun(session_id, code, timeout_seconds);
    EXPECT_TRUE(std::holds_alternative<RunSnapshot>(started)) << std::get<Error>(started).message;
    return std::holds_alternative<RunSnapshot>(started) ? std::get<RunSnapshot>(started).run_id
                                                        : std::string();
  }

  RunSnapshot finalOf(const std::string& run_id) {
    std::optional<RunSnapshot> snapshot;
    EXPECT_TRUE(eventually([&] {
      snapshot = manager().get(kLocalTenant, run_id);
      return snapshot && policy::isFinal(snapshot->status);
    })) << "run "
        << run_id << " never ended";
    return snapshot.value_or(RunSnapshot{});
  }

  // The session's sandbox: created for it, or prepared and told to become it.
  std::optional<View> sessionSandbox(std::size_t index = 0) {
    std::size_t seen = 0;
    for (View& view : fake().sandboxes()) {
      if (view.serves_session && seen++ == index) {
        return std::move(view);
      }
    }
    return std::nullopt;
  }

  // Opens a session (*session, the index-th session sandbox) whose code sets x = 1, then lets it
  // idle the 60 s that hibernate it. Call with ASSERT_NO_FATAL_FAILURE.
  void openAndNap(std::string* session, std::size_t index = 0) {
    *session = open();
    EXPECT_EQ(finalOf(run(*session, "#fake:set=x=1\n")).status, policy::RunStatus::kSucceeded);
    advance(60s);
    ASSERT_TRUE(eventually([&] { return sessionSandbox(index)->snapshotted; }));
  }

  // Moves the clock once the maintenance thread and `others` waiting threads wait on it.
  void advance(std::chrono::milliseconds by, std::size_t others = 0) {
    ASSERT_TRUE(clock_.awaitWaiters(1 + others));
    clock_.advance(by);
  }

  // Sessions hibernate and are kept across restarts in a directory of the test's.
  const SessionStore& keepSessions() {
    char pattern[] = "/tmp/scs-state-XXXXXX";
    state_dir_ = ::mkdtemp(pattern);
    Result<SessionStore> opened = SessionStore::open(state_dir_);
    EXPECT_TRUE(std::holds_alternative<SessionStore>(opened)) << std::get<Error>(opened).message;
    store_.emplace(std::move(std::get<SessionStore>(opened)));
    settings_.sessions.hibernate = true;
    settings_.sessions.store = &*store_;
    return *store_;
  }

  ~SessionTest() override {
    manager_.reset();
    if (!state_dir_.empty()) {
      std::filesystem::remove_all(state_dir_);
    }
  }

  testing::ManualClock clock_;
  fake::Options options_;
  std::optional<FakeBackend> fake_;
  RunSettings settings_;
  policy::SandboxSettings sandbox_;
  std::string state_dir_;
  std::optional<SessionStore> store_;
  Refusals events_;
  std::unique_ptr<RunManager> manager_;  // last: it stops before the backend goes away
};

TEST_F(SessionTest, StateCarriesBetweenRunsAndTheLastExpressionComesBack) {
  const std::string session = open();
  const std::optional<View> sandbox = sessionSandbox();
  ASSERT_TRUE(sandbox);
  EXPECT_EQ(sandbox->spec.command.back(), "--session");
  EXPECT_EQ(sandbox->spec.posture.memory_bytes, std::int64_t{1} << 30);

  const RunSnapshot first = finalOf(run(session, "#fake:set=x=42\n#fake:stdout=set\n"));
  EXPECT_EQ(first.status, policy::RunStatus::kSucceeded) << first.reason;
  EXPECT_EQ(first.stdout_output.text, "set");
  EXPECT_EQ(first.session_id, session);
  EXPECT_TRUE(first.session_alive);
  EXPECT_THAT(first.reason, HasSubstr("The session is still open."));
  EXPECT_FALSE(first.results.result);
  // Its memory and cpus are the session's, whatever the run asked for.
  EXPECT_EQ(first.limits.memory_gb, 1);
  EXPECT_EQ(first.limits.cpus, 1);

  const RunSnapshot second = finalOf(run(session, "#fake:get=x\n"));
  EXPECT_EQ(second.status, policy::RunStatus::kSucceeded) << second.reason;
  EXPECT_EQ(second.results.result, "42");
  // One sandbox served both; the session's files came with its first run only.
  EXPECT_EQ(fake().sandboxes().size(), 1u);
  EXPECT_FALSE(sessionSandbox()->removed);

  const RunSnapshot unknown = finalOf(run(session, "#fake:get=y\n"));
  EXPECT_EQ(unknown.status, policy::RunStatus::kFailed);
  ASSERT_TRUE(unknown.results.exception);
  EXPECT_EQ(unknown.results.exception->type, "NameError");
  EXPECT_TRUE(unknown.session_alive);
}

TEST_F(SessionTest, ItsRunsWaitInItsQueueInOrderAndAStopInterruptsOnlyTheCode) {
  const std::string session = open();
  const std::string first = run(session, "#fake:hang\n");
  const std::string second = run(session, "#fake:result=two\n");
  const std::string third = run(session, "#fake:result=three\n");
  ASSERT_TRUE(
      eventually([&] { return sessionSandbox()->archive.find("hang") != std::string::npos; }));
  EXPECT_EQ(manager().get(kLocalTenant, second)->status, policy::RunStatus::kQueued);
  EXPECT_EQ(manager().get(kLocalTenant, second)->queue_position, 2u);
  EXPECT_EQ(manager().get(kLocalTenant, third)->queue_position, 3u);

  const std::optional<RunSnapshot> stopped = manager().stop(kLocalTenant, first);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->status, policy::RunStatus::kStopped);
  EXPECT_THAT(stopped->reason, HasSubstr("interrupted (KeyboardInterrupt)"));
  EXPECT_TRUE(stopped->session_alive);
  EXPECT_EQ(finalOf(second).results.result, "two");
  EXPECT_EQ(finalOf(third).results.result, "three");
}

TEST_F(SessionTest, ATimeoutInterruptsTheCodeAndTheSessionLivesOn) {
  const std::string session = open();
  const std::string id = run(session, "#fake:hang\n", 5);
  ASSERT_TRUE(
      eventually([&] { return sessionSandbox()->archive.find("hang") != std::string::npos; }));
  advance(4999ms, 1);
  EXPECT_EQ(manager().get(kLocalTenant, id)->status, policy::RunStatus::kRunning);
  advance(1ms, 1);
  const RunSnapshot timed_out = finalOf(id);
  EXPECT_EQ(timed_out.status, policy::RunStatus::kTimedOut);
  EXPECT_THAT(timed_out.reason, HasSubstr("5-second limit was reached and the run's code was "
                                          "interrupted (KeyboardInterrupt)"));
  EXPECT_TRUE(timed_out.session_alive);
  ASSERT_TRUE(timed_out.results.exception);
  EXPECT_EQ(timed_out.results.exception->type, "KeyboardInterrupt");
  EXPECT_EQ(finalOf(run(session, "#fake:result=after\n")).results.result, "after");
}

TEST_F(SessionTest, CodeThatIgnoresTheInterruptEndsTheSession) {
  const std::string session = open();
  const std::string id = run(session, "#fake:ignore_interrupt\n", 5);
  const std::string queued = run(session, "#fake:result=never\n");
  ASSERT_TRUE(eventually(
      [&] { return sessionSandbox()->archive.find("ignore_interrupt") != std::string::npos; }));
  advance(5s, 1);  // the timeout: the code is interrupted
  advance(2999ms, 1);
  EXPECT_EQ(manager().get(kLocalTenant, id)->status, policy::RunStatus::kRunning);
  advance(1ms, 1);  // the grace is over: the sandbox is killed and the session ends
  const RunSnapshot ended = finalOf(id);
  EXPECT_EQ(ended.status, policy::RunStatus::kTimedOut);
  EXPECT_FALSE(ended.session_alive);
  EXPECT_THAT(ended.reason, HasSubstr("did not stop within 3 s of KeyboardInterrupt"));
  const RunSnapshot stopped = finalOf(queued);
  EXPECT_EQ(stopped.status, policy::RunStatus::kStopped);
  EXPECT_THAT(stopped.reason, HasSubstr("its session ended"));
  EXPECT_TRUE(eventually([&] { return sessionSandbox()->removed; }));
  auto refused = tryRun(session, "#fake:result=late\n");
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_THAT(std::get<Error>(refused).message, HasSubstr("has ended"));
  EXPECT_EQ(std::get<Error>(refused).kind, ErrorKind::kInvalid);  // asking again fails again
  EXPECT_EQ(events_.taken(), std::vector<RunEvents::Refusal>{RunEvents::Refusal::kInvalid});
}

TEST_F(SessionTest, AnOomThatKillsTheInterpreterEndsTheSessionOneThatKillsAChildDoesNot) {
  const std::string session = open();
  const RunSnapshot child = finalOf(run(session, "#fake:child_oom\n"));
  EXPECT_EQ(child.status, policy::RunStatus::kSucceeded) << child.reason;
  EXPECT_TRUE(child.session_alive);

  const RunSnapshot killed = finalOf(run(session, "#fake:oom\n"));
  EXPECT_EQ(killed.status, policy::RunStatus::kOutOfMemory) << killed.reason;
  EXPECT_FALSE(killed.session_alive);
  EXPECT_THAT(killed.reason, HasSubstr("killed by the OOM killer"));
  EXPECT_TRUE(eventually([&] { return sessionSandbox()->removed; }));
}

TEST_F(SessionTest, AnIdleSessionExpiresAndOneAtItsLifetimeEndsWhileBusy) {
  const std::string idle = open();
  EXPECT_EQ(finalOf(run(idle, "#fake:result=1\n")).status, policy::RunStatus::kSucceeded);
  advance(59s);
  EXPECT_FALSE(sessionSandbox(0)->removed);
  advance(1s);
  EXPECT_TRUE(eventually([&] { return sessionSandbox(0)->removed; }));
  const std::optional<SessionSnapshot> closed = manager().closeSession(kLocalTenant, idle);
  ASSERT_TRUE(closed);
  EXPECT_FALSE(closed->open);
  EXPECT_EQ(closed->end_reason, "it was idle for 60 s");

  const std::string busy = open();
  const std::string id = run(busy, "#fake:ignore_interrupt\n", 1000);
  ASSERT_TRUE(
      eventually([&] { return sessionSandbox(1)->archive.find("ignore") != std::string::npos; }));
  for (int i = 0; i < 6; ++i) {
    advance(100s, 1);  // the run's thread waits too
  }
  const RunSnapshot ended = finalOf(id);
  EXPECT_EQ(ended.status, policy::RunStatus::kStopped);
  EXPECT_FALSE(ended.session_alive);
  EXPECT_THAT(ended.reason, HasSubstr("it reached its maximum lifetime of 600 s"));
  EXPECT_TRUE(eventually([&] { return sessionSandbox(1)->removed; }));
}

// Where the backend snapshots sandboxes, an idle session hibernates instead of ending: its
// sandbox stays (stopped), it holds none of the host's memory, and its next run wakes it with
// its names, the wake counted as the server's time, not the run's.
TEST_F(SessionTest, AnIdleSessionHibernatesFreesItsMemoryAndItsNextRunWakesIt) {
  settings_.sessions.hibernate = true;
  settings_.host_memory_bytes = std::int64_t{8} << 30;
  const std::string session = open(kLocalTenant, 3);
  EXPECT_EQ(finalOf(run(session, "#fake:set=x=42\n")).status, policy::RunStatus::kSucceeded);
  advance(59s);
  EXPECT_FALSE(sessionSandbox()->snapshotted);
  advance(1s);
  ASSERT_TRUE(eventually([&] { return sessionSandbox()->snapshotted; }));
  EXPECT_FALSE(sessionSandbox()->removed);

  // 6 GB fits beside nothing but a hibernated session of 3.
  StartRequest big;
  big.files = {{"main.py", "#fake:exit=0\n"}};
  big.limits = {6, 30, 1, 256};
  const RunSnapshot fresh = finalOf(std::get<RunSnapshot>(manager().start(std::move(big))).run_id);
  EXPECT_EQ(fresh.status, policy::RunStatus::kSucceeded) << fresh.reason;

  const RunSnapshot woke = finalOf(run(session, "#fake:get=x\n"));
  EXPECT_EQ(woke.status, policy::RunStatus::kSucceeded) << woke.reason;
  EXPECT_EQ(woke.results.result, "42");
  ASSERT_TRUE(woke.woke_seconds);
  EXPECT_TRUE(woke.session_alive);
  EXPECT_FALSE(sessionSandbox()->snapshotted);
  EXPECT_EQ(fake().sandboxes().size(), 2u) << "waking made a sandbox instead of resuming one";

  // Awake again, it holds its memory: a 6 GB run now waits until it is closed.
  StartRequest waiting;
  waiting.files = {{"main.py", "#fake:exit=0\n"}};
  waiting.limits = {6, 30, 1, 256};
  const std::string queued = std::get<RunSnapshot>(manager().start(std::move(waiting))).run_id;
  EXPECT_EQ(manager().get(kLocalTenant, queued)->status, policy::RunStatus::kQueued);
  ASSERT_TRUE(manager().closeSession(kLocalTenant, session));
  EXPECT_EQ(finalOf(queued).status, policy::RunStatus::kSucceeded);
  EXPECT_TRUE(sessionSandbox()->removed);
}

TEST_F(SessionTest, AHibernatedSessionEndsAfterItsTimeAndItsLifetimeCountsOnlyAwakeTime) {
  settings_.sessions.hibernate = true;
  settings_.sessions.hibernated_max = 3600s;
  std::string session;
  ASSERT_NO_FATAL_FAILURE(openAndNap(&session));
  // Past its lifetime of 600 s since it opened, but awake for only 60 s of it.
  for (int i = 0; i < 3; ++i) {
    advance(300s);
  }
  const RunSnapshot woke = finalOf(run(session, "#fake:get=x\n"));
  EXPECT_EQ(woke.status, policy::RunStatus::kSucceeded) << woke.reason;
  EXPECT_EQ(woke.results.result, "1");
  ASSERT_TRUE(manager().closeSession(kLocalTenant, session));

  // One hibernated for --session-hibernate-seconds ends.
  std::string sleeper;
  ASSERT_NO_FATAL_FAILURE(openAndNap(&sleeper, 1));
  advance(3599s);
  EXPECT_FALSE(sessionSandbox(1)->removed);
  advance(1s);
  EXPECT_TRUE(eventually([&] { return sessionSandbox(1)->removed; }));
  const std::optional<SessionSnapshot> ended = manager().closeSession(kLocalTenant, sleeper);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->end_reason, "it was hibernated for 3600 s");
}

// Its sandbox's own deadline runs on while it sleeps: a session that naps and wakes ends once
// it is as old as its awake lifetime and one hibernation together, before that deadline could
// end its interpreter under a run.
TEST_F(SessionTest, ASessionThatNapsAndWakesEndsAtItsSandboxsLifetime) {
  settings_.sessions.hibernate = true;
  settings_.sessions.hibernated_max = 3600s;
  std::string session;
  ASSERT_NO_FATAL_FAILURE(openAndNap(&session));
  for (int i = 0; i < 10; ++i) {
    advance(300s);  // t = 3060 s
  }
  EXPECT_EQ(finalOf(run(session, "#fake:get=x\n")).results.result, "1");
  advance(60s);
  ASSERT_TRUE(eventually([&] { return sessionSandbox()->snapshotted; }));
  for (int i = 0; i < 3; ++i) {
    advance(300s);  // t = 4020 s
  }
  EXPECT_FALSE(sessionSandbox()->removed);
  advance(180s);  // t = 4200 s: 600 s awake and 3600 s hibernated
  EXPECT_TRUE(eventually([&] { return sessionSandbox()->removed; }));
  const std::optional<SessionSnapshot> ended = manager().closeSession(kLocalTenant, session);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->end_reason,
            "it reached its sandbox's lifetime of 4200 s, awake and hibernated together");
}

TEST_F(SessionTest, ASnapshotOrAWakeThatFailsEndsTheSessionWithTheReason) {
  settings_.sessions.hibernate = true;
  options_.fail = {"resume"};
  std::string session;
  ASSERT_NO_FATAL_FAILURE(openAndNap(&session));
  const RunSnapshot failed = finalOf(run(session, "#fake:get=x\n"));
  EXPECT_EQ(failed.status, policy::RunStatus::kSandboxError);
  EXPECT_THAT(failed.reason, HasSubstr("could not be woken from hibernation"));
  EXPECT_THAT(failed.reason, HasSubstr("resume failed as scripted"));
  EXPECT_FALSE(failed.session_alive);
  EXPECT_TRUE(eventually([&] { return sessionSandbox()->removed; }));

  options_.fail = {"snapshot"};
  manager_.reset();  // before the backend it stops with
  fake_.reset();
  const std::string other = open();
  EXPECT_EQ(finalOf(run(other, "#fake:set=x=1\n")).status, policy::RunStatus::kSucceeded);
  advance(60s);
  EXPECT_TRUE(eventually([&] { return sessionSandbox()->removed; }));
  const std::optional<SessionSnapshot> ended = manager().closeSession(kLocalTenant, other);
  ASSERT_TRUE(ended);
  EXPECT_THAT(ended->end_reason, HasSubstr("it could not be hibernated"));
}

// --state-dir: a shutdown keeps the sessions (hibernated, their records 0600), a run in progress
// is interrupted rather than killed, and the next run manager takes them back: their next runs
// wake them with their names; they stay their tenant's; close removes record and sandbox.
TEST_F(SessionTest, AShutdownKeepsSessionsAndTheNextServerTakesThemBack) {
  const SessionStore& store = keepSessions();
  const auto record = [&](const std::string& id) { return store.directory() + "/" + id + ".json"; };

  std::string napping;  // hibernated while idle: its record is written then
  ASSERT_NO_FATAL_FAILURE(openAndNap(&napping));
  struct stat status {};
  ASSERT_TRUE(eventually([&] { return ::stat(record(napping).c_str(), &status) == 0; }));
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  const std::string busy = open();
  EXPECT_EQ(finalOf(run(busy, "#fake:set=y=2\n")).status, policy::RunStatus::kSucceeded);
  const std::string hanging = run(busy, "#fake:hang\n");
  const std::string waiting = run(busy, "#fake:result=never\n");
  ASSERT_TRUE(
      eventually([&] { return sessionSandbox(1)->archive.find("hang") != std::string::npos; }));

  manager_->shutdown();
  const RunSnapshot interrupted = finalOf(hanging);
  EXPECT_EQ(interrupted.status, policy::RunStatus::kStopped);
  EXPECT_THAT(interrupted.reason, HasSubstr("KeyboardInterrupt"));
  EXPECT_EQ(finalOf(waiting).status, policy::RunStatus::kStopped);
  for (const std::string& id : {napping, busy}) {
    EXPECT_EQ(::access(record(id).c_str(), F_OK), 0) << id;
  }
  for (std::size_t index : {0u, 1u}) {
    EXPECT_TRUE(sessionSandbox(index)->snapshotted);
    EXPECT_FALSE(sessionSandbox(index)->removed);
  }
  manager_.reset();

  std::vector<std::string> problems;
  std::vector<SavedSession> kept = store.load(&problems);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(kept.size(), 2u);
  for (const SavedSession& saved : kept) {
    settings_.reserved_uids.push_back(saved.uid);
  }
  const TakenBack taken = manager().takeBack(std::move(kept));
  EXPECT_EQ(taken.sessions, 2u);
  EXPECT_EQ(taken.uids.size(), 2u);
  const RunSnapshot woke = finalOf(run(busy, "#fake:get=y\n"));
  EXPECT_EQ(woke.status, policy::RunStatus::kSucceeded) << woke.reason;
  EXPECT_EQ(woke.results.result, "2");
  EXPECT_TRUE(woke.woke_seconds.has_value());
  EXPECT_NE(::access(record(busy).c_str(), F_OK), 0);  // it lives in its sandbox again
  EXPECT_EQ(finalOf(run(napping, "#fake:get=x\n")).results.result, "1");
  auto foreign = tryRun(busy, "#fake:get=y\n", 30, "bob");
  ASSERT_TRUE(std::holds_alternative<Error>(foreign));
  EXPECT_THAT(std::get<Error>(foreign).message, HasSubstr("Unknown session_id"));
  ASSERT_TRUE(manager().closeSession(kLocalTenant, busy));
  EXPECT_TRUE(sessionSandbox(1)->removed);
}

// A record the backend cannot take back is dropped with its reason; one past its time ends.
TEST_F(SessionTest, AKeptSessionTheBackendCannotTakeBackIsDropped) {
  const SessionStore& store = keepSessions();
  std::string session;
  ASSERT_NO_FATAL_FAILURE(openAndNap(&session));
  manager_.reset();
  std::vector<std::string> problems;
  std::vector<SavedSession> kept = store.load(&problems);
  ASSERT_EQ(kept.size(), 1u);
  kept[0].backend_saved = "not what it saved";
  const TakenBack taken = manager().takeBack(std::move(kept));
  EXPECT_EQ(taken.sessions, 0u);
  EXPECT_TRUE(taken.uids.empty());             // its sandbox is a leftover for the sweep
  EXPECT_TRUE(store.load(&problems).empty());  // its record is gone
  auto gone = tryRun(session, "#fake:get=x\n");
  ASSERT_TRUE(std::holds_alternative<Error>(gone));
}

TEST_F(SessionTest, SessionsBelongToTheirTenantAndAreCapped) {
  const std::string alice = open("alice");
  open("alice");
  auto third = tryOpen("alice");
  ASSERT_TRUE(std::holds_alternative<Error>(third));
  EXPECT_THAT(std::get<Error>(third).message, HasSubstr("2 sessions open"));
  open("bob");
  auto total = tryOpen("carol");
  ASSERT_TRUE(std::holds_alternative<Error>(total));
  EXPECT_THAT(std::get<Error>(total).message, HasSubstr("the most it allows"));

  auto foreign = tryRun(alice, "#fake:result=x\n", 30, "bob");
  ASSERT_TRUE(std::holds_alternative<Error>(foreign));
  EXPECT_THAT(std::get<Error>(foreign).message, HasSubstr("Unknown session_id"));
  EXPECT_FALSE(manager().closeSession("bob", alice));
  ASSERT_TRUE(manager().closeSession("alice", alice));
  open("carol");  // a closed one no longer counts
}

TEST_F(SessionTest, ASessionsMemoryCountsAgainstTheHostWhileItIsOpen) {
  settings_.host_memory_bytes = std::int64_t{8} << 30;
  open("alice", 3);
  // One tenant's sessions hold at most half of the host's memory.
  auto hoarding = tryOpen("alice", 2);
  ASSERT_TRUE(std::holds_alternative<Error>(hoarding));
  EXPECT_THAT(std::get<Error>(hoarding).message, HasSubstr("more than half"));
  const std::string bobs = open("bob", 4);
  auto full = tryOpen("carol", 2);
  ASSERT_TRUE(std::holds_alternative<Error>(full));
  EXPECT_THAT(std::get<Error>(full).message, HasSubstr("Not enough of the host's memory"));
  // A fresh run of 2 GB waits for memory while the sessions are open, and starts once one closes.
  StartRequest request;
  request.files = {{"main.py", "#fake:exit=0\n"}};
  request.limits = {2, 30, 1, 256};
  const std::string waiting = std::get<RunSnapshot>(manager().start(std::move(request))).run_id;
  EXPECT_EQ(manager().get(kLocalTenant, waiting)->status, policy::RunStatus::kQueued);
  ASSERT_TRUE(manager().closeSession("bob", bobs));
  EXPECT_EQ(finalOf(waiting).status, policy::RunStatus::kSucceeded);
}

// A run holds its session from the tools' one lookup to start(): a session that ended between
// the two is said to have ended, once, and a server shutting down says so before any session.
TEST_F(SessionTest, ARunWhoseSessionEndedBeforeItStartedIsToldSo) {
  const std::string session = open();
  Result<SessionTicket> ticket = manager().sessionForRun(kLocalTenant, session, {});
  ASSERT_TRUE(std::holds_alternative<SessionTicket>(ticket)) << std::get<Error>(ticket).message;
  ASSERT_TRUE(manager().closeSession(kLocalTenant, session));
  StartRequest request;
  request.files = {{"main.py", "#fake:result=1\n"}};
  request.limits = {8, 30, 4, 256};
  request.session = std::get<SessionTicket>(ticket).session;
  StartRequest foreign = request;
  foreign.tenant = "bob";  // a ticket is its tenant's alone
  const auto ended = manager().start(std::move(request));
  ASSERT_TRUE(std::holds_alternative<Error>(ended));
  EXPECT_THAT(std::get<Error>(ended).message,
              HasSubstr("has ended: it was closed by close_session"));
  const auto bobs = manager().start(std::move(foreign));
  ASSERT_TRUE(std::holds_alternative<Error>(bobs));
  EXPECT_THAT(std::get<Error>(bobs).message, HasSubstr("Unknown session_id"));
  manager().shutdown();
  const auto late = manager().sessionForRun(kLocalTenant, session, {});
  ASSERT_TRUE(std::holds_alternative<Error>(late));
  EXPECT_EQ(std::get<Error>(late).message, "The server is shutting down.");
  EXPECT_EQ(events_.taken(), (std::vector<RunEvents::Refusal>{RunEvents::Refusal::kInvalid,
                                                              RunEvents::Refusal::kInvalid,
                                                              RunEvents::Refusal::kShuttingDown}));
}

// A session whose limits a prepared sandbox was made for begins in it: no sandbox is created
// for it, the launcher is told to serve a session with the session's deadline, and the pool
// makes another. The session's runs take no prepared sandbox (they run in the session's), and
// its queue counts against the tenant's like the fair queue does.
TEST_F(SessionTest, OneOpensInAPreparedSandboxWhoseRunsTakeNoOtherAndCountInTheQueue) {
  settings_.prepared = 1;
  settings_.prepared_max = 1;
  settings_.prepared_limits = {1, 30, 1, 256};
  settings_.max_queue = 2;
  RunManager& runs = manager();
  ASSERT_TRUE(eventually([&] { return runs.awaitPrepared(1, 0ms); }));
  const std::string prepared = fake().sandboxes().front().id;
  const std::string session = open();
  const std::optional<View> sandbox = sessionSandbox();
  ASSERT_TRUE(sandbox);
  EXPECT_EQ(sandbox->id, prepared);
  EXPECT_EQ(sandbox->spec.labels.at(sandbox::kLabelPrepared), "true");
  EXPECT_EQ(sandbox->archive, "SCS-SESSION 610\n");  // the lifetime, 600 s, and the grace
  // Nothing was created for the session: any other sandbox is the pool's next one, which it may
  // already be making (a session holds no claim the refill waits for).
  ASSERT_TRUE(eventually([&] { return runs.awaitPrepared(1, 0ms); }));  // a new one
  const std::vector<View> all = fake().sandboxes();
  EXPECT_EQ(all.size(), 2u);
  for (const View& view : all) {
    EXPECT_EQ(view.spec.labels.at(sandbox::kLabelPrepared), "true") << view.id;
  }

  const std::string first = run(session, "#fake:hang\n");
  run(session, "#fake:result=2\n");
  run(session, "#fake:result=3\n");
  auto refused = tryRun(session, "#fake:result=4\n");
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_THAT(std::get<Error>(refused).message, HasSubstr("The queue is full"));
  // Counted as a full queue, not as a bad request.
  EXPECT_EQ(std::get<Error>(refused).kind, ErrorKind::kRefused);
  EXPECT_EQ(events_.taken(), std::vector<RunEvents::Refusal>{RunEvents::Refusal::kQueueFull});
  EXPECT_TRUE(runs.awaitPrepared(1, 0ms));  // still there, unused
  runs.stop(kLocalTenant, first);
}

// A prepared sandbox that ended while it idled cannot become the session's: it is removed and
// the session comes up in a fresh sandbox of another uid, never in one that shares the uid of a
// sandbox not yet gone.
TEST_F(SessionTest, OneWhosePreparedSandboxEndedIdleOpensInAFreshOneOfAnotherUid) {
  settings_.prepared = 1;
  settings_.prepared_max = 1;
  settings_.prepared_limits = {1, 30, 1, 256};
  RunManager& runs = manager();
  ASSERT_TRUE(eventually([&] { return runs.awaitPrepared(1, 0ms); }));
  const View prepared = fake().sandboxes().front();
  ASSERT_TRUE(fake().finish(prepared.id, 0));
  ASSERT_TRUE(fake().awaitSandboxes([&](const std::vector<View>& all) { return all[0].exited; }));

  const std::string session = open();
  const std::optional<View> sandbox = sessionSandbox();
  ASSERT_TRUE(sandbox);
  EXPECT_NE(sandbox->id, prepared.id);
  EXPECT_EQ(sandbox->spec.command.back(), "--session");
  EXPECT_NE(sandbox->spec.posture.user, prepared.spec.posture.user);
  EXPECT_TRUE(fake().sandbox(prepared.id)->removed);
  EXPECT_EQ(finalOf(run(session, "#fake:result=7\n")).results.result, "7");
}

TEST_F(SessionTest, ClosingStopsItsRunsAndRemovesItsSandboxAndShutdownRemovesTheRest) {
  const std::string session = open();
  const std::string running = run(session, "#fake:hang\n");
  const std::string queued = run(session, "#fake:result=x\n");
  ASSERT_TRUE(
      eventually([&] { return sessionSandbox()->archive.find("hang") != std::string::npos; }));
  const std::optional<SessionSnapshot> closed = manager().closeSession(kLocalTenant, session);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->end_reason, "it was closed by close_session");
  EXPECT_TRUE(sessionSandbox()->removed);  // before close_session answered
  EXPECT_EQ(finalOf(running).status, policy::RunStatus::kStopped);
  EXPECT_EQ(finalOf(queued).status, policy::RunStatus::kStopped);
  EXPECT_TRUE(manager().closeSession(kLocalTenant, session));  // idempotent

  open();
  manager().shutdown();
  EXPECT_TRUE(sessionSandbox(1)->removed);
}

}  // namespace
}  // namespace scs::runs
