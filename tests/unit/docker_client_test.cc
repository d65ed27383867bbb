#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "docker_backend.h"
#include "engine_client.h"
#include "engine_socket.h"
#include "mocks/docker_engine.h"
#include "mocks/mock_engine_socket.h"
#include "mocks/recording_sink.h"
#include "mocks/test_logs.h"

namespace scs::docker {
namespace {

using backend::Code;
using mocks::RecordingLog;
using mocks::RecordingSink;
using ::testing::_;
using ::testing::AllOf;
using testing::connected;
using testing::connectTo;
using testing::expectStartup;
using ::testing::Field;
using testing::goodSpec;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Invoke;
using testing::IsCall;
using testing::JsonBodyEq;
using testing::MockEngineSocket;
using testing::opened;
using testing::quietSettings;
using testing::reply;
using ::testing::Return;
using testing::scripted;
using testing::ScriptedConnection;
using ::testing::SizeIs;
using ::testing::StrictMock;
using State = ScriptedConnection::State;

TEST(EngineAddressTest, ParsesUnixAndTcp) {
  std::string error;
  const auto unix_address = parseEngineAddress("unix:///var/run/docker.sock", &error);
  ASSERT_TRUE(unix_address);
  EXPECT_EQ(unix_address->kind, EngineAddress::Kind::kUnix);
  EXPECT_EQ(unix_address->path, "/var/run/docker.sock");
  const auto tcp = parseEngineAddress("tcp://10.0.0.5:2375", &error);
  ASSERT_TRUE(tcp);
  EXPECT_EQ(tcp->kind, EngineAddress::Kind::kTcp);
  EXPECT_EQ(tcp->host, "10.0.0.5");
  EXPECT_EQ(tcp->port, 2375);
  const auto v6 = parseEngineAddress("tcp://[::1]:2376/", &error);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 2376);
}

TEST(EngineAddressTest, RejectsEverythingElse) {
  for (const char* bad : {"", "/var/run/docker.sock", "http://localhost:2375", "unix://",
                          "unix://relative.sock", "tcp://host", "tcp://:2375", "tcp://host:0",
                          "tcp://host:65536", "tcp://host:12ab", "npipe:////./pipe/docker"}) {
    std::string error;
    EXPECT_FALSE(parseEngineAddress(bad, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(SettingsTest, DefaultsAndOptions) {
  std::string error;
  const auto defaults = parseSettings({}, &error);
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->engine, "unix:///var/run/docker.sock");
  EXPECT_EQ(defaults->api_timeout, std::chrono::milliseconds(30000));
  const auto set = parseSettings({{"engine", "tcp://h:1"}, {"api_timeout_ms", "1500"}}, &error);
  ASSERT_TRUE(set);
  EXPECT_EQ(set->engine, "tcp://h:1");
  EXPECT_EQ(set->api_timeout, std::chrono::milliseconds(1500));
}

TEST(SettingsTest, RejectsUnknownOptionsAndBadTimeouts) {
  for (const auto& options :
       std::vector<std::map<std::string, std::string>>{{{"engin", "unix:///x"}},
                                                       {{"api_timeout_ms", "0"}},
                                                       {{"api_timeout_ms", "-5"}},
                                                       {{"api_timeout_ms", "10s"}},
                                                       {{"api_timeout_ms", "99999999999"}}}) {
    std::string error;
    EXPECT_FALSE(parseSettings(options, &error)) << options.begin()->first;
    EXPECT_FALSE(error.empty());
  }
}

struct VersionCase {
  const char* reply;
  Code code;
  const char* chosen;
};

TEST(NegotiationTest, PicksTheNewestCommonVersion) {
  const std::vector<VersionCase> cases = {
      {R"({"ApiVersion":"1.41","MinAPIVersion":"1.12"})", Code::kOk, "1.41"},  // Debian 20.10
      {R"({"ApiVersion":"1.51","MinAPIVersion":"1.24"})", Code::kOk, "1.47"},  // capped
      {R"({"ApiVersion":"1.52","MinAPIVersion":"1.44"})", Code::kOk, "1.47"},  // 29.0 floor
      {R"({"ApiVersion":"1.45","MinAPIVersion":"1.44"})", Code::kOk, "1.45"},
      {R"({"ApiVersion":"1.47"})", Code::kOk, "1.47"},
      {R"({"ApiVersion":"1.60","MinAPIVersion":"1.48"})", Code::kUnsupported, ""},
      {R"({"ApiVersion":"1.40","MinAPIVersion":"1.12"})", Code::kUnsupported, ""},
      {R"({"Version":"20.10"})", Code::kInternal, ""},
      {R"({"ApiVersion":"one.two"})", Code::kInternal, ""},
      {"not json", Code::kInternal, ""},
  };
  for (const auto& c : cases) {
    const Negotiation n = negotiateApiVersion(c.reply);
    EXPECT_EQ(n.status.code, c.code) << c.reply;
    if (c.code == Code::kOk) {
      EXPECT_EQ(n.version.text(), c.chosen) << c.reply;
    } else {
      EXPECT_FALSE(n.status.message.empty()) << c.reply;
    }
  }
}

TEST(NegotiationTest, LaterPathsCarryTheNegotiatedVersion) {
  for (const auto& [version_reply, prefix] : std::vector<std::pair<std::string, std::string>>{
           {R"({"ApiVersion":"1.41","MinAPIVersion":"1.12"})", "/v1.41"},
           {R"({"ApiVersion":"1.51","MinAPIVersion":"1.24"})", "/v1.47"},
           {R"({"ApiVersion":"1.47","MinAPIVersion":"1.44"})", "/v1.47"},
           {R"({"ApiVersion":"1.45","MinAPIVersion":"1.44"})", "/v1.45"}}) {
    StrictMock<MockEngineSocket> transport;
    expectStartup(&transport, version_reply, prefix + "/info");
    std::string error;
    auto backend = connectTo(&transport, quietSettings(), &error);
    ASSERT_TRUE(backend) << error;
    EXPECT_CALL(transport, call(IsCall("POST", prefix + "/containers/x/kill?signal=KILL")))
        .WillOnce(Return(reply(204)));
    EXPECT_TRUE(backend->kill("x").ok());
  }
}

TEST(ConnectTest, UnreachableEngineGivesNoBackendAndSaysWhy) {
  StrictMock<MockEngineSocket> transport;
  HttpReply refused;
  refused.error = TransportError::kConnect;
  refused.error_message = "No such file or directory";
  EXPECT_CALL(transport, call(IsCall("GET", "/version"))).WillOnce(Return(refused));
  std::string error;
  EXPECT_FALSE(connectTo(&transport, quietSettings(), &error));
  EXPECT_EQ(error,
            "cannot reach the Docker engine at unix:///var/run/docker.sock: No such file or "
            "directory");
}

TEST(ConnectTest, TooNewEngineGivesNoBackend) {
  StrictMock<MockEngineSocket> transport;
  EXPECT_CALL(transport, call(IsCall("GET", "/version")))
      .WillOnce(Return(reply(200, R"({"ApiVersion":"1.60","MinAPIVersion":"1.50"})")));
  std::string error;
  EXPECT_FALSE(connectTo(&transport, quietSettings(), &error));
  EXPECT_NE(error.find("cannot serve"), std::string::npos) << error;
  EXPECT_NE(error.find("1.50"), std::string::npos) << error;
}

struct MappingCase {
  int status;
  TransportError error;
  Code code;
};

TEST(ErrorMappingTest, EveryReplyMapsToOneStatus) {
  const std::vector<MappingCase> cases = {
      {200, TransportError::kNone, Code::kOk},
      {201, TransportError::kNone, Code::kOk},
      {204, TransportError::kNone, Code::kOk},
      {304, TransportError::kNone, Code::kInternal},
      {400, TransportError::kNone, Code::kRejected},
      {401, TransportError::kNone, Code::kRejected},
      {403, TransportError::kNone, Code::kRejected},
      {404, TransportError::kNone, Code::kNotFound},
      {409, TransportError::kNone, Code::kRejected},
      {500, TransportError::kNone, Code::kUnavailable},
      {503, TransportError::kNone, Code::kUnavailable},
      {0, TransportError::kConnect, Code::kUnavailable},
      {0, TransportError::kIo, Code::kUnavailable},
      {0, TransportError::kTimeout, Code::kTimeout},
  };
  for (const auto& c : cases) {
    HttpReply r;
    r.status = c.status;
    r.error = c.error;
    r.error_message = "socket trouble";
    r.body = R"({"message":"the engine's own words"})";
    const backend::Status status = statusFromReply("create", r);
    EXPECT_EQ(status.code, c.code) << c.status;
    if (c.code != Code::kOk) {
      EXPECT_NE(status.message.find("create"), std::string::npos) << c.status;
      const char* expected =
          c.error == TransportError::kNone ? "the engine's own words" : "socket trouble";
      EXPECT_NE(status.message.find(expected), std::string::npos) << status.message;
    }
  }
}

TEST(ErrorMappingTest, NonJsonBodiesAreQuotedShortAndPrintable) {
  HttpReply r = reply(500, std::string(1000, 'x') + "\n\x01");
  const backend::Status status = statusFromReply("start", r);
  EXPECT_EQ(status.code, Code::kUnavailable);
  EXPECT_LT(status.message.size(), 400u);
  EXPECT_EQ(status.message.find('\n'), std::string::npos);
}

// A backend connected over a strict mock that has answered the startup calls, logging to log_.
// startSandbox() creates and starts "abc" with its output going to sink_; attach_ and waiting_
// are then the handles of its attach and wait streams.
class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { connect(quietSettings()); }

  // Replaces the backend with one connected under `settings`.
  void connect(const DockerSettings& settings) {
    backend_ = connected(&transport_, settings, &log_);
  }

  // See createAndStart.
  void startSandbox(bool deliver_first = true);

  // "abc" is started, exits 0 as the engine records it, and is removed; what the wait reported.
  backend::WaitReply runToExit();

  StrictMock<MockEngineSocket> transport_;
  RecordingLog log_;
  RecordingSink sink_;
  std::unique_ptr<DockerBackend> backend_;
  std::shared_ptr<State> attach_;
  std::shared_ptr<State> waiting_;
};

using KillRemoveTest = EngineTest;

TEST_F(KillRemoveTest, KillTreatsNotRunningAsDone) {
  EXPECT_CALL(transport_, call(IsCall("POST", "/v1.41/containers/abc/kill?signal=KILL")))
      .WillOnce(Return(reply(204)))
      .WillOnce(Return(reply(409, R"({"message":"Container abc is not running"})")))
      .WillOnce(Return(reply(404, R"({"message":"No such container: abc"})")))
      .WillOnce(Return(reply(500, R"({"message":"daemon trouble"})")));
  EXPECT_EQ(backend_->kill("abc").code, Code::kOk);
  EXPECT_EQ(backend_->kill("abc").code, Code::kOk);
  EXPECT_EQ(backend_->kill("abc").code, Code::kNotFound);
  EXPECT_EQ(backend_->kill("abc").code, Code::kUnavailable);
}

TEST_F(KillRemoveTest, RemoveForcesAndTreatsGoneAsDone) {
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/abc?force=1&v=1")))
      .WillOnce(Return(reply(204)))
      .WillOnce(Return(reply(404, R"({"message":"No such container: abc"})")))
      .WillOnce(
          Return(reply(409, R"({"message":"removal of container abc is already in progress"})")))
      .WillOnce(Return(reply(409, R"({"message":"You cannot remove a running container"})")))
      .WillOnce(Return(reply(500, R"({"message":"driver failed"})")));
  EXPECT_EQ(backend_->remove("abc").code, Code::kOk);
  EXPECT_EQ(backend_->remove("abc").code, Code::kOk);
  EXPECT_EQ(backend_->remove("abc").code, Code::kOk);
  EXPECT_EQ(backend_->remove("abc").code, Code::kRejected);
  const backend::Status failed = backend_->remove("abc");
  EXPECT_EQ(failed.code, Code::kUnavailable);
  EXPECT_NE(failed.message.find("driver failed"), std::string::npos);
}

using ListCapacityTest = EngineTest;

TEST_F(ListCapacityTest, ListFiltersByLabelAndReadsLabels) {
  EXPECT_CALL(transport_, call(IsCall("GET",
                                      "/v1.41/containers/json?all=1&filters="
                                      "%7B%22label%22%3A%5B%22io.scs.managed%22%5D%7D")))
      .WillOnce(Return(reply(200, R"([{"Id":"a1","Labels":{"io.scs.managed":"true",
                                       "io.scs.run-id":"r1"}},{"Id":"b2","Labels":null}])")));
  const auto listed = backend_->list("io.scs.managed");
  ASSERT_TRUE(listed.status.ok()) << listed.status.message;
  ASSERT_EQ(listed.sandboxes.size(), 2u);
  EXPECT_EQ(listed.sandboxes[0].id, "a1");
  EXPECT_EQ(listed.sandboxes[0].labels.at("io.scs.run-id"), "r1");
  EXPECT_EQ(listed.sandboxes[1].id, "b2");
  EXPECT_TRUE(listed.sandboxes[1].labels.empty());
}

TEST_F(ListCapacityTest, CapacityComesFromInfo) {
  EXPECT_CALL(transport_, call(IsCall("GET", "/v1.41/info")))
      .WillOnce(Return(reply(200, R"({"NCPU":16,"MemTotal":68719476736})")))
      .WillOnce(Return(reply(200, R"({"NCPU":16})")));
  const auto capacity = backend_->capacity();
  ASSERT_TRUE(capacity.status.ok());
  EXPECT_EQ(capacity.capacity.cores, 16);
  EXPECT_EQ(capacity.capacity.memory_bytes, 68719476736);
  EXPECT_EQ(backend_->capacity().status.code, Code::kInternal);
}

using GuardTest = EngineTest;

TEST_F(GuardTest, AnExceptionBelowBecomesInternal) {
  EXPECT_CALL(transport_, call(_)).WillRepeatedly(Invoke([](const HttpCall&) -> HttpReply {
    throw std::runtime_error("boom");
  }));
  EXPECT_EQ(backend_->capacity().status.code, Code::kInternal);
  EXPECT_EQ(backend_->kill("abc").code, Code::kInternal);
  EXPECT_EQ(backend_->list("k").status.code, Code::kInternal);
  EXPECT_NE(backend_->remove("abc").message.find("boom"), std::string::npos);
}

constexpr const char* kCreatePath = "/v1.41/containers/create?name=scs-run-1";

using CreateTest = EngineTest;

TEST_F(CreateTest, EngineWarningsRemoveTheContainerAndRefuse) {
  InSequence order;
  EXPECT_CALL(transport_, call(IsCall("POST", kCreatePath)))
      .WillOnce(
          Return(reply(201, R"({"Id":"abc","Warnings":["Your kernel does not support )"
                            R"(memory swappiness capabilities. Memory swappiness discarded."]})")));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/abc?force=1&v=1")))
      .WillOnce(Return(reply(204)));
  const auto created = backend_->create(goodSpec());
  EXPECT_EQ(created.status.code, Code::kUnsupported);
  EXPECT_NE(created.status.message.find("swappiness"), std::string::npos);
  EXPECT_TRUE(created.id.empty());
}

TEST_F(CreateTest, ALostReplyRemovesTheContainerByName) {
  HttpReply lost;
  lost.error = TransportError::kTimeout;
  lost.error_message = "no reply within 30000 ms";
  InSequence order;
  EXPECT_CALL(transport_, call(IsCall("POST", kCreatePath))).WillOnce(Return(lost));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/scs-run-1?force=1&v=1")))
      .WillOnce(Return(reply(404)));
  EXPECT_CALL(transport_, call(IsCall("POST", kCreatePath)))
      .WillOnce(Return(reply(500, R"({"message":"oci runtime error"})")));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/scs-run-1?force=1&v=1")))
      .WillOnce(Return(reply(204)));
  EXPECT_EQ(backend_->create(goodSpec()).status.code, Code::kTimeout);
  EXPECT_EQ(backend_->create(goodSpec()).status.code, Code::kUnavailable);
}

TEST_F(CreateTest, RefusalsLeaveOtherContainersAlone) {
  EXPECT_CALL(transport_, call(IsCall("POST", kCreatePath)))
      .WillOnce(Return(reply(409, R"({"message":"Conflict. The container name is in use"})")))
      .WillOnce(Return(reply(404, R"({"message":"No such image: img"})")))
      .WillOnce(Return(reply(201, R"({"Warnings":[]})")));
  // An answer without an id may still have created the container.
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/scs-run-1?force=1&v=1")))
      .WillOnce(Return(reply(204)));
  EXPECT_EQ(backend_->create(goodSpec()).status.code, Code::kRejected);
  const auto missing = backend_->create(goodSpec());
  EXPECT_EQ(missing.status.code, Code::kNotFound);
  EXPECT_NE(missing.status.message.find("No such image: img"), std::string::npos);
  EXPECT_EQ(backend_->create(goodSpec()).status.code, Code::kInternal);
}

using UnknownSandboxTest = EngineTest;

TEST_F(UnknownSandboxTest, CallsForSandboxesThisServerDidNotCreate) {
  EXPECT_EQ(backend_->deliver("zzz", "tar").code, Code::kNotFound);
  EXPECT_EQ(backend_->start("zzz", nullptr).code, Code::kNotFound);
  EXPECT_EQ(backend_->wait("zzz", std::chrono::milliseconds(1)).status.code, Code::kNotFound);
  // A leftover of an earlier server: removed at the engine all the same.
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/zzz?force=1&v=1")))
      .WillOnce(Return(reply(204)));
  EXPECT_TRUE(backend_->remove("zzz").ok());
}

std::string frame(int type, std::string_view payload) {
  std::string out(8, '\0');
  out[0] = static_cast<char>(type);
  const auto size = static_cast<std::uint32_t>(payload.size());
  out[4] = static_cast<char>(size >> 24);
  out[5] = static_cast<char>(size >> 16);
  out[6] = static_cast<char>(size >> 8);
  out[7] = static_cast<char>(size);
  out.append(payload);
  return out;
}

constexpr const char* kAttachPath =
    "/v1.41/containers/abc/attach?stream=1&stdin=1&stdout=1&stderr=1";
constexpr const char* kWaitPath = "/v1.41/containers/abc/wait?condition=next-exit";
constexpr const char* kStartPath = "/v1.41/containers/abc/start";
constexpr const char* kInspectPath = "/v1.41/containers/abc/json";
constexpr const char* kDeletePath = "/v1.41/containers/abc?force=1&v=1";

// The inspect after the exit: the engine's record of a plain exit with `exit_code`.
void expectExitedInspect(StrictMock<MockEngineSocket>& transport, int exit_code) {
  EXPECT_CALL(transport, call(IsCall("GET", kInspectPath)))
      .WillOnce(Return(reply(200, R"({"State":{"Status":"exited","Running":false,)"
                                  R"("OOMKilled":false,"ExitCode":)" +
                                      std::to_string(exit_code) + R"(,"Error":""}})")));
}

const std::string kArchive("ustar\0archive", 13);

// The sandbox ends with `exit_code`: its output stream closes and the wait reports the exit.
void endWith(State& attach, State& waiting, int exit_code) {
  attach.finish();
  waiting.push(R"({"StatusCode":)" + std::to_string(exit_code) + "}");
  waiting.finish();
}

void expectRemoved(StrictMock<MockEngineSocket>& transport, DockerBackend& backend) {
  EXPECT_CALL(transport, call(IsCall("DELETE", kDeletePath))).WillOnce(Return(reply(204)));
  EXPECT_TRUE(backend.remove("abc").ok());
}

// Starts the created "abc"; returns the attach and wait streams' handles. The attach stream,
// like the launcher, answers only after stdin is closed.
void start(StrictMock<MockEngineSocket>& transport, DockerBackend& backend, RecordingSink* sink,
           std::shared_ptr<State>* attach, std::shared_ptr<State>* waiting) {
  {
    InSequence order;  // attach and register the wait before start
    EXPECT_CALL(transport,
                open(AllOf(IsCall("POST", kAttachPath), Field(&HttpCall::upgrade, true))))
        .WillOnce(Invoke([attach](const HttpCall&) {
          auto connection = scripted(attach);
          (*attach)->hold_until_write_shut = true;
          return opened(101, std::move(connection));
        }));
    EXPECT_CALL(transport, open(IsCall("POST", kWaitPath)))
        .WillOnce(Invoke([waiting](const HttpCall&) { return opened(200, scripted(waiting)); }));
    EXPECT_CALL(transport, call(IsCall("POST", kStartPath))).WillOnce(Return(reply(204)));
  }
  const backend::Status started = backend.start("abc", sink);
  ASSERT_TRUE(started.ok()) << started.message;
}

void create(StrictMock<MockEngineSocket>& transport, DockerBackend& backend) {
  EXPECT_CALL(transport, call(IsCall("POST", kCreatePath)))
      .WillOnce(Return(reply(201, R"({"Id":"abc","Warnings":null})")));
  ASSERT_EQ(backend.create(goodSpec()).id, "abc");
}

// Creates "abc", delivers an archive unless `deliver_first` is false (a sandbox prepared ahead
// of its run, whose launcher idles on stdin), and starts it.
void createAndStart(StrictMock<MockEngineSocket>& transport, DockerBackend& backend,
                    RecordingSink* sink, std::shared_ptr<State>* attach,
                    std::shared_ptr<State>* waiting, bool deliver_first = true) {
  create(transport, backend);
  if (deliver_first) {
    ASSERT_TRUE(backend.deliver("abc", kArchive).ok());
  }
  start(transport, backend, sink, attach, waiting);
}

void EngineTest::startSandbox(bool deliver_first) {
  createAndStart(transport_, *backend_, &sink_, &attach_, &waiting_, deliver_first);
}

backend::WaitReply EngineTest::runToExit() {
  startSandbox();
  expectExitedInspect(transport_, 0);
  endWith(*attach_, *waiting_, 0);
  const auto done = backend_->wait("abc", std::chrono::seconds(30));
  expectRemoved(transport_, *backend_);
  return done;
}

using RunTest = EngineTest;

TEST_F(RunTest, DeliversCodeOverStdinDrainsOutputAndReportsTheExit) {
  startSandbox();
  expectExitedInspect(transport_, 3);

  EXPECT_FALSE(backend_->wait("abc", std::chrono::milliseconds(20)).exit.exited);
  const std::string stream = frame(1, "4") + frame(2, "Traceback\n") + frame(1, "5\n");
  attach_->push(stream.substr(0, 5));
  attach_->push(stream.substr(5));
  attach_->finish();
  waiting_->push(R"({"Error":null,"StatusCode":3})");
  waiting_->finish();

  const auto done = backend_->wait("abc", std::chrono::seconds(30));
  ASSERT_TRUE(done.status.ok()) << done.status.message;
  EXPECT_TRUE(done.exit.exited);
  EXPECT_EQ(done.exit.exit_code, 3);
  EXPECT_FALSE(done.exit.oom_killed);
  EXPECT_EQ(done.exit.engine_error, "");
  EXPECT_EQ(sink_.out(), "45\n");
  EXPECT_EQ(sink_.err(), "Traceback\n");
  EXPECT_EQ(attach_->writtenBytes(), kArchive);
  EXPECT_TRUE(attach_->writeShut());
  const int writes = sink_.writes();
  EXPECT_EQ(backend_->wait("abc", std::chrono::milliseconds(0)).exit.exit_code, 3);  // repeatable

  expectRemoved(transport_, *backend_);
  EXPECT_EQ(sink_.writes(), writes);
  EXPECT_EQ(backend_->wait("abc", std::chrono::milliseconds(0)).status.code, Code::kNotFound);
}

TEST_F(RunTest, EngineErrorsAndOomFromTheRecordAreReported) {
  startSandbox();
  EXPECT_CALL(transport_, call(IsCall("GET", kInspectPath)))
      .WillOnce(
          Return(reply(200, R"({"State":{"Status":"exited","Running":false,)"
                            R"("OOMKilled":true,"ExitCode":137,"Error":"oci runtime says no"}})")));
  attach_->push(frame(3, "attach_ failed"));
  attach_->finish();
  waiting_->push(R"({"Error":{"Message":"wait went wrong"},"StatusCode":137})");
  waiting_->finish();
  const auto done = backend_->wait("abc", std::chrono::seconds(30));
  ASSERT_TRUE(done.status.ok());
  EXPECT_EQ(done.exit.exit_code, 137);
  EXPECT_TRUE(done.exit.oom_killed);
  EXPECT_NE(done.exit.engine_error.find("attach_ failed"), std::string::npos);
  EXPECT_NE(done.exit.engine_error.find("wait went wrong"), std::string::npos);
  EXPECT_NE(done.exit.engine_error.find("oci runtime says no"), std::string::npos);
  EXPECT_EQ(sink_.writes(), 0);
  expectRemoved(transport_, *backend_);
}

TEST_F(RunTest, RemoveEndsAHangingRunAndJoinsItsThread) {
  startSandbox();
  attach_->push(frame(1, "tick\n"));  // the run prints, then never ends on its own
  attach_->waitConsumed();
  EXPECT_FALSE(backend_->wait("abc", std::chrono::milliseconds(10)).exit.exited);
  expectRemoved(transport_, *backend_);
  EXPECT_TRUE(attach_->wasAborted());
  EXPECT_TRUE(waiting_->wasAborted());
  EXPECT_EQ(sink_.out(), "tick\n");
}

TEST_F(RunTest, StartFailureAbortsTheStreamsAndStartsNoThread) {
  EXPECT_CALL(transport_, call(IsCall("POST", kCreatePath)))
      .WillOnce(Return(reply(201, R"({"Id":"abc"})")));
  ASSERT_EQ(backend_->create(goodSpec()).id, "abc");
  EXPECT_CALL(transport_, open(IsCall("POST", kAttachPath))).WillOnce(Invoke([&](const HttpCall&) {
    return opened(101, scripted(&attach_));
  }));
  EXPECT_CALL(transport_, open(IsCall("POST", kWaitPath))).WillOnce(Invoke([&](const HttpCall&) {
    return opened(200, scripted(&waiting_));
  }));
  EXPECT_CALL(transport_, call(IsCall("POST", kStartPath)))
      .WillOnce(Return(reply(500, R"({"message":"OCI runtime create failed: runsc not found"})")));
  const backend::Status started = backend_->start("abc", &sink_);
  EXPECT_EQ(started.code, Code::kUnavailable);
  EXPECT_NE(started.message.find("runsc not found"), std::string::npos);
  EXPECT_TRUE(attach_->wasAborted());
  EXPECT_TRUE(waiting_->wasAborted());
  EXPECT_FALSE(backend_->wait("abc", std::chrono::milliseconds(5)).exit.exited);
  expectRemoved(transport_, *backend_);
}

// The container ends on its own with its stdin never read, as when the launcher's timeout
// kills a sandbox that idled too long.
void endWithoutReading(State& attach) {
  {
    std::lock_guard<std::mutex> lock(attach.mu);
    attach.hold_until_write_shut = false;
    attach.finished = true;
  }
  attach.cv.notify_all();
}

using PreparedTest = EngineTest;

// The run of a sandbox that was started before its code existed, then given it.
TEST_F(PreparedTest, DeliverAfterStartWritesTheArchiveAndTheRunCompletes) {
  startSandbox(/*deliver_first=*/false);
  EXPECT_FALSE(backend_->wait("abc", std::chrono::milliseconds(20)).exit.exited);
  EXPECT_EQ(attach_->writtenBytes(), "");  // idle: stdin stays open and empty
  EXPECT_FALSE(attach_->writeShut());

  expectExitedInspect(transport_, 0);
  attach_->push(frame(1, "1\n"));  // read back only once stdin is closed
  endWith(*attach_, *waiting_, 0);
  const backend::Status delivered = backend_->deliver("abc", kArchive);
  ASSERT_TRUE(delivered.ok()) << delivered.message;

  const auto done = backend_->wait("abc", std::chrono::seconds(30));
  ASSERT_TRUE(done.status.ok()) << done.status.message;
  EXPECT_TRUE(done.exit.exited);
  EXPECT_EQ(done.exit.exit_code, 0);
  EXPECT_EQ(done.exit.engine_error, "");
  EXPECT_EQ(sink_.out(), "1\n");
  EXPECT_EQ(attach_->writtenBytes(), kArchive);
  EXPECT_TRUE(attach_->writeShut());
  // The steps are timed from the delivery, which the line places after the start.
  EXPECT_TRUE(log_.contains("docker: abc: code delivered "));
  EXPECT_TRUE(log_.contains(" ms after start; from delivery: written "));
  EXPECT_TRUE(log_.contains(", output ended "));
  expectRemoved(transport_, *backend_);
}

TEST_F(PreparedTest, ASecondDeliverIsRejectedAndOnlyTheFirstArchiveIsWritten) {
  startSandbox(/*deliver_first=*/false);
  expectExitedInspect(transport_, 0);
  endWith(*attach_, *waiting_, 0);
  ASSERT_TRUE(backend_->deliver("abc", kArchive).ok());
  const backend::Status again = backend_->deliver("abc", "another archive");
  EXPECT_EQ(again.code, Code::kRejected);
  EXPECT_NE(again.message.find("abc"), std::string::npos) << again.message;
  ASSERT_TRUE(backend_->wait("abc", std::chrono::seconds(30)).exit.exited);
  EXPECT_EQ(attach_->writtenBytes(), kArchive);
  EXPECT_EQ(backend_->deliver("abc", kArchive).code, Code::kRejected);  // after the end too
  expectRemoved(transport_, *backend_);
}

// The path of a sandbox created for its run: the archive is held until start.
TEST_F(PreparedTest, DeliverBeforeStartIsHeldUntilStartAndCannotBeRepeated) {
  create(transport_, *backend_);
  ASSERT_TRUE(backend_->deliver("abc", kArchive).ok());
  EXPECT_EQ(backend_->deliver("abc", "another archive").code, Code::kRejected);
  start(transport_, *backend_, &sink_, &attach_, &waiting_);
  EXPECT_EQ(backend_->deliver("abc", "another archive").code, Code::kRejected);
  expectExitedInspect(transport_, 0);
  endWith(*attach_, *waiting_, 0);
  ASSERT_TRUE(backend_->wait("abc", std::chrono::seconds(30)).exit.exited);
  EXPECT_EQ(attach_->writtenBytes(), kArchive);
  EXPECT_TRUE(attach_->writeShut());
  EXPECT_TRUE(log_.contains("docker: abc: code delivered before start; from start: written "));
  expectRemoved(transport_, *backend_);
}

TEST_F(PreparedTest, RemovingAnIdleSandboxReturnsAndJoinsItsThread) {
  startSandbox(/*deliver_first=*/false);
  EXPECT_FALSE(backend_->wait("abc", std::chrono::milliseconds(10)).exit.exited);
  EXPECT_CALL(transport_, call(IsCall("DELETE", kDeletePath))).WillOnce(Return(reply(204)));
  const auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(backend_->remove("abc").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5));
  EXPECT_TRUE(attach_->wasAborted());
  EXPECT_TRUE(waiting_->wasAborted());
  EXPECT_EQ(attach_->writtenBytes(), "");
  EXPECT_FALSE(attach_->writeShut());
  EXPECT_EQ(sink_.writes(), 0);
  EXPECT_EQ(backend_->deliver("abc", kArchive).code, Code::kNotFound);
}

TEST_F(PreparedTest, DeliverDuringAFailedRemovalFails) {
  startSandbox(/*deliver_first=*/false);
  EXPECT_CALL(transport_, call(IsCall("DELETE", kDeletePath)))
      .WillOnce(Return(reply(500, R"({"message":"driver failed"})")));
  EXPECT_EQ(backend_->remove("abc").code, Code::kUnavailable);
  EXPECT_TRUE(attach_->wasAborted());  // its thread ended all the same
  const backend::Status delivered = backend_->deliver("abc", kArchive);
  EXPECT_EQ(delivered.code, Code::kNotFound);
  EXPECT_NE(delivered.message.find("removed"), std::string::npos) << delivered.message;
  EXPECT_EQ(attach_->writtenBytes(), "");
}

TEST_F(PreparedTest, DestroyingTheBackendEndsIdleSandboxes) {
  startSandbox(/*deliver_first=*/false);
  const auto began = std::chrono::steady_clock::now();
  backend_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5));
  EXPECT_TRUE(attach_->wasAborted());
  EXPECT_TRUE(waiting_->wasAborted());
  EXPECT_EQ(attach_->writtenBytes(), "");
}

TEST_F(PreparedTest, ASandboxThatEndedIdleRefusesItsCode) {
  startSandbox(/*deliver_first=*/false);
  expectExitedInspect(transport_, 137);
  endWithoutReading(*attach_);
  waiting_->push(R"({"StatusCode":137})");
  waiting_->finish();
  const auto done = backend_->wait("abc", std::chrono::seconds(30));
  ASSERT_TRUE(done.status.ok()) << done.status.message;
  EXPECT_EQ(done.exit.exit_code, 137);
  EXPECT_EQ(done.exit.engine_error, "");

  const backend::Status delivered = backend_->deliver("abc", kArchive);
  EXPECT_EQ(delivered.code, Code::kUnavailable);
  EXPECT_NE(delivered.message.find("ended"), std::string::npos) << delivered.message;
  EXPECT_EQ(attach_->writtenBytes(), "");
  EXPECT_FALSE(attach_->writeShut());
  EXPECT_TRUE(log_.contains("docker: abc ended before it had its code"));
  EXPECT_TRUE(log_.contains("docker: abc: no code delivered; from start: output ended "));
  expectRemoved(transport_, *backend_);
}

// A cgroup v1 tree as the engine lays it out, in a temporary directory.
class FakeCgroups {
 public:
  FakeCgroups() {
    char pattern[] = "/tmp/scs-cgroup-XXXXXX";
    root_ = ::mkdtemp(pattern);
    std::filesystem::create_directories(root_ / "memory/docker/abc");
    std::filesystem::create_directories(root_ / "cpuacct/docker/abc");
    std::ofstream(root_ / "memory/docker/memory.max_usage_in_bytes") << "1\n";
  }
  ~FakeCgroups() { std::filesystem::remove_all(root_); }
  void set(std::int64_t peak, std::int64_t cpu_nanos, int oom_kills) {
    std::ofstream(root_ / "memory/docker/abc/memory.max_usage_in_bytes") << peak << "\n";
    std::ofstream(root_ / "memory/docker/abc/memory.oom_control")
        << "oom_kill_disable 0\nunder_oom 0\noom_kill " << oom_kills << "\n";
    std::ofstream(root_ / "cpuacct/docker/abc/cpuacct.usage") << cpu_nanos << "\n";
  }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

using CgroupTest = EngineTest;

TEST_F(CgroupTest, PeakMemoryCpuAndOomKillsAreRead) {
  FakeCgroups cgroups;
  DockerSettings settings = quietSettings();
  settings.cgroup_root = cgroups.root();
  connect(settings);
  cgroups.set(12345678, 1500000000, 0);
  const auto quiet = runToExit();
  ASSERT_TRUE(quiet.status.ok());
  EXPECT_EQ(quiet.exit.peak_memory_bytes, 12345678);
  ASSERT_TRUE(quiet.exit.cpu_seconds);
  EXPECT_DOUBLE_EQ(*quiet.exit.cpu_seconds, 1.5);
  EXPECT_FALSE(quiet.exit.oom_killed);

  cgroups.set(12345678, 1500000000, 1);  // a child was OOM-killed; the main process exited 0
  const auto child_oom = runToExit();
  EXPECT_EQ(child_oom.exit.exit_code, 0);
  EXPECT_TRUE(child_oom.exit.oom_killed);
  // The kill means usage hit the cap.
  EXPECT_EQ(child_oom.exit.peak_memory_bytes, goodSpec().posture.memory_bytes);
}

TEST_F(CgroupTest, NothingReadableLeavesThemUnset) {
  startSandbox();  // cgroup_root empty
  EXPECT_CALL(transport_, call(IsCall("GET", kInspectPath)))
      .WillOnce(Return(reply(200, R"({"State":{"OOMKilled":false}})")));
  endWith(*attach_, *waiting_, 0);
  const auto done = backend_->wait("abc", std::chrono::seconds(30));
  EXPECT_FALSE(done.exit.peak_memory_bytes);
  EXPECT_FALSE(done.exit.cpu_seconds);
  expectRemoved(transport_, *backend_);
}

MATCHER(IsEventsCall, "") {
  const std::string prefix =
      "/v1.41/events?filters=" +
      urlEncode(
          R"({"event":["oom","kill","die"],"label":["io.scs.managed"],"type":["container"]})") +
      "&since=";
  return arg.method == "GET" && arg.path.rfind(prefix, 0) == 0;
}

std::string event(const char* action, const char* id) {
  return std::string(R"({"Type":"container","Action":")") + action + R"(","Actor":{"ID":")" + id +
         R"(","Attributes":{}},"timeNano":1796012259814000000})" + "\n";
}

// A backend that watches the event stream, whose handle is stream_, already reading it.
class EventsTest : public EngineTest {
 protected:
  void SetUp() override {
    std::promise<void> stream_open;
    EXPECT_CALL(transport_, open(IsEventsCall())).WillOnce(Invoke([&](const HttpCall&) {
      auto connection = scripted(&stream_);
      stream_open.set_value();
      return opened(200, std::move(connection));
    }));
    DockerSettings settings = quietSettings();
    settings.watch_events = true;
    settings.die_event_grace = std::chrono::seconds(30);
    connect(settings);
    stream_open.get_future().wait();
    stream_->push(event("die", "someone-else"));
    stream_->waitConsumed();  // the watcher is connected and reading
  }

  // OOM evidence that the inspect record lost (20.10 drops the flag when "oom" follows the
  // exit, F4) still reaches the report through the event stream.
  void runWithEvents(const std::vector<std::string>& events, bool expect_oom) {
    startSandbox();
    expectExitedInspect(transport_, 137);
    endWith(*attach_, *waiting_, 137);
    for (const auto& line : events) {
      stream_->push(line);
    }
    const auto done = backend_->wait("abc", std::chrono::seconds(30));
    ASSERT_TRUE(done.status.ok());
    EXPECT_EQ(done.exit.exit_code, 137);
    EXPECT_EQ(done.exit.oom_killed, expect_oom);
    expectRemoved(transport_, *backend_);
    backend_.reset();
    EXPECT_TRUE(stream_->wasAborted());
  }

  std::shared_ptr<State> stream_;
};

TEST_F(EventsTest, OomEventBeforeDieIsEvidence) {
  runWithEvents({event("oom", "abc"), event("die", "abc")}, true);
}

TEST_F(EventsTest, DieWithoutOomIsNoEvidence) {
  runWithEvents({event("oom", "other"), event("die", "abc")}, false);
}

// Issue 29: a derived image is a container of the base that is created, never started, takes the
// layer's archive and is committed with the base's configuration and the layer's labels.
using ImageTest = EngineTest;

backend::ImageLayer packageLayer() {
  backend::ImageLayer layer;
  layer.base_image = "safe-code-sandbox:latest";
  layer.image = "safe-code-sandbox-packages:abc";
  layer.archive = std::string(1024, '\0');
  layer.labels = {{"io.scs.package-set", "abc"}};
  layer.build_labels = {{"io.scs.managed", "true"}, {"io.scs.owner-pid", "42"}};
  return layer;
}

constexpr const char* kBasePath = "/v1.41/images/safe-code-sandbox%3Alatest/json";
constexpr const char* kMadePath = "/v1.41/images/safe-code-sandbox-packages%3Aabc/json";
constexpr const char* kBaseRecord =
    R"({"Id":"sha256:base","Config":{"Env":["PATH=/usr/bin"],"User":"",)"
    R"("Labels":{"io.scs.image-inputs":"x"}}})";

TEST_F(ImageTest, ALayerIsCommittedFromANeverStartedContainerOfTheBase) {
  InSequence order;
  EXPECT_CALL(transport_, call(IsCall("GET", kBasePath))).WillOnce(Return(reply(200, kBaseRecord)));
  EXPECT_CALL(transport_, call(IsCall("GET", kMadePath)))
      .WillOnce(Return(reply(404, R"({"message":"No such image"})")));
  EXPECT_CALL(
      transport_,
      call(AllOf(IsCall("POST", "/v1.41/containers/create"),
                 JsonBodyEq(R"({"Image":"safe-code-sandbox:latest","Cmd":["/bin/true"],)"
                            R"("Entrypoint":[],"NetworkDisabled":true,)"
                            R"("Labels":{"io.scs.managed":"true","io.scs.owner-pid":"42"}})"))))
      .WillOnce(Return(reply(201, R"({"Id":"builder","Warnings":[]})")));
  EXPECT_CALL(transport_, call(AllOf(IsCall("PUT", "/v1.41/containers/builder/archive?path=%2F"),
                                     Field(&HttpCall::body, SizeIs(1024u)),
                                     Field(&HttpCall::content_type, "application/x-tar"))))
      .WillOnce(Return(reply(200)));
  EXPECT_CALL(transport_,
              call(AllOf(IsCall("POST",
                                "/v1.41/commit?container=builder&repo=safe-code-sandbox-packages&"
                                "tag=abc&pause=0"),
                         JsonBodyEq(R"({"Env":["PATH=/usr/bin"],"User":"","Labels":{)"
                                    R"("io.scs.image-inputs":"x","io.scs.package-set":"abc",)"
                                    R"("io.scs.base-image":"safe-code-sandbox:latest",)"
                                    R"("io.scs.base-image-id":"sha256:base"}})"))))
      .WillOnce(Return(reply(201, R"({"Id":"sha256:made"})")));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/builder?force=1&v=1")))
      .WillOnce(Return(reply(204)));
  const backend::Status built = backend_->buildImage(packageLayer());
  EXPECT_TRUE(built.ok()) << built.message;
}

TEST_F(ImageTest, ALayerMadeOnThisBaseIsKeptAndOneOnAnEarlierBaseIsMadeAnew) {
  InSequence order;
  EXPECT_CALL(transport_, call(IsCall("GET", kBasePath))).WillOnce(Return(reply(200, kBaseRecord)));
  EXPECT_CALL(transport_, call(IsCall("GET", kMadePath)))
      .WillOnce(
          Return(reply(200, R"({"Id":"sha256:made","Config":{"Labels":{"io.scs.base-image-id":)"
                            R"("sha256:base"}}})")));
  EXPECT_TRUE(backend_->buildImage(packageLayer()).ok());

  EXPECT_CALL(transport_, call(IsCall("GET", kBasePath))).WillOnce(Return(reply(200, kBaseRecord)));
  EXPECT_CALL(transport_, call(IsCall("GET", kMadePath)))
      .WillOnce(
          Return(reply(200, R"({"Id":"sha256:made","Config":{"Labels":{"io.scs.base-image-id":)"
                            R"("sha256:older"}}})")));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/images/safe-code-sandbox-packages%3Aabc")))
      .WillOnce(Return(reply(200, "[]")));
  EXPECT_CALL(transport_, call(IsCall("POST", "/v1.41/containers/create")))
      .WillOnce(Return(reply(201, R"({"Id":"builder"})")));
  EXPECT_CALL(transport_, call(IsCall("PUT", "/v1.41/containers/builder/archive?path=%2F")))
      .WillOnce(Return(reply(200)));
  EXPECT_CALL(transport_, call(Field(&HttpCall::method, "POST")))
      .WillOnce(Return(reply(201, R"({"Id":"sha256:new"})")));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/builder?force=1&v=1")))
      .WillOnce(Return(reply(204)));
  EXPECT_TRUE(backend_->buildImage(packageLayer()).ok());
}

TEST_F(ImageTest, AFailedWriteLeavesNoContainerAndNoImage) {
  InSequence order;
  EXPECT_CALL(transport_, call(IsCall("GET", kBasePath))).WillOnce(Return(reply(200, kBaseRecord)));
  EXPECT_CALL(transport_, call(IsCall("GET", kMadePath))).WillOnce(Return(reply(404)));
  EXPECT_CALL(transport_, call(IsCall("POST", "/v1.41/containers/create")))
      .WillOnce(Return(reply(201, R"({"Id":"builder"})")));
  EXPECT_CALL(transport_, call(IsCall("PUT", "/v1.41/containers/builder/archive?path=%2F")))
      .WillOnce(Return(reply(500, R"({"message":"no space left on device"})")));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/containers/builder?force=1&v=1")))
      .WillOnce(Return(reply(204)));
  EXPECT_CALL(transport_, call(IsCall("DELETE", "/v1.41/images/safe-code-sandbox-packages%3Aabc")))
      .WillOnce(Return(reply(404)));
  const backend::Status built = backend_->buildImage(packageLayer());
  EXPECT_EQ(built.code, Code::kUnavailable);
  EXPECT_THAT(built.message, HasSubstr("no space left on device"));
}

TEST_F(ImageTest, TheListSaysWhichLayersWereMadeOnTheirBaseAsItIsNow) {
  EXPECT_CALL(transport_, call(IsCall("GET",
                                      "/v1.41/images/json?filters="
                                      "%7B%22label%22%3A%5B%22io.scs.package-set%22%5D%7D")))
      .WillOnce(Return(reply(
          200,
          R"([{"RepoTags":["safe-code-sandbox-packages:a"],"Labels":{)"
          R"("io.scs.base-image":"safe-code-sandbox:latest","io.scs.base-image-id":"sha256:base"}},)"
          R"({"RepoTags":["safe-code-sandbox-packages:b"],"Labels":{)"
          R"("io.scs.base-image":"safe-code-sandbox:latest","io.scs.base-image-id":"sha256:old"}}])")));
  EXPECT_CALL(transport_, call(IsCall("GET", kBasePath))).WillOnce(Return(reply(200, kBaseRecord)));
  const backend::ImageListReply listed = backend_->listImages("io.scs.package-set");
  ASSERT_TRUE(listed.status.ok()) << listed.status.message;
  ASSERT_EQ(listed.images.size(), 2u);
  EXPECT_EQ(listed.images[0].image, "safe-code-sandbox-packages:a");
  EXPECT_EQ(listed.images[0].base_image, "safe-code-sandbox:latest");
  EXPECT_TRUE(listed.images[0].current);
  EXPECT_FALSE(listed.images[1].current);
}

}  // namespace
}  // namespace scs::docker
