// The session table (sessions/session_table.h): every rule of a session's life, tested without
// a thread, a backend or a clock. Time is a value the test hands it.

#include "sessions/session_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace scs::sessions {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr std::int64_t kGb = std::int64_t{1} << 30;
const common::SteadyTime kT0{std::chrono::hours(1)};
const std::chrono::system_clock::time_point kWall0{std::chrono::hours(1000)};

// The Error a result holds; one that says "no error" when it holds a value.
template <class T>
Error errorOf(const Result<T>& result) {
  const Error* error = std::get_if<Error>(&result);
  return error ? *error : Error{ErrorKind::kInternal, "no error"};
}

class SessionTableTest : public ::testing::Test {
 protected:
  SessionTable& table() {
    if (!table_) {
      table_.emplace(settings_, limits_);
    }
    return *table_;
  }

  std::shared_ptr<Session> add(const std::string& id, const std::string& tenant = "alice",
                               policy::Language language = policy::Language::kPython) {
    auto session = std::make_shared<Session>();
    session->id = id;
    session->tenant = tenant;
    session->language = language;
    session->limits = {1, 30, 1, 256};
    session->memory_bytes = kGb;
    session->opened = session->last_active = session->awake_since = kT0;
    session->opened_wall = session->last_active_wall = kWall0;
    table().add(session);
    return session;
  }

  static void end(Session& session, const std::string& reason) {
    session.open = false;
    session.end_reason = reason;
  }

  std::vector<std::string> expire(common::SteadyTime now, bool executing = false) {
    std::vector<std::string> reasons;
    table().expire(
        now, [&](const std::string&) { return executing; },
        [&](Session& session, const std::string& reason) {
          reasons.push_back(session.id + ": " + reason);
        });
    return reasons;
  }

  SessionSettings settings_;
  TableLimits limits_;
  std::optional<SessionTable> table_;
};

TEST_F(SessionTableTest, ARunGoesToItsTenantsOpenSessionOnly) {
  const auto session = add("s1");
  const auto found = table().forRun("alice", "s1", {});
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<Session>>(found)) << errorOf(found).message;
  EXPECT_EQ(std::get<std::shared_ptr<Session>>(found), session);
  // Another tenant's session does not exist for it, as an unknown id.
  for (const auto& [tenant, id] : {std::pair{"bob", "s1"}, std::pair{"alice", "s2"}}) {
    const auto refused = table().forRun(tenant, id, {});
    EXPECT_EQ(errorOf(refused).kind, ErrorKind::kInvalid);
    EXPECT_THAT(errorOf(refused).message, HasSubstr("Unknown session_id \"" + std::string(id)));
  }
  end(*session, "it was closed by close_session");
  RunAsk other_language;
  other_language.language = policy::Language::kBash;
  const auto ended = table().forRun("alice", "s1", other_language);  // ended says it first
  EXPECT_EQ(errorOf(ended).kind, ErrorKind::kInvalid);
  EXPECT_THAT(errorOf(ended).message,
              HasSubstr("Session s1 has ended: it was closed by close_session."));
}

TEST_F(SessionTableTest, ARunAsksNothingThatIsTheSessions) {
  add("py");
  add("js", "alice", policy::Language::kJavascript);
  RunAsk ask;
  ask.language = policy::Language::kPython;
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<Session>>(table().forRun("alice", "py", ask)));
  ask.language = policy::Language::kBash;
  EXPECT_THAT(errorOf(table().forRun("alice", "py", ask)).message,
              HasSubstr("This session runs python, not bash"));

  RunAsk limits;
  limits.sets_memory_or_cpus = true;
  EXPECT_EQ(errorOf(table().forRun("alice", "py", limits)).kind, ErrorKind::kLimits);
  EXPECT_THAT(errorOf(table().forRun("alice", "py", limits)).message,
              HasSubstr("memory_gb and cpus belong to the session"));
  // Said before the session is looked up: what a run may never ask, it never may.
  EXPECT_EQ(errorOf(table().forRun("alice", "unknown", limits)).kind, ErrorKind::kLimits);

  RunAsk packages;
  packages.has_packages = true;
  EXPECT_EQ(errorOf(table().forRun("alice", "py", packages)).message, kSessionPackagesMessage);

  RunAsk stdin_text;
  stdin_text.has_stdin = true;  // python and bash sessions read it; javascript's do not
  EXPECT_TRUE(
      std::holds_alternative<std::shared_ptr<Session>>(table().forRun("alice", "py", stdin_text)));
  EXPECT_THAT(errorOf(table().forRun("alice", "js", stdin_text)).message,
              HasSubstr("In a javascript session a run reads no stdin"));

  policy::Limits run = SessionTable::limitsOfRun(*table().find("alice", "py"), 7);
  EXPECT_EQ(run.memory_gb, 1);
  EXPECT_EQ(run.cpus, 1);
  EXPECT_EQ(run.timeout_seconds, 7);
}

TEST_F(SessionTableTest, OpeningKeepsTheCapsAndHalfTheHostsMemoryPerTenant) {
  settings_.max_open_per_tenant = 2;
  settings_.max_open = 3;
  limits_.host_memory_bytes = 8 * kGb;
  EXPECT_TRUE(std::holds_alternative<Done>(table().mayOpen("alice", 4, 4 * kGb)));
  EXPECT_EQ(errorOf(table().mayOpen("alice", 9, 9 * kGb)).kind, ErrorKind::kLimits);
  add("a1");
  // Alice holds 1 GB: 4 more would be more than half of 8; Bob holds none.
  EXPECT_THAT(errorOf(table().mayOpen("alice", 4, 4 * kGb)).message, HasSubstr("Your open"));
  EXPECT_EQ(errorOf(table().mayOpen("alice", 4, 4 * kGb)).kind, ErrorKind::kRefused);
  EXPECT_TRUE(std::holds_alternative<Done>(table().mayOpen("bob", 4, 4 * kGb)));
  add("a2");
  EXPECT_THAT(errorOf(table().mayOpen("alice", 1, kGb)).message,
              HasSubstr("You have 2 sessions open"));
  add("b1", "bob");
  EXPECT_THAT(errorOf(table().mayOpen("carol", 1, kGb)).message,
              HasSubstr("The server has 3 sessions open"));
  // An ended session is not open; its memory counts until its sandbox is removed.
  Session& ended = *table().find("alice", "a1");
  end(ended, "closed");
  EXPECT_TRUE(std::holds_alternative<Done>(table().mayOpen("alice", 1, kGb)));
  EXPECT_THAT(errorOf(table().mayOpen("alice", 3, 3 * kGb)).message, HasSubstr("Your open"));
  ended.removed = true;
  EXPECT_TRUE(std::holds_alternative<Done>(table().mayOpen("alice", 3, 3 * kGb)));
}

TEST_F(SessionTableTest, ASessionsRunsGoOneAtATimeAndCountInItsTenantsQueue) {
  limits_.max_queue = 3;
  Session& session = *add("s1");
  add("s2");
  Session& bobs = *add("b1", "bob");
  EXPECT_EQ(std::get<Placement>(table().enqueue(session, "r1", 0)), Placement::kFairQueue);
  EXPECT_EQ(session.current, "r1");
  EXPECT_EQ(std::get<Placement>(table().enqueue(session, "r2", 0)), Placement::kSessionQueue);
  EXPECT_EQ(std::get<Placement>(table().enqueue(*table().find("alice", "s2"), "r3", 0)),
            Placement::kFairQueue);
  EXPECT_EQ(std::get<Placement>(table().enqueue(*table().find("alice", "s2"), "r4", 0)),
            Placement::kSessionQueue);
  // Alice has 2 runs waiting in her sessions and 1 in the fair queue: the queue is full for her,
  // not for Bob.
  const auto full = table().enqueue(session, "r5", 1);
  EXPECT_EQ(errorOf(full).kind, ErrorKind::kRefused);
  EXPECT_THAT(errorOf(full).message, HasSubstr("The queue is full: 3 of your runs"));
  EXPECT_EQ(std::get<Placement>(table().enqueue(bobs, "b", 1)), Placement::kFairQueue);

  // Its run ends: the next one still queued goes (one stopped meanwhile is skipped).
  EXPECT_EQ(std::get<Placement>(table().enqueue(session, "r6", 0)), Placement::kSessionQueue);
  const auto queued = [](const std::string& id) { return id != "r2"; };
  EXPECT_EQ(table().runEnded(session, "r1", kT0 + 5s, kWall0 + 5s, queued), "r6");
  EXPECT_EQ(session.current, "r6");
  EXPECT_TRUE(session.waiting.empty());
  EXPECT_EQ(session.last_active, kT0 + 5s);
  EXPECT_EQ(session.last_active_wall, kWall0 + 5s);
  EXPECT_EQ(table().runEnded(session, "r6", kT0 + 6s, kWall0 + 6s, queued), std::nullopt);
  EXPECT_FALSE(session.busy());

  end(session, "it was idle for 600 s");
  EXPECT_EQ(errorOf(table().enqueue(session, "r7", 0)).kind, ErrorKind::kInvalid);
}

TEST_F(SessionTableTest, ARunArrivingWhileItsSessionIsSnapshottedWaitsForTheSnapshot) {
  Session& session = *add("s1");
  session.rest = Session::Rest::kHibernating;
  EXPECT_EQ(std::get<Placement>(table().enqueue(session, "r1", 0)), Placement::kSessionQueue);
  session.rest = Session::Rest::kHibernated;
  EXPECT_EQ(table().next(session), "r1");
  EXPECT_EQ(table().next(session), std::nullopt);  // r1 is its run in progress now
  // Admitted to wake it, r1 ended before it did: the session sleeps on.
  session.rest = Session::Rest::kWaking;
  EXPECT_EQ(table().runEnded(session, "r1", kT0, kWall0, [](const std::string&) { return true; }),
            std::nullopt);
  EXPECT_EQ(session.rest, Session::Rest::kHibernated);
}

TEST_F(SessionTableTest, TheClockEndsIdleAndOldSessionsAndForgetsEndedOnes) {
  settings_.idle = 600s;
  settings_.max_lifetime = 3600s;
  limits_.retention = 60s;
  add("idle");
  Session& busy = *add("busy");
  busy.current = "r1";
  Session& opening = *add("opening");
  opening.opening = true;
  EXPECT_TRUE(expire(kT0 + 599s).empty());
  // A session busy past its idle time lives on; an opening one is its opener's.
  EXPECT_EQ(expire(kT0 + 600s, true), std::vector<std::string>{"idle: it was idle for 600 s"});
  EXPECT_EQ(expire(kT0 + 3600s, true),
            (std::vector<std::string>{"busy: it reached its maximum lifetime of 3600 s",
                                      "idle: it reached its maximum lifetime of 3600 s"}));
  // Its sandbox ended between runs (not during one, whose run says so).
  Session& exited = *add("exited");
  exited.sink.ended();
  exited.current = "r2";
  EXPECT_TRUE(expire(kT0 + 1s, true).empty());
  EXPECT_EQ(
      expire(kT0 + 1s, false),
      std::vector<std::string>{"exited: its sandbox ended between runs (its interpreter exited)"});
  // An ended session answers "ended" until its sandbox is removed and the retention is past.
  Session& closed = *table().find("alice", "idle");
  end(closed, "closed");
  closed.ended = kT0;
  expire(kT0 + 61s);
  EXPECT_TRUE(table().knows("idle"));  // its sandbox is not removed yet
  closed.removed = true;
  expire(kT0 + 59s);
  EXPECT_TRUE(table().knows("idle"));
  expire(kT0 + 60s);
  EXPECT_FALSE(table().knows("idle"));
  EXPECT_TRUE(table().knows("opening"));
}

TEST_F(SessionTableTest, WithHibernationAnIdleSessionSleepsAndOnlyAwakeTimeCounts) {
  settings_.hibernate = true;
  settings_.idle = 600s;
  settings_.max_lifetime = 3600s;
  settings_.hibernated_max = 86400s;
  Session& session = *add("s1");
  EXPECT_TRUE(expire(kT0 + 600s).empty());
  EXPECT_EQ(session.rest, Session::Rest::kHibernating);  // for the run manager to snapshot
  // Snapshotted at +600 s: awake 600 s of its 3600.
  session.rest = Session::Rest::kHibernated;
  session.awake_before = 600s;
  session.hibernated_at = kT0 + 600s;
  session.hibernated_wall = kWall0 + 600s;
  EXPECT_EQ(table().awake(session, kT0 + 5000s), 600s);
  const SessionSnapshot asleep = table().snapshot(session, kT0 + 5000s, kWall0 + 5000s);
  EXPECT_TRUE(asleep.hibernated);
  EXPECT_EQ(asleep.idle_expires_at, kWall0 + 600s + 86400s);
  EXPECT_EQ(asleep.expires_at, kWall0 + 5000s + 3000s);  // the awake time left, from now
  EXPECT_EQ(table().memory(), 0);                        // a hibernated session holds none
  EXPECT_EQ(expire(kT0 + 600s + 86400s),
            std::vector<std::string>{"s1: it was hibernated for 86400 s"});
  // Its sandbox's own deadline counts awake and hibernated time together.
  Session& other = *add("s2");
  other.rest = Session::Rest::kHibernated;
  other.hibernated_at = kT0 + 89000s;
  const std::string lifetime =
      ": it reached its sandbox's lifetime of 90000 s, awake and hibernated together";
  EXPECT_EQ(expire(kT0 + 90000s), (std::vector<std::string>{"s1" + lifetime, "s2" + lifetime}));
  EXPECT_EQ(table().memory(), 0);
  other.rest = Session::Rest::kAwake;
  EXPECT_EQ(table().memory(), kGb);
}

TEST_F(SessionTableTest, WithoutHibernationASnapshotSaysWhenItCloses) {
  settings_.idle = 600s;
  settings_.max_lifetime = 3600s;
  Session& session = *add("s1");
  session.last_active_wall = kWall0 + 3300s;
  const SessionSnapshot snapshot = table().snapshot(session, kT0 + 3300s, kWall0 + 3300s);
  EXPECT_TRUE(snapshot.open);
  EXPECT_FALSE(snapshot.hibernates_at);
  EXPECT_EQ(snapshot.expires_at, kWall0 + 3600s);
  EXPECT_EQ(snapshot.idle_expires_at, kWall0 + 3600s);  // its lifetime comes first
}

TEST_F(SessionTableTest, OnlyAnEndedSessionThatNothingHoldsIsReleased) {
  Session& session = *add("s1");
  EXPECT_TRUE(table().releasable().empty());
  end(session, "closed");
  session.current = "r1";  // its run in progress ends first
  EXPECT_TRUE(table().releasable().empty());
  session.current.clear();
  session.opening = true;  // its opener removes what it made
  EXPECT_TRUE(table().releasable().empty());
  session.opening = false;
  ASSERT_EQ(table().releasable().size(), 1u);
  session.releasing = true;
  EXPECT_TRUE(table().releasable().empty());
}

}  // namespace
}  // namespace scs::sessions
