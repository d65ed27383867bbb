#include "plugin/loader.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/dll/shared_library.hpp>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mocks/recording_sink.h"
#include "mocks/test_logs.h"
#include "policy/files.h"

namespace scs::plugin {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const fs::path kFakePlugin = fs::path(SCS_PLUGIN_DIR) / "libscs_backend_fake.so";
const fs::path kBadAbiPlugin = fs::path(SCS_TEST_PLUGIN_DIR) / "libscs_backend_badabi.so";

using mocks::RecordingLog;
using CollectingSink = mocks::RecordingSink;

// A private directory (mode 0700) that is removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "scs-loader-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

backend::RuntimeBackendPtr loadFake(RecordingLog& log,
                                    std::map<std::string, std::string> options = {},
                                    std::string* error = nullptr) {
  Result<backend::RuntimeBackendPtr> loaded =
      loadBackend(kFakePlugin, backend::BackendContext{std::move(options), &log});
  if (const auto* failure = std::get_if<Error>(&loaded)) {
    if (error != nullptr) {
      *error = failure->message;
    }
    return nullptr;
  }
  return std::move(std::get<backend::RuntimeBackendPtr>(loaded));
}

// Why loading `path` failed; empty when it loaded.
std::string failureOf(const Result<backend::RuntimeBackendPtr>& loaded) {
  const auto* failure = std::get_if<Error>(&loaded);
  return failure != nullptr ? failure->message : std::string();
}

// Why loadBackend refuses `path`; a plugin that loads fails the test.
std::string refusalOf(const fs::path& path) {
  RecordingLog log;
  const Result<backend::RuntimeBackendPtr> loaded = loadBackend(path, {{}, &log});
  EXPECT_TRUE(std::holds_alternative<Error>(loaded)) << path;
  return failureOf(loaded);
}

// A copy of the fake plugin in `dir`, whose permissions the test may change.
fs::path fakePluginCopyIn(const TempDir& dir) {
  const fs::path copy = dir.path() / "libscs_backend_fake.so";
  fs::copy_file(kFakePlugin, copy);
  return copy;
}

TEST(BackendPathTest, JoinsTheDirectoryAndTheName) {
  EXPECT_EQ(backendPath("fake", "/opt/scs/plugins"), "/opt/scs/plugins/libscs_backend_fake.so");
  EXPECT_EQ(backendPath("my_vm2", "/p"), "/p/libscs_backend_my_vm2.so");
}

TEST(BackendPathTest, RefusesNamesThatCouldEscapeTheDirectory) {
  for (const char* name : {"", "../fake", "a/b", "Docker", "fake.so", "fa ke", "-x"}) {
    EXPECT_THROW(backendPath(name, "/p"), std::invalid_argument) << name;
  }
}

TEST(LoaderTest, LoadsTheFakeAndCallsItThroughTheInterface) {
  RecordingLog log;
  std::string error;
  auto backend = loadFake(log, {}, &error);
  ASSERT_NE(backend, nullptr) << error;
  const backend::CapacityReply capacity = backend->capacity();
  ASSERT_TRUE(capacity.status.ok()) << capacity.status.message;
  EXPECT_EQ(capacity.capacity.cores, 8);
  EXPECT_EQ(capacity.capacity.memory_bytes, std::int64_t{64} << 30);
}

TEST(LoaderTest, PassesTheOptionsToTheFactory) {
  RecordingLog log;
  auto backend = loadFake(log, {{"cores", "2"}, {"memory_gb", "4"}, {"engine", "unix:///x"}});
  ASSERT_NE(backend, nullptr);
  const backend::CapacityReply capacity = backend->capacity();
  EXPECT_EQ(capacity.capacity.cores, 2);
  EXPECT_EQ(capacity.capacity.memory_bytes, std::int64_t{4} << 30);
}

TEST(LoaderTest, ReportsTheFactorysOwnError) {
  RecordingLog log;
  for (const auto& [key, value] : std::map<std::string, std::string>{{"posture", "colour"},
                                                                     {"cores", "0"},
                                                                     {"memory_gb", "lots"},
                                                                     {"fail", "everything"},
                                                                     {"colour", "blue"}}) {
    std::string error;
    EXPECT_EQ(loadFake(log, {{key, value}}, &error), nullptr);
    EXPECT_THAT(error, HasSubstr("could not start")) << key;
    EXPECT_THAT(error, HasSubstr(key)) << error;
  }
}

TEST(LoaderTest, RefusesAWrongAbiBeforeItsFactoryRuns) {
  RecordingLog log;
  // The bad plugin's factory calls std::abort(): reaching the assertions proves it never ran.
  const Result<backend::RuntimeBackendPtr> loaded =
      loadBackend(kBadAbiPlugin, backend::BackendContext{{}, &log});
  EXPECT_TRUE(std::holds_alternative<Error>(loaded));
  const std::string error = failureOf(loaded);
  EXPECT_THAT(error, HasSubstr("ABI version " + std::to_string(backend::kAbiVersion + 1000)));
  EXPECT_THAT(error, HasSubstr("needs ABI version " + std::to_string(backend::kAbiVersion)));
  EXPECT_THAT(error, HasSubstr(kBadAbiPlugin.string()));
}

TEST(LoaderDeathTest, TheWrongAbiFixtureReallyAbortsWhenItsFactoryIsCalled) {
  // Keeps the test above honest: calling this factory is fatal.
  EXPECT_DEATH(
      {
        boost::dll::shared_library library(kBadAbiPlugin.string());
        RecordingLog log;
        std::string error;
        library.get_alias<backend::FactoryFn>(backend::kFactorySymbol)(
            backend::BackendContext{{}, &log}, &error);
      },
      "");
}

TEST(LoaderTest, RefusesARelativePath) {
  EXPECT_THAT(refusalOf("build/plugins/libscs_backend_fake.so"), HasSubstr("relative"));
  EXPECT_THAT(refusalOf(""), HasSubstr("relative"));
}

TEST(LoaderTest, RefusesAMissingFile) {
  const fs::path missing = fs::path(SCS_PLUGIN_DIR) / "libscs_backend_nosuch.so";
  const std::string error = refusalOf(missing);
  EXPECT_THAT(error, HasSubstr(missing.string()));
  EXPECT_THAT(error, HasSubstr("does not exist"));
}

TEST(LoaderTest, RefusesADirectory) {
  EXPECT_THAT(refusalOf(SCS_PLUGIN_DIR), HasSubstr("not a regular file"));
}

TEST(LoaderTest, RefusesAFileWritableByOthers) {
  TempDir dir;
  const fs::path copy = fakePluginCopyIn(dir);
  fs::permissions(copy, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read);
  RecordingLog log;
  // The copy itself is loadable, so only the permission change below can refuse it.
  const Result<backend::RuntimeBackendPtr> loaded = loadBackend(copy, {{}, &log});
  EXPECT_TRUE(std::holds_alternative<backend::RuntimeBackendPtr>(loaded)) << failureOf(loaded);

  fs::permissions(copy, fs::perms::others_write, fs::perm_options::add);
  EXPECT_THAT(refusalOf(copy), HasSubstr("writable by group or others"));

  fs::permissions(copy, fs::perms::others_write, fs::perm_options::remove);
  fs::permissions(copy, fs::perms::group_write, fs::perm_options::add);
  EXPECT_THAT(refusalOf(copy), HasSubstr("writable by group or others"));
}

TEST(LoaderTest, RefusesAFileInADirectoryWritableByOthers) {
  TempDir dir;
  const fs::path copy = fakePluginCopyIn(dir);
  fs::permissions(dir.path(), fs::perms::others_write | fs::perms::others_exec,
                  fs::perm_options::add);
  const std::string error = refusalOf(copy);
  EXPECT_THAT(error, HasSubstr("plugin directory"));
  EXPECT_THAT(error, HasSubstr("writable by group or others"));
}

TEST(LoaderTest, RefusesALibraryThatIsNotABackend) {
  TempDir dir;
  const fs::path text = dir.path() / "libscs_backend_text.so";
  { std::ofstream(text) << "not an ELF file\n"; }
  EXPECT_THAT(refusalOf(text), HasSubstr("cannot load"));

  // A real shared object without the entry symbols: the bad-ABI plugin's directory holds
  // only plugins, so use a copy of the C++ runtime's math library.
  const fs::path libm = dir.path() / "libm.so.6";
  const char* sources[] = {"/lib/x86_64-linux-gnu/libm.so.6",
                           "/usr/lib/x86_64-linux-gnu/libm.so.6"};
  for (const char* source : sources) {
    if (fs::exists(source)) {
      fs::copy_file(source, libm);
      break;
    }
  }
  ASSERT_TRUE(fs::exists(libm));
  EXPECT_THAT(refusalOf(libm), HasSubstr("does not export"));
}

TEST(LoaderTest, KeepsTheLibraryMappedWhileTheBackendLives) {
  auto mapped = [] {
    void* handle = ::dlopen(kFakePlugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle != nullptr) {
      ::dlclose(handle);
    }
    return handle != nullptr;
  };
  ASSERT_FALSE(mapped());
  RecordingLog log;
  auto backend = loadFake(log);
  ASSERT_NE(backend, nullptr);
  auto copy = backend;
  backend.reset();
  EXPECT_TRUE(mapped());
  EXPECT_TRUE(copy->capacity().status.ok());
  copy.reset();
  EXPECT_FALSE(mapped());
}

// The fake backend, driven through the plugin interface exactly as the core drives it.
class FakeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { load(); }

  // Replaces the backend with one loaded with `options`.
  void load(std::map<std::string, std::string> options = {}) {
    std::string error;
    backend_ = loadFake(log_, std::move(options), &error);
    ASSERT_NE(backend_, nullptr) << error;
  }

  static backend::SandboxSpec spec(const std::string& run_id) {
    backend::SandboxSpec spec;
    spec.run_id = run_id;
    spec.labels = {{"io.scs.managed", "1"}, {"io.scs.run-id", run_id}};
    spec.command = {"/usr/bin/python3", "-I", "/opt/scs/launcher.py"};
    spec.posture.image = "safe-code-sandbox:latest";
    spec.posture.runtime = "runc";
    spec.posture.user = "10001:10001";
    spec.posture.network_disabled = true;
    spec.posture.read_only_root = true;
    spec.posture.all_capabilities_dropped = true;
    spec.posture.no_new_privileges = true;
    spec.posture.seccomp_enabled = true;
    spec.posture.memory_bytes = std::int64_t{5} << 30;
    spec.posture.memory_swap_bytes = std::int64_t{5} << 30;
    spec.posture.pids_limit = 256;
    spec.posture.masked_paths = {"/proc/kcore"};
    backend::TmpfsMount workspace;
    workspace.path = "/workspace";
    workspace.size_bytes = 1 << 20;
    workspace.noexec = workspace.nosuid = workspace.nodev = true;
    spec.posture.tmpfs = {workspace};
    return spec;
  }

  static std::string archive(const std::string& main_py) {
    return policy::buildArchive(
        {policy::File{"main.py", main_py}, policy::File{"data/input.txt", "#fake: exit=9\n"}},
        10001, 10001);
  }

  // create -> inspect -> deliver -> start; returns the sandbox id.
  std::string run(const std::string& main_py, CollectingSink* sink) {
    const backend::CreateReply created = backend_->create(spec("run-1"));
    EXPECT_TRUE(created.status.ok()) << created.status.message;
    EXPECT_TRUE(backend_->inspect(created.id).status.ok());
    const backend::Status delivered = backend_->deliver(created.id, archive(main_py));
    EXPECT_TRUE(delivered.ok()) << delivered.message;
    const backend::Status started = backend_->start(created.id, sink);
    EXPECT_TRUE(started.ok()) << started.message;
    return created.id;
  }

  backend::Exit waitExit(const std::string& id) {
    const backend::WaitReply reply = backend_->wait(id, 10s);
    EXPECT_TRUE(reply.status.ok()) << reply.status.message;
    EXPECT_TRUE(reply.exit.exited);
    return reply.exit;
  }

  // A sink outlives its sandbox: the fake may call ended() until the sandbox is removed, which
  // the destructor of backend_, declared after the sinks, does.
  CollectingSink& newSink() { return sinks_.emplace_back(); }

  RecordingLog log_;
  std::deque<CollectingSink> sinks_;
  backend::RuntimeBackendPtr backend_;
};

TEST_F(FakeBackendTest, PlaysBackTheDirectivesOfMainPy) {
  CollectingSink& sink = newSink();
  const std::string id =
      run("print('this is never run')\n#fake: stdout=hello\\sworld\\n stderr=a\\tb\\\\\n#fake: "
          "exit=3\n",
          &sink);
  const backend::Exit exit = waitExit(id);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_FALSE(exit.oom_killed);
  EXPECT_TRUE(exit.engine_error.empty());
  EXPECT_EQ(sink.out(), "hello world\n");
  EXPECT_EQ(sink.err(), "a\tb\\");
  EXPECT_TRUE(log_.has(backend::LogLevel::kInfo, "fake: started " + id));
  EXPECT_TRUE(backend_->remove(id).ok());
  EXPECT_EQ(sink.ends(), 1);  // once, after the last write, and never after remove()
}

TEST_F(FakeBackendTest, WithoutDirectivesARunSucceedsSilently) {
  CollectingSink& sink = newSink();
  const backend::Exit exit = waitExit(run("print('hello')\n", &sink));
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(sink.out(), "");
  EXPECT_EQ(sink.writes(), 0);
}

TEST_F(FakeBackendTest, EndsWithTheScriptedEvidence) {
  struct Case {
    const char* directives;
    std::optional<int> exit_code;
    bool oom;
    std::string engine_error;
  };
  for (const Case& c :
       {Case{"oom", 137, true, ""}, Case{"child_oom", 0, true, ""},
        Case{"signal=11", 139, false, ""}, Case{"exit=255", 255, false, ""},
        Case{"engine_error=runtime\\sbroke", std::nullopt, false, "runtime broke"}}) {
    CollectingSink& sink = newSink();
    const backend::Exit exit = waitExit(run(std::string("#fake: ") + c.directives + "\n", &sink));
    EXPECT_EQ(exit.exit_code, c.exit_code) << c.directives;
    EXPECT_EQ(exit.oom_killed, c.oom) << c.directives;
    EXPECT_EQ(exit.engine_error, c.engine_error) << c.directives;
  }
}

TEST_F(FakeBackendTest, FloodsInChunks) {
  CollectingSink& sink = newSink();
  const backend::Exit exit = waitExit(run("#fake: flood=1000000\n", &sink));
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(sink.out(), std::string(1000000, 'x'));
  EXPECT_GT(sink.writes(), 1);
}

TEST_F(FakeBackendTest, AHangingRunEndsOnlyWhenKilled) {
  CollectingSink& sink = newSink();
  const std::string id = run("#fake: stdout=partial hang\n", &sink);
  const backend::WaitReply early = backend_->wait(id, 100ms);
  ASSERT_TRUE(early.status.ok());
  EXPECT_FALSE(early.exit.exited);
  EXPECT_EQ(sink.out(), "partial");
  ASSERT_TRUE(backend_->kill(id).ok());
  const backend::Exit exit = waitExit(id);
  EXPECT_EQ(exit.exit_code, 137);
  EXPECT_FALSE(exit.oom_killed);
  EXPECT_TRUE(backend_->kill(id).ok());
}

TEST_F(FakeBackendTest, SleepsBeforeEnding) {
  CollectingSink& sink = newSink();
  const auto begin = std::chrono::steady_clock::now();
  const std::string id = run("#fake: sleep_ms=400 exit=1\n", &sink);
  EXPECT_FALSE(backend_->wait(id, 10ms).exit.exited);
  EXPECT_EQ(waitExit(id).exit_code, 1);
  EXPECT_GE(std::chrono::steady_clock::now() - begin, 400ms);
}

TEST_F(FakeBackendTest, DelaysStart) {
  CollectingSink& sink = newSink();
  const auto begin = std::chrono::steady_clock::now();
  const std::string id = run("#fake: start_delay_ms=300\n", &sink);
  EXPECT_GE(std::chrono::steady_clock::now() - begin, 300ms);
  EXPECT_EQ(waitExit(id).exit_code, 0);
}

TEST_F(FakeBackendTest, FailsTheScriptedCall) {
  {
    const std::string id = backend_->create(spec("a")).id;
    const backend::Status status = backend_->deliver(id, archive("#fake: fail=deliver\n"));
    EXPECT_EQ(status.code, backend::Code::kUnavailable);
    EXPECT_THAT(status.message, HasSubstr("deliver"));
  }
  {
    const std::string id = backend_->create(spec("b")).id;
    ASSERT_TRUE(backend_->deliver(id, archive("#fake: fail=start\n")).ok());
    CollectingSink& sink = newSink();
    EXPECT_EQ(backend_->start(id, &sink).code, backend::Code::kUnavailable);
    EXPECT_FALSE(log_.has(backend::LogLevel::kInfo, "fake: started " + id));
  }
  {
    const std::string id = backend_->create(spec("c")).id;
    ASSERT_TRUE(backend_->deliver(id, archive("#fake: fail=wait\n")).ok());
    CollectingSink& sink = newSink();
    ASSERT_TRUE(backend_->start(id, &sink).ok());
    EXPECT_EQ(backend_->wait(id, 1s).status.code, backend::Code::kUnavailable);
  }
}

TEST_F(FakeBackendTest, RejectsBadDirectivesAndArchives) {
  const std::string id = backend_->create(spec("a")).id;
  for (const char* main_py : {"#fake: explode\n", "#fake: exit=256\n", "#fake: exit=x\n",
                              "#fake: stdout=\\q\n", "#fake: fail=create\n", "#fake: hang=1\n"}) {
    EXPECT_EQ(backend_->deliver(id, archive(main_py)).code, backend::Code::kRejected) << main_py;
  }
  EXPECT_EQ(backend_->deliver(id, "garbage").code, backend::Code::kRejected);
  EXPECT_EQ(backend_->deliver(id, policy::buildArchive({policy::File{"other.py", ""}}, 1, 1)).code,
            backend::Code::kRejected);
}

TEST_F(FakeBackendTest, FailsEveryCallNamedByTheFailOption) {
  load({{"fail", "create,inspect,list,capacity"}});
  EXPECT_EQ(backend_->create(spec("a")).status.code, backend::Code::kUnavailable);
  EXPECT_EQ(backend_->inspect("fake-1").status.code, backend::Code::kUnavailable);
  EXPECT_EQ(backend_->list("io.scs.managed").status.code, backend::Code::kUnavailable);
  EXPECT_EQ(backend_->capacity().status.code, backend::Code::kUnavailable);
}

TEST_F(FakeBackendTest, InspectReadsBackThePostureOfTheCreate) {
  const backend::SandboxSpec s = spec("a");
  const backend::InspectReply reply = backend_->inspect(backend_->create(s).id);
  ASSERT_TRUE(reply.status.ok());
  EXPECT_EQ(reply.posture, s.posture);
}

class FakePostureFaultTest : public FakeBackendTest,
                             public ::testing::WithParamInterface<const char*> {};

TEST_P(FakePostureFaultTest, InspectReadsBackADifferentPosture) {
  load({{"posture", GetParam()}});
  const backend::SandboxSpec s = spec("a");
  const backend::InspectReply reply = backend_->inspect(backend_->create(s).id);
  ASSERT_TRUE(reply.status.ok());
  EXPECT_NE(reply.posture, s.posture);
}

INSTANTIATE_TEST_SUITE_P(
    EveryField, FakePostureFaultTest,
    ::testing::Values("image", "runtime", "user", "network_disabled", "read_only_root",
                      "privileged", "all_capabilities_dropped", "added_capabilities",
                      "no_new_privileges", "seccomp_enabled", "seccomp_profile", "engine_init",
                      "init_command", "host_namespaces", "host_mounts", "devices", "tmpfs",
                      "shm_bytes", "memory_bytes", "memory_swap_bytes", "nano_cpus", "pids_limit",
                      "processes_limit", "open_files_limit", "file_size_limit_bytes",
                      "core_dumps_disabled", "masked_paths", "readonly_paths"));

TEST_F(FakeBackendTest, ListsLabelledSandboxesAndForgetsRemovedOnes) {
  const std::string a = backend_->create(spec("a")).id;
  const std::string b = backend_->create(spec("b")).id;
  backend::SandboxSpec unlabelled = spec("c");
  unlabelled.labels = {{"other", "x"}};
  backend_->create(unlabelled);

  backend::ListReply listed = backend_->list("io.scs.managed");
  ASSERT_TRUE(listed.status.ok());
  ASSERT_EQ(listed.sandboxes.size(), 2u);
  EXPECT_EQ(listed.sandboxes[0].id, a);
  EXPECT_EQ(listed.sandboxes[0].labels.at("io.scs.run-id"), "a");
  EXPECT_EQ(listed.sandboxes[1].id, b);

  EXPECT_TRUE(backend_->remove(a).ok());
  EXPECT_TRUE(backend_->remove(a).ok());
  listed = backend_->list("io.scs.managed");
  ASSERT_EQ(listed.sandboxes.size(), 1u);
  EXPECT_EQ(listed.sandboxes[0].id, b);
  EXPECT_EQ(backend_->inspect(a).status.code, backend::Code::kNotFound);
  EXPECT_EQ(backend_->kill(a).code, backend::Code::kNotFound);
  EXPECT_EQ(backend_->wait(a, 10ms).status.code, backend::Code::kNotFound);
}

TEST_F(FakeBackendTest, RemovingARunningSandboxEndsAWaitOnIt) {
  CollectingSink& sink = newSink();
  const std::string id = run("#fake: hang\n", &sink);
  backend::WaitReply reply;
  const auto begin = std::chrono::steady_clock::now();
  std::thread waiter([&] { reply = backend_->wait(id, 30s); });
  EXPECT_TRUE(backend_->remove(id).ok());
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
  EXPECT_TRUE(reply.status.code == backend::Code::kNotFound || reply.exit.exited);
  EXPECT_EQ(backend_->list("io.scs.managed").sandboxes.size(), 0u);
}

// A sandbox prepared ahead of its run: started with no code, it idles until deliver().
TEST_F(FakeBackendTest, AStartedSandboxIdlesUntilItsCodeIsDelivered) {
  const std::string id = backend_->create(spec("a")).id;
  CollectingSink& sink = newSink();
  ASSERT_TRUE(backend_->start(id, &sink).ok());
  EXPECT_TRUE(log_.has(backend::LogLevel::kInfo, "fake: started " + id));
  const backend::WaitReply idle = backend_->wait(id, 50ms);
  ASSERT_TRUE(idle.status.ok()) << idle.status.message;
  EXPECT_FALSE(idle.exit.exited);
  EXPECT_EQ(sink.writes(), 0);
  EXPECT_FALSE(log_.has(backend::LogLevel::kInfo, "fake: running " + id));

  const backend::Status delivered =
      backend_->deliver(id, archive("#fake: stdout=hello\\n stderr=oops exit=4\n"));
  ASSERT_TRUE(delivered.ok()) << delivered.message;
  const backend::Exit exit = waitExit(id);
  EXPECT_EQ(exit.exit_code, 4);
  EXPECT_EQ(sink.out(), "hello\n");
  EXPECT_EQ(sink.err(), "oops");
  EXPECT_TRUE(log_.has(backend::LogLevel::kInfo, "fake: running " + id));
  EXPECT_TRUE(backend_->remove(id).ok());
}

TEST_F(FakeBackendTest, AKilledIdleSandboxEndsKilledAndRefusesCode) {
  const std::string id = backend_->create(spec("a")).id;
  CollectingSink& sink = newSink();
  ASSERT_TRUE(backend_->start(id, &sink).ok());
  ASSERT_TRUE(backend_->kill(id).ok());
  const backend::Exit exit = waitExit(id);
  EXPECT_EQ(exit.exit_code, 137);
  EXPECT_FALSE(exit.oom_killed);
  const backend::Status delivered = backend_->deliver(id, archive("#fake: exit=3\n"));
  EXPECT_EQ(delivered.code, backend::Code::kUnavailable);
  EXPECT_THAT(delivered.message, HasSubstr("ended"));
  EXPECT_EQ(sink.writes(), 0);
  EXPECT_EQ(waitExit(id).exit_code, 137);
  EXPECT_FALSE(log_.has(backend::LogLevel::kInfo, "fake: running " + id));
}

TEST_F(FakeBackendTest, ASecondDeliverIsRejectedBeforeAndAfterStart) {
  {
    const std::string id = backend_->create(spec("a")).id;
    ASSERT_TRUE(backend_->deliver(id, archive("#fake: exit=5\n")).ok());
    EXPECT_EQ(backend_->deliver(id, archive("#fake: exit=6\n")).code, backend::Code::kRejected);
    CollectingSink& sink = newSink();
    ASSERT_TRUE(backend_->start(id, &sink).ok());
    EXPECT_EQ(backend_->deliver(id, archive("#fake: exit=6\n")).code, backend::Code::kRejected);
    EXPECT_EQ(waitExit(id).exit_code, 5);
  }
  {
    const std::string id = backend_->create(spec("b")).id;
    CollectingSink& sink = newSink();
    ASSERT_TRUE(backend_->start(id, &sink).ok());
    ASSERT_TRUE(backend_->deliver(id, archive("#fake: exit=7 sleep_ms=100\n")).ok());
    const backend::Status again = backend_->deliver(id, archive("#fake: exit=8\n"));
    EXPECT_EQ(again.code, backend::Code::kRejected);
    EXPECT_THAT(again.message, HasSubstr(id));
    EXPECT_EQ(waitExit(id).exit_code, 7);
    EXPECT_EQ(backend_->deliver(id, archive("#fake: exit=8\n")).code, backend::Code::kRejected);
  }
}

TEST_F(FakeBackendTest, RemovingAnIdleSandboxEndsItAndRefusesCode) {
  const std::string id = backend_->create(spec("a")).id;
  CollectingSink& sink = newSink();
  ASSERT_TRUE(backend_->start(id, &sink).ok());
  backend::WaitReply reply;
  std::thread waiter([&] { reply = backend_->wait(id, 30s); });
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_TRUE(backend_->remove(id).ok());
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
  EXPECT_TRUE(reply.status.code == backend::Code::kNotFound || reply.exit.exited);
  EXPECT_EQ(backend_->deliver(id, archive("#fake: exit=3\n")).code, backend::Code::kNotFound);
  EXPECT_EQ(sink.writes(), 0);
}

// start_delay_ms and fail=start act on start(); code delivered after it comes too late for them.
TEST_F(FakeBackendTest, StartDirectivesApplyOnlyWhenTheCodeCameBeforeStart) {
  const std::string id = backend_->create(spec("a")).id;
  CollectingSink& sink = newSink();
  ASSERT_TRUE(backend_->start(id, &sink).ok());
  const auto begin = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      backend_->deliver(id, archive("#fake: start_delay_ms=5000 fail=start exit=2\n")).ok());
  EXPECT_EQ(waitExit(id).exit_code, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 4s);
}

TEST_F(FakeBackendTest, DestroyingTheBackendEndsIdleSandboxes) {
  CollectingSink& sink = newSink();
  for (const char* run_id : {"a", "b"}) {
    ASSERT_TRUE(backend_->start(backend_->create(spec(run_id)).id, &sink).ok());
  }
  const auto begin = std::chrono::steady_clock::now();
  backend_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
  EXPECT_EQ(sink.writes(), 0);
}

TEST_F(FakeBackendTest, DestroyingTheBackendEndsRunningSandboxes) {
  CollectingSink& sink = newSink();
  run("#fake: hang\n", &sink);
  run("#fake: flood=100000000\n", &sink);
  const auto begin = std::chrono::steady_clock::now();
  backend_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
}

}  // namespace
}  // namespace scs::plugin
