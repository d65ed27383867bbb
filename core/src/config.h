// Every operator setting of the server (Config), its shipped defaults, and parsing them from
// the arguments and a --config file; also the --help and --version texts.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "egress/relay.h"
#include "mcp/http/settings.h"
#include "packages/package_layers.h"
#include "policy/files.h"
#include "policy/limits.h"
#include "policy/posture.h"
#include "result.h"
#include "runs/run_manager.h"

namespace scs::config {

// `--seccomp-profile` value that keeps the engine's own default profile instead of a file.
inline constexpr const char* kEngineDefaultSeccomp = "engine-default";

// Every operator setting of the server, from the config file and the flags.
struct Config {
  std::string backend = "docker";
  std::filesystem::path backend_path;  // empty: plugin_dir/libscs_backend_<backend>.so
  std::filesystem::path plugin_dir;    // default: <directory of the executable>/plugins
  std::map<std::string, std::string> backend_options;  // includes "engine" when set
  std::string seccomp_profile_path;                    // a file, or kEngineDefaultSeccomp
  policy::LimitSettings limits;
  runs::RunSettings runs;
  policy::SandboxSettings sandbox;  // seccomp_profile is filled by loadSeccompProfile()
  policy::FileSettings files;
  std::size_t max_message_bytes = std::size_t{16} << 20;
  std::string log_level = "info";
  std::string log_format = "text";          // text or json
  mcp::HttpSettings http;                   // http.listen set: Streamable HTTP instead of stdio
  std::string metrics_listen;               // ADDR:PORT of GET /metrics; empty: no metrics listener
  std::chrono::seconds start_wait{0};       // start_run\'s wait when the call gives none
  std::size_t max_waiting_per_tenant = 16;  // calls with wait_seconds one tenant has at once
  bool self_test = false;  // run the audit once at startup; refuse to serve when it fails
  // Where hibernated sessions outlive the server (sessions/session_store.h); empty: they do not.
  std::string state_dir;
  packages::PackageSettings packages;  // `packages` of runs; off unless a wheelhouse or index
  std::vector<std::string> allowed_packages;  // --allow-packages as given ("any", or names)
  // Egress by allow-list (issue 44): the entries as given (checked by buildEgressPolicy()),
  // and the caps of the relay. No allow entry: no egress at all.
  struct Egress {
    std::vector<std::string> allow;    // TENANT=PATTERN[:PORT]
    std::vector<std::string> deny;     // TENANT=PATTERN[:PORT]
    std::vector<std::string> resolve;  // NAME=ADDRESS
    // Brokered credentials (issue 48): TENANT=HOST[:PORT]:HEADER=SOURCE or :$VARIABLE=SOURCE,
    // checked and read by buildCredentials(); the operator's CAs for the hosts' certificates.
    std::vector<std::string> credentials;
    std::string upstream_ca;
    egress::EgressLimits limits;
  } egress;
};

// The policy of config.egress: every entry applied to `policy`, or the first that is refused.
Result<Done> buildEgressPolicy(const Config& config, egress::EgressPolicy& policy);

// The credentials of config.egress, read into `store` (their files and variables read now), each
// for a host its tenant's allow-list lets it reach; or the first that is refused.
Result<Done> buildCredentials(const Config& config, const egress::EgressPolicy& policy,
                              egress::CredentialStore& store);

// The settings before any file or flag: the shipped defaults.
Config defaults();

// kAudit: the `audit` subcommand (the first argument), which takes every server flag.
enum class Action { kServe, kHelp, kVersion, kAudit };

struct Parsed {
  Action action = Action::kServe;
  Config config;
};

// Parses the arguments after argv[0]: an optional leading `audit`, then flags.
// `--config FILE` is read first; flags override it. An Error is a bad flag, file or value (the
// server exits with code 2).
Result<Parsed> parse(const std::vector<std::string>& args);

// Reads the profile named by config->seccomp_profile_path into
// config->sandbox.seccomp_profile; an Error when it is missing, unreadable or not a JSON object.
Result<Done> loadSeccompProfile(Config* config);

// The text of --help; every default in it is read from defaults().
std::string helpText();

// "safe-code-sandbox <version>".
std::string versionText();

// <directory of the running executable>/plugins (from /proc/self/exe), or the package's plugin
// directory when the executable is the installed one (in the install prefix's bin directory).
std::filesystem::path defaultPluginDir();

// The checkout's docker/seccomp.json, or the package's copy for the installed executable.
std::string defaultSeccompProfile();

}  // namespace scs::config
