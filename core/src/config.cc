// The server's settings: parsing the arguments and the --config file through the flag table
// (config_flags.cc), the checks across flags, the shipped defaults and the --help text.
#include "config.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <variant>

#include "config_flags.h"

#if !defined(SCS_VERSION) || !defined(SCS_DEFAULT_SECCOMP_PROFILE) ||   \
    !defined(SCS_INSTALL_BINDIR) || !defined(SCS_INSTALL_PLUGIN_DIR) || \
    !defined(SCS_INSTALL_SECCOMP_PROFILE)
#error \
    "the build defines SCS_VERSION, SCS_DEFAULT_SECCOMP_PROFILE and SCS_INSTALL_* (core/CMakeLists.txt)"
#endif

namespace scs::config {
namespace {

namespace fs = std::filesystem;

// Scalars of the config file become the text a flag would carry.
Result<std::string> scalarText(const std::string& key, const Poco::Dynamic::Var& value) {
  if (value.isEmpty() || value.isArray() || value.isStruct() || value.type() == typeid(bool) ||
      value.type() == typeid(Poco::JSON::Object::Ptr) ||
      value.type() == typeid(Poco::JSON::Array::Ptr)) {
    return invalid("config file: \"" + key + "\" must be a string or a number");
  }
  if (value.isString()) {
    return value.extract<std::string>();
  }
  if (value.isInteger()) {
    return std::to_string(value.convert<std::int64_t>());
  }
  return policy::formatNumber(value.convert<double>());
}

// A flag applied to a scalar of the config file.
Result<Done> applyScalar(Config& config, const Flag& flag, const std::string& key,
                         const Poco::Dynamic::Var& value) {
  const Result<std::string> text = scalarText(key, value);
  if (const Error* problem = std::get_if<Error>(&text)) {
    return *problem;
  }
  return flag.apply(config, std::get<std::string>(text));
}

// The object form of "backend-option": {"KEY": VALUE, ...}.
Result<Done> applyFileBackendOptions(Config& config, const Poco::JSON::Object::Ptr& object) {
  const Flag* flag = findFlag("backend-option");
  for (const auto& [key, item] : *object) {
    const Result<std::string> text = scalarText("backend-option." + key, item);
    if (const Error* problem = std::get_if<Error>(&text)) {
      return *problem;
    }
    Result<Done> applied = flag->apply(config, key + "=" + std::get<std::string>(text));
    if (std::holds_alternative<Error>(applied)) {
      return applied;
    }
  }
  return Done{};
}

// A repeated flag's entries, each a scalar.
Result<Done> applyFileEntries(Config& config, const Flag& flag, const std::string& key,
                              const Poco::JSON::Array::Ptr& entries) {
  for (std::size_t i = 0; i < entries->size(); ++i) {
    Result<Done> applied = applyScalar(config, flag, key, entries->get(static_cast<unsigned>(i)));
    if (std::holds_alternative<Error>(applied)) {
      return applied;
    }
  }
  return Done{};
}

Result<Done> applyFile(Config& config, const std::string& path, std::set<std::string>* given) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return invalid("--config: cannot read " + path);
  }
  std::stringstream text;
  text << in.rdbuf();
  Poco::Dynamic::Var parsed;
  try {
    Poco::JSON::Parser parser;
    parsed = parser.parse(text.str());
  } catch (const Poco::Exception& e) {
    return invalid("--config: " + path + " is not valid JSON: " + e.displayText());
  }
  if (parsed.type() != typeid(Poco::JSON::Object::Ptr)) {
    return invalid("--config: " + path + " must hold a JSON object");
  }
  auto object = parsed.extract<Poco::JSON::Object::Ptr>();
  for (const auto& [key, value] : *object) {
    const Flag* flag = findFlag(key);
    if (flag == nullptr || !flag->apply) {
      return invalid("--config: " + path + " has an unknown setting \"" + key + "\"");
    }
    Result<Done> applied = Done{};
    if (key == "backend-option" && value.type() == typeid(Poco::JSON::Object::Ptr)) {
      applied = applyFileBackendOptions(config, value.extract<Poco::JSON::Object::Ptr>());
    } else if (flag->repeated && value.type() == typeid(Poco::JSON::Array::Ptr)) {
      applied = applyFileEntries(config, *flag, key, value.extract<Poco::JSON::Array::Ptr>());
    } else if (*flag->metavar == '\0' && value.type() == typeid(bool)) {
      // A switch: JSON true or false.
      applied = flag->apply(config, value.extract<bool>() ? "true" : "false");
    } else {
      applied = applyScalar(config, *flag, key, value);
    }
    if (const Error* problem = std::get_if<Error>(&applied)) {
      return invalid("--config " + path + ": " + problem->message);
    }
    given->insert(key);
  }
  return Done{};
}

Result<Done> checkLimitPair(const Config& config, const std::set<std::string>& given,
                            const char* what, double policy::Limits::*field, double floor,
                            const char* unit) {
  const std::string default_flag = std::string("default-") + what;
  const std::string max_flag = std::string("max-") + what;
  const double default_value = config.limits.defaults.*field;
  const double max_value = config.limits.maxima.*field;
  if (default_value < floor) {
    return invalid(flagName(default_flag) + ": " + policy::formatNumber(default_value) +
                   " is below the floor of " + policy::formatNumber(floor) + unit);
  }
  if (max_value < floor) {
    return invalid(flagName(max_flag) + ": " + policy::formatNumber(max_value) +
                   " is below the floor of " + policy::formatNumber(floor) + unit);
  }
  // A default above the maximum is a contradiction only when both were set; otherwise the
  // limit policy lowers the default to the maximum and logs it.
  if (given.count(default_flag) != 0 && default_value > max_value) {
    return invalid(flagName(default_flag) + " " + policy::formatNumber(default_value) +
                   " is above " + flagName(max_flag) + " " + policy::formatNumber(max_value));
  }
  return Done{};
}

Result<Done> checkHttpFlags(const Config& config, const std::set<std::string>& given) {
  for (const char* flag : {"token-file", "allowed-origins", "allowed-hosts", "max-http-body-bytes",
                           "max-sessions", "max-sessions-per-tenant", "max-requests-per-tenant"}) {
    if (config.http.listen.empty() && given.count(flag) != 0) {
      return invalid(flagName(flag) + " applies to HTTP only; give --http ADDR:PORT too");
    }
  }
  return Done{};
}

}  // namespace

Result<Done> buildEgressPolicy(const Config& config, egress::EgressPolicy& policy) {
  const Config::Egress& e = config.egress;
  if (e.allow.empty() && (!e.deny.empty() || !e.resolve.empty())) {
    return invalid(std::string(e.deny.empty() ? "--egress-resolve" : "--egress-deny") +
                   " needs --egress-allow: without an allow entry no program reaches any host");
  }
  const auto apply = [](const std::vector<std::string>& entries, const char* flag,
                        auto add) -> Result<Done> {
    for (const std::string& entry : entries) {
      const Result<bool> added = add(entry);
      if (const Error* error = std::get_if<Error>(&added)) {
        return Error{error->kind, std::string(flag) + ": " + error->message};
      }
    }
    return Done{};
  };
  if (Result<Done> allowed =
          apply(e.allow, "--egress-allow", [&](const std::string& v) { return policy.allow(v); });
      std::holds_alternative<Error>(allowed)) {
    return allowed;
  }
  if (Result<Done> denied =
          apply(e.deny, "--egress-deny", [&](const std::string& v) { return policy.deny(v); });
      std::holds_alternative<Error>(denied)) {
    return denied;
  }
  return apply(e.resolve, "--egress-resolve", [&](const std::string& v) { return policy.pin(v); });
}

Result<Done> buildCredentials(const Config& config, const egress::EgressPolicy& policy,
                              egress::CredentialStore& store) {
  const Config::Egress& e = config.egress;
  if (!e.upstream_ca.empty() && e.credentials.empty()) {
    return invalid(
        "--egress-upstream-ca needs --egress-credential: only a brokered host's certificate is "
        "checked by the server");
  }
  // The variables read are unset however this ends.
  struct Forget {
    egress::CredentialStore& store;
    ~Forget() { store.forgetEnvironment(); }
  } forget{store};
  for (const std::string& entry : e.credentials) {
    const Result<Done> added = store.add(entry);
    if (std::holds_alternative<Error>(added)) {
      return added;
    }
    const egress::Credential& credential = store.all().back();
    const Result<egress::Target> target = egress::parseTarget(credential.host);
    const egress::Decision decision =
        std::holds_alternative<egress::Target>(target)
            ? policy.decide(credential.tenant, std::get<egress::Target>(target), credential.port)
            : egress::Decision{};
    if (!decision.allowed) {
      return invalid("--egress-credential for " + credential.tenant + " and " +
                     credential.target() +
                     ": that host is not on the tenant's allow-list (--egress-allow " +
                     credential.tenant + "=" + credential.target() + ")");
    }
  }
  return Done{};
}

namespace {

Result<Done> validate(const Config& config, const std::set<std::string>& given) {
  if (Result<Done> p = checkHttpFlags(config, given); std::holds_alternative<Error>(p)) {
    return p;
  }
  egress::EgressPolicy egress(nullptr);
  if (Result<Done> p = buildEgressPolicy(config, egress); std::holds_alternative<Error>(p)) {
    return p;
  }
  const policy::LimitSettings& l = config.limits;
  if (Result<Done> p = checkLimitPair(config, given, "memory-gb", &policy::Limits::memory_gb,
                                      l.min_memory_gb, " GB");
      std::holds_alternative<Error>(p)) {
    return p;
  }
  if (Result<Done> p =
          checkLimitPair(config, given, "timeout-seconds", &policy::Limits::timeout_seconds,
                         l.min_timeout_seconds, " seconds");
      std::holds_alternative<Error>(p)) {
    return p;
  }
  if (Result<Done> p =
          checkLimitPair(config, given, "cpus", &policy::Limits::cpus, l.min_cpus, " CPUs");
      std::holds_alternative<Error>(p)) {
    return p;
  }
  const std::string& index = config.packages.resolver.index_url;
  if (!index.empty() && index.rfind("http://", 0) != 0 && index.rfind("https://", 0) != 0) {
    return invalid("--package-index: '" + index + "' is not an http:// or https:// URL");
  }
  if (!index.empty() && config.allowed_packages.empty()) {
    return invalid(
        "--package-index needs --allow-packages: the projects the index may serve, or any");
  }
  if (!config.allowed_packages.empty() && !config.packages.enabled()) {
    return invalid("--allow-packages needs --wheelhouse or --package-index");
  }
  // Without --prepared-max, a --prepared above its default is the ceiling too.
  if (given.count("prepared-max") != 0 && config.runs.prepared_max < config.runs.prepared) {
    return invalid("--prepared-max " + std::to_string(config.runs.prepared_max) +
                   " is below --prepared " + std::to_string(config.runs.prepared));
  }
  return Done{};
}

std::string wrap(const std::string& text, std::size_t indent, std::size_t width) {
  std::istringstream words(text);
  std::string word;
  std::string out;
  std::string line;
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) {
    out += std::string(indent, ' ') + line + "\n";
  }
  return out;
}

}  // namespace

namespace {

// The running executable's directory, or empty when /proc cannot say.
fs::path executableDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// Whether this executable is the installed one (the package's), which finds its plugins and
// seccomp profile where the package puts them; any other (a build tree) finds them beside
// itself and in the checkout it was built from.
bool installed() { return executableDir() == fs::path(SCS_INSTALL_BINDIR); }

}  // namespace

fs::path defaultPluginDir() {
  if (installed()) {
    return SCS_INSTALL_PLUGIN_DIR;
  }
  const fs::path dir = executableDir();
  return dir.empty() ? fs::path("plugins") : dir / "plugins";
}

std::string defaultSeccompProfile() {
  return installed() ? SCS_INSTALL_SECCOMP_PROFILE : SCS_DEFAULT_SECCOMP_PROFILE;
}

Config defaults() {
  Config config;
  config.plugin_dir = defaultPluginDir();
  config.seccomp_profile_path = defaultSeccompProfile();
  config.runs.prepared = 1;
  config.runs.prepared_max = 4;
  config.runs.prepared_warm_modules = {"numpy", "pandas", "matplotlib.pyplot"};
  return config;
}

Result<Parsed> parse(const std::vector<std::string>& args) {
  Parsed result;
  result.config = defaults();

  // Split into (name, value) pairs first, so that --config is applied before every flag
  // wherever it appears.
  std::vector<std::pair<std::string, std::string>> given_flags;
  std::optional<std::string> config_file;
  const bool audit = !args.empty() && args.front() == "audit";
  for (std::size_t i = audit ? 1 : 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return invalid("unexpected argument '" + arg + "'; every setting is a --flag");
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const Flag* flag = findFlag(name);
    if (flag == nullptr) {
      return invalid("unknown flag --" + name);
    }
    if (*flag->metavar == '\0') {
      if (value) {
        return invalid("--" + name + " takes no value");
      }
      if (flag->apply) {
        given_flags.emplace_back(name, "");
      } else {
        result.action = name == "help" ? Action::kHelp : Action::kVersion;
      }
      continue;
    }
    if (!value) {
      if (i + 1 == args.size()) {
        return invalid("--" + name + " needs a value (" + flag->metavar + ")");
      }
      value = args[++i];
    }
    if (name == "config") {
      config_file = *value;
    } else {
      given_flags.emplace_back(name, *value);
    }
  }
  if (result.action != Action::kServe) {
    return result;
  }

  std::set<std::string> given;
  if (config_file) {
    const Result<Done> applied = applyFile(result.config, *config_file, &given);
    if (const Error* problem = std::get_if<Error>(&applied)) {
      return *problem;
    }
  }
  for (const auto& [name, value] : given_flags) {
    const Result<Done> applied = findFlag(name)->apply(result.config, value);
    if (const Error* problem = std::get_if<Error>(&applied)) {
      return *problem;
    }
    given.insert(name);
  }
  const Result<Done> valid = validate(result.config, given);
  if (const Error* problem = std::get_if<Error>(&valid)) {
    return *problem;
  }
  // pip runs in a directory of its own, where a relative path would name nothing.
  std::string& wheelhouse = result.config.packages.resolver.wheelhouse;
  if (!wheelhouse.empty()) {
    wheelhouse = std::filesystem::absolute(wheelhouse).lexically_normal().string();
  }
  const std::vector<std::string>& allowed = result.config.allowed_packages;
  if (std::find(allowed.begin(), allowed.end(), "any") == allowed.end()) {
    for (const std::string& name : allowed) {
      result.config.packages.allowed.insert(packages::normalizedName(name));
    }
  }
  // gVisor copies what a forked child shares with its parent far sooner than Linux does
  // (measured: about 28 MiB per child of a warm interpreter, against under 1 MiB under runc),
  // so a program that forks many children would reach its memory cap in a warm sandbox where a
  // fresh one holds. Under runsc the interpreter is warmed only when the operator says so.
  if (result.config.sandbox.runtime == "runsc" && given.count("warm-modules") == 0) {
    result.config.runs.prepared_warm_modules.clear();
  }
  if (audit) {
    result.action = Action::kAudit;
  }
  return result;
}

Result<Done> loadSeccompProfile(Config* config) {
  if (config->seccomp_profile_path == kEngineDefaultSeccomp) {
    config->sandbox.seccomp_profile.clear();
    return Done{};
  }
  const std::string& path = config->seccomp_profile_path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return invalid("cannot read the seccomp profile " + path +
                   " (--seccomp-profile FILE, or engine-default)");
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    Poco::JSON::Parser parser;
    if (parser.parse(text.str()).type() != typeid(Poco::JSON::Object::Ptr)) {
      return invalid("the seccomp profile " + path + " is not a JSON object");
    }
  } catch (const Poco::Exception& e) {
    return invalid("the seccomp profile " + path + " is not valid JSON: " + e.displayText());
  }
  config->sandbox.seccomp_profile = text.str();
  return Done{};
}

std::string helpText() {
  const Config shipped = defaults();
  std::ostringstream out;
  out << "Usage: safe-code-sandbox [--flag VALUE]...\n"
         "       safe-code-sandbox audit [--flag VALUE]...\n"
         "\n"
         "An MCP server (JSON-RPC 2.0 over stdio, or Streamable HTTP with --http) that runs\n"
         "untrusted Python, bash or JavaScript in a locked-down, throwaway sandbox. On stdio,\n"
         "stdout carries only the protocol; logs always go to stderr.\n"
         "Flags may also be written --flag=VALUE. Exit codes: 0 after a clean shutdown (stdin\n"
         "closed, SIGTERM or SIGINT), 1 when the server cannot start (backend, capacity), 2 for\n"
         "a bad flag, config file or value.\n"
         "\n"
         "audit: loads the backend as the server would, starts one sandbox with the production\n"
         "posture, checks every control from inside it, prints a table on stdout and exits 0\n"
         "when every check passes, 1 when one fails, 2 when the audit cannot run.\n"
         "\n";
  for (const Flag& flag : flags()) {
    std::string head = "  --" + std::string(flag.name);
    if (*flag.metavar != '\0') {
      head += " " + std::string(flag.metavar);
    }
    std::string text = flag.help;
    if (flag.shown_default) {
      text += " (default: " + flag.shown_default(shipped) + ")";
    }
    out << head << "\n" << wrap(text, 6, 92);
  }
  return out.str();
}

std::string versionText() { return std::string("safe-code-sandbox ") + SCS_VERSION; }

}  // namespace scs::config
