#include "config.h"

#include <Poco/Logger.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "logging.h"
#include "support/errors.h"

namespace scs::config {
namespace {

namespace fs = std::filesystem;
using scs::testing::errorOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A file in a private temporary directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    std::string pattern = (fs::temp_directory_path() / "scs-config-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    dir_ = pattern;
    path_ = dir_ / "settings.json";
    std::ofstream(path_) << content;
  }
  ~TempFile() { fs::remove_all(dir_); }
  std::string path() const { return path_.string(); }

 private:
  fs::path dir_;
  fs::path path_;
};

Config parseOk(const std::vector<std::string>& args) {
  Result<Parsed> result = parse(args);
  EXPECT_EQ(errorOf(result), std::nullopt) << ::testing::PrintToString(args);
  if (!std::holds_alternative<Parsed>(result)) {
    return Config{};
  }
  EXPECT_EQ(std::get<Parsed>(result).action, Action::kServe);
  return std::get<Parsed>(result).config;
}

std::string parseError(const std::vector<std::string>& args) {
  Result<Parsed> result = parse(args);
  EXPECT_NE(errorOf(result), std::nullopt) << "accepted: " << ::testing::PrintToString(args);
  return errorOf(result).value_or("");
}

TEST(ConfigTest, DefaultsAreTheShippedValues) {
  const Config c = parseOk({});
  EXPECT_EQ(c.backend, "docker");
  EXPECT_TRUE(c.backend_path.empty());
  EXPECT_EQ(c.plugin_dir, fs::read_symlink("/proc/self/exe").parent_path() / "plugins");
  EXPECT_TRUE(c.backend_options.empty());
  EXPECT_EQ(c.limits.defaults, (policy::Limits{5, 600, 2, 256}));
  EXPECT_EQ(c.limits.maxima, (policy::Limits{16, 3600, 4, 256}));
  EXPECT_EQ(c.runs.max_concurrent, 4);
  EXPECT_EQ(c.runs.max_queue, 64u);
  EXPECT_EQ(c.runs.max_queue_total, 256u);
  EXPECT_EQ(c.runs.prepared_warm_modules,
            (std::vector<std::string>{"numpy", "pandas", "matplotlib.pyplot"}));
  EXPECT_EQ(c.runs.max_retained, 1000u);
  EXPECT_EQ(c.runs.max_retained_per_tenant, 500u);
  EXPECT_EQ(c.runs.max_retained_bytes, 256u << 20);
  EXPECT_EQ(c.runs.max_retained_bytes_per_tenant, 128u << 20);
  EXPECT_EQ(c.http.max_sessions, 10000u);
  EXPECT_EQ(c.http.max_sessions_per_tenant, 1000u);
  EXPECT_EQ(c.runs.retention, std::chrono::seconds(3600));
  EXPECT_EQ(c.runs.output_cap_bytes, 1u << 20);
  EXPECT_EQ(c.files.max_files, 100u);
  EXPECT_EQ(c.files.max_total_bytes, 10u << 20);
  EXPECT_EQ(c.max_message_bytes, 16u << 20);
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.sandbox.image, "safe-code-sandbox:latest");
  EXPECT_EQ(c.sandbox.runtime, "runc");
  EXPECT_EQ(c.sandbox.uids, (policy::UidRange{1900000000, 1900000999}));
  EXPECT_TRUE(fs::path(c.seccomp_profile_path).is_absolute());
  EXPECT_THAT(c.seccomp_profile_path, ::testing::EndsWith("docker/seccomp.json"));
}

TEST(ConfigTest, EachFlagSetsItsSetting) {
  const Config c = parseOk({"--backend",
                            "fake",
                            "--backend-path",
                            "/opt/x/libscs_backend_vm.so",
                            "--plugin-dir",
                            "/opt/plugins",
                            "--backend-option",
                            "cores=2",
                            "--backend-option",
                            "posture=user",
                            "--engine",
                            "unix:///run/docker.sock",
                            "--image",
                            "sandbox@sha256:abc",
                            "--sandbox-uids",
                            "70000-70999",
                            "--runtime",
                            "runsc",
                            "--seccomp-profile",
                            "/etc/scs/seccomp.json",
                            "--default-memory-gb",
                            "1.5",
                            "--max-memory-gb",
                            "8",
                            "--default-timeout-seconds",
                            "30",
                            "--max-timeout-seconds",
                            "120",
                            "--default-cpus",
                            "0.5",
                            "--max-cpus",
                            "3",
                            "--processes",
                            "64",
                            "--max-concurrent",
                            "1",
                            "--max-queue",
                            "0",
                            "--retention-seconds",
                            "60",
                            "--prepared",
                            "3",
                            "--prepared-max",
                            "6",
                            "--prepared-idle-seconds",
                            "45",
                            "--max-retained-bytes",
                            "2097152",
                            "--max-retained",
                            "40",
                            "--max-retained-per-tenant",
                            "20",
                            "--max-retained-bytes-per-tenant",
                            "1048576",
                            "--max-queue-total",
                            "9",
                            "--warm-modules",
                            "scipy.stats, sklearn",
                            "--output-cap-bytes",
                            "4096",
                            "--max-files",
                            "7",
                            "--max-files-bytes",
                            "2048",
                            "--max-message-bytes",
                            "65536",
                            "--log-level",
                            "debug",
                            "--log-format",
                            "json"});
  EXPECT_EQ(c.backend, "fake");
  EXPECT_EQ(c.log_format, "json");
  EXPECT_EQ(c.backend_path, "/opt/x/libscs_backend_vm.so");
  EXPECT_EQ(c.plugin_dir, "/opt/plugins");
  EXPECT_EQ(c.backend_options,
            (std::map<std::string, std::string>{
                {"cores", "2"}, {"posture", "user"}, {"engine", "unix:///run/docker.sock"}}));
  EXPECT_EQ(c.sandbox.image, "sandbox@sha256:abc");
  EXPECT_EQ(c.runs.prepared, 3u);
  EXPECT_EQ(c.runs.prepared_max, 6u);
  EXPECT_EQ(c.runs.prepared_max_idle, std::chrono::seconds(45));
  EXPECT_EQ(c.runs.max_retained_bytes, 2097152u);
  EXPECT_EQ(c.runs.max_retained, 40u);
  EXPECT_EQ(c.runs.max_retained_per_tenant, 20u);
  EXPECT_EQ(c.runs.max_retained_bytes_per_tenant, 1048576u);
  EXPECT_EQ(c.runs.max_queue_total, 9u);
  EXPECT_EQ(c.runs.prepared_warm_modules, (std::vector<std::string>{"scipy.stats", "sklearn"}));
  EXPECT_TRUE(parseOk({"--warm-modules", "none"}).runs.prepared_warm_modules.empty());
  // Under gVisor a warm interpreter makes forking costly: warm only when asked to.
  EXPECT_TRUE(parseOk({"--runtime", "runsc"}).runs.prepared_warm_modules.empty());
  EXPECT_EQ(parseOk({"--runtime", "runsc", "--warm-modules", "numpy"}).runs.prepared_warm_modules,
            (std::vector<std::string>{"numpy"}));
  EXPECT_EQ(c.sandbox.runtime, "runsc");
  EXPECT_EQ(c.sandbox.uids, (policy::UidRange{70000, 70999}));
  EXPECT_EQ(c.seccomp_profile_path, "/etc/scs/seccomp.json");
  EXPECT_EQ(c.limits.defaults, (policy::Limits{1.5, 30, 0.5, 64}));
  EXPECT_EQ(c.limits.maxima, (policy::Limits{8, 120, 3, 64}));
  EXPECT_EQ(c.runs.max_concurrent, 1);
  EXPECT_EQ(c.runs.max_queue, 0u);
  EXPECT_EQ(c.runs.retention, std::chrono::seconds(60));
  EXPECT_EQ(c.runs.output_cap_bytes, 4096u);
  EXPECT_EQ(c.files.max_files, 7u);
  EXPECT_EQ(c.files.max_total_bytes, 2048u);
  EXPECT_EQ(c.max_message_bytes, 65536u);
  EXPECT_EQ(c.log_level, "debug");
}

TEST(ConfigTest, AcceptsFlagEqualsValue) {
  const Config c = parseOk({"--backend=fake", "--max-cpus=3", "--backend-option=fail=create"});
  EXPECT_EQ(c.backend, "fake");
  EXPECT_EQ(c.limits.maxima.cpus, 3);
  EXPECT_EQ(c.backend_options.at("fail"), "create");
}

TEST(ConfigTest, TheLastOfARepeatedFlagWins) {
  const Config c =
      parseOk({"--image", "a", "--image", "b", "--backend-option", "cores=1", "--backend-option",
               "cores=2", "--backend-option", "engine=x", "--engine", "y"});
  EXPECT_EQ(c.sandbox.image, "b");
  EXPECT_EQ(c.backend_options.at("cores"), "2");
  EXPECT_EQ(c.backend_options.at("engine"), "y");
}

TEST(ConfigTest, ReadsAConfigFile) {
  TempFile file(R"({"backend": "fake", "max-memory-gb": 8, "default-memory-gb": 2.5,
                    "max-concurrent": "2", "runtime": "runsc",
                    "backend-option": {"cores": 2, "posture": "user"},
                    "engine": "tcp://127.0.0.1:2375", "log-level": "warning"})");
  const Config c = parseOk({"--config", file.path()});
  EXPECT_EQ(c.backend, "fake");
  EXPECT_EQ(c.limits.maxima.memory_gb, 8);
  EXPECT_EQ(c.limits.defaults.memory_gb, 2.5);
  EXPECT_EQ(c.runs.max_concurrent, 2);
  EXPECT_EQ(c.sandbox.runtime, "runsc");
  EXPECT_EQ(c.backend_options,
            (std::map<std::string, std::string>{
                {"cores", "2"}, {"posture", "user"}, {"engine", "tcp://127.0.0.1:2375"}}));
  EXPECT_EQ(c.log_level, "warning");
}

TEST(ConfigTest, AcceptsBackendOptionsAsAnArrayInTheFile) {
  TempFile file(R"({"backend-option": ["cores=3", "fail=list"]})");
  const Config c = parseOk({"--config", file.path()});
  EXPECT_EQ(c.backend_options.at("cores"), "3");
  EXPECT_EQ(c.backend_options.at("fail"), "list");
}

// Issue 44: the egress entries are repeated flags: arrays in the file, adding up with the
// command line's; a flag that takes one value refuses an array.
TEST(ConfigTest, EgressEntriesAddUpFromTheFileAndTheCommandLine) {
  TempFile file(R"({"egress-allow": ["local=api.github.com", "alice=*.example.org:8443"],
                    "egress-resolve": "db.internal=10.1.2.3"})");
  const Config c = parseOk({"--config", file.path(), "--egress-allow", "local=db.internal:5432"});
  EXPECT_EQ(c.egress.allow,
            (std::vector<std::string>{"local=api.github.com", "alice=*.example.org:8443",
                                      "local=db.internal:5432"}));
  EXPECT_EQ(c.egress.resolve, std::vector<std::string>{"db.internal=10.1.2.3"});
  TempFile scalar(R"({"egress-max-bytes": [2000000, 3000000]})");
  EXPECT_THAT(parseError({"--config", scalar.path()}),
              HasSubstr("\"egress-max-bytes\" must be a string or a number"));
  EXPECT_THAT(parseError({"--egress-deny", "local=example.com"}),
              HasSubstr("--egress-deny needs --egress-allow"));
  EXPECT_THAT(parseError({"--egress-allow", "local=*.github.io"}), HasSubstr("--egress-allow: "));
}

// Issue 48: a credential is for a host its tenant's allow-list names; the CA file needs one.
TEST(ConfigTest, ACredentialNeedsItsHostOnTheTenantsAllowList) {
  ::setenv("SCS_CONFIG_TEST_TOKEN", "token-value", 1);
  const auto build = [](const std::vector<std::string>& args) {
    const Config c = parseOk(args);
    egress::EgressPolicy policy(nullptr);
    EXPECT_EQ(scs::testing::errorOf(buildEgressPolicy(c, policy)), std::nullopt);
    egress::CredentialStore store;
    const Result<Done> built = buildCredentials(c, policy, store);
    const Error* error = std::get_if<Error>(&built);
    return error != nullptr ? error->message : std::string();
  };
  // Two entries may read one variable: it is unset once both are read.
  EXPECT_EQ(build({"--egress-allow", "alice=api.test", "--egress-allow", "bob=api.test",
                   "--egress-credential", "alice=api.test:Authorization=env:SCS_CONFIG_TEST_TOKEN",
                   "--egress-credential", "bob=api.test:Authorization=env:SCS_CONFIG_TEST_TOKEN"}),
            "");
  EXPECT_EQ(std::getenv("SCS_CONFIG_TEST_TOKEN"), nullptr);
  ::setenv("SCS_CONFIG_TEST_TOKEN", "token-value", 1);  // unset once read
  const std::string other = build({"--egress-allow", "alice=api.test", "--egress-credential",
                                   "bob=api.test:Authorization=env:SCS_CONFIG_TEST_TOKEN"});
  EXPECT_THAT(other, HasSubstr("not on the tenant's allow-list (--egress-allow bob=api.test:443)"));
  EXPECT_THAT(other, Not(HasSubstr("token-value")));
  EXPECT_THAT(build({"--egress-allow", "alice=api.test", "--egress-upstream-ca", "/etc/x.pem"}),
              HasSubstr("--egress-upstream-ca needs --egress-credential"));
  EXPECT_EQ(std::getenv("SCS_CONFIG_TEST_TOKEN"), nullptr);
}

TEST(ConfigTest, FlagsOverrideTheFileWhereverTheyStand) {
  TempFile file(R"({"backend": "fake", "max-memory-gb": 8, "backend-option": {"cores": "2"}})");
  const Config c = parseOk({"--max-memory-gb", "4", "--config", file.path(), "--backend-option",
                            "cores=6", "--backend", "docker"});
  EXPECT_EQ(c.backend, "docker");
  EXPECT_EQ(c.limits.maxima.memory_gb, 4);
  EXPECT_EQ(c.backend_options.at("cores"), "6");
}

TEST(ConfigTest, AMaximumBelowTheShippedDefaultIsLeftToTheLimitPolicy) {
  const Config c = parseOk({"--max-memory-gb", "4"});
  EXPECT_EQ(c.limits.maxima.memory_gb, 4);
  EXPECT_EQ(c.limits.defaults.memory_gb, 5);
}

TEST(ConfigTest, RefusesBadValuesWithAMessageNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "unknown flag --bogus"},
      {{"--transport", "stdio"}, "unknown flag --transport"},
      {{"--sandbox-uids", "0-100"}, "--sandbox-uids: '0-100' is not FIRST-LAST"},
      {{"--sandbox-uids", "200-100"}, "--sandbox-uids: '200-100'"},
      {{"--sandbox-uids", "100-110"}, "at least 16 uids"},
      {{"--sandbox-uids", "3000000000-3000000100"}, "below 2^31"},
      {{"--sandbox-uids", "5"}, "--sandbox-uids: '5'"},
      {{"--max-sessions", "3"}, "--max-sessions applies to HTTP only"},
      {{"--max-sessions-per-tenant", "0", "--http", ":0"}, "--max-sessions-per-tenant: 0 is out"},
      {{"--max-retained-per-tenant", "0"}, "--max-retained-per-tenant: 0 is out of range"},
      {{"--warm-modules", "os;import sys"}, "--warm-modules: 'os;import sys' is not a Python"},
      {{"--warm-modules", "a..b"}, "--warm-modules: 'a..b'"},
      {{"--warm-modules", ","}, "--warm-modules needs module names"},
      {{"fake"}, "unexpected argument 'fake'"},
      {{"-b"}, "unexpected argument '-b'"},
      {{"--backend"}, "--backend needs a value"},
      {{"--backend", "Docker"}, "--backend: 'Docker'"},
      {{"--backend", "../x"}, "--backend: '../x'"},
      {{"--max-memory-gb", "abc"}, "--max-memory-gb: 'abc' is not a number"},
      {{"--max-memory-gb", "0"}, "--max-memory-gb: 0 is out of range"},
      {{"--max-memory-gb", "-4"}, "--max-memory-gb: -4 is out of range"},
      {{"--max-memory-gb", "nan"}, "--max-memory-gb: 'nan' is not a number"},
      {{"--max-memory-gb", "inf"}, "--max-memory-gb: 'inf' is not a number"},
      {{"--max-memory-gb", "1e400"}, "--max-memory-gb: '1e400' is not a number"},
      {{"--max-memory-gb", "8GB"}, "--max-memory-gb: '8GB' is not a number"},
      {{"--max-memory-gb", ""}, "--max-memory-gb: '' is not a number"},
      {{"--default-timeout-seconds", "0"}, "--default-timeout-seconds: 0 is out of range"},
      {{"--max-cpus", "1e9"}, "--max-cpus: 1e9 is out of range"},
      {{"--default-cpus", "0.01"}, "--default-cpus: 0.01 is below the floor"},
      {{"--max-concurrent", "0"}, "--max-concurrent: 0 is out of range"},
      {{"--max-concurrent", "1.5"}, "--max-concurrent: '1.5' is not a whole number"},
      {{"--max-queue", "-1"}, "--max-queue: -1 is out of range"},
      {{"--processes", "0"}, "--processes: 0 is out of range"},
      {{"--retention-seconds", "0"}, "--retention-seconds: 0 is out of range"},
      {{"--prepared", "-1"}, "--prepared: -1 is out of range"},
      {{"--prepared", "65"}, "--prepared: 65 is out of range"},
      {{"--prepared-idle-seconds", "0"}, "--prepared-idle-seconds: 0 is out of range"},
      {{"--prepared", "3", "--prepared-max", "2"}, "--prepared-max 2 is below --prepared 3"},
      {{"--prepared-max", "65"}, "--prepared-max: 65 is out of range"},
      {{"--max-retained-bytes", "1000"}, "--max-retained-bytes: 1000 is out of range"},
      {{"--output-cap-bytes", "10"}, "--output-cap-bytes: 10 is out of range"},
      {{"--max-message-bytes", "99999999999"}, "--max-message-bytes: 99999999999 is out of range"},
      {{"--runtime", "kata"}, "--runtime: 'kata' is not runc or runsc"},
      {{"--log-level", "verbose"}, "--log-level: 'verbose'"},
      {{"--log-format", "xml"}, "--log-format: 'xml' is not text or json"},
      {{"--backend-option", "cores"}, "--backend-option: 'cores' is not KEY=VALUE"},
      {{"--backend-option", "=2"}, "--backend-option: '=2' is not KEY=VALUE"},
      {{"--image", "a b"}, "--image: 'a b'"},
      {{"--engine", ""}, "--engine needs a non-empty value"},
      {{"--help=yes"}, "--help takes no value"},
      {{"--default-memory-gb", "20", "--max-memory-gb", "16"},
       "--default-memory-gb 20 is above --max-memory-gb 16"},
      {{"--default-timeout-seconds", "90", "--max-timeout-seconds", "60"},
       "--default-timeout-seconds 90 is above --max-timeout-seconds 60"},
      {{"--config", "/nonexistent/settings.json"}, "--config: cannot read"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(parseError(c.args), HasSubstr(c.message)) << ::testing::PrintToString(c.args);
  }
}

TEST(ConfigTest, RefusesABadConfigFile) {
  struct Case {
    std::string content;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{not json", "is not valid JSON"},
      {"[1, 2]", "must hold a JSON object"},
      {R"({"colour": "blue"})", "unknown setting \"colour\""},
      {R"({"config": "/etc/other.json"})", "unknown setting \"config\""},
      {R"({"help": 1})", "unknown setting \"help\""},
      {R"({"max-memory-gb": true})", "\"max-memory-gb\" must be a string or a number"},
      {R"({"max-memory-gb": null})", "\"max-memory-gb\" must be a string or a number"},
      {R"({"max-memory-gb": [8]})", "\"max-memory-gb\" must be a string or a number"},
      {R"({"max-memory-gb": 0})", "--max-memory-gb: 0 is out of range"},
      {R"({"runtime": "kata"})", "--runtime: 'kata'"},
      {R"({"backend-option": {"cores": {"n": 2}}})", "must be a string or a number"},
      {R"({"backend-option": ["cores"]})", "is not KEY=VALUE"},
      {R"({"self-test": 1})", "--self-test takes no value (in a config file: true or false)"},
  };
  for (const Case& c : cases) {
    TempFile file(c.content);
    const std::string error = parseError({"--config", file.path()});
    EXPECT_THAT(error, HasSubstr(c.message)) << c.content;
    EXPECT_THAT(error, HasSubstr(file.path())) << c.content;
  }
}

// A switch (a flag without a value) takes JSON true or false in a config file, as the strings
// do; a flag with a value does not (the table above).
TEST(ConfigTest, ASwitchInAConfigFileIsTrueOrFalse) {
  for (const auto& [content, expected] :
       std::vector<std::pair<std::string, bool>>{{R"({"self-test": true})", true},
                                                 {R"({"self-test": false})", false},
                                                 {R"({"self-test": "true"})", true}}) {
    TempFile file(content);
    EXPECT_EQ(parseOk({"--config", file.path()}).self_test, expected) << content;
  }
}

TEST(ConfigTest, HelpAndVersionAreActions) {
  EXPECT_EQ(std::get<Parsed>(parse({"--help"})).action, Action::kHelp);
  EXPECT_EQ(std::get<Parsed>(parse({"--backend", "fake", "--version"})).action, Action::kVersion);
  EXPECT_THAT(versionText(), ::testing::StartsWith("safe-code-sandbox "));
}

TEST(ConfigTest, HelpExplainsEveryFlagWithItsTrueDefault) {
  const std::string help = helpText();
  for (const char* flag : {"--config FILE",
                           "--backend NAME",
                           "--backend-path FILE",
                           "--plugin-dir DIR",
                           "--backend-option KEY=VALUE",
                           "--engine ADDR",
                           "--image NAME",
                           "--runtime runc|runsc",
                           "--seccomp-profile FILE",
                           "--default-memory-gb GB",
                           "--max-memory-gb GB",
                           "--default-timeout-seconds S",
                           "--max-timeout-seconds S",
                           "--default-cpus N",
                           "--max-cpus N",
                           "--processes N",
                           "--max-concurrent N",
                           "--max-queue N",
                           "--max-queue-total N",
                           "--prepared N",
                           "--prepared-max N",
                           "--prepared-idle-seconds S",
                           "--warm-modules LIST",
                           "--retention-seconds S",
                           "--max-retained N",
                           "--max-retained-per-tenant N",
                           "--max-retained-bytes N",
                           "--max-retained-bytes-per-tenant N",
                           "--max-sessions N",
                           "--max-sessions-per-tenant N",
                           "--output-cap-bytes N",
                           "--max-files N",
                           "--max-files-bytes N",
                           "--max-message-bytes N",
                           "--log-level LEVEL",
                           "--log-format FORMAT",
                           "--sandbox-uids FIRST-LAST",
                           "--help",
                           "--version"}) {
    EXPECT_THAT(help, HasSubstr(std::string("  ") + flag + "\n")) << flag;
  }
  // Each default shown is the parsed default, so the help cannot drift from the code.
  const Config c = parseOk({});
  auto shown = [&](const std::string& flag, const std::string& value) {
    const auto at = help.find("  --" + flag + " ");
    ASSERT_NE(at, std::string::npos) << flag;
    const auto next = help.find("\n  --", at + 1);
    std::string block = help.substr(at, next - at);
    block = std::regex_replace(block, std::regex("\\s+"), " ");
    EXPECT_THAT(block, HasSubstr("(default: " + value + ")")) << flag;
  };
  shown("backend", c.backend);
  shown("plugin-dir", c.plugin_dir.string());
  shown("image", c.sandbox.image);
  shown("runtime", "runc");
  shown("seccomp-profile", c.seccomp_profile_path);
  shown("default-memory-gb", "5");
  shown("max-memory-gb", "16");
  shown("default-timeout-seconds", "600");
  shown("max-timeout-seconds", "3600");
  shown("default-cpus", "2");
  shown("max-cpus", "4");
  shown("processes", "256");
  shown("max-concurrent", "4");
  shown("max-queue", "64");
  shown("prepared", "1");
  shown("prepared-max", "4");
  shown("prepared-idle-seconds", "300");
  shown("warm-modules", "numpy,pandas,matplotlib.pyplot");
  shown("retention-seconds", "3600");
  shown("max-queue-total", "256");
  shown("max-retained", "1000");
  shown("max-retained-per-tenant", "500");
  shown("max-retained-bytes", "268435456");
  shown("max-retained-bytes-per-tenant", "134217728");
  shown("max-sessions", "10000");
  shown("max-sessions-per-tenant", "1000");
  shown("output-cap-bytes", std::to_string(c.runs.output_cap_bytes));
  shown("max-files", "100");
  shown("max-files-bytes", std::to_string(c.files.max_total_bytes));
  shown("max-message-bytes", "16777216");
  shown("log-level", "info");
  shown("log-format", "text");
  shown("sandbox-uids", "1900000000-1900000999");
  for (const std::string& line : [&] {
         std::vector<std::string> lines;
         std::istringstream in(help);
         for (std::string l; std::getline(in, l);) {
           lines.push_back(l);
         }
         return lines;
       }()) {
    if (line.find(c.plugin_dir.string()) == std::string::npos) {
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
}

TEST(ConfigTest, LoadsTheSeccompProfileText) {
  TempFile file(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []})");
  Config c = parseOk({"--seccomp-profile", file.path()});
  ASSERT_EQ(scs::testing::errorOf(loadSeccompProfile(&c)), std::nullopt);
  EXPECT_EQ(c.sandbox.seccomp_profile, R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []})");
}

TEST(ConfigTest, EngineDefaultKeepsTheEnginesProfile) {
  Config c = parseOk({"--seccomp-profile", "engine-default"});
  c.sandbox.seccomp_profile = "stale";
  ASSERT_EQ(scs::testing::errorOf(loadSeccompProfile(&c)), std::nullopt);
  EXPECT_EQ(c.sandbox.seccomp_profile, "");
}

TEST(ConfigTest, RefusesAMissingOrInvalidSeccompProfile) {
  Config missing = parseOk({"--seccomp-profile", "/nonexistent/seccomp.json"});
  EXPECT_THAT(scs::testing::errorOf(loadSeccompProfile(&missing)).value_or(""),
              HasSubstr("cannot read the seccomp profile /nonexistent/seccomp.json"));
  TempFile garbage("SCMP_ACT_ALLOW");
  Config invalid = parseOk({"--seccomp-profile", garbage.path()});
  EXPECT_THAT(scs::testing::errorOf(loadSeccompProfile(&invalid)).value_or(""),
              HasSubstr("is not valid JSON"));
  TempFile array("[]");
  Config not_object = parseOk({"--seccomp-profile", array.path()});
  EXPECT_THAT(scs::testing::errorOf(loadSeccompProfile(&not_object)).value_or(""),
              HasSubstr("is not a JSON object"));
}

TEST(LoggingTest, ParsesTheFourLevels) {
  EXPECT_EQ(logging::parseLevel("debug"), Poco::Message::PRIO_DEBUG);
  EXPECT_EQ(logging::parseLevel("info"), Poco::Message::PRIO_INFORMATION);
  EXPECT_EQ(logging::parseLevel("warning"), Poco::Message::PRIO_WARNING);
  EXPECT_EQ(logging::parseLevel("error"), Poco::Message::PRIO_ERROR);
  EXPECT_EQ(logging::parseLevel("trace"), std::nullopt);
}

TEST(LoggingTest, WritesFormattedLinesToStdErrAtTheConfiguredLevel) {
  // std::clog is the stderr stream; capture it for the test.
  std::ostringstream captured;
  std::streambuf* previous = std::clog.rdbuf(captured.rdbuf());
  std::ostringstream out_captured;
  std::streambuf* previous_out = std::cout.rdbuf(out_captured.rdbuf());
  Poco::Logger& existing = Poco::Logger::get("scs.test.existing");
  logging::setUp(Poco::Message::PRIO_WARNING);
  existing.warning("from an earlier logger");
  Poco::Logger::get("scs.test.later").information("hidden below the level");
  logging::BackendLogSink sink;
  sink.log(backend::LogLevel::kError, "fake: broke");
  sink.log(backend::LogLevel::kInfo, "fake: started fake-1");
  logging::setUp(Poco::Message::PRIO_DEBUG);
  sink.log(backend::LogLevel::kDebug, "fake: created fake-2");
  std::clog.rdbuf(previous);
  std::cout.rdbuf(previous_out);

  const std::string text = captured.str();
  EXPECT_EQ(out_captured.str(), "");
  const std::regex line(
      R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (Warning|Error|Debug) [a-z.]+: .*)");
  std::istringstream lines(text);
  std::vector<std::string> all;
  for (std::string l; std::getline(lines, l);) {
    EXPECT_TRUE(std::regex_match(l, line)) << l;
    all.push_back(l);
  }
  ASSERT_EQ(all.size(), 3u) << text;
  EXPECT_THAT(all[0], HasSubstr("Warning scs.test.existing: from an earlier logger"));
  EXPECT_THAT(all[1], HasSubstr("Error scs.backend: fake: broke"));
  EXPECT_THAT(all[2], HasSubstr("Debug scs.backend: fake: created fake-2"));
}

}  // namespace
}  // namespace scs::config
