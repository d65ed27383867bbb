#include "sandbox/leftover_sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include "mocks/mock_backend.h"
#include "sandbox/labels.h"

namespace scs::sandbox {
namespace {

using ::testing::_;
using ::testing::Return;

const auto kNow = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));

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

TEST(LeftoverSweepTest, RemovesLeftoversOfDeadOrExpiredInstancesOnly) {
  const std::string live_pid = std::to_string(getpid());
  const std::string dead_pid = std::to_string(impossiblePid());
  const std::string future = std::to_string(1'700'000'000 + 3600);
  const std::string past = std::to_string(1'700'000'000 - 1);
  backend::ListReply list;
  list.sandboxes = {
      leftover("ours",
               {{kLabelInstance, "this"}, {kLabelOwnerPid, dead_pid}, {kLabelDeadline, past}}),
      leftover("live", {{kLabelInstance, "other"},
                        {kLabelOwnerPid, live_pid},
                        {kLabelDeadline, future},
                        {kLabelUid, "1900000005"}}),
      leftover("dead-owner",
               {{kLabelInstance, "other"}, {kLabelOwnerPid, dead_pid}, {kLabelDeadline, future}}),
      leftover("unlabelled", {{kLabelInstance, "other"}}),
      leftover("garbled", {{kLabelInstance, "other"}, {kLabelOwnerPid, "12abc"}}),
      leftover("group", {{kLabelInstance, "other"}, {kLabelOwnerPid, "-1"}}),
      leftover("expired",
               {{kLabelInstance, "other"}, {kLabelOwnerPid, live_pid}, {kLabelDeadline, past}}),
  };
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend;
  EXPECT_CALL(backend, list(kLabelManaged)).WillOnce(Return(list));
  for (const char* gone : {"dead-owner", "unlabelled", "garbled", "group", "expired"}) {
    EXPECT_CALL(backend, remove(gone)).WillOnce(Return(backend::Status{}));
  }
  const SweepResult result = sweepLeftovers(backend, "this", kNow);
  EXPECT_EQ(result.removed, 5u);
  // The live instance's sandbox keeps its uid.
  EXPECT_EQ(result.kept_uids, (std::vector<std::uint32_t>{1900000005}));
}

// --state-dir: the sandbox of a session an earlier server kept stays, though its owner is gone,
// until its deadline; another of that dead owner goes.
TEST(LeftoverSweepTest, KeepsTheSandboxesOfKeptSessionsUntilTheirDeadline) {
  const std::string dead_pid = std::to_string(impossiblePid());
  const std::string future = std::to_string(1'700'000'000 + 3600);
  const std::string past = std::to_string(1'700'000'000 - 1);
  backend::ListReply list;
  list.sandboxes = {
      leftover("kept", {{kLabelOwnerPid, dead_pid}, {kLabelDeadline, future}, {kLabelUid, "41"}}),
      leftover("kept-too-long",
               {{kLabelOwnerPid, dead_pid}, {kLabelDeadline, past}, {kLabelUid, "42"}}),
      leftover("not-kept",
               {{kLabelOwnerPid, dead_pid}, {kLabelDeadline, future}, {kLabelUid, "43"}}),
  };
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend;
  EXPECT_CALL(backend, list(kLabelManaged)).WillOnce(Return(list));
  EXPECT_CALL(backend, remove("kept-too-long")).WillOnce(Return(backend::Status{}));
  EXPECT_CALL(backend, remove("not-kept")).WillOnce(Return(backend::Status{}));
  const SweepResult result = sweepLeftovers(backend, "", kNow, {41, 42});
  EXPECT_EQ(result.removed, 2u);
  EXPECT_EQ(result.kept_uids, (std::vector<std::uint32_t>{41}));
}

TEST(LeftoverSweepTest, CountsOnlyWhatItRemoved) {
  ::testing::StrictMock<mocks::MockRuntimeBackend> backend;
  backend::ListReply list;
  list.sandboxes = {leftover("a", {{kLabelUid, "7"}}), leftover("b", {{kLabelUid, "8"}})};
  EXPECT_CALL(backend, list(_))
      .WillOnce(Return(list))
      .WillOnce(Return(backend::ListReply{{backend::Code::kUnavailable, "down"}, {}}));
  EXPECT_CALL(backend, remove("a")).WillOnce(Return(backend::Status{}));
  EXPECT_CALL(backend, remove("b"))
      .WillOnce(Return(backend::Status{backend::Code::kUnavailable, "busy"}));
  const SweepResult result = sweepLeftovers(backend, "this", kNow);
  EXPECT_EQ(result.removed, 1u);
  // What it could not remove may still run: its uid stays taken.
  EXPECT_EQ(result.kept_uids, (std::vector<std::uint32_t>{8}));
  EXPECT_EQ(sweepLeftovers(backend, "this", kNow).removed, 0u);
}

}  // namespace
}  // namespace scs::sandbox
