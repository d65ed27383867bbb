#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "docker_backend.h"
#include "mocks/docker_engine.h"
#include "mocks/mock_engine_socket.h"
#include "spec_translation.h"

namespace scs::docker {
namespace {

using backend::Code;
using backend::Posture;
using backend::SandboxSpec;
using backend::TmpfsMount;
using ::testing::_;
using ::testing::AllOf;
using testing::connected;
using ::testing::Field;
using testing::goodSpec;
using testing::IsCall;
using testing::JsonBodyEq;
using testing::MockEngineSocket;
using testing::reply;
using ::testing::Return;
using ::testing::StrictMock;

constexpr const char* kExpectedBody = R"({
  "Image": "safe-code-sandbox:latest",
  "Entrypoint": [],
  "Cmd": ["/usr/bin/python3", "-I", "/opt/scs/launcher.py", "--deadline", "615"],
  "User": "10001:10001",
  "WorkingDir": "/workspace",
  "Hostname": "sandbox",
  "Env": ["PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"],
  "Labels": {"io.scs.managed": "true", "io.scs.instance": "inst-9", "io.scs.run-id": "run-1"},
  "NetworkDisabled": true,
  "StopSignal": "SIGKILL",
  "StopTimeout": 1,
  "Tty": false, "OpenStdin": true, "StdinOnce": true,
  "AttachStdin": true, "AttachStdout": true, "AttachStderr": true,
  "HostConfig": {
    "NetworkMode": "none",
    "Privileged": false,
    "CapDrop": ["ALL"], "CapAdd": [],
    "SecurityOpt": ["no-new-privileges:true"],
    "ReadonlyRootfs": true,
    "Tmpfs": {
      "/tmp": "rw,noexec,nosuid,nodev,size=67108864,nr_inodes=4096,mode=1777",
      "/workspace": "rw,noexec,nosuid,nodev,size=268435456,nr_inodes=16384,mode=0700,uid=10001,gid=10001"
    },
    "Memory": 5368709120, "MemorySwap": 5368709120, "MemorySwappiness": 0,
    "OomKillDisable": false, "OomScoreAdj": 500,
    "NanoCpus": 2000000000,
    "PidsLimit": 256,
    "Ulimits": [
      {"Name": "nofile", "Soft": 1024, "Hard": 1024},
      {"Name": "nproc", "Soft": 256, "Hard": 256},
      {"Name": "fsize", "Soft": 268435456, "Hard": 268435456},
      {"Name": "core", "Soft": 0, "Hard": 0}
    ],
    "IpcMode": "private", "ShmSize": 67108864,
    "PidMode": "", "UTSMode": "", "UsernsMode": "", "CgroupnsMode": "private",
    "Init": false,
    "AutoRemove": false,
    "RestartPolicy": {"Name": "no", "MaximumRetryCount": 0},
    "Runtime": "runc",
    "Devices": [], "DeviceRequests": [], "DeviceCgroupRules": [],
    "Binds": [], "Mounts": [], "VolumesFrom": [],
    "PortBindings": {}, "PublishAllPorts": false,
    "Dns": [], "DnsOptions": [], "DnsSearch": [], "ExtraHosts": [], "GroupAdd": [],
    "Sysctls": {},
    "LogConfig": {"Type": "none", "Config": {}},
    "MaskedPaths": ["/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
                    "/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
                    "/proc/timer_stats", "/sys/devices/virtual/powercap", "/sys/firmware"],
    "ReadonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
  },
  "NetworkingConfig": {"EndpointsConfig": {}}
})";

TEST(CreateBodyTest, StrictMockPinsTheExactCreateBody) {
  StrictMock<MockEngineSocket> transport;
  auto backend = connected(&transport);
  EXPECT_CALL(transport, call(AllOf(IsCall("POST", "/v1.41/containers/create?name=scs-run-1"),
                                    Field(&HttpCall::content_type, "application/json"),
                                    JsonBodyEq(kExpectedBody))))
      .WillOnce(Return(reply(201, R"({"Id":"c0ffee","Warnings":[]})")));
  const auto created = backend->create(goodSpec());
  ASSERT_TRUE(created.status.ok()) << created.status.message;
  EXPECT_EQ(created.id, "c0ffee");
}

TEST(CreateBodyTest, CgroupV2OmitsSwappinessAndKeepsTheRest) {
  const auto v1 = createBody(goodSpec(), EngineTraits{1, true});
  const auto v2 = createBody(goodSpec(), EngineTraits{2, true});
  ASSERT_TRUE(v1.status.ok());
  ASSERT_TRUE(v2.status.ok());
  EXPECT_TRUE(v1.body->getObject("HostConfig")->has("MemorySwappiness"));
  EXPECT_FALSE(v2.body->getObject("HostConfig")->has("MemorySwappiness"));
  v1.body->getObject("HostConfig")->remove("MemorySwappiness");
  std::string where;
  EXPECT_TRUE(testing::jsonTreeEqual(v1.body, v2.body, "", &where)) << where;
}

TEST(CreateBodyTest, SeccompProfileTextIsSentInSecurityOpt) {
  SandboxSpec spec = goodSpec();
  spec.posture.seccomp_profile = R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[]})";
  const auto body = createBody(spec, EngineTraits{});
  ASSERT_TRUE(body.status.ok());
  const auto options = json::strings(body.body->getObject("HostConfig")->getArray("SecurityOpt"));
  EXPECT_EQ(options, (std::vector<std::string>{"no-new-privileges:true",
                                               "seccomp=" + spec.posture.seccomp_profile}));
}

TEST(CreateBodyTest, FaithfulFieldsFollowTheSpec) {
  SandboxSpec spec = goodSpec();
  spec.posture.read_only_root = false;
  spec.posture.engine_init = true;
  spec.posture.core_dumps_disabled = false;
  spec.posture.tmpfs[0].noexec = false;
  spec.posture.shm_bytes = 16ll << 20;
  const auto body = createBody(spec, EngineTraits{});
  ASSERT_TRUE(body.status.ok());
  const auto host = body.body->getObject("HostConfig");
  EXPECT_EQ(host->getValue<Poco::Int64>("ShmSize"), 16777216);
  EXPECT_FALSE(host->getValue<bool>("ReadonlyRootfs"));
  EXPECT_TRUE(host->getValue<bool>("Init"));
  EXPECT_EQ(host->getArray("Ulimits")->size(), 3u);
  EXPECT_EQ(host->getObject("Tmpfs")->getValue<std::string>("/tmp"),
            "rw,exec,nosuid,nodev,size=67108864,nr_inodes=4096,mode=1777");
}

struct Weakening {
  const char* name;
  std::function<void(SandboxSpec&)> apply;
};

TEST(CreateBodyTest, EverySpecTheBackendCannotHonourIsUnsupportedAndNeverSent) {
  const std::vector<Weakening> cases = {
      {"no image", [](SandboxSpec& s) { s.posture.image.clear(); }},
      {"no runtime", [](SandboxSpec& s) { s.posture.runtime.clear(); }},
      {"named user", [](SandboxSpec& s) { s.posture.user = "sandbox"; }},
      {"empty user", [](SandboxSpec& s) { s.posture.user.clear(); }},
      {"no command", [](SandboxSpec& s) { s.command.clear(); }},
      {"network", [](SandboxSpec& s) { s.posture.network_disabled = false; }},
      {"privileged", [](SandboxSpec& s) { s.posture.privileged = true; }},
      {"caps kept", [](SandboxSpec& s) { s.posture.all_capabilities_dropped = false; }},
      {"cap added", [](SandboxSpec& s) { s.posture.added_capabilities = {"NET_RAW"}; }},
      {"new privileges", [](SandboxSpec& s) { s.posture.no_new_privileges = false; }},
      {"seccomp off", [](SandboxSpec& s) { s.posture.seccomp_enabled = false; }},
      {"host pid", [](SandboxSpec& s) { s.posture.host_namespaces = {"pid"}; }},
      {"host mount", [](SandboxSpec& s) { s.posture.host_mounts = {"/:/host"}; }},
      {"device", [](SandboxSpec& s) { s.posture.devices = {"/dev/kvm"}; }},
      {"no memory cap", [](SandboxSpec& s) { s.posture.memory_bytes = 0; }},
      {"swap below memory", [](SandboxSpec& s) { s.posture.memory_swap_bytes = -1; }},
      {"no cpu cap", [](SandboxSpec& s) { s.posture.nano_cpus = 0; }},
      {"no pids cap", [](SandboxSpec& s) { s.posture.pids_limit = -1; }},
      {"no open files cap", [](SandboxSpec& s) { s.posture.open_files_limit = 0; }},
      {"no file size cap", [](SandboxSpec& s) { s.posture.file_size_limit_bytes = 0; }},
      {"no shm cap", [](SandboxSpec& s) { s.posture.shm_bytes = 0; }},
      {"negative shm cap", [](SandboxSpec& s) { s.posture.shm_bytes = -1; }},
      {"no masks", [](SandboxSpec& s) { s.posture.masked_paths.clear(); }},
      {"no readonly paths", [](SandboxSpec& s) { s.posture.readonly_paths.clear(); }},
      {"tmpfs unsized", [](SandboxSpec& s) { s.posture.tmpfs[0].size_bytes = 0; }},
      {"tmpfs no inode cap", [](SandboxSpec& s) { s.posture.tmpfs[1].max_inodes = 0; }},
      {"tmpfs relative", [](SandboxSpec& s) { s.posture.tmpfs[0].path = "tmp"; }},
      {"tmpfs comma", [](SandboxSpec& s) { s.posture.tmpfs[0].path = "/a,exec"; }},
      {"tmpfs twice", [](SandboxSpec& s) { s.posture.tmpfs[1].path = "/tmp"; }},
      {"tmpfs named owner", [](SandboxSpec& s) { s.posture.tmpfs[1].owner = "nobody"; }},
      {"tmpfs bad mode", [](SandboxSpec& s) { s.posture.tmpfs[1].mode = 010000; }},
  };
  StrictMock<MockEngineSocket> transport;  // any create call would fail the test
  auto backend = connected(&transport);
  for (const auto& weakening : cases) {
    SandboxSpec spec = goodSpec();
    weakening.apply(spec);
    const auto created = backend->create(spec);
    EXPECT_EQ(created.status.code, Code::kUnsupported) << weakening.name;
    EXPECT_FALSE(created.status.message.empty()) << weakening.name;
    EXPECT_TRUE(created.id.empty()) << weakening.name;
  }
}

TEST(TmpfsTest, OptionsAreExplicitAndParseBack) {
  const TmpfsMount workspace{"/workspace", 256ull << 20, 16384,         true,
                             true,         true,         "10001:10001", 0700};
  EXPECT_EQ(tmpfsOptions(workspace),
            "rw,noexec,nosuid,nodev,size=268435456,nr_inodes=16384,mode=0700,uid=10001,gid=10001");
  EXPECT_EQ(parseTmpfs("/workspace", tmpfsOptions(workspace)), workspace);
  const TmpfsMount loose{"/x", 1, 2, false, false, false, "", 01777};
  EXPECT_EQ(tmpfsOptions(loose), "rw,exec,suid,dev,size=1,nr_inodes=2,mode=1777");
  EXPECT_EQ(parseTmpfs("/x", tmpfsOptions(loose)), loose);
}

TEST(TmpfsTest, AbsentOrUnreadableOptionsReadWeak) {
  const TmpfsMount none = parseTmpfs("/t", "");
  EXPECT_FALSE(none.noexec);
  EXPECT_FALSE(none.nosuid);
  EXPECT_FALSE(none.nodev);
  EXPECT_EQ(none.size_bytes, 0u);
  EXPECT_EQ(none.max_inodes, 0u);
  EXPECT_EQ(none.mode, 01777u);
  EXPECT_EQ(none.owner, "");
  const TmpfsMount overridden = parseTmpfs("/t", "noexec,nosuid,nodev,exec,size=50%,mode=07x");
  EXPECT_FALSE(overridden.noexec);  // the later option wins, as in mount(8)
  EXPECT_TRUE(overridden.nosuid);
  EXPECT_EQ(overridden.size_bytes, 0u);
  EXPECT_EQ(overridden.mode, 01777u);
  EXPECT_EQ(parseTmpfs("/t", "size=64m,nr_inodes=4k").size_bytes, 64ull << 20);
  EXPECT_EQ(parseTmpfs("/t", "size=64m,nr_inodes=4k").max_inodes, 4096u);
  EXPECT_EQ(parseTmpfs("/t", "size=1g").size_bytes, 1ull << 30);
  EXPECT_EQ(parseTmpfs("/t", "uid=10001").owner, "10001:");
}

// An inspect record shaped as Docker 20.10 reports one for goodSpec(): the request's
// fields split into Config and HostConfig, plus a few the engine adds.
json::ObjectPtr engineRecord() {
  const auto body = createBody(goodSpec(), EngineTraits{1, true});
  EXPECT_TRUE(body.status.ok());
  json::ObjectPtr config = new Poco::JSON::Object();
  for (const auto& key : body.body->getNames()) {
    if (key != "HostConfig" && key != "NetworkingConfig") {
      config->set(key, body.body->get(key));
    }
  }
  json::ObjectPtr host = body.body->getObject("HostConfig");
  host->set("Capabilities", Poco::Dynamic::Var());
  host->set("CpuShares", 0);
  json::ObjectPtr record = new Poco::JSON::Object();
  record->set("Id", "c0ffee");
  record->set("Image", "sha256:54e65d07");
  // The engine splits the command into the program and its arguments.
  record->set("Path", goodSpec().command.front());
  Poco::JSON::Array::Ptr args = new Poco::JSON::Array();
  for (std::size_t i = 1; i < goodSpec().command.size(); ++i) {
    args->add(goodSpec().command[i]);
  }
  record->set("Args", args);
  record->set("Config", config);
  record->set("HostConfig", host);
  record->set("Mounts", json::ArrayPtr(new Poco::JSON::Array()));
  json::ObjectPtr none = new Poco::JSON::Object();
  json::ObjectPtr networks = new Poco::JSON::Object();
  networks->set("none", none);
  json::ObjectPtr settings = new Poco::JSON::Object();
  settings->set("Networks", networks);
  record->set("NetworkSettings", settings);
  return record;
}

json::ObjectPtr hostOf(const json::ObjectPtr& record) { return record->getObject("HostConfig"); }
json::ObjectPtr configOf(const json::ObjectPtr& record) { return record->getObject("Config"); }

TEST(PostureFromRecordTest, GoodRecordReadsBackAsTheSpecPosture) {
  EXPECT_EQ(postureFromRecord(engineRecord(), EngineTraits{1, true}), goodSpec().posture);
  EXPECT_TRUE(constantDeviations(engineRecord(), EngineTraits{1, true}).empty());
}

// What Docker 20.10.24 (API 1.41, cgroup v1) returned for GET /containers/{id}/json after
// kExpectedBody was posted to it, trimmed to the parts the plugin reads: a recorded answer, kept
// as the engine wrote it in tests/unit/data.
std::string record2010() {
  std::ifstream in(SCS_TEST_DATA_DIR "/docker-20.10-inspect.json", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(PostureFromRecordTest, TheRecordDocker2010ReturnedReadsBackAsTheSpecPosture) {
  const json::ObjectPtr record = json::parseObject(record2010());
  ASSERT_FALSE(record.isNull());
  EXPECT_EQ(postureFromRecord(record, EngineTraits{1, true}), goodSpec().posture);
  EXPECT_TRUE(constantDeviations(record, EngineTraits{1, true}).empty());
}

TEST(PostureFromRecordTest, EmptyRecordReadsWeakEverywhere) {
  const Posture p = postureFromRecord(new Poco::JSON::Object(), EngineTraits{1, true});
  EXPECT_FALSE(p.network_disabled);
  EXPECT_FALSE(p.read_only_root);
  EXPECT_TRUE(p.privileged);
  EXPECT_FALSE(p.all_capabilities_dropped);
  EXPECT_FALSE(p.no_new_privileges);
  EXPECT_TRUE(p.engine_init);
  EXPECT_TRUE(p.init_command.empty());
  EXPECT_EQ(p.host_namespaces.size(), 5u);  // pid, ipc, uts, userns and cgroup all unset
  EXPECT_EQ(p.shm_bytes, 0);
  EXPECT_EQ(p.memory_bytes, 0);
  EXPECT_EQ(p.nano_cpus, 0);
  EXPECT_EQ(p.pids_limit, 0);
  EXPECT_EQ(p.open_files_limit, -1);
  EXPECT_EQ(p.processes_limit, -1);
  EXPECT_EQ(p.file_size_limit_bytes, -1);
  EXPECT_FALSE(p.core_dumps_disabled);
  EXPECT_TRUE(p.masked_paths.empty());
  EXPECT_TRUE(p.readonly_paths.empty());
  EXPECT_TRUE(p.user.empty());
  EXPECT_TRUE(p.image.empty());
  EXPECT_TRUE(p.runtime.empty());
  EXPECT_FALSE(constantDeviations(new Poco::JSON::Object(), EngineTraits{}).empty());
}

struct RecordCase {
  const char* name;
  std::function<void(const json::ObjectPtr&)> mutate;
  std::function<bool(const Posture&)> weak;  // true when the posture shows the weakening
};

TEST(PostureFromRecordTest, EachMissingOrWeakenedFieldReadsWeak) {
  const auto set_host = [](const char* key, Poco::Dynamic::Var value) {
    return [key, value](const json::ObjectPtr& r) { hostOf(r)->set(key, value); };
  };
  const auto drop_host = [](const char* key) {
    return [key](const json::ObjectPtr& r) { hostOf(r)->remove(key); };
  };
  const auto strings = [](std::vector<std::string> items) {
    Poco::JSON::Array::Ptr array = new Poco::JSON::Array();
    for (const auto& item : items) {
      array->add(item);
    }
    return Poco::Dynamic::Var(array);
  };
  const auto shared = [](const std::string& ns) {
    return [ns](const Posture& p) {
      return std::any_of(p.host_namespaces.begin(), p.host_namespaces.end(),
                         [&](const std::string& s) { return s.rfind(ns + ":", 0) == 0; });
    };
  };
  const auto object_list = [](const char* json_text) {
    return Poco::Dynamic::Var(json::parseArray(json_text));
  };
  const std::vector<RecordCase> cases = {
      {"NetworkDisabled missing",
       [](const json::ObjectPtr& r) { configOf(r)->remove("NetworkDisabled"); },
       [](const Posture& p) { return !p.network_disabled; }},
      {"NetworkMode bridge", set_host("NetworkMode", "bridge"),
       [](const Posture& p) { return !p.network_disabled; }},
      {"NetworkMode missing", drop_host("NetworkMode"),
       [](const Posture& p) { return !p.network_disabled; }},
      {"NetworkMode host", set_host("NetworkMode", "host"),
       [&](const Posture& p) { return !p.network_disabled && shared("net")(p); }},
      {"attached to bridge",
       [](const json::ObjectPtr& r) {
         r->getObject("NetworkSettings")
             ->getObject("Networks")
             ->set("bridge", json::ObjectPtr(new Poco::JSON::Object()));
       },
       [](const Posture& p) { return !p.network_disabled; }},
      {"ReadonlyRootfs missing", drop_host("ReadonlyRootfs"),
       [](const Posture& p) { return !p.read_only_root; }},
      {"Privileged missing", drop_host("Privileged"),
       [](const Posture& p) { return p.privileged; }},
      {"Privileged true", set_host("Privileged", true),
       [](const Posture& p) { return p.privileged; }},
      {"CapDrop missing", drop_host("CapDrop"),
       [](const Posture& p) { return !p.all_capabilities_dropped; }},
      {"CapDrop partial", set_host("CapDrop", strings({"NET_RAW"})),
       [](const Posture& p) { return !p.all_capabilities_dropped; }},
      {"CapAdd", set_host("CapAdd", strings({"SYS_ADMIN"})),
       [](const Posture& p) {
         return p.added_capabilities == std::vector<std::string>{"SYS_ADMIN"};
       }},
      {"Capabilities (old field)", set_host("Capabilities", strings({"CAP_SYS_ADMIN"})),
       [](const Posture& p) { return !p.added_capabilities.empty(); }},
      {"SecurityOpt missing", drop_host("SecurityOpt"),
       [](const Posture& p) { return !p.no_new_privileges; }},
      {"no-new-privileges false", set_host("SecurityOpt", strings({"no-new-privileges:false"})),
       [](const Posture& p) { return !p.no_new_privileges; }},
      {"seccomp unconfined",
       set_host("SecurityOpt", strings({"no-new-privileges:true", "seccomp=unconfined"})),
       [](const Posture& p) { return !p.seccomp_enabled; }},
      {"seccomp unconfined with colon",
       set_host("SecurityOpt", strings({"no-new-privileges", "seccomp:unconfined"})),
       [](const Posture& p) { return !p.seccomp_enabled; }},
      {"Init null", set_host("Init", Poco::Dynamic::Var()),
       [](const Posture& p) { return p.engine_init; }},
      {"Init true", set_host("Init", true), [](const Posture& p) { return p.engine_init; }},
      {"Path missing", [](json::ObjectPtr r) { r->remove("Path"); },
       [](const Posture& p) { return p.init_command.empty(); }},
      {"Path another program", [](json::ObjectPtr r) { r->set("Path", "/bin/sh"); },
       [](const Posture& p) { return p.init_command.front() == "/bin/sh"; }},
      {"PidMode host", set_host("PidMode", "host"), shared("pid")},
      {"PidMode missing", drop_host("PidMode"), shared("pid")},
      {"IpcMode host", set_host("IpcMode", "host"), shared("ipc")},
      {"IpcMode shareable", set_host("IpcMode", "shareable"), shared("ipc")},
      {"IpcMode missing", drop_host("IpcMode"), shared("ipc")},
      {"UTSMode host", set_host("UTSMode", "host"), shared("uts")},
      {"UsernsMode host", set_host("UsernsMode", "host"), shared("userns")},
      {"CgroupnsMode host", set_host("CgroupnsMode", "host"), shared("cgroup")},
      {"CgroupnsMode missing", drop_host("CgroupnsMode"), shared("cgroup")},
      {"Binds", set_host("Binds", strings({"/:/host"})),
       [](const Posture& p) { return !p.host_mounts.empty(); }},
      {"Mounts", set_host("Mounts", object_list(R"([{"Type":"bind","Source":"/","Target":"/h"}])")),
       [](const Posture& p) { return !p.host_mounts.empty(); }},
      {"VolumesFrom", set_host("VolumesFrom", strings({"other"})),
       [](const Posture& p) { return !p.host_mounts.empty(); }},
      {"image volume in the record's Mounts",
       [&](json::ObjectPtr r) {
         r->set(
             "Mounts",
             object_list(
                 R"([{"Type":"volume","Source":"/var/lib/docker/volumes/x","Destination":"/data"}])"));
       },
       [](const Posture& p) { return !p.host_mounts.empty(); }},
      {"Devices",
       set_host("Devices",
                object_list(R"([{"PathOnHost":"/dev/kvm","PathInContainer":"/dev/kvm"}])")),
       [](const Posture& p) { return !p.devices.empty(); }},
      {"DeviceRequests", set_host("DeviceRequests", object_list(R"([{"Driver":"nvidia"}])")),
       [](const Posture& p) { return !p.devices.empty(); }},
      {"DeviceCgroupRules", set_host("DeviceCgroupRules", strings({"c 1:3 rwm"})),
       [](const Posture& p) { return !p.devices.empty(); }},
      {"tmpfs loses noexec",
       [](const json::ObjectPtr& r) {
         hostOf(r)->getObject("Tmpfs")->set(
             "/tmp", "rw,nosuid,nodev,size=67108864,nr_inodes=4096,mode=1777");
       },
       [](const Posture& p) { return !p.tmpfs[0].noexec; }},
      {"tmpfs loses its size",
       [](const json::ObjectPtr& r) {
         hostOf(r)->getObject("Tmpfs")->set("/tmp",
                                            "rw,noexec,nosuid,nodev,nr_inodes=4096,mode=1777");
       },
       [](const Posture& p) { return p.tmpfs[0].size_bytes == 0; }},
      {"extra tmpfs",
       [](const json::ObjectPtr& r) { hostOf(r)->getObject("Tmpfs")->set("/var", "rw"); },
       [](const Posture& p) { return p.tmpfs.size() == 3; }},
      {"Tmpfs missing", drop_host("Tmpfs"), [](const Posture& p) { return p.tmpfs.empty(); }},
      {"ShmSize missing", drop_host("ShmSize"), [](const Posture& p) { return p.shm_bytes == 0; }},
      {"ShmSize larger", set_host("ShmSize", 1ll << 30),
       [](const Posture& p) { return p.shm_bytes == 1ll << 30; }},
      {"ShmSize zero", set_host("ShmSize", 0), [](const Posture& p) { return p.shm_bytes == 0; }},
      {"ShmSize as a string", set_host("ShmSize", "67108864"),
       [](const Posture& p) { return p.shm_bytes == 0; }},
      {"Memory missing", drop_host("Memory"), [](const Posture& p) { return p.memory_bytes == 0; }},
      {"MemorySwap unlimited", set_host("MemorySwap", -1),
       [](const Posture& p) { return p.memory_swap_bytes == -1; }},
      {"NanoCpus missing", drop_host("NanoCpus"),
       [](const Posture& p) { return p.nano_cpus == 0; }},
      {"PidsLimit null", set_host("PidsLimit", Poco::Dynamic::Var()),
       [](const Posture& p) { return p.pids_limit == 0; }},
      {"Ulimits missing", drop_host("Ulimits"),
       [](const Posture& p) {
         return p.open_files_limit == -1 && p.file_size_limit_bytes == -1 &&
                p.processes_limit == -1 && !p.core_dumps_disabled;
       }},
      {"core soft only",
       set_host("Ulimits", object_list(R"([{"Name":"core","Soft":0,"Hard":1000}])")),
       [](const Posture& p) { return !p.core_dumps_disabled; }},
      {"MaskedPaths missing", drop_host("MaskedPaths"),
       [](const Posture& p) { return p.masked_paths.empty(); }},
      {"MaskedPaths shorter", set_host("MaskedPaths", strings({"/proc/kcore"})),
       [](const Posture& p) { return p.masked_paths.size() == 1; }},
      {"ReadonlyPaths missing", drop_host("ReadonlyPaths"),
       [](const Posture& p) { return p.readonly_paths.empty(); }},
      {"Runtime missing", drop_host("Runtime"), [](const Posture& p) { return p.runtime.empty(); }},
      {"User missing", [](const json::ObjectPtr& r) { configOf(r)->remove("User"); },
       [](const Posture& p) { return p.user.empty(); }},
      {"User root", [](const json::ObjectPtr& r) { configOf(r)->set("User", "0:0"); },
       [](const Posture& p) { return p.user == "0:0"; }},
      {"Image missing", [](const json::ObjectPtr& r) { configOf(r)->remove("Image"); },
       [](const Posture& p) { return p.image.empty(); }},
      {"HostConfig missing", [](json::ObjectPtr r) { r->remove("HostConfig"); },
       [](const Posture& p) { return p.privileged && !p.read_only_root; }},
      {"Memory as a string", set_host("Memory", "5368709120"),
       [](const Posture& p) { return p.memory_bytes == 0; }},
  };
  const Posture good = goodSpec().posture;
  for (const auto& c : cases) {
    const json::ObjectPtr record = engineRecord();
    c.mutate(record);
    const Posture read = postureFromRecord(record, EngineTraits{1, true});
    EXPECT_NE(read, good) << c.name;
    EXPECT_TRUE(c.weak(read)) << c.name;
  }
}

TEST(PostureFromRecordTest, SeccompReadsFromTheEngineDefaultAndTheProfile) {
  EXPECT_FALSE(postureFromRecord(engineRecord(), EngineTraits{1, false}).seccomp_enabled);
  json::ObjectPtr record = engineRecord();
  Poco::JSON::Array::Ptr options = new Poco::JSON::Array();
  options->add("no-new-privileges:true");
  options->add(R"(seccomp={"defaultAction":"SCMP_ACT_ERRNO"})");
  hostOf(record)->set("SecurityOpt", options);
  const Posture p = postureFromRecord(record, EngineTraits{1, false});
  EXPECT_TRUE(p.seccomp_enabled);
  EXPECT_EQ(p.seccomp_profile, R"({"defaultAction":"SCMP_ACT_ERRNO"})");
  EXPECT_TRUE(p.no_new_privileges);
}

TEST(ConstantDeviationsTest, EachWeakenedConstantIsReported) {
  const std::vector<std::pair<const char*, std::function<void(const json::ObjectPtr&)>>> cases = {
      {"OomKillDisable", [](const json::ObjectPtr& r) { hostOf(r)->set("OomKillDisable", true); }},
      {"OomScoreAdj", [](const json::ObjectPtr& r) { hostOf(r)->set("OomScoreAdj", -1000); }},
      {"AutoRemove", [](const json::ObjectPtr& r) { hostOf(r)->set("AutoRemove", true); }},
      {"RestartPolicy",
       [](const json::ObjectPtr& r) {
         hostOf(r)->getObject("RestartPolicy")->set("Name", "always");
       }},
      {"LogConfig",
       [](const json::ObjectPtr& r) {
         hostOf(r)->getObject("LogConfig")->set("Type", "json-file");
       }},
      {"Sysctls",
       [](const json::ObjectPtr& r) {
         hostOf(r)->getObject("Sysctls")->set("net.ipv4.ip_forward", "1");
       }},
      {"PortBindings",
       [](const json::ObjectPtr& r) {
         hostOf(r)
             ->getObject("PortBindings")
             ->set("80/tcp", json::ArrayPtr(new Poco::JSON::Array()));
       }},
      {"PublishAllPorts",
       [](const json::ObjectPtr& r) { hostOf(r)->set("PublishAllPorts", true); }},
      {"Entrypoint",
       [](const json::ObjectPtr& r) {
         Poco::JSON::Array::Ptr entry = new Poco::JSON::Array();
         entry->add("/bin/sh");
         configOf(r)->set("Entrypoint", entry);
       }},
  };
  for (const auto& [name, mutate] : cases) {
    const json::ObjectPtr record = engineRecord();
    mutate(record);
    EXPECT_EQ(constantDeviations(record, EngineTraits{}).size(), 1u) << name;
  }
}

// /dev/shm's size is a posture field the core compares, no longer a plugin constant.
TEST(ConstantDeviationsTest, ShmSizeIsLeftToThePosture) {
  json::ObjectPtr record = engineRecord();
  hostOf(record)->set("ShmSize", 1ll << 30);
  EXPECT_TRUE(constantDeviations(record, EngineTraits{1, true}).empty());
  EXPECT_EQ(postureFromRecord(record, EngineTraits{1, true}).shm_bytes, 1ll << 30);
}

TEST(InspectTest, ReadsThePostureAndRefusesAWeakenedConstant) {
  StrictMock<MockEngineSocket> transport;
  auto backend = connected(&transport);
  const std::string good = json::stringify(engineRecord());
  json::ObjectPtr weak = engineRecord();
  hostOf(weak)->set("AutoRemove", true);
  EXPECT_CALL(transport, call(IsCall("GET", "/v1.41/containers/c0ffee/json")))
      .WillOnce(Return(reply(200, good)))
      .WillOnce(Return(reply(200, json::stringify(weak))))
      .WillOnce(Return(reply(200, "not json")))
      .WillOnce(Return(reply(404, R"({"message":"No such container: c0ffee"})")));
  const auto first = backend->inspect("c0ffee");
  ASSERT_TRUE(first.status.ok()) << first.status.message;
  EXPECT_EQ(first.posture, goodSpec().posture);
  const auto second = backend->inspect("c0ffee");
  EXPECT_EQ(second.status.code, Code::kUnsupported);
  EXPECT_NE(second.status.message.find("auto-remove"), std::string::npos);
  EXPECT_EQ(backend->inspect("c0ffee").status.code, Code::kInternal);
  const auto gone = backend->inspect("c0ffee");
  EXPECT_EQ(gone.status.code, Code::kNotFound);
  EXPECT_NE(gone.status.message.find("No such container: c0ffee"), std::string::npos);
}

}  // namespace
}  // namespace scs::docker
