// Tools: each tool's arguments checked (names, ids, waits, limits, files), its call made on the
// run manager, and its CallToolResult built; a refusal is a tool error a model can act on.

#include "mcp/tools.h"

#include <Poco/Dynamic/Var.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string_view>
#include <variant>
#include <vector>

#include "common/utf8.h"
#include "mcp/report_json.h"
#include "mcp/tool_definitions.h"
#include "policy/language.h"
#include "policy/status_map.h"

namespace scs::mcp {
namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

// Client text quoted back in a message is cut to this many bytes.
constexpr std::size_t kMaxQuotedBytes = 200;

std::string compact(const Object::Ptr& object) {
  std::ostringstream out;
  object->stringify(out);
  return out.str();
}

std::string quoted(std::string_view text) {
  std::string cut = common::toValidUtf8(text.substr(0, kMaxQuotedBytes));
  if (text.size() > kMaxQuotedBytes) {
    cut += "...";
  }
  return "\"" + cut + "\"";
}

Object::Ptr toolError(const std::string& message) {
  Object::Ptr text = newObject();
  text->set("type", "text");
  text->set("text", common::toValidUtf8(message));
  Array::Ptr content = new Array;
  content->add(text);
  Object::Ptr result = newObject();
  result->set("content", content);
  result->set("isError", true);
  return result;
}

// The result of a call that succeeded: the compact JSON of `structured` as its text block (for
// clients without structured content) and `blocks` (a report's files) after it.
Object::Ptr toolSuccess(const Object::Ptr& structured, const Array::Ptr& blocks = nullptr) {
  Object::Ptr text = newObject();
  text->set("type", "text");
  text->set("text", compact(structured));
  Array::Ptr content = new Array;
  content->add(text);
  if (blocks) {
    for (const Var& block : *blocks) {
      content->add(block);
    }
  }
  Object::Ptr result = newObject();
  result->set("content", content);
  result->set("structuredContent", structured);
  result->set("isError", false);
  return result;
}

std::string unknownRunMessage(const std::string& run_id) {
  return "Unknown or expired run_id " + quoted(run_id) +
         ". Reports are kept for a limited time after a run ends; start a new run.";
}

// Empty when every key of `arguments` is allowed; otherwise a message naming the others.
std::string checkArgumentNames(const Object& arguments, std::string_view tool,
                               std::initializer_list<std::string_view> allowed) {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : arguments) {
    bool known = false;
    for (std::string_view name : allowed) {
      known = known || key == name;
    }
    if (!known) {
      unknown.push_back(quoted(key));
    }
  }
  if (unknown.empty()) {
    return {};
  }
  std::string message = unknown.size() == 1 ? "Unknown argument " : "Unknown arguments ";
  for (std::size_t i = 0; i < unknown.size(); ++i) {
    message += (i == 0 ? "" : ", ") + unknown[i];
  }
  message += " for " + std::string(tool) + ". Allowed arguments: ";
  bool first = true;
  for (std::string_view name : allowed) {
    message += (first ? "" : ", ") + std::string(name);
    first = false;
  }
  return message + ".";
}

Var argument(const Object& arguments, const std::string& key) {
  return arguments.has(key) ? arguments.get(key) : Var();
}

// Empty when `run_id` is usable; otherwise a message saying what is wrong with it.
std::string checkRunId(const Var& run_id) {
  if (run_id.isEmpty()) {
    return "Missing required argument \"run_id\": pass the run_id that start_run returned.";
  }
  if (!run_id.isString()) {
    return "\"run_id\" must be a string: pass the run_id that start_run returned.";
  }
  return {};
}

// Reads `wait_seconds` (0 to kMaxWaitSeconds) into `*wait`, leaving it when absent; a message
// when it is not such a number.
std::string parseWait(const Object& arguments, const std::string& tool,
                      std::chrono::milliseconds* wait) {
  const Var wait_seconds = argument(arguments, "wait_seconds");
  if (wait_seconds.isEmpty()) {
    return {};
  }
  const double seconds = wait_seconds.isNumeric() && !wait_seconds.isBoolean()
                             ? wait_seconds.convert<double>()
                             : std::nan("");
  if (!(seconds >= 0 && seconds <= kMaxWaitSeconds)) {
    return "\"wait_seconds\" must be a number from 0 to " + policy::formatNumber(kMaxWaitSeconds) +
           (tool == kGetResult ? ". Call get_result again if the run is still going."
                               : ". Call get_result to wait longer.");
  }
  *wait = std::chrono::milliseconds(std::llround(seconds * 1000));
  return {};
}

// Empty when `session_id` is usable; otherwise a message saying what is wrong with it.
std::string checkSessionId(const Var& session_id) {
  if (session_id.isEmpty()) {
    return "Missing required argument \"session_id\": pass the session_id that open_session "
           "returned.";
  }
  if (!session_id.isString() || session_id.toString().empty()) {
    return "\"session_id\" must be the string open_session returned.";
  }
  return {};
}

// Empty when `language` is absent (nullopt) or names a language (`*language`); otherwise a
// message saying what is wrong with it.
std::string parseLanguage(const Object& arguments, std::optional<policy::Language>* language) {
  const Var named = argument(arguments, "language");
  if (named.isEmpty()) {
    return {};
  }
  *language = named.isString() ? policy::languageNamed(named.toString()) : std::nullopt;
  if (!*language) {
    return "\"language\" must be the string " + policy::languageNames() +
           (named.isString() ? ", got " + quoted(named.toString()) : std::string()) + ".";
  }
  return {};
}

std::string unknownSessionMessage(const std::string& session_id) {
  return "Unknown session_id " + quoted(session_id) +
         ": open a session with open_session first. Ended sessions are forgotten after a while.";
}

}  // namespace

Tools::Tools(runs::RunManager& runs, const policy::LimitPolicy& limits,
             const policy::FileSettings& files, std::chrono::seconds retention, ToolOptions options)
    : runs_(runs), limits_(limits), files_(files), retention_(retention), options_(options) {}

std::string egressSentence(const egress::EgressPolicy* policy, const std::string& tenant,
                           const egress::CredentialStore* credentials) {
  if (policy == nullptr || !policy->enabledFor(tenant)) {
    return {};
  }
  std::string hosts;
  for (const std::string& entry : policy->allowedFor(tenant)) {
    hosts += (hosts.empty() ? "" : ", ") + entry;
  }
  std::string except;
  for (const std::string& entry : policy->deniedFor(tenant)) {
    except += (except.empty() ? "" : ", ") + entry;
  }
  std::string brokered;
  static const std::vector<egress::Credential> kNone;
  for (const egress::Credential& credential : credentials != nullptr ? credentials->all() : kNone) {
    if (credential.tenant == tenant) {
      brokered += (brokered.empty() ? "" : "; ") + credential.target() +
                  (credential.variable.empty()
                       ? " (" + credential.header + " set)"
                       : " ($" + credential.variable + " holds a placeholder: use it in the " +
                             credential.header + " header as the real value)");
    }
  }
  return "Network: only " + hosts + (except.empty() ? std::string() : " (except " + except + ")") +
         ", through the proxy HTTP_PROXY, HTTPS_PROXY and ALL_PROXY name; other hosts are refused "
         "with the reason (the report's network part)." +
         (brokered.empty() ? std::string()
                           : " The server adds credentials to HTTPS requests to " + brokered +
                                 "; the sandbox never holds them.");
}

Poco::JSON::Array::Ptr Tools::definitions(const std::string& tenant) const {
  ToolSettings settings{limits_.defaults(), limits_.maxima(), files_, retention_, kMaxWaitSeconds};
  settings.packages = options_.packages != nullptr;
  if (options_.packages != nullptr) {
    settings.max_packages = options_.packages->settings().max_requirements;
  }
  settings.default_start_wait_seconds = static_cast<double>(options_.start_wait.count()) / 1000;
  settings.session_idle = options_.sessions.idle;
  settings.session_lifetime = options_.sessions.max_lifetime;
  settings.session_hibernate = options_.sessions.hibernate;
  settings.session_hibernated_max = options_.sessions.hibernated_max;
  // --state-dir keeps sessions across restarts, but never one with network access.
  settings.sessions_kept = options_.sessions.hibernate && options_.sessions.store != nullptr &&
                           !(options_.egress != nullptr && options_.egress->enabledFor(tenant));
  settings.max_sessions_per_tenant = options_.sessions.max_open_per_tenant;
  Poco::JSON::Array::Ptr tools = toolDefinitions(settings);
  const std::string network = egressSentence(options_.egress, tenant, options_.credentials);
  if (!network.empty()) {
    for (std::size_t i = 0; i < tools->size(); ++i) {
      Poco::JSON::Object::Ptr tool = tools->getObject(static_cast<unsigned>(i));
      const std::string name = tool->getValue<std::string>("name");
      if (name == kStartRun) {  // a session's runs are start_run's too: said once
        tool->set("description", tool->getValue<std::string>("description") + " " + network);
      }
    }
  }
  return tools;
}

bool Tools::has(const std::string& name) const {
  return name == kStartRun || name == kGetResult || name == kStopRun || name == kOpenSession ||
         name == kCloseSession;
}

Poco::JSON::Object::Ptr Tools::call(const std::string& name,
                                    const Poco::JSON::Object::Ptr& arguments,
                                    const CallContext& context) const {
  const Object empty;
  const Object& args = arguments ? *arguments : empty;
  if (name == kStartRun) {
    return startRun(args, context);
  }
  if (name == kGetResult) {
    return getResult(args, context);
  }
  if (name == kOpenSession) {
    return openSession(args, context);
  }
  if (name == kCloseSession) {
    return closeSession(args, context);
  }
  return stopRun(args, context);
}

Poco::JSON::Object::Ptr Tools::startRun(const Object& arguments, const CallContext& context) const {
  // Refusals before the run manager sees the run are counted here, by their kind; its own,
  // there.
  const auto refuse = [&](const Error& refusal) {
    runs_.events().refused(context.tenant, admission::refusalOf(refusal));
    return toolError(refusal.message);
  };
  if (std::string message = checkArgumentNames(arguments, kStartRun,
                                               {"code", "language", "files", "limits", "stdin",
                                                "session_id", "wait_seconds", "packages"});
      !message.empty()) {
    return refuse(invalid(message));
  }
  const Var code = argument(arguments, "code");
  if (code.isEmpty()) {
    return refuse(
        invalid("Missing required argument \"code\": pass the program to run (Python unless "
                "\"language\" names bash or javascript)."));
  }
  if (!code.isString()) {
    return refuse(invalid("\"code\" must be a string holding the program's source."));
  }
  std::optional<policy::Language> named;
  if (std::string message = parseLanguage(arguments, &named); !message.empty()) {
    return refuse(invalid(message));
  }
  policy::Language language = named.value_or(policy::Language::kPython);

  std::shared_ptr<sessions::Session> session;
  if (const Var session_id = argument(arguments, "session_id"); !session_id.isEmpty()) {
    if (std::string message = checkSessionId(session_id); !message.empty()) {
      return refuse(invalid(message));
    }
    // Every rule of a run in a session, in one call before anything is made for the run (the
    // run manager counts its refusal); the session's language names the code file.
    sessions::RunAsk ask;
    ask.language = named;
    const Var asked = argument(arguments, "limits");
    if (asked.type() == typeid(Object::Ptr) && asked.extract<Object::Ptr>()) {
      for (const auto& [key, value] : *asked.extract<Object::Ptr>()) {
        ask.sets_memory_or_cpus = ask.sets_memory_or_cpus || key == "memory_gb" || key == "cpus";
      }
    }
    ask.has_stdin = argument(arguments, "stdin").isString();  // else refused as not a string
    ask.has_packages = !argument(arguments, "packages").isEmpty();
    auto ticket = runs_.sessionForRun(context.tenant, session_id.toString(), ask);
    if (const Error* refusal = std::get_if<Error>(&ticket)) {
      return toolError(refusal->message);
    }
    session = std::move(std::get<runs::SessionTicket>(ticket).session);
    language = std::get<runs::SessionTicket>(ticket).language;
  }
  std::chrono::milliseconds wait = options_.start_wait;
  if (std::string message = parseWait(arguments, kStartRun, &wait); !message.empty()) {
    return refuse(invalid(message));
  }
  auto slot = waitSlot(wait, context);
  if (auto* refused = std::get_if<Poco::JSON::Object::Ptr>(&slot)) {
    return *refused;  // before the run starts: nothing is left running unasked
  }
  auto limits = limits_.resolve(argument(arguments, "limits"));
  if (auto* rejection = std::get_if<Error>(&limits)) {
    return refuse(*rejection);
  }
  auto files = policy::resolveFiles(code.toString(), argument(arguments, "files"), files_,
                                    policy::codeFileOf(language));
  if (auto* rejection = std::get_if<Error>(&files)) {
    return refuse(*rejection);
  }
  std::optional<std::string> stdin_data;
  if (const Var stdin_text = argument(arguments, "stdin"); !stdin_text.isEmpty()) {
    if (!stdin_text.isString()) {
      return refuse(invalid("\"stdin\" must be a string: the text the program reads from stdin."));
    }
    stdin_data = stdin_text.toString();
    if (stdin_data->size() > files_.max_stdin_bytes) {
      return refuse(invalid("\"stdin\" is too large: " + std::to_string(stdin_data->size()) +
                            " bytes, max is " + std::to_string(files_.max_stdin_bytes) +
                            " bytes. Send large input as a file in `files` instead."));
    }
  }

  auto packages = packagesOf(arguments);
  if (auto* refused = std::get_if<Poco::JSON::Object::Ptr>(&packages)) {
    runs_.events().refused(context.tenant, runs::RunEvents::Refusal::kInvalid);
    return *refused;
  }

  runs::StartRequest request;
  if (auto& grant = std::get<std::optional<packages::LayerGrant>>(packages)) {
    request.packages = std::move(grant->use);
    request.packages_hold = std::move(grant->hold);
  }
  request.files = std::move(std::get<std::vector<policy::File>>(files));
  request.language = language;
  request.limits = std::get<policy::Limits>(limits);
  request.tenant = context.tenant;
  request.stdin_data = std::move(stdin_data);
  request.session = std::move(session);
  auto started = runs_.start(std::move(request));
  if (auto* refusal = std::get_if<Error>(&started)) {
    return toolError(refusal->message);
  }
  const runs::RunSnapshot& snapshot = std::get<runs::RunSnapshot>(started);
  if (wait.count() == 0) {
    return toolSuccess(snapshotToJson(snapshot, reportOptions()));
  }
  Object::Ptr report = waitForReport(snapshot.run_id, wait, {}, reportOptions(), context);
  if (context.abandoned && context.abandoned()) {
    // Its client left before the answer: nobody holds the run_id to see or stop the run.
    runs_.stop(context.tenant, snapshot.run_id);
  }
  return report;
}

std::variant<std::optional<net::TenantSlots::Slot>, Poco::JSON::Object::Ptr> Tools::waitSlot(
    std::chrono::milliseconds wait, const CallContext& context) const {
  if (wait.count() == 0 || !options_.waiting) {
    return std::optional<net::TenantSlots::Slot>();
  }
  std::optional<net::TenantSlots::Slot> slot = options_.waiting->take(context.tenant);
  if (!slot) {
    return toolError("You already have " + std::to_string(options_.waiting->cap()) +
                     " calls waiting at once (wait_seconds), the most one client may have. "
                     "Wait for one of them to return, or call with wait_seconds 0 and poll "
                     "with get_result.");
  }
  return slot;
}

ReportOptions Tools::reportOptions(bool with_offsets, bool verbose) const {
  return {.with_offsets = with_offsets, .verbose = verbose, .defaults = &limits_.defaults()};
}

Poco::JSON::Object::Ptr Tools::waitForReport(const std::string& id, std::chrono::milliseconds wait,
                                             const runs::OutputOffsets& from,
                                             const ReportOptions& report,
                                             const CallContext& context) const {
  // Without on_wait or abandoned the whole wait is one slice.
  const std::chrono::milliseconds progress =
      std::max(context.progress_interval, std::chrono::milliseconds(1));
  std::chrono::milliseconds slice = context.on_wait ? progress : wait;
  if (context.abandoned) {
    slice = std::min(slice, kAbandonCheck);
  }
  std::chrono::milliseconds waited{0};
  std::chrono::milliseconds reported{0};
  while (true) {
    const std::chrono::milliseconds next = std::min(slice, wait - waited);
    std::optional<runs::RunSnapshot> snapshot = runs_.get(context.tenant, id, next, from);
    if (!snapshot) {
      return toolError(unknownRunMessage(id));
    }
    waited += next;
    if (policy::isFinal(snapshot->status) || waited >= wait ||
        (context.abandoned && context.abandoned())) {
      return toolSuccess(snapshotToJson(*snapshot, report), fileBlocks(*snapshot));
    }
    if (context.on_wait && waited - reported >= progress) {
      reported = waited;
      context.on_wait(
          static_cast<double>(waited.count()) / 1000, static_cast<double>(wait.count()) / 1000,
          "Run " + id + " is still " + std::string(policy::statusName(snapshot->status)) + ".");
    }
  }
}

Poco::JSON::Object::Ptr Tools::getResult(const Object& arguments,
                                         const CallContext& context) const {
  if (std::string message = checkArgumentNames(
          arguments, kGetResult,
          {"run_id", "wait_seconds", "stdout_offset", "stderr_offset", "verbose"});
      !message.empty()) {
    return toolError(message);
  }
  const Var run_id = argument(arguments, "run_id");
  if (std::string message = checkRunId(run_id); !message.empty()) {
    return toolError(message);
  }

  std::chrono::milliseconds wait{0};
  if (std::string message = parseWait(arguments, kGetResult, &wait); !message.empty()) {
    return toolError(message);
  }
  auto slot = waitSlot(wait, context);
  if (auto* refused = std::get_if<Poco::JSON::Object::Ptr>(&slot)) {
    return *refused;
  }

  runs::OutputOffsets from;
  bool with_offsets = false;
  for (const auto& [key, target] : {std::pair{"stdout_offset", &from.stdout_from},
                                    std::pair{"stderr_offset", &from.stderr_from}}) {
    const Var offset = argument(arguments, key);
    if (offset.isEmpty()) {
      continue;
    }
    const double value =
        offset.isNumeric() && !offset.isBoolean() ? offset.convert<double>() : std::nan("");
    if (!(value >= 0 && value <= 9.0e15 && value == std::floor(value))) {
      return toolError("\"" + std::string(key) +
                       "\" must be a whole number of bytes, 0 or more: pass the previous "
                       "report's " +
                       std::string(key).substr(0, 6) + "_bytes to get only what is new.");
    }
    *target = static_cast<std::uint64_t>(value);
    with_offsets = true;
  }

  const Var verbose = argument(arguments, "verbose");
  if (!verbose.isEmpty() && !verbose.isBoolean()) {
    return toolError("\"verbose\" must be true or false.");
  }
  return waitForReport(run_id.toString(), wait, from,
                       reportOptions(with_offsets, !verbose.isEmpty() && verbose.convert<bool>()),
                       context);
}

std::optional<Tools::RunView> Tools::view(const std::string& run_id,
                                          const CallContext& context) const {
  std::optional<runs::RunSnapshot> snapshot =
      runs_.get(context.tenant, run_id, std::chrono::milliseconds(0), {});
  if (!snapshot) {
    return std::nullopt;
  }
  Object::Ptr result =
      toolSuccess(snapshotToJson(*snapshot, reportOptions()), fileBlocks(*snapshot));
  return RunView{std::move(*snapshot), result};
}

Poco::JSON::Object::Ptr Tools::stopRun(const Object& arguments, const CallContext& context) const {
  if (std::string message = checkArgumentNames(arguments, kStopRun, {"run_id"}); !message.empty()) {
    return toolError(message);
  }
  const Var run_id = argument(arguments, "run_id");
  if (std::string message = checkRunId(run_id); !message.empty()) {
    return toolError(message);
  }
  const std::string id = run_id.toString();
  std::optional<runs::RunSnapshot> snapshot = runs_.stop(context.tenant, id);
  if (!snapshot) {
    return toolError(unknownRunMessage(id));
  }
  return toolSuccess(snapshotToJson(*snapshot, reportOptions()), fileBlocks(*snapshot));
}

Poco::JSON::Object::Ptr Tools::openSession(const Object& arguments,
                                           const CallContext& context) const {
  if (std::string message =
          checkArgumentNames(arguments, kOpenSession, {"language", "limits", "files", "packages"});
      !message.empty()) {
    return toolError(message);
  }
  std::optional<policy::Language> named;
  if (std::string message = parseLanguage(arguments, &named); !message.empty()) {
    return toolError(message);
  }
  const policy::Language language = named.value_or(policy::Language::kPython);
  const Var asked = argument(arguments, "limits");
  if (asked.type() == typeid(Object::Ptr) && asked.extract<Object::Ptr>() &&
      asked.extract<Object::Ptr>()->has("timeout_seconds")) {
    return toolError(
        "A session has no timeout of its own: pass timeout_seconds to each "
        "start_run in it. open_session takes memory_gb and cpus.");
  }
  auto limits = limits_.resolve(asked);
  if (auto* rejection = std::get_if<Error>(&limits)) {
    return toolError(rejection->message);
  }
  const std::string_view code_file = policy::codeFileOf(language);
  auto files = policy::resolveFiles("", argument(arguments, "files"), files_, code_file);
  if (auto* rejection = std::get_if<Error>(&files)) {
    return toolError(rejection->message);
  }
  auto packages = packagesOf(arguments);
  if (auto* refused = std::get_if<Poco::JSON::Object::Ptr>(&packages)) {
    return *refused;
  }
  runs::OpenSessionRequest request;
  if (auto& grant = std::get<std::optional<packages::LayerGrant>>(packages)) {
    request.packages = std::move(grant->use);
    request.packages_hold = std::move(grant->hold);
  }
  request.tenant = context.tenant;
  request.limits = std::get<policy::Limits>(limits);
  request.language = language;
  // Without the code file: the session's files go with its first run, which brings its own.
  for (policy::File& file : std::get<std::vector<policy::File>>(files)) {
    if (file.path != code_file) {
      request.files.push_back(std::move(file));
    }
  }
  auto opened = runs_.openSession(std::move(request));
  if (auto* refusal = std::get_if<Error>(&opened)) {
    return toolError(refusal->message);
  }
  return toolSuccess(sessionToJson(std::get<sessions::SessionSnapshot>(opened)));
}

std::variant<std::optional<packages::LayerGrant>, Poco::JSON::Object::Ptr> Tools::packagesOf(
    const Object& arguments) const {
  const Var asked = argument(arguments, "packages");
  if (asked.isEmpty()) {
    return std::optional<packages::LayerGrant>();
  }
  if (options_.packages == nullptr) {
    return toolError(
        "This server offers no packages: its operator has set no wheelhouse or package index. "
        "Use what the image has (see start_run's description), or send pure-Python modules "
        "in `files`.");
  }
  const Poco::JSON::Array::Ptr array = asked.type() == typeid(Poco::JSON::Array::Ptr)
                                           ? asked.extract<Poco::JSON::Array::Ptr>()
                                           : nullptr;
  if (!array || std::any_of(array->begin(), array->end(),
                            [](const Var& element) { return !element.isString(); })) {
    return toolError(
        "\"packages\" must be an array of strings, e.g. [\"tqdm\", \"plotly==5.4.1\"].");
  }
  std::vector<std::string> specifiers;
  for (const Var& element : *array) {
    specifiers.push_back(element.toString());
  }
  Result<packages::LayerGrant> layer = options_.packages->layerFor(specifiers);
  if (auto* error = std::get_if<Error>(&layer)) {
    return toolError(error->message);
  }
  return std::optional<packages::LayerGrant>(std::move(std::get<packages::LayerGrant>(layer)));
}

Poco::JSON::Object::Ptr Tools::closeSession(const Object& arguments,
                                            const CallContext& context) const {
  if (std::string message = checkArgumentNames(arguments, kCloseSession, {"session_id"});
      !message.empty()) {
    return toolError(message);
  }
  const Var session_id = argument(arguments, "session_id");
  if (std::string message = checkSessionId(session_id); !message.empty()) {
    return toolError(message);
  }
  const std::string id = session_id.toString();
  const std::optional<sessions::SessionSnapshot> closed = runs_.closeSession(context.tenant, id);
  if (!closed) {
    return toolError(unknownSessionMessage(id));
  }
  return toolSuccess(sessionToJson(*closed, /*packages=*/false));
}

}  // namespace scs::mcp
