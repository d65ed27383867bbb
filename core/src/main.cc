// The safe-code-sandbox program: parses the flags, loads the named backend plugin, sweeps
// leftovers, then serves MCP on stdio or Streamable HTTP (or runs the audit) until stdin closes
// or SIGTERM/SIGINT stops every run.

#include <Poco/Logger.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "audit/audit.h"
#include "common/clock.h"
#include "config.h"
#include "logging.h"
#include "mcp/http/transport.h"
#include "mcp/server.h"
#include "mcp/stdio_transport.h"
#include "metrics/counting_backend.h"
#include "metrics/metrics.h"
#include "metrics/metrics_endpoint.h"
#include "plugin/loader.h"
#include "policy/limits.h"
#include "policy/posture.h"
#include "policy/status_map.h"
#include "runs/run_manager.h"
#include "sandbox/leftover_sweep.h"
#include "sessions/session_store.h"

namespace {

using namespace scs;

// How long a stopping server waits for the engine to remove its sandboxes: SPEC §5 has it
// exit within 2 s of EOF, SIGTERM or SIGINT. What is left then, the next start's sweep removes.
constexpr std::chrono::milliseconds kRemovalsWithin{1500};

// Ends the process once every run has stopped, without destroying the run manager: its
// destructor would wait for the removals the shutdown left to the next start's sweep.
[[noreturn]] void exitStopped(int code) {
  std::cout.flush();
  std::clog.flush();
  ::_exit(code);
}

sigset_t shutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Waits for SIGTERM or SIGINT on its own thread and hands it to `handler`, which does not
// return. Destroying the object ends the thread without calling the handler.
class SignalThread {
 public:
  explicit SignalThread(std::function<void(int)> handler)
      : thread_([this, handler = std::move(handler)] {
          const sigset_t set = shutdownSignals();
          int number = 0;
          if (sigwait(&set, &number) == 0 && !done_) {
            handler(number);
          }
        }) {}

  ~SignalThread() {
    done_ = true;
    pthread_kill(thread_.native_handle(), SIGTERM);
    thread_.join();
  }

  SignalThread(const SignalThread&) = delete;
  SignalThread& operator=(const SignalThread&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Hands the heap's free pages back to the kernel every few seconds (malloc_trim), so that the
// buffers of a burst of large answers do not stay resident once freed (see main()).
class HeapTrimmer {
 public:
  HeapTrimmer()
      : thread_([this] {
          std::unique_lock lock(mutex_);
          while (!wake_.wait_for(lock, std::chrono::seconds(5), [this] { return done_; })) {
            malloc_trim(0);
          }
        }) {}

  ~HeapTrimmer() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// The backend and the limit policy, loaded the same way for serving and for the audit.
struct Engine {
  logging::BackendLogSink backend_log;  // outlives the backend, which logs through it
  backend::RuntimeBackendPtr backend;
  std::filesystem::path plugin;
  std::optional<policy::LimitPolicy> limits;
  std::map<std::string, std::string> versions;  // what the engine says of itself
};

std::unique_ptr<Engine> loadEngine(config::Config& config, Poco::Logger& log) {
  auto engine = std::make_unique<Engine>();
  const backend::BackendContext context{config.backend_options, &engine->backend_log};
  std::filesystem::path file = config.backend_path;
  if (file.empty()) {
    file = plugin::backendPath(config.backend, config.plugin_dir);
  }
  Result<backend::RuntimeBackendPtr> loaded = plugin::loadBackend(file, context);
  if (const auto* failure = std::get_if<Error>(&loaded)) {
    log.error("cannot start: " + failure->message);
    return nullptr;
  }
  engine->backend = std::move(std::get<backend::RuntimeBackendPtr>(loaded));
  log.information("loaded backend plugin " + file.string());
  engine->plugin = file;

  const backend::CapacityReply capacity = engine->backend->capacity();
  if (!capacity.status.ok()) {
    log.error("cannot start: the backend cannot report the host's capacity: " +
              capacity.status.message);
    return nullptr;
  }
  std::vector<std::string> adjustments;
  engine->limits.emplace(
      config.limits, policy::HostCapacity{capacity.capacity.cores, capacity.capacity.memory_bytes},
      &adjustments);
  for (const std::string& adjustment : adjustments) {
    log.information(adjustment);
  }
  config.runs.host_memory_bytes = capacity.capacity.memory_bytes;
  engine->versions = capacity.versions;
  config.runs.prepared_limits = engine->limits->defaults();

  const backend::Status supported = engine->backend->supports(policy::requiredPosture(
      engine->limits->defaults(), config.sandbox, config.sandbox.uids.first));
  if (!supported.ok()) {
    log.error("cannot start: the backend cannot give sandboxes every control they need: " +
              supported.message);
    return nullptr;
  }
  const backend::Status snapshots = engine->backend->snapshots(policy::requiredPosture(
      engine->limits->defaults(), config.sandbox, config.sandbox.uids.first));
  const bool wanted = config.runs.sessions.hibernated_max.count() > 0;
  config.runs.sessions.hibernate = wanted && snapshots.ok();
  log.information(
      config.runs.sessions.hibernate
          ? "idle sessions hibernate: the backend snapshots their sandboxes"
          : "idle sessions end: " +
                (wanted ? snapshots.message : std::string("--session-hibernate-seconds 0")));
  return engine;
}

// The only writer of the audit table: stdout for the audit command, the log for --self-test.
void printAudit(const audit::Report& report, std::ostream* out, Poco::Logger& log) {
  const std::string table = audit::formatTable(report);
  if (out != nullptr) {
    *out << table << std::flush;
    return;
  }
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    log.information("self-test: " + line);
  }
}

constexpr std::chrono::seconds kPreparedPatience{60};

// Egress (issue 44): the operator's policy, the brokered credentials and their CA (issue 48)
// and, when any tenant has a policy, the service whose channels the run manager gives those
// tenants' sandboxes (config.runs.egress). Its destructor waits for the streams' threads, so it
// must outlive the manager.
struct Egress {
  egress::EgressPolicy policy;
  egress::CredentialStore credentials;
  std::unique_ptr<egress::CertificateAuthority> authority;
  std::optional<egress::EgressService> service;
};

// Starts `egress` from the configuration; false when it cannot start (the log says why).
bool startEgress(config::Config& config, Egress& egress, egress::EgressEvents* events,
                 Poco::Logger& log) {
  const Result<Done> built = config::buildEgressPolicy(config, egress.policy);
  if (const auto* problem = std::get_if<Error>(&built)) {
    log.error("cannot start: " + problem->message);
    return false;
  }
  if (!egress.policy.enabled()) {
    if (!config.egress.credentials.empty() || !config.egress.upstream_ca.empty()) {
      log.error(
          "cannot start: --egress-credential and --egress-upstream-ca need --egress-allow "
          "for the hosts they name");
      return false;
    }
    return true;
  }
  const Result<Done> read = egress.policy.readOwnAddresses();
  if (const auto* problem = std::get_if<Error>(&read)) {
    log.error("cannot start: " + problem->message);
    return false;
  }
  if (config.backend == "kubernetes") {
    log.error(
        "cannot start: --egress-allow needs a backend whose sandboxes' programs may use "
        "the sandbox's loopback; the kubernetes backend's filter refuses them every IP "
        "socket (docs/SCALING.md), so it carries no egress yet");
    return false;
  }
  const Result<Done> credentials =
      config::buildCredentials(config, egress.policy, egress.credentials);
  if (const auto* problem = std::get_if<Error>(&credentials)) {
    log.error("cannot start: " + problem->message);
    return false;
  }
  if (!egress.credentials.empty()) {
    auto made =
        egress::CertificateAuthority::make(egress.credentials.hosts(), config.egress.upstream_ca);
    if (const auto* problem = std::get_if<Error>(&made)) {
      log.error("cannot start: " + problem->message);
      return false;
    }
    egress.authority = std::move(std::get<0>(made));
    for (const egress::Credential& credential : egress.credentials.all()) {
      log.information("egress: a credential for tenant " + credential.tenant + " and " +
                      credential.target() + " (" +
                      (credential.variable.empty()
                           ? "header " + credential.header
                           : "placeholder $" + credential.variable + " in " + credential.header) +
                      ", from " + credential.source + ")");
    }
  }
  egress.service.emplace(egress.policy, config.egress.limits, events,
                         egress::Brokering{&egress.credentials, egress.authority.get()});
  config.runs.egress = &*egress.service;
  log.information("egress: " + std::to_string(config.egress.allow.size()) +
                  " allow entries; programs reach their hosts through the server's relay");
  return true;
}

// Audits the sandbox a run with the default limits gets: with --prepared (the default) the one
// prepared ahead of the run, once it is ready; with --prepared 0 one created for the run.
audit::Report auditAsRunsGetIt(runs::RunManager& manager, const Engine& engine,
                               const config::Config& config, Poco::Logger& log) {
  if (config.runs.prepared > 0 && !manager.awaitPrepared(1, kPreparedPatience)) {
    log.warning("no prepared sandbox was ready within " +
                std::to_string(kPreparedPatience.count()) + " s; auditing one created for the run");
  }
  audit::Report report = audit::run(manager, audit::auditLimits(engine.limits->defaults()),
                                    config.sandbox, config.files, config.runs.egress != nullptr);
  report.versions = engine.versions;
  return report;
}

int runAudit(config::Config& config, Poco::Logger& log) {
  std::unique_ptr<Engine> engine = loadEngine(config, log);
  if (!engine) {
    return audit::kExitSetupFailed;
  }
  common::SystemClock clock;
  Egress egress;
  if (!startEgress(config, egress, nullptr, log)) {
    return audit::kExitSetupFailed;
  }
  runs::RunManager manager(*engine->backend, config.runs, config.sandbox, clock);
  // Ctrl-C or SIGTERM during the audit still removes its sandbox.
  SignalThread signals([&](int number) {
    log.information("received " + policy::signalName(number) + "; stopping the audit");
    manager.shutdown();
    std::clog.flush();
    ::_exit(audit::kExitSetupFailed);
  });
  log.information("auditing a sandbox with runtime " + config.sandbox.runtime);
  const audit::Report report = auditAsRunsGetIt(manager, *engine, config, log);
  manager.shutdown();
  printAudit(report, &std::cout, log);
  return audit::exitCode(report);
}

// Serves MCP over Streamable HTTP until SIGTERM or SIGINT; stdin and stdout are not used.
// `stop_everything` stops every run (RunManager::shutdown) and what else the answers in flight
// may wait for.
int serveHttp(mcp::Server& server, const std::function<void()>& stop_everything,
              mcp::HttpEndpoint endpoint, Poco::Logger& log) {
  mcp::HttpTransport transport(server, std::move(endpoint));
  const Result<Done> started = transport.start();
  if (const auto* problem = std::get_if<Error>(&started)) {
    log.error("cannot start: " + problem->message);
    return 1;
  }
  log.information(config::versionText() + " serving MCP over Streamable HTTP at " +
                  transport.url());
  const sigset_t signals = shutdownSignals();
  int number = 0;
  while (sigwait(&signals, &number) != 0) {
  }
  log.information("received " + policy::signalName(number) + "; stopping every run");
  transport.stop();
  stop_everything();
  transport.finish();
  log.information("every run stopped; exiting");
  exitStopped(0);
}

// --state-dir: the store, and the sessions an earlier server kept for this one (their uids are
// spared by the startup sweep and reserved before the run manager makes a sandbox).
struct KeptSessions {
  std::optional<sessions::SessionStore> store;
  std::vector<sessions::SavedSession> sessions;
  std::set<std::uint32_t> uids;
};

bool openStateDir(config::Config& config, const std::vector<std::string>& tenants,
                  KeptSessions& kept, Poco::Logger& log) {
  if (!config.runs.sessions.hibernate) {
    log.error(
        "cannot start: --state-dir keeps sessions across restarts by hibernating them, "
        "and idle sessions here end instead (see the line above)");
    return false;
  }
  Result<sessions::SessionStore> opened = sessions::SessionStore::open(config.state_dir);
  if (const auto* problem = std::get_if<Error>(&opened)) {
    log.error("cannot start: " + problem->message);
    return false;
  }
  kept.store.emplace(std::move(std::get<sessions::SessionStore>(opened)));
  config.runs.sessions.store = &*kept.store;
  std::vector<std::string> problems;
  for (sessions::SavedSession& saved : kept.store->load(&problems)) {
    if (std::find(tenants.begin(), tenants.end(), saved.tenant) == tenants.end()) {
      problems.push_back("session " + saved.id + " belongs to tenant " + saved.tenant +
                         ", whom this server does not know; dropped");
      kept.store->remove(saved.id);
      continue;
    }
    kept.uids.insert(saved.uid);
    kept.sessions.push_back(std::move(saved));
  }
  for (const std::string& problem : problems) {
    log.warning("--state-dir: " + problem);
  }
  return true;
}

int serve(config::Config& config, std::optional<mcp::HttpEndpoint> http, Poco::Logger& log) {
  HeapTrimmer trimmer;
  std::unique_ptr<Engine> engine = loadEngine(config, log);
  if (!engine) {
    return 1;
  }
  metrics::Metrics metrics(SCS_VERSION, config.backend);
  // Every backend call the server makes from here on is counted when it fails.
  metrics::CountingBackend backend(*engine->backend, metrics);
  common::SystemClock clock;
  const std::vector<std::string> tenants =
      http && http->tokens ? http->tokens->tenants() : std::vector<std::string>{runs::kLocalTenant};
  KeptSessions kept;
  if (!config.state_dir.empty() && !openStateDir(config, tenants, kept, log)) {
    return 1;
  }
  // Before the run manager makes a sandbox: the uids of the leftovers that stay are taken.
  const sandbox::SweepResult swept =
      sandbox::sweepLeftovers(backend, "", clock.wallNow(), kept.uids);
  if (swept.removed > 0) {
    log.information("removed " + std::to_string(swept.removed) +
                    " sandboxes left by earlier instances");
  }
  metrics.swept(swept.removed);
  metrics.knowTenants(tenants);
  // The kept sessions' uids too, whether or not the engine listed their sandboxes.
  config.runs.reserved_uids = swept.kept_uids;
  config.runs.reserved_uids.insert(config.runs.reserved_uids.end(), kept.uids.begin(),
                                   kept.uids.end());
  // Declared before the manager, so that it outlives every channel's use of the backend.
  Egress egress;
  if (!startEgress(config, egress, &metrics, log)) {
    return 1;
  }
  runs::RunManager manager(backend, config.runs, config.sandbox, clock, &metrics);
  if (kept.store) {
    const std::size_t count = kept.sessions.size();
    const runs::TakenBack taken = manager.takeBack(std::move(kept.sessions));
    log.information("--state-dir " + config.state_dir + ": took back " +
                    std::to_string(taken.sessions) + " of " + std::to_string(count) +
                    " kept sessions");
    // The sandboxes of those it dropped are leftovers now.
    const sandbox::SweepResult dropped =
        sandbox::sweepLeftovers(backend, manager.instanceId(), clock.wallNow(), taken.uids);
    if (dropped.removed > 0) {
      log.information("removed " + std::to_string(dropped.removed) +
                      " sandboxes of kept sessions not taken back");
    }
  }
  // Declared after the manager, so it stops before the manager goes.
  std::optional<metrics::MetricsEndpoint> metrics_endpoint;
  if (!config.metrics_listen.empty()) {
    metrics_endpoint.emplace(std::get<Poco::Net::SocketAddress>(
                                 mcp::parseListenAddress(config.metrics_listen, "--metrics")),
                             [&metrics, &manager] { return metrics.render(manager.load()); });
    const Result<Done> started = metrics_endpoint->start();
    if (const auto* problem = std::get_if<Error>(&started)) {
      log.error("cannot start: " + problem->message);
      return 1;
    }
    log.information("serving metrics at http://" + metrics_endpoint->address().toString() +
                    "/metrics");
  }
  if (config.self_test) {
    log.information("self-test: auditing a sandbox with runtime " + config.sandbox.runtime);
    const audit::Report report = auditAsRunsGetIt(manager, *engine, config, log);
    printAudit(report, nullptr, log);
    if (!audit::passed(report)) {
      log.error("cannot start: the self-test audit failed; refusing to serve");
      return 1;
    }
  }
  mcp::ServerInfo info;
  info.version = SCS_VERSION;
  info.run_retention = config.runs.retention;
  info.tools.start_wait = config.start_wait;
  info.tools.max_waiting_per_tenant = config.max_waiting_per_tenant;
  info.tools.sessions = config.runs.sessions;
  info.tools.egress = egress.service ? &egress.policy : nullptr;
  info.tools.credentials = egress.service ? &egress.credentials : nullptr;
  std::optional<packages::PackageLayers> package_layers;
  if (config.packages.enabled()) {
    package_layers.emplace(backend, config.packages, config.sandbox.image);
    const Result<Done> started = package_layers->start();
    if (const auto* problem = std::get_if<Error>(&started)) {
      log.error("cannot start: " + problem->message);
      return 1;
    }
    info.tools.packages = &*package_layers;
  }
  // A call that waits for a package layer is answered at once too. A shutdown that fails
  // ends the process here: unwinding would wait, in the manager's destructor, for every
  // removal the shutdown left to the sweep.
  const auto stop_everything = [&] {
    try {
      if (package_layers) {
        package_layers->shutdown();
      }
      manager.shutdown(kRemovalsWithin);
    } catch (const std::exception& e) {
      log.error(std::string("shutdown failed: ") + e.what());
      exitStopped(1);
    }
  };
  mcp::Server server(manager, *engine->limits, config.files, info);
  if (http) {
    // GET /readyz: the engine answers, and the pool works when one is configured: it has made
    // a sandbox and its last attempt did not fail (which shows that the image is there and
    // sandboxes pass the posture check). The engine is asked at most once a second, however
    // often strangers probe.
    struct EngineProbe {
      std::mutex mutex;
      std::chrono::steady_clock::time_point asked{};
      bool answered = false;
    };
    auto probe = std::make_shared<EngineProbe>();
    http->readiness = [&backend, &manager, prepared = config.runs.prepared, probe] {
      bool engine_answers = false;
      {
        std::lock_guard lock(probe->mutex);
        const auto now = std::chrono::steady_clock::now();
        if (now - probe->asked >= std::chrono::seconds(1)) {
          probe->answered = backend.capacity().status.ok();
          probe->asked = now;
        }
        engine_answers = probe->answered;
      }
      std::vector<mcp::ReadinessCheck> checks;
      checks.push_back({"engine", engine_answers ? "" : "unreachable"});
      if (prepared > 0) {
        // Not "one is idle now": runs taking them must not make the host look unready.
        checks.push_back({"prepared_sandbox", manager.preparedHealthy() ? "" : "not working"});
      }
      return checks;
    };
    return serveHttp(server, stop_everything, std::move(*http), log);
  }
  mcp::StdioTransport transport(server, config.max_message_bytes);

  // SIGTERM and SIGINT stop every run, let the answers in flight be written whole, and end
  // the process: the main thread may be blocked reading stdin and cannot be woken.
  SignalThread signals([&](int number) {
    try {
      log.information("received " + policy::signalName(number) + "; stopping every run");
      stop_everything();
      transport.finish();
      log.information("every run stopped; exiting");
    } catch (const std::exception& e) {
      log.error(std::string("shutdown failed: ") + e.what());
      exitStopped(1);
    }
    exitStopped(0);
  });

  log.information(config::versionText() + " serving MCP on stdio with backend " +
                  (config.backend_path.empty() ? config.backend : engine->plugin.string()));
  transport.serve(std::cin, std::cout);
  log.information("stdin closed; stopping every run");
  stop_everything();
  transport.finish();
  log.information("every run stopped; exiting");
  exitStopped(0);
}

}  // namespace

int main(int argc, char** argv) {
  // The server's heap is mostly large buffers that live for one run or one answer (captured
  // output, a report's JSON). With glibc's default of 8 arenas per core, each worker thread's
  // arena keeps its own high-water mark of them: the two-tenant soak of bench/tenants.mjs
  // settled at 105 MiB with 32 MiB of reports retained, at 79 MiB with two arenas, and at 58
  // to 74 MiB when HeapTrimmer also hands freed pages back.
  mallopt(M_ARENA_MAX, 2);
  // Before any thread starts, so that every thread inherits the mask: shutdown signals are
  // taken only by sigwait(), and a closed stdout gives EPIPE instead of killing the server.
  sigset_t blocked = shutdownSignals();
  sigaddset(&blocked, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);

  std::ios::sync_with_stdio(false);
  // Reading stdin must not flush stdout: only the transport writes there, under its lock.
  std::cin.tie(nullptr);

  Result<config::Parsed> read = config::parse(std::vector<std::string>(argv + 1, argv + argc));
  if (const Error* problem = std::get_if<Error>(&read)) {
    std::cerr << "safe-code-sandbox: " << problem->message
              << "\nRun safe-code-sandbox --help to see every flag." << std::endl;
    return 2;
  }
  config::Parsed& parsed = std::get<config::Parsed>(read);
  if (parsed.action == config::Action::kHelp) {
    std::cout << config::helpText() << std::flush;
    return 0;
  }
  if (parsed.action == config::Action::kVersion) {
    std::cout << config::versionText() << std::endl;
    return 0;
  }
  config::Config& config = parsed.config;
  const Result<Done> loaded = config::loadSeccompProfile(&config);
  if (const auto* problem = std::get_if<Error>(&loaded)) {
    std::cerr << "safe-code-sandbox: " << problem->message << std::endl;
    return 2;
  }
  std::optional<mcp::HttpEndpoint> http;
  if (!config.http.listen.empty() && parsed.action == config::Action::kServe) {
    auto resolved = mcp::resolveHttpSettings(config.http);
    if (auto* problem = std::get_if<Error>(&resolved)) {
      std::cerr << "safe-code-sandbox: " << problem->message << std::endl;
      return 2;
    }
    http = std::move(std::get<mcp::HttpEndpoint>(resolved));
  }
  logging::setUp(*logging::parseLevel(config.log_level),
                 config.log_format == "json" ? logging::Format::kJson : logging::Format::kText);
  Poco::Logger& log = Poco::Logger::get("scs.main");
  try {
    if (parsed.action == config::Action::kAudit) {
      return runAudit(config, log);
    }
    return serve(config, std::move(http), log);
  } catch (const std::exception& e) {
    log.fatal(std::string("cannot serve: ") + e.what());
    return parsed.action == config::Action::kAudit ? audit::kExitSetupFailed : 1;
  }
}
