// The audit: the embedded program and its audit.json, the one run through the run manager, the
// program's check lines read into a Report, the runtime named and the table printed.

#include "audit/audit.h"

#include <Poco/Dynamic/Var.h>
#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <sstream>
#include <utility>
#include <variant>

#include "policy/status_map.h"

namespace scs::audit {
namespace {

#include "audit/audit_filesystem.inc"
#include "audit/audit_process.inc"
#include "audit/audit_program.inc"

template <std::size_t N>
std::string_view embedded(const unsigned char (&bytes)[N]) {
  return std::string_view(reinterpret_cast<const char*>(bytes), N);
}

constexpr const char* kConfigFile = "audit.json";
// The audit run's tenant: a name no token file can give (runs/run_manager.h), so that no
// client's runs or counts mix with it.
constexpr const char* kAuditTenant = "(audit)";
// The engine's create, start and removal come on top of the run's own timeout.
constexpr std::chrono::seconds kEngineSlack{60};
constexpr std::size_t kColumnWidth = 44;

std::string stringField(const Poco::JSON::Object::Ptr& object, const std::string& key) {
  if (!object->has(key) || object->isNull(key)) {
    return "";
  }
  return object->get(key).convert<std::string>();
}

Poco::JSON::Array::Ptr stringArray(const std::vector<std::string>& items) {
  Poco::JSON::Array::Ptr array = new Poco::JSON::Array;
  for (const std::string& item : items) {
    array->add(item);
  }
  return array;
}

std::string lastLines(const std::string& text, std::size_t bytes) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

// Splits `text` into pieces of at most `width` characters, preferring a break after a space
// or a comma.
std::vector<std::string> wrapped(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::string rest = text;
  while (rest.size() > width) {
    std::size_t cut = rest.find_last_of(" ,", width - 1);
    cut = (cut == std::string::npos || cut < width / 2) ? width : cut + 1;
    std::string line = rest.substr(0, cut);
    while (!line.empty() && line.back() == ' ') {
      line.pop_back();
    }
    lines.push_back(line);
    rest.erase(0, cut);
  }
  lines.push_back(rest);
  return lines;
}

std::string padded(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

Check failedCheck(std::string name, std::string expected, std::string observed,
                  std::string detail = "") {
  return Check{std::move(name), std::move(expected), std::move(observed), std::move(detail), false};
}

}  // namespace

std::string_view program() { return embedded(kAuditProgramBytes); }

std::string programConfig(const policy::Limits& limits, const policy::SandboxSettings& sandbox,
                          bool egress) {
  // The sandbox's own uid is known only once it is made; the audit checks it is in the range.
  const backend::Posture posture = policy::requiredPosture(limits, sandbox, sandbox.uids.first);
  Poco::JSON::Object config(Poco::JSON_PRESERVE_KEY_ORDER);
  config.set("runtime", sandbox.runtime);
  config.set("egress", egress);
  config.set("uid_first", static_cast<Poco::UInt64>(sandbox.uids.first));
  config.set("uid_last", static_cast<Poco::UInt64>(sandbox.uids.last));
  config.set("pids_limit", static_cast<Poco::Int64>(posture.pids_limit));
  config.set("processes_limit", static_cast<Poco::Int64>(posture.processes_limit));
  config.set("open_files_limit", static_cast<Poco::Int64>(posture.open_files_limit));
  config.set("file_size_limit_bytes", static_cast<Poco::Int64>(posture.file_size_limit_bytes));
  Poco::JSON::Object::Ptr tmpfs = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const backend::TmpfsMount& mount : posture.tmpfs) {
    Poco::JSON::Object::Ptr caps = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    caps->set("size_bytes", static_cast<Poco::UInt64>(mount.size_bytes));
    caps->set("max_inodes", static_cast<Poco::UInt64>(mount.max_inodes));
    tmpfs->set(mount.path, caps);
  }
  config.set("tmpfs", tmpfs);
  config.set("masked_paths", stringArray(posture.masked_paths));
  config.set("readonly_paths", stringArray(posture.readonly_paths));
  config.set("budget_seconds", static_cast<Poco::Int64>(kProgramBudget.count()));
  std::ostringstream out;
  config.stringify(out);
  return out.str();
}

policy::Limits auditLimits(const policy::Limits& defaults) {
  policy::Limits limits = defaults;
  limits.timeout_seconds = static_cast<double>(kRunTimeout.count());
  return limits;
}

std::vector<Check> parseChecks(const std::string& stdout_text) {
  std::vector<Check> checks;
  std::istringstream lines(stdout_text);
  std::string line;
  bool done = false;
  std::int64_t announced = -1;
  while (std::getline(lines, line)) {
    if (line.empty()) {
      continue;
    }
    // Only the program's own lines count; anything else on stdout (the launcher's trailer)
    // is not the audit's. A missing or short completion line still fails the audit.
    if (line.front() != '{') {
      continue;
    }
    Poco::JSON::Object::Ptr object;
    try {
      Poco::JSON::Parser parser;
      const Poco::Dynamic::Var parsed = parser.parse(line);
      if (parsed.type() == typeid(Poco::JSON::Object::Ptr)) {
        object = parsed.extract<Poco::JSON::Object::Ptr>();
      }
    } catch (const Poco::Exception&) {
      object = nullptr;
    }
    if (!object) {
      checks.push_back(
          failedCheck("audit_output", "one JSON object per line", lastLines(line, 200)));
      continue;
    }
    if (!object->has("name") && !object->has("done")) {
      continue;
    }
    if (object->has("done")) {
      done = object->get("done").convert<bool>();
      announced = object->has("checks") ? object->get("checks").convert<std::int64_t>() : -1;
      continue;
    }
    Check check;
    check.name = stringField(object, "name");
    check.expected = stringField(object, "expected");
    check.observed = stringField(object, "observed");
    check.detail = stringField(object, "detail");
    check.ok = object->has("ok") && object->get("ok").isBoolean() &&
               object->get("ok").convert<bool>() && !check.name.empty();
    checks.push_back(std::move(check));
  }
  if (!done) {
    checks.push_back(failedCheck("audit_complete", "every check ran", "the program stopped early"));
  } else if (announced != static_cast<std::int64_t>(checks.size())) {
    checks.push_back(failedCheck("audit_complete", std::to_string(announced) + " checks reported",
                                 std::to_string(checks.size()) + " read"));
  }
  return checks;
}

Report run(runs::RunManager& runs, const policy::Limits& limits,
           const policy::SandboxSettings& sandbox, const policy::FileSettings& files,
           bool egress) {
  Report report;
  report.runtime = sandbox.runtime;
  report.image = sandbox.image;

  Poco::JSON::Array::Ptr extra = new Poco::JSON::Array;
  // The program's checks, beside main.py: it imports them from its own directory.
  for (const auto& [path, text] :
       {std::pair{"audit_process.py", embedded(kAuditProcessBytes)},
        std::pair{"audit_filesystem.py", embedded(kAuditFilesystemBytes)}}) {
    Poco::JSON::Object::Ptr checks_file = new Poco::JSON::Object;
    checks_file->set("path", path);
    checks_file->set("content", std::string(text));
    extra->add(checks_file);
  }
  Poco::JSON::Object::Ptr config_file = new Poco::JSON::Object;
  config_file->set("path", kConfigFile);
  config_file->set("content", programConfig(limits, sandbox, egress));
  extra->add(config_file);
  // The same validation as a start_run from a client. The two modules of checks are the
  // program's, as main.py is: they do not count against the operator's cap on a run's files.
  policy::FileSettings caps = files;
  caps.max_files += 2;
  auto resolved = policy::resolveFiles(std::string(program()), Poco::Dynamic::Var(extra), caps);
  if (const auto* rejection = std::get_if<Error>(&resolved)) {
    report.setup_error = "the audit program was refused: " + rejection->message;
    return report;
  }
  runs::StartRequest request;
  request.files = std::move(std::get<std::vector<policy::File>>(resolved));
  request.limits = limits;
  request.tenant = kAuditTenant;
  request.egress_probe = egress;
  auto started = runs.start(std::move(request));
  if (const auto* refusal = std::get_if<Error>(&started)) {
    report.setup_error = "the audit run was refused: " + refusal->message;
    return report;
  }
  report.run_id = std::get<runs::RunSnapshot>(started).run_id;

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(static_cast<long long>(limits.timeout_seconds)) +
                        kEngineSlack;
  std::optional<runs::RunSnapshot> snapshot;
  while (true) {
    snapshot = runs.get(kAuditTenant, report.run_id, std::chrono::seconds(5));
    if (!snapshot) {
      report.setup_error = "the audit run " + report.run_id + " was forgotten by the server";
      return report;
    }
    if (policy::isFinal(snapshot->status)) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      runs.stop(kAuditTenant, report.run_id);
      report.setup_error = "the audit run did not end in time";
      return report;
    }
  }
  report.duration_seconds = snapshot->duration_seconds;
  report.prepared_sandbox = snapshot->prepared_sandbox;
  const std::string status(policy::statusName(snapshot->status));
  if (snapshot->status == policy::RunStatus::kSandboxError ||
      snapshot->status == policy::RunStatus::kStopped) {
    report.setup_error = "the audit sandbox ended as " + status + ": " + snapshot->reason;
    return report;
  }
  report.checks = parseChecks(snapshot->stdout_output.text);
  if (snapshot->status != policy::RunStatus::kSucceeded) {
    std::string observed = status;
    if (snapshot->exit_code) {
      observed += " (exit code " + std::to_string(*snapshot->exit_code) + ")";
    }
    report.checks.push_back(
        failedCheck("audit_program", "succeeded", observed,
                    snapshot->reason + " stderr: " + lastLines(snapshot->stderr_output.text, 600)));
  }
  return report;
}

bool passed(const Report& report) {
  return report.setup_error.empty() && !report.checks.empty() &&
         std::all_of(report.checks.begin(), report.checks.end(),
                     [](const Check& check) { return check.ok; });
}

int exitCode(const Report& report) {
  if (!report.setup_error.empty()) {
    return kExitSetupFailed;
  }
  return passed(report) ? kExitPassed : kExitFailed;
}

namespace {

std::string versionOf(const Report& report, const std::string& name) {
  const auto found = report.versions.find(name);
  return found == report.versions.end() ? std::string() : found->second;
}

}  // namespace

std::string describeRuntime(const Report& report) {
  const std::string own = versionOf(report, report.runtime);
  std::vector<std::string> about;
  if (own.empty()) {
    const std::string path = versionOf(report, report.runtime + " path");
    about.push_back("version not reported by the engine" + (path.empty() ? "" : "; " + path));
  }
  for (const char* name : {"engine", "containerd"}) {
    if (!versionOf(report, name).empty()) {
      about.push_back(std::string(name) + " " + versionOf(report, name));
    }
  }
  std::string text = report.runtime + (own.empty() ? "" : " " + own);
  for (std::size_t i = 0; i < about.size(); ++i) {
    text += (i == 0 ? " (" : ", ") + about[i] + (i + 1 == about.size() ? ")" : "");
  }
  return text;
}

std::string runtimeNote(const Report& report) {
  // runc before 1.2.8 (and 1.3 before 1.3.3) lacks the fixes for CVE-2025-31133, -52565 and
  // -52881, which need an attacker who controls the image or a mount another container shares.
  const std::string own = versionOf(report, report.runtime);
  int major = 0;
  int minor = 0;
  int patch = 0;
  if (report.runtime != "runc" ||
      std::sscanf(own.c_str(), "%d.%d.%d", &major, &minor, &patch) != 3) {
    return {};
  }
  const bool fixed =
      major > 1 ||
      (major == 1 && (minor > 3 || (minor == 3 && patch >= 3) || (minor == 2 && patch >= 8)));
  if (fixed) {
    return {};
  }
  return "Note: runc " + own +
         " predates the fixes for CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881 (runc "
         "1.2.8, 1.3.3); docs/SECURITY.md section 5 says why they do not reach these sandboxes. "
         "Upgrade runc where you can.";
}

std::string formatTable(const Report& report) {
  std::ostringstream out;
  out << "Sandbox audit: runtime " << describeRuntime(report) << ", image " << report.image;
  if (!report.run_id.empty()) {
    out << ", run " << report.run_id;
  }
  out << "\n";
  if (const std::string note = runtimeNote(report); !note.empty()) {
    out << note << "\n";
  }
  if (!report.run_id.empty()) {
    out << "Sandbox: "
        << (report.prepared_sandbox ? "prepared ahead of the run (--prepared)"
                                    : "created for the run")
        << "\n";
  }
  if (!report.setup_error.empty()) {
    out << "SETUP FAILED: " << report.setup_error << "\n";
    return out.str();
  }
  std::size_t name_width = 5;
  for (const Check& check : report.checks) {
    name_width = std::max(name_width, check.name.size());
  }
  name_width = std::min<std::size_t>(name_width, 40);
  out << padded("CHECK", name_width) << "  " << padded("EXPECTED", kColumnWidth) << "  "
      << padded("OBSERVED", kColumnWidth) << "  RESULT\n";
  std::size_t failures = 0;
  for (const Check& check : report.checks) {
    const std::vector<std::string> names = wrapped(check.name, name_width);
    const std::vector<std::string> expected = wrapped(check.expected, kColumnWidth);
    const std::vector<std::string> observed = wrapped(check.observed, kColumnWidth);
    const std::size_t rows = std::max({names.size(), expected.size(), observed.size()});
    for (std::size_t row = 0; row < rows; ++row) {
      const auto cell = [row](const std::vector<std::string>& lines) {
        return row < lines.size() ? lines[row] : std::string();
      };
      std::string line = padded(cell(names), name_width) + "  " +
                         padded(cell(expected), kColumnWidth) + "  " +
                         padded(cell(observed), kColumnWidth) + "  " +
                         (row == 0 ? (check.ok ? "PASS" : "FAIL") : "");
      while (!line.empty() && line.back() == ' ') {
        line.pop_back();
      }
      out << line << "\n";
    }
    if (!check.ok && !check.detail.empty()) {
      out << "    why: " << check.detail << "\n";
    }
    failures += check.ok ? 0 : 1;
  }
  out << report.checks.size() << " checks, " << (report.checks.size() - failures) << " passed, "
      << failures << " failed in "
      << policy::formatNumber(std::round(report.duration_seconds * 10) / 10)
      << " s: " << (passed(report) ? "PASS" : "FAIL") << "\n";
  return out.str();
}

}  // namespace scs::audit
