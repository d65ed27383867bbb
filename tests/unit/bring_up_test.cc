#include "sandbox/bring_up.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mocks/mock_backend.h"
#include "mocks/recording_sink.h"
#include "support/manual_clock.h"

namespace scs::sandbox {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Return;

class BringUpTest : public ::testing::Test {
 protected:
  BringUpTest() {
    spec_ = bring_up_.spec("run-1", limits_, required_, false);
    ON_CALL(backend_, create(_)).WillByDefault(Return(backend::CreateReply{{}, "sb-1"}));
    ON_CALL(backend_, inspect(_)).WillByDefault(Return(backend::InspectReply{{}, required_}));
    ON_CALL(backend_, deliver(_, _)).WillByDefault(Return(backend::Status{}));
    ON_CALL(backend_, start(_, _)).WillByDefault(Return(backend::Status{}));
  }

  SandboxBringUp::Steps steps(const std::string* archive) {
    SandboxBringUp::Steps steps;
    steps.archive = archive;
    steps.sink = &sink_;
    steps.created = [this](const std::string& id) { created_ = id; };
    return steps;
  }

  testing::ManualClock clock_;
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend_;
  policy::SandboxSettings settings_;
  policy::Limits limits_{1, 30, 1, 256};
  backend::Posture required_ = policy::requiredPosture(limits_, settings_, settings_.uids.first);
  SandboxBringUp bring_up_{backend_,
                           settings_,
                           "instance",
                           std::chrono::seconds(300),
                           std::chrono::seconds(3600),
                           {"numpy", "pandas"},
                           clock_};
  backend::SandboxSpec spec_;
  mocks::RecordingSink sink_;
  std::string created_;
  const std::string archive_ = "the archive";
};

TEST_F(BringUpTest, ARunsSandboxIsCheckedCreatedCheckedAgainGivenItsCodeAndStarted) {
  {
    InSequence in_order;
    EXPECT_CALL(backend_, create(_));
    EXPECT_CALL(backend_, inspect("sb-1"));
    EXPECT_CALL(backend_, deliver("sb-1", archive_));
    EXPECT_CALL(backend_, start("sb-1", &sink_));
  }
  const auto outcome = bring_up_.bringUp(spec_, required_, steps(&archive_));
  EXPECT_TRUE(outcome.started());
  EXPECT_EQ(outcome.sandbox_id, "sb-1");
  EXPECT_EQ(created_, "sb-1");
}

TEST_F(BringUpTest, APreparedSandboxStartsWithoutItsCode) {
  {
    InSequence in_order;
    EXPECT_CALL(backend_, create(_));
    EXPECT_CALL(backend_, inspect("sb-1"));
    EXPECT_CALL(backend_, start("sb-1", &sink_));
  }
  EXPECT_TRUE(bring_up_.bringUp(spec_, required_, steps(nullptr)).started());
}

TEST_F(BringUpTest, AWeakSpecNeverReachesTheBackend) {
  backend::SandboxSpec weak = spec_;
  weak.posture.privileged = true;
  const auto outcome = bring_up_.bringUp(weak, required_, steps(&archive_));
  EXPECT_THAT(outcome.failure, HasSubstr("the sandbox spec failed the posture check"));
  EXPECT_THAT(outcome.failure, HasSubstr("privileged"));
  EXPECT_TRUE(outcome.sandbox_id.empty());
}

TEST_F(BringUpTest, AWeakReadBackStopsBeforeTheCodeIsDeliveredAndTheCallerOwnsTheSandbox) {
  backend::Posture weak = required_;
  weak.read_only_root = false;
  EXPECT_CALL(backend_, create(_));
  EXPECT_CALL(backend_, inspect("sb-1")).WillOnce(Return(backend::InspectReply{{}, weak}));
  const auto outcome = bring_up_.bringUp(spec_, required_, steps(&archive_));
  EXPECT_THAT(outcome.failure, HasSubstr("posture check failed: read_only_root"));
  EXPECT_EQ(created_, "sb-1");
}

TEST_F(BringUpTest, EachFailingStepEndsTheSequenceAndSaysWhich) {
  const backend::Status broken{backend::Code::kUnavailable, "broken"};
  EXPECT_CALL(backend_, create(_)).WillOnce(Return(backend::CreateReply{broken, ""}));
  EXPECT_EQ(bring_up_.bringUp(spec_, required_, steps(&archive_)).failure, "create failed: broken");

  EXPECT_CALL(backend_, create(_)).Times(3);
  EXPECT_CALL(backend_, inspect(_)).WillOnce(Return(backend::InspectReply{broken, {}}));
  EXPECT_EQ(bring_up_.bringUp(spec_, required_, steps(&archive_)).failure,
            "inspect failed: broken");
  EXPECT_CALL(backend_, inspect(_)).Times(2);
  EXPECT_CALL(backend_, deliver(_, _)).WillOnce(Return(broken));
  EXPECT_EQ(bring_up_.bringUp(spec_, required_, steps(&archive_)).failure,
            "delivery failed: broken");
  EXPECT_CALL(backend_, deliver(_, _));
  EXPECT_CALL(backend_, start(_, _)).WillOnce(Return(broken));
  EXPECT_EQ(bring_up_.bringUp(spec_, required_, steps(&archive_)).failure, "start failed: broken");
}

TEST_F(BringUpTest, AUserOutsideTheSandboxRangeNeverReachesTheBackend) {
  for (const std::string user : {"10001:10001", "0:0", "1900000000:1900000001"}) {
    backend::Posture outside = policy::requiredPosture(limits_, settings_, settings_.uids.first);
    outside.user = user;
    backend::SandboxSpec spec = bring_up_.spec("run-1", limits_, outside, false);
    EXPECT_THAT(bring_up_.bringUp(spec, outside, steps(&archive_)).failure,
                HasSubstr("the sandbox range 1900000000-1900000999"))
        << user;
  }
}

TEST_F(BringUpTest, TheSpecIsLabelledWithItsUidAndRunsTheLauncherAsPid1) {
  EXPECT_EQ(spec_.labels.at("io.scs.uid"), "1900000000");
  EXPECT_EQ(spec_.command, (std::vector<std::string>{"/usr/bin/python3", "-I",
                                                     "/opt/scs/launcher.py", "--deadline", "40"}));
  EXPECT_EQ(spec_.posture.init_command, spec_.command);
}

TEST_F(BringUpTest, OnlyAPreparedSandboxWarmsItsInterpreterAndItsWatchdogAllowsItsIdleTime) {
  const backend::SandboxSpec prepared = bring_up_.spec("prepared-1", limits_, required_, true);
  EXPECT_EQ(prepared.command,
            (std::vector<std::string>{"/usr/bin/python3", "-I", "/opt/scs/launcher.py",
                                      "--deadline", "340", "--warm", "numpy,pandas"}));
  EXPECT_EQ(prepared.posture.init_command, prepared.command);
  EXPECT_EQ(prepared.labels.at("io.scs.prepared"), "true");
  EXPECT_EQ(spec_.labels.count("io.scs.prepared"), 0u);
}

TEST_F(BringUpTest, AStopBetweenStepsEndsTheSequenceWithoutAFailure) {
  EXPECT_CALL(backend_, create(_));
  EXPECT_CALL(backend_, inspect(_));
  int asked = 0;
  SandboxBringUp::Steps stopping = steps(&archive_);
  stopping.stopped = [&] { return ++asked == 2; };  // after the read-back
  const auto outcome = bring_up_.bringUp(spec_, required_, stopping);
  EXPECT_TRUE(outcome.stopped);
  EXPECT_TRUE(outcome.failure.empty());
  EXPECT_EQ(created_, "sb-1");
}

}  // namespace
}  // namespace scs::sandbox
