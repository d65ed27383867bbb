#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "docker_backend.h"
#include "mocks/mock_engine_socket.h"
#include "mocks/test_logs.h"
#include "policy/posture.h"

namespace scs::docker::testing {

// Settings under which the backend makes no calls of its own (no event stream, no cgroup
// reads), so that a strict mock sees only what a test expects.
inline DockerSettings quietSettings() {
  DockerSettings settings;
  settings.watch_events = false;
  settings.cgroup_root.clear();
  return settings;
}

// The startup calls of a Docker 20.10 engine (cgroup v1, seccomp on): the version, which
// answers `version_reply`, then the info at `info_path`.
inline void expectStartup(::testing::StrictMock<MockEngineSocket>* transport,
                          const std::string& version_reply, const std::string& info_path) {
  using ::testing::Return;
  EXPECT_CALL(*transport, call(IsCall("GET", "/version")))
      .WillOnce(Return(reply(200, version_reply)));
  EXPECT_CALL(*transport, call(IsCall("GET", info_path)))
      .WillOnce(Return(reply(200, R"({"NCPU":2,"MemTotal":25000000000,"CgroupVersion":"1",)"
                                  R"("SecurityOptions":["name=seccomp,profile=default"]})")));
}

// DockerBackend::connect over `transport`; logs go to `log`, or nowhere.
inline std::unique_ptr<DockerBackend> connectTo(::testing::StrictMock<MockEngineSocket>* transport,
                                                const DockerSettings& settings, std::string* error,
                                                backend::LogSink* log = nullptr) {
  static mocks::NullLog null_log;
  return DockerBackend::connect(std::make_unique<ForwardingEngineSocket>(transport), settings,
                                log != nullptr ? log : &null_log, error);
}

// A backend on a strict mock that has already answered the startup calls (API 1.41).
inline std::unique_ptr<DockerBackend> connected(::testing::StrictMock<MockEngineSocket>* transport,
                                                const DockerSettings& settings = quietSettings(),
                                                backend::LogSink* log = nullptr) {
  expectStartup(transport, R"({"ApiVersion":"1.41","MinAPIVersion":"1.12"})", "/v1.41/info");
  std::string error;
  auto backend = connectTo(transport, settings, &error, log);
  EXPECT_TRUE(backend) << error;
  return backend;
}

// A spec that passes every check of the translation: the posture of the shipped defaults, on
// a 5 GiB, 2-core run "run-1". The create body it makes is pinned in docker_spec_test.
inline backend::SandboxSpec goodSpec() {
  backend::SandboxSpec spec;
  spec.run_id = "run-1";
  spec.labels = {
      {"io.scs.managed", "true"}, {"io.scs.instance", "inst-9"}, {"io.scs.run-id", "run-1"}};
  spec.command = {"/usr/bin/python3", "-I", "/opt/scs/launcher.py", "--deadline", "615"};
  spec.env = {"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"};
  spec.working_dir = "/workspace";
  spec.hostname = "sandbox";
  backend::Posture& p = spec.posture;
  p.image = "safe-code-sandbox:latest";
  p.runtime = "runc";
  p.user = "10001:10001";
  p.network_disabled = true;
  p.read_only_root = true;
  p.all_capabilities_dropped = true;
  p.no_new_privileges = true;
  p.seccomp_enabled = true;
  p.engine_init = false;
  p.init_command = spec.command;
  p.tmpfs = {backend::TmpfsMount{"/tmp", 64ull << 20, 4096, true, true, true, "", 01777},
             backend::TmpfsMount{"/workspace", 256ull << 20, 16384, true, true, true, "10001:10001",
                                 0700}};
  p.shm_bytes = 64ll << 20;
  p.memory_bytes = 5ll << 30;
  p.memory_swap_bytes = 5ll << 30;
  p.nano_cpus = 2000000000;
  p.pids_limit = 256;
  p.processes_limit = 256;
  p.open_files_limit = 1024;
  p.file_size_limit_bytes = 256ll << 20;
  p.core_dumps_disabled = true;
  p.masked_paths = policy::requiredMaskedPaths();  // what the core asks of every sandbox
  p.readonly_paths = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"};
  return spec;
}

}  // namespace scs::docker::testing
