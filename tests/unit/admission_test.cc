// Admission alone (scs_admission): the fair queue moved on within the slots and the host's
// memory, prepared sandboxes taken or giving way, and the queue's room. No thread, no clock of
// its own: each test hands it the time and plays the run manager's part in `launch`.

#include "admission/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "admission/refusal.h"
#include "policy/posture.h"

namespace scs::admission {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::int64_t kGb = policy::kBytesPerGb;

policy::Limits gb(double memory_gb) { return {memory_gb, 30, 1, 256}; }

class AdmissionTest : public ::testing::Test {
 protected:
  // Admission over pools whose main pool makes sandboxes of 1 GB for gb(1).
  void make(AdmissionSettings settings) {
    pools_ = std::make_unique<sandbox::PreparedPools>(
        sandbox::PoolSettings{1, 1, gb(1), kGb, std::chrono::seconds(300), ""}, 0);
    admission_ = std::make_unique<Admission>(settings, sandbox_, *pools_,
                                             [this] { return sessions_memory_; });
  }

  // A ready prepared sandbox of the main pool, as the maintenance thread would make it.
  void prepare(std::uint32_t uid) {
    sandbox::PreparedPool& pool = pools_->main();
    pool.making(now_);
    auto sandbox = std::make_unique<sandbox::PreparedSandbox>();
    sandbox->sandbox_id = "prepared-" + std::to_string(uid);
    sandbox->uid = uid;
    sandbox->posture = policy::requiredPosture(gb(1), sandbox_, uid);
    sandbox->timeout_seconds = 30;
    pool.made(std::move(sandbox), now_);
  }

  void queue(const std::string& tenant, const std::string& id, Candidate candidate) {
    candidates_[id] = std::move(candidate);
    admission_->queue().push(tenant, id);
  }
  void queue(const std::string& tenant, const std::string& id, double memory_gb) {
    queue(
        tenant, id,
        Candidate{"", gb(memory_gb), memoryBytes(gb(memory_gb)), memoryBytes(gb(memory_gb)), true});
  }

  // Moves the queue on; the runs it launches are recorded with their prepared sandbox's id.
  bool admit() {
    return admission_->admit(
        now_, [this](const std::string& id) { return candidates_.at(id); },
        [this](const FairQueue::Entry& run, sandbox::PreparedPtr prepared) {
          launched_.push_back(run.id);
          took_[run.id] = prepared ? prepared->sandbox_id : "";
          if (on_launch_) {
            on_launch_(run);
          }
        });
  }

  common::SteadyTime now_ = common::SteadyTime(std::chrono::hours(1));
  policy::SandboxSettings sandbox_;
  std::int64_t sessions_memory_ = 0;
  std::unique_ptr<sandbox::PreparedPools> pools_;
  std::unique_ptr<Admission> admission_;
  std::map<std::string, Candidate> candidates_;
  std::vector<std::string> launched_;
  std::map<std::string, std::string> took_;
  std::function<void(const FairQueue::Entry&)> on_launch_;
};

TEST_F(AdmissionTest, RunsTakeTheFreeSlotsInFairOrderAndTheNextWhenOneEnds) {
  make({2, 10, 100, 0});
  queue("alice", "a1", 1);
  queue("alice", "a2", 1);
  queue("alice", "a3", 1);
  queue("bob", "b1", 1);
  admit();
  EXPECT_THAT(launched_, ElementsAre("a1", "b1"));
  EXPECT_EQ(admission_->queue().executing(), 2u);
  admission_->ended("alice", "a1");
  admit();
  EXPECT_THAT(launched_, ElementsAre("a1", "b1", "a2"));
}

TEST_F(AdmissionTest, TheChosenRunWaitsForMemoryAndIsNotOvertakenBySmallerOnes) {
  make({8, 10, 100, 8 * kGb});
  queue("alice", "big", 5);
  admit();
  EXPECT_EQ(admission_->executingMemory(), 5 * kGb);
  queue("bob", "bigger", 5);
  queue("alice", "small", 1);
  admit();
  EXPECT_THAT(launched_, ElementsAre("big")) << "1 GB would fit, but 5 GB came first";
  admission_->ended("alice", "big");
  EXPECT_EQ(admission_->executingMemory(), 0);
  admit();
  EXPECT_THAT(launched_, ElementsAre("big", "bigger", "small"));
  EXPECT_EQ(admission_->executingMemory(), 6 * kGb);
}

TEST_F(AdmissionTest, SessionsMemoryCountsAndAWakeNeedsTheSessionsMemoryButHoldsNone) {
  make({8, 10, 100, 8 * kGb});
  sessions_memory_ = 6 * kGb;
  queue("alice", "run", 3);
  admit();
  EXPECT_TRUE(launched_.empty()) << "3 GB beside the sessions' 6 GB is more than 8";
  admission_->queue().remove("alice", "run");
  // A session's run that wakes its hibernated session of 2 GB.
  queue("alice", "wake", Candidate{"", gb(2), 0, 2 * kGb, false});
  admit();
  EXPECT_THAT(launched_, ElementsAre("wake"));
  EXPECT_EQ(admission_->executingMemory(), 0) << "the session's memory is counted as its";
}

TEST_F(AdmissionTest, ARunTakesAPreparedSandboxThatHoldsPartOfItsMemoryAndAnotherMakesItGiveWay) {
  make({8, 10, 100, 3 * kGb / 2});
  prepare(1000);
  queue("alice", "fits", 1);
  admit();
  ASSERT_THAT(launched_, ElementsAre("fits"));
  EXPECT_EQ(took_["fits"], "prepared-1000") << "1 GB fits only because the sandbox holds it";
  admission_->ended("alice", "fits");

  prepare(1001);
  // Too big for a prepared sandbox: the idle one gives way to it.
  queue("bob", "other", Candidate{"", gb(1.5), 3 * kGb / 2, 3 * kGb / 2, true});
  EXPECT_TRUE(admit()) << "an idle sandbox gave way";
  EXPECT_THAT(launched_, ElementsAre("fits", "other"));
  EXPECT_EQ(took_["other"], "");
  EXPECT_EQ(pools_->main().ready(), 0u);
}

TEST_F(AdmissionTest, AFullQueueRefusesTheTenantThenPushesOutTheNewestRunOfTheTenantWithMost) {
  make({0, 2, 2, 0});  // no slot: every run stays queued; 2 per tenant, 2 in all
  queue("alice", "a1", 1);
  queue("alice", "a2", 1);
  queue("alice", "a3", 1);
  Result<std::optional<std::string>> room = admission_->room("alice", "a3", 2);
  ASSERT_TRUE(std::holds_alternative<Error>(room));
  EXPECT_EQ(std::get<Error>(room).message,
            "The queue is full: 2 runs are waiting behind 0 running. Try again when a run "
            "finishes.");
  EXPECT_EQ(refusalOf(std::get<Error>(room)), Refusal::kQueueFull);
  EXPECT_EQ(admission_->queue().queued("alice"), 2u) << "the refused run left the queue";

  queue("bob", "b1", 1);  // three queued: alice, holding more, gives way
  room = admission_->room("bob", "b1", 0);
  ASSERT_FALSE(std::holds_alternative<Error>(room));
  EXPECT_EQ(std::get<std::optional<std::string>>(room), "a2") << "alice's newest";
  EXPECT_EQ(admission_->queue().queued(), 2u);

  queue("bob", "b2", 1);  // bob holds the most now: his new run is refused
  room = admission_->room("bob", "b2", 1);
  ASSERT_TRUE(std::holds_alternative<Error>(room));
  EXPECT_EQ(std::get<Error>(room).message,
            "The server's queue is full: 2 runs are waiting, 1 of them yours, the most of "
            "anyone's. Try again when one of your runs finishes.");
  EXPECT_EQ(admission_->queue().queued("bob"), 1u);
}

TEST_F(AdmissionTest, ARunWhoseLaunchFailsEndsAtOnceAndLetsTheNextOneIn) {
  make({1, 10, 100, 8 * kGb});
  queue("alice", "fails", 2);
  queue("alice", "next", 2);
  on_launch_ = [this](const FairQueue::Entry& run) {
    if (run.id == "fails") {  // its thread could not start: the run manager ends it at once
      admission_->ended(run.tenant, run.id);
      admit();
    }
  };
  admit();
  EXPECT_THAT(launched_, ElementsAre("fails", "next"));
  EXPECT_EQ(admission_->queue().executing(), 1u);
  EXPECT_EQ(admission_->executingMemory(), 2 * kGb);
}

TEST(RefusalTest, EachKindOfErrorIsCountedInItsCategory) {
  EXPECT_EQ(refusalName(refusalOf(invalid("x"))), "invalid");
  EXPECT_EQ(refusalName(refusalOf(internal("x"))), "invalid");
  EXPECT_EQ(refusalName(refusalOf(overLimits("x"))), "limits");
  EXPECT_EQ(refusalName(refusalOf(refused("x"))), "queue_full");
  EXPECT_EQ(refusalName(refusalOf(stopping("x"))), "shutting_down");
}

}  // namespace
}  // namespace scs::admission
