#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "exit_evidence.h"

namespace scs::docker {
namespace {

using backend::Code;

json::ObjectPtr record(const std::string& state) {
  return json::parseObject(R"({"State":)" + state + "}");
}

struct Row {
  const char* name;
  ExitFacts facts;
  Code code;  // of the reply's status
  bool exited;
  std::optional<int> exit_code;
  bool oom;
  std::string engine_error;  // exactly
  std::optional<std::int64_t> peak;
  bool outside = false;  // killed_outside
};

ExitFacts withWait(std::string body) {
  ExitFacts facts;
  facts.wait_body = std::move(body);
  facts.record.value = record(R"({"Running":false,"Status":"exited","ExitCode":0})");
  return facts;
}

std::vector<Row> rows() {
  std::vector<Row> rows;
  rows.push_back({"a_clean_exit", withWait(R"({"StatusCode":0})"), Code::kOk, true, 0, false, "",
                  std::nullopt});
  rows.push_back({"an_exit_code_from_the_wait", withWait(R"({"StatusCode":3})"), Code::kOk, true, 3,
                  false, "", std::nullopt});
  {
    ExitFacts facts = withWait(R"({"StatusCode":137})");
    facts.record.value = record(R"({"Running":false,"Status":"exited","OOMKilled":true})");
    facts.peak_memory_bytes = 100;
    facts.memory_limit_bytes = 1000;
    rows.push_back({"oom_from_the_record_raises_the_peak_to_the_limit", facts, Code::kOk, true, 137,
                    true, "", 1000});
  }
  {
    ExitFacts facts = withWait(R"({"StatusCode":137})");
    facts.oom_event = true;
    rows.push_back(
        {"oom_from_the_event_stream", facts, Code::kOk, true, 137, true, "", std::nullopt});
  }
  {
    ExitFacts facts = withWait(R"({"StatusCode":0})");
    facts.cgroup_oom = true;
    facts.peak_memory_bytes = 2000;
    facts.memory_limit_bytes = 1000;
    rows.push_back(
        {"oom_from_the_cgroup_keeps_a_higher_sample", facts, Code::kOk, true, 0, true, "", 2000});
  }
  {
    ExitFacts facts;
    facts.wait_broke = true;
    facts.record.value = record(R"({"Running":false,"Status":"exited","ExitCode":7})");
    rows.push_back({"a_broken_wait_reads_the_exit_from_the_record", facts, Code::kOk, true, 7,
                    false, "", std::nullopt});
  }
  {
    ExitFacts facts;
    facts.wait_broke = true;
    facts.record.value = record(R"({"Running":true,"Status":"running"})");
    rows.push_back({"a_broken_wait_of_a_running_sandbox_is_lost", facts, Code::kUnavailable, false,
                    std::nullopt, false, "", std::nullopt});
  }
  {
    ExitFacts facts;
    facts.wait_broke = true;
    facts.removing = true;
    rows.push_back({"a_removed_sandbox_did_not_end_on_its_own", facts, Code::kNotFound, false,
                    std::nullopt, false, "", std::nullopt});
  }
  {
    ExitFacts facts = withWait(R"({"StatusCode":127,"Error":{"Message":"exec failed"}})");
    facts.system_error = "oci runtime error";
    facts.stream_broke = true;
    facts.stream_malformed = true;
    facts.record.value =
        record(R"({"Running":false,"Status":"exited","ExitCode":127,"Error":"no such file"})");
    rows.push_back({"every_engine_error_is_joined", facts, Code::kOk, true, 127, false,
                    "engine: oci runtime error the output stream broke before the end; the "
                    "engine's output stream was malformed; exec failed; no such file",
                    std::nullopt});
  }
  {
    ExitFacts facts = withWait(R"({"StatusCode":0})");
    facts.stream_broke = true;
    facts.removing = true;
    facts.record = {};
    rows.push_back({"a_stream_cut_by_removal_is_no_error", facts, Code::kOk, true, 0, false, "",
                    std::nullopt});
  }
  {
    ExitFacts facts = withWait(R"({"StatusCode":137})");
    facts.record = {{Code::kUnavailable, "connection refused"}, nullptr};
    rows.push_back({"an_engine_gone_right_after_the_exit_ended_the_run", facts, Code::kOk, true,
                    137, false,
                    "the container engine stopped or became unreachable as the run ended: "
                    "connection refused",
                    std::nullopt});
  }
  {
    ExitFacts facts = withWait(R"({"StatusCode":0})");
    facts.record = {{Code::kNotFound, "gone"}, nullptr};
    rows.push_back({"a_record_gone_without_our_removal_was_removed_from_outside", facts, Code::kOk,
                    true, 0, false, "", std::nullopt, true});
  }
  {
    ExitFacts facts = withWait(std::string(5000, 'x'));
    facts.wait_broke = false;
    facts.record.value = record(R"({"Running":true})");
    rows.push_back({"a_malformed_wait_body_of_a_running_sandbox", facts, Code::kInternal, false,
                    std::nullopt, false, "", std::nullopt});
  }
  {
    ExitFacts facts = withWait(R"({"StatusCode":137})");
    facts.kill_event = true;
    rows.push_back({"a_kill_this_backend_did_not_send", facts, Code::kOk, true, 137, false, "",
                    std::nullopt, true});
    facts.kill_requested = true;
    rows.push_back(
        {"a_kill_this_backend_sent", facts, Code::kOk, true, 137, false, "", std::nullopt, false});
  }
  return rows;
}

void PrintTo(const Row& row, std::ostream* out) { *out << row.name; }

class MergeExitEvidenceTest : public ::testing::TestWithParam<Row> {};

TEST_P(MergeExitEvidenceTest, MergesTheFactsIntoOneExit) {
  const Row& row = GetParam();
  const backend::WaitReply reply = mergeExitEvidence(row.facts);
  EXPECT_EQ(reply.status.code, row.code) << reply.status.message;
  EXPECT_EQ(reply.exit.exited, row.exited);
  EXPECT_EQ(reply.exit.exit_code, row.exit_code);
  EXPECT_EQ(reply.exit.oom_killed, row.oom);
  EXPECT_EQ(reply.exit.engine_error, row.engine_error);
  EXPECT_EQ(reply.exit.peak_memory_bytes, row.peak);
  EXPECT_EQ(reply.exit.killed_outside, row.outside);
}

INSTANTIATE_TEST_SUITE_P(Table, MergeExitEvidenceTest, ::testing::ValuesIn(rows()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MergeExitEvidenceTest, AnEngineErrorIsCapped) {
  ExitFacts facts = withWait(R"({"StatusCode":1})");
  facts.system_error = std::string(10000, 'e');
  EXPECT_EQ(mergeExitEvidence(facts).exit.engine_error.size(), 4096u);
}

}  // namespace
}  // namespace scs::docker
