#include "metrics/metrics.h"

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>

#include "mcp/tools.h"
#include "metrics/counting_backend.h"
#include "metrics/metrics_endpoint.h"
#include "mocks/core_stack.h"
#include "mocks/mock_backend.h"
#include "support/errors.h"
#include "support/json.h"

namespace scs::metrics {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Return;

// The value of one series ("name{labels}" exactly as written), or nullopt when it is absent.
std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

TEST(MetricsTest, EventsBecomeSeriesLabelledOnlyByTenantAndFixedNames) {
  Metrics metrics("1.2.3", "fake");
  metrics.accepted("alice");
  metrics.accepted("alice");
  metrics.refused("bob", runs::RunEvents::Refusal::kQueueFull);
  metrics.finished("alice", policy::RunStatus::kSucceeded, 0.2, 0.01);
  metrics.finished("alice", policy::RunStatus::kTimedOut, 40, 3);
  metrics.preparedTaken(true);
  metrics.preparedTaken(false);
  metrics.preparedTaken(true);
  metrics.engineFailed("create", backend::Code::kUnavailable);
  metrics.swept(3);
  const std::string text = metrics.render({2, 4, 1});

  EXPECT_EQ(sample(text, R"(scs_runs_started_total{tenant="alice"})"), 2);
  EXPECT_EQ(sample(text, R"(scs_runs_refused_total{reason="queue_full",tenant="bob"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_runs_finished_total{status="succeeded",tenant="alice"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_runs_finished_total{status="timed_out",tenant="alice"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_prepared_pool_takes_total{result="hit"})"), 2);
  EXPECT_EQ(sample(text, R"(scs_prepared_pool_takes_total{result="miss"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_engine_errors_total{call="create",code="unavailable"})"), 1);
  EXPECT_EQ(sample(text, "scs_sweep_removed_total"), 3);
  EXPECT_EQ(sample(text, "scs_runs_queued"), 2);
  EXPECT_EQ(sample(text, "scs_runs_executing"), 4);
  EXPECT_EQ(sample(text, "scs_prepared_sandboxes_ready"), 1);
  EXPECT_EQ(sample(text, R"(scs_build_info{backend="fake",version="1.2.3"})"), 1);
  // The histograms: two runs, one within 0.25 s, one past 30 s.
  EXPECT_EQ(sample(text, "scs_run_latency_seconds_count"), 2);
  EXPECT_EQ(sample(text, R"(scs_run_latency_seconds_bucket{le="0.25"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_run_latency_seconds_bucket{le="30"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_run_latency_seconds_bucket{le="60"})"), 2);
  EXPECT_DOUBLE_EQ(*sample(text, "scs_run_latency_seconds_sum"), 40.2);
  EXPECT_EQ(sample(text, R"(scs_run_queue_wait_seconds_bucket{le="0.01"})"), 1);
  EXPECT_THAT(text, HasSubstr("# TYPE scs_run_latency_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("# TYPE scs_runs_finished_total counter"));
}

TEST(MetricsTest, KnownTenantsHaveTheirSeriesAtZeroBeforeTheirFirstRun) {
  Metrics metrics("1", "fake");
  metrics.knowTenants({"alice", "bob"});
  const std::string text = metrics.render({});
  EXPECT_EQ(sample(text, R"(scs_runs_started_total{tenant="bob"})"), 0);
  EXPECT_EQ(sample(text, R"(scs_runs_finished_total{status="sandbox_error",tenant="alice"})"), 0);
  EXPECT_EQ(sample(text, R"(scs_runs_refused_total{reason="queue_full",tenant="bob"})"), 0);
  EXPECT_EQ(sample(text, R"(scs_runs_finished_total{status="running",tenant="alice"})"),
            std::nullopt);
}

TEST(CountingBackendTest, CountsEveryAnswerThatIsNotOkAndChangesNone) {
  Metrics metrics("1", "mock");
  ::testing::StrictMock<mocks::MockRuntimeBackend> inner;
  CountingBackend backend(inner, metrics);
  backend::CreateReply refused;
  refused.status = {backend::Code::kRejected, "no such image"};
  EXPECT_CALL(inner, create(_)).WillOnce(Return(refused));
  EXPECT_CALL(inner, remove("a")).WillOnce(Return(backend::Status{}));
  EXPECT_CALL(inner, kill("b"))
      .Times(2)
      .WillRepeatedly(Return(backend::Status{backend::Code::kNotFound, "gone"}));
  backend::ListReply listed;
  listed.status = {backend::Code::kTimeout, "slow"};
  EXPECT_CALL(inner, list("io.scs.managed")).WillOnce(Return(listed));

  const backend::CreateReply created = backend.create({});
  EXPECT_EQ(created.status.code, backend::Code::kRejected);
  EXPECT_EQ(created.status.message, "no such image");
  EXPECT_TRUE(backend.remove("a").ok());
  EXPECT_EQ(backend.kill("b").message, "gone");
  EXPECT_EQ(backend.kill("b").code, backend::Code::kNotFound);
  EXPECT_EQ(backend.list("io.scs.managed").status.code, backend::Code::kTimeout);

  const std::string text = metrics.render({});
  EXPECT_EQ(sample(text, R"(scs_engine_errors_total{call="create",code="rejected"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_engine_errors_total{call="kill",code="not_found"})"), 2);
  EXPECT_EQ(sample(text, R"(scs_engine_errors_total{call="list",code="timeout"})"), 1);
  EXPECT_THAT(text, Not(HasSubstr(R"(call="remove")")));
}

// The run manager and the tools in front of it report to the metrics as runs come and go.
class RunMetricsTest : public ::testing::Test {
 protected:
  static runs::RunSettings settings() {
    runs::RunSettings settings;
    settings.max_concurrent = 1;
    settings.max_queue = 1;
    return settings;
  }

  Poco::JSON::Object::Ptr call(const std::string& name, const std::string& arguments) {
    return tools_.call(name, scs::testing::parseOrdered(arguments));
  }
  std::string runIdOf(const Poco::JSON::Object::Ptr& result) {
    EXPECT_FALSE(result->getValue<bool>("isError")) << scs::testing::compact(result);
    return result->getObject("structuredContent")->getValue<std::string>("run_id");
  }
  std::string render() { return metrics_.render(core_.runs.load()); }

  Metrics metrics_{"1", "fake"};
  mocks::CoreStack core_{settings(), mocks::kTestHost, &metrics_};
  mcp::Tools tools_{core_.runs, core_.limits, policy::FileSettings{}, std::chrono::seconds(3600)};
};

TEST_F(RunMetricsTest, RefusalsRunsAndTheQueueAreCounted) {
  EXPECT_TRUE(
      call("start_run", R"({"code":"x","limits":{"memory_gb":1000}})")->getValue<bool>("isError"));
  EXPECT_TRUE(call("start_run", R"({"limits":{}})")->getValue<bool>("isError"));

  const std::string done = runIdOf(call("start_run", R"({"code":"#fake:exit=3"})"));
  const auto result = call("get_result", R"({"run_id":")" + done + R"(","wait_seconds":20})");
  EXPECT_EQ(result->getObject("structuredContent")->getValue<std::string>("status"), "failed");

  const std::string running = runIdOf(call("start_run", R"({"code":"#fake:hang"})"));
  ASSERT_TRUE(core_.backend.awaitSandboxes([](const auto& views) {
    return std::count_if(views.begin(), views.end(), [](const auto& view) {
             return view.waits > 0;
           }) == 2;  // the finished run's and this one's
  }));
  const std::string queued = runIdOf(call("start_run", R"({"code":"#fake:hang"})"));
  EXPECT_TRUE(call("start_run", R"({"code":"#fake:hang"})")->getValue<bool>("isError"));

  std::string text = render();
  EXPECT_EQ(sample(text, R"(scs_runs_refused_total{reason="limits",tenant="local"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_runs_refused_total{reason="invalid",tenant="local"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_runs_refused_total{reason="queue_full",tenant="local"})"), 1);
  EXPECT_EQ(sample(text, R"(scs_runs_started_total{tenant="local"})"), 3);
  EXPECT_EQ(sample(text, R"(scs_runs_finished_total{status="failed",tenant="local"})"), 1);
  EXPECT_EQ(sample(text, "scs_run_latency_seconds_count"), 1);
  EXPECT_EQ(sample(text, "scs_runs_queued"), 1);
  EXPECT_EQ(sample(text, "scs_runs_executing"), 1);
  // No run id ever becomes a label.
  EXPECT_THAT(text, Not(HasSubstr(done)));
  EXPECT_THAT(text, Not(HasSubstr(running)));

  call("stop_run", R"({"run_id":")" + queued + R"("})");
  call("stop_run", R"({"run_id":")" + running + R"("})");
  text = render();
  EXPECT_EQ(sample(text, R"(scs_runs_finished_total{status="stopped",tenant="local"})"), 2);
  EXPECT_EQ(sample(text, "scs_runs_queued"), 0);
  EXPECT_EQ(sample(text, "scs_runs_executing"), 0);
  // Two runs executed; the one stopped in the queue waited for nothing it got.
  EXPECT_EQ(sample(text, "scs_run_queue_wait_seconds_count"), 2);
  EXPECT_EQ(sample(text, "scs_run_latency_seconds_count"), 2);
}

// The endpoint answers GET /metrics with the exposition and nothing else.
TEST(MetricsEndpointTest, ServesTheExpositionAtMetricsOnly) {
  MetricsEndpoint endpoint(Poco::Net::SocketAddress("127.0.0.1", 0),
                           [] { return std::string("scs_up 1\n"); });
  ASSERT_EQ(scs::testing::errorOf(endpoint.start()), std::nullopt);
  const auto fetch = [&](const std::string& method, const std::string& path, std::string* body) {
    Poco::Net::HTTPClientSession session(endpoint.address());
    Poco::Net::HTTPRequest request(method, path, Poco::Net::HTTPRequest::HTTP_1_1);
    session.sendRequest(request);
    Poco::Net::HTTPResponse response;
    std::istream& in = session.receiveResponse(response);
    body->assign(std::istreambuf_iterator<char>(in), {});
    return response;
  };
  std::string body;
  const Poco::Net::HTTPResponse ok = fetch("GET", "/metrics", &body);
  EXPECT_EQ(ok.getStatus(), Poco::Net::HTTPResponse::HTTP_OK);
  EXPECT_EQ(ok.getContentType(), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(body, "scs_up 1\n");
  EXPECT_EQ(fetch("GET", "/mcp", &body).getStatus(), Poco::Net::HTTPResponse::HTTP_NOT_FOUND);
  const Poco::Net::HTTPResponse post = fetch("POST", "/metrics", &body);
  EXPECT_EQ(post.getStatus(), Poco::Net::HTTPResponse::HTTP_METHOD_NOT_ALLOWED);
  EXPECT_EQ(post.get("Allow"), "GET");
  endpoint.stop();
  endpoint.stop();
}

}  // namespace
}  // namespace scs::metrics
