#pragma once

// The five tools (start_run, get_result, stop_run, open_session, close_session): who calls one
// (CallContext), the operator's options, and Tools, which validates arguments and runs a call.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "egress/credentials.h"
#include "egress/host_policy.h"
#include "mcp/report_json.h"
#include "net/tenant_slots.h"
#include "packages/package_layers.h"
#include "policy/files.h"
#include "policy/limits.h"
#include "runs/run_manager.h"

namespace scs::mcp {

inline constexpr const char* kStartRun = "start_run";
inline constexpr const char* kGetResult = "get_result";
inline constexpr const char* kStopRun = "stop_run";
inline constexpr const char* kOpenSession = "open_session";
inline constexpr const char* kCloseSession = "close_session";

inline constexpr double kMaxWaitSeconds = 60;

// Who calls a tool, and how a waiting call reports that it is still alive.
struct CallContext {
  // Whose runs the call may start, see and stop.
  std::string tenant = runs::kLocalTenant;
  // When set, a get_result that waits calls it every progress_interval while the run is not
  // final, with the seconds waited so far, the seconds it waits at most, and one sentence on
  // the run's state. Called on the caller's thread.
  std::function<void(double waited_seconds, double wait_seconds, const std::string& message)>
      on_wait;
  std::chrono::milliseconds progress_interval{5000};
  // When set, a call that waits asks it every kAbandonCheck whether its client has gone (the
  // 2026-07-28 HTTP transport: closing a request's stream cancels the request); then it stops
  // waiting, and a start_run stops its run, whose run_id the client never got.
  std::function<bool()> abandoned;
};

inline constexpr std::chrono::milliseconds kAbandonCheck{1000};

// Operator settings the tools quote or apply beyond the limits and files.
struct ToolOptions {
  // How long start_run waits for the run to end when the call does not say (wait_seconds).
  std::chrono::milliseconds start_wait{0};
  sessions::SessionSettings sessions;  // quoted in the session tools' descriptions
  // Calls of one tenant that wait (wait_seconds above 0) at once; one more is a tool error, so
  // that one client's long-polls cannot hold what every client needs.
  std::size_t max_waiting_per_tenant = 16;
  // The count of those calls, shared by every Tools of one server (Server makes it).
  std::shared_ptr<net::TenantSlots> waiting;
  // Where `packages` come from; null: the server offers none, and the tools do not show them.
  packages::PackageLayers* packages = nullptr;
  // The operator's egress policy; null: no tenant's sandbox reaches any host.
  const egress::EgressPolicy* egress = nullptr;
  // The brokered credentials (issue 48); null or empty: none.
  const egress::CredentialStore* credentials = nullptr;
};

// What `tenant`'s programs may reach, in one sentence for the model ("Network: ... only"), and
// the credentials the server adds for it, or empty when it reaches nothing.
std::string egressSentence(const egress::EgressPolicy* policy, const std::string& tenant,
                           const egress::CredentialStore* credentials = nullptr);

// The five tools: their definitions for tools/list and their execution for tools/call.
// Holds references only; cheap to build per call. Thread-safe as far as RunManager is.
class Tools {
 public:
  Tools(runs::RunManager& runs, const policy::LimitPolicy& limits,
        const policy::FileSettings& files, std::chrono::seconds retention,
        ToolOptions options = {});

  // The `tools` array of a tools/list result: name, title, description, inputSchema,
  // outputSchema and annotations of each tool. The limits quoted are the effective ones.
  // `tenant`: whose programs' network start_run and open_session describe.
  Poco::JSON::Array::Ptr definitions(const std::string& tenant = runs::kLocalTenant) const;

  bool has(const std::string& name) const;

  // Runs tool `name` (which must satisfy has()) with `arguments` (null: none) and returns
  // the CallToolResult. Bad arguments, refusals and unknown run ids are results with
  // isError true and one text block a model can act on; success carries structuredContent
  // and the same JSON as text. Throws only on an unexpected failure (a bug).
  Poco::JSON::Object::Ptr call(const std::string& name, const Poco::JSON::Object::Ptr& arguments,
                               const CallContext& context = {}) const;

  // Run `run_id` now, as the tenant of `context` may see it, and the CallToolResult get_result
  // would answer with (for the tasks extension, whose tasks are runs); nullopt when the run is
  // unknown to the tenant or expired.
  struct RunView {
    runs::RunSnapshot snapshot;
    Poco::JSON::Object::Ptr result;
  };
  std::optional<RunView> view(const std::string& run_id, const CallContext& context) const;

 private:
  Poco::JSON::Object::Ptr startRun(const Poco::JSON::Object& arguments,
                                   const CallContext& context) const;
  Poco::JSON::Object::Ptr getResult(const Poco::JSON::Object& arguments,
                                    const CallContext& context) const;
  Poco::JSON::Object::Ptr stopRun(const Poco::JSON::Object& arguments,
                                  const CallContext& context) const;
  Poco::JSON::Object::Ptr openSession(const Poco::JSON::Object& arguments,
                                      const CallContext& context) const;
  Poco::JSON::Object::Ptr closeSession(const Poco::JSON::Object& arguments,
                                       const CallContext& context) const;
  // A slot of the tenant's calls that wait, when `wait` is above 0 (nullopt inside: none
  // needed); a tool error when the tenant holds every one.
  std::variant<std::optional<net::TenantSlots::Slot>, Poco::JSON::Object::Ptr> waitSlot(
      std::chrono::milliseconds wait, const CallContext& context) const;
  // Waits up to `wait` for run `id` to end, reporting progress through the context; the
  // report then (or now, when it is still going). An error result for an unknown id.
  Poco::JSON::Object::Ptr waitForReport(const std::string& id, std::chrono::milliseconds wait,
                                        const runs::OutputOffsets& from,
                                        const ReportOptions& report,
                                        const CallContext& context) const;
  // The layer for the call's `packages` (nullopt inside when it names none), or the tool error.
  std::variant<std::optional<packages::LayerGrant>, Poco::JSON::Object::Ptr> packagesOf(
      const Poco::JSON::Object& arguments) const;
  // How reports are written: compact unless `verbose`, limits left out when the defaults.
  ReportOptions reportOptions(bool with_offsets = false, bool verbose = false) const;

  runs::RunManager& runs_;
  const policy::LimitPolicy& limits_;
  const policy::FileSettings& files_;
  std::chrono::seconds retention_;
  ToolOptions options_;
};

}  // namespace scs::mcp
