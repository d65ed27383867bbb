// tools.json made into the tools/list array: each ${setting} filled with the operator's value
// or its words, descriptions joined, $defs references resolved; and the byte and duration words.

#include "mcp/tool_definitions.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/ParseHandler.h>
#include <Poco/JSON/Parser.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include "launcher/side_channel.h"

namespace scs::mcp {
namespace {

#include "mcp/tools_json.inc"

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

struct Setting {
  Var value;          // where a whole string names it
  std::string words;  // where a text names it
};

using Settings = std::map<std::string, Setting>;

Setting number(double value) { return {value, policy::formatNumber(value)}; }

Setting count(std::size_t value) {
  return {static_cast<std::uint64_t>(value), std::to_string(value)};
}

// How a session ends, in the words of open_session's description.
std::string sessionEnds(const ToolSettings& tools) {
  if (!tools.session_hibernate) {
    return "It closes after " + formatDuration(tools.session_idle) + " without a run, " +
           formatDuration(tools.session_lifetime) + " after it opened";
  }
  return "After " + formatDuration(tools.session_idle) +
         " without a run it hibernates: its next run wakes it as it was, in a few seconds (open "
         "network connections are lost). It closes after " +
         formatDuration(tools.session_hibernated_max) + " hibernated or " +
         formatDuration(tools.session_lifetime) + " awake" +
         (tools.sessions_kept
              ? ". A server restart keeps it too (a run then in progress is stopped)"
              : "");
}

Settings settingsOf(const ToolSettings& tools) {
  return {
      {"default_memory_gb", number(tools.defaults.memory_gb)},
      {"max_memory_gb", number(tools.maxima.memory_gb)},
      {"default_timeout_seconds", number(tools.defaults.timeout_seconds)},
      {"max_timeout_seconds", number(tools.maxima.timeout_seconds)},
      {"default_cpus", number(tools.defaults.cpus)},
      {"max_cpus", number(tools.maxima.cpus)},
      {"processes", count(static_cast<std::size_t>(tools.defaults.processes))},
      {"max_files", count(tools.files.max_files)},
      {"max_path_bytes", count(tools.files.max_path_bytes)},
      {"max_total_bytes",
       {static_cast<std::uint64_t>(tools.files.max_total_bytes),
        formatBytes(tools.files.max_total_bytes)}},
      {"max_stdin_bytes",
       {static_cast<std::uint64_t>(tools.files.max_stdin_bytes),
        formatBytes(tools.files.max_stdin_bytes)}},
      {"max_wait_seconds", number(tools.max_wait_seconds)},
      {"retention", {Var(formatDuration(tools.retention)), formatDuration(tools.retention)}},
      {"default_start_wait_seconds", number(tools.default_start_wait_seconds)},
      {"session_ends", {Var(sessionEnds(tools)), sessionEnds(tools)}},
      {"max_sessions_per_tenant", count(tools.max_sessions_per_tenant)},
      {"max_packages", count(tools.max_packages)},
      {"max_result_bytes",
       {static_cast<std::uint64_t>(launcher::kMaxResultBytes),
        formatBytes(launcher::kMaxResultBytes)}},
  };
}

const Setting& settingNamed(const Settings& settings, const std::string& name) {
  const auto found = settings.find(name);
  if (found == settings.end()) {
    throw std::logic_error("tools.json names an unknown setting ${" + name + "}");
  }
  return found->second;
}

Var fill(const Var& value, const Settings& settings, const Object& defs);

Var fillText(const std::string& text, const Settings& settings) {
  if (text.size() > 3 && text.rfind("${", 0) == 0 && text.find('}') == text.size() - 1) {
    return settingNamed(settings, text.substr(2, text.size() - 3)).value;
  }
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t open = text.find("${", at);
    if (open == std::string::npos) {
      return out + text.substr(at);
    }
    const std::size_t close = text.find('}', open);
    if (close == std::string::npos) {
      throw std::logic_error("tools.json has an unclosed ${ in \"" + text + "\"");
    }
    out += text.substr(at, open - at) +
           settingNamed(settings, text.substr(open + 2, close - open - 2)).words;
    at = close + 1;
  }
}

Var fillObject(const Object& object, const Settings& settings, const Object& defs) {
  if (object.has("$ref")) {
    const std::string ref = object.getValue<std::string>("$ref");
    constexpr std::string_view kPrefix = "#/$defs/";
    const std::string name = ref.substr(std::min(ref.size(), kPrefix.size()));
    if (ref.rfind(kPrefix, 0) != 0 || !defs.has(name)) {
      throw std::logic_error("tools.json refers to an unknown schema " + ref);
    }
    return fill(defs.get(name), settings, defs);
  }
  Object::Ptr filled = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  // getNames() keeps the file's order (iterating the object would sort the keys).
  for (const std::string& key : object.getNames()) {
    const Var member = object.get(key);
    if (key == "$comment") {
      continue;
    }
    if (key == "description" && member.type() == typeid(Array::Ptr)) {
      std::string lines;
      for (const Var& line : *member.extract<Array::Ptr>()) {
        lines += (lines.empty() ? "" : "\n") + fillText(line.toString(), settings).toString();
      }
      filled->set(key, lines);
    } else {
      filled->set(key, fill(member, settings, defs));
    }
  }
  return filled;
}

Var fill(const Var& value, const Settings& settings, const Object& defs) {
  if (value.type() == typeid(Object::Ptr)) {
    return fillObject(*value.extract<Object::Ptr>(), settings, defs);
  }
  if (value.type() == typeid(Array::Ptr)) {
    Array::Ptr filled = new Array;
    for (const Var& item : *value.extract<Array::Ptr>()) {
      filled->add(fill(item, settings, defs));
    }
    return filled;
  }
  if (value.isString()) {
    return fillText(value.toString(), settings);
  }
  return value;
}

}  // namespace

std::string formatBytes(std::size_t bytes) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  constexpr std::size_t kKiB = std::size_t{1} << 10;
  if (bytes >= kMiB && bytes % kMiB == 0) {
    return std::to_string(bytes / kMiB) + " MiB";
  }
  if (bytes >= kKiB && bytes % kKiB == 0) {
    return std::to_string(bytes / kKiB) + " KiB";
  }
  return std::to_string(bytes) + " bytes";
}

std::string formatDuration(std::chrono::seconds duration) {
  const auto seconds = duration.count();
  const auto unit = [](long long n, const char* singular) {
    return std::to_string(n) + " " + singular + (n == 1 ? "" : "s");
  };
  if (seconds >= 3600 && seconds % 3600 == 0) {
    return unit(seconds / 3600, "hour");
  }
  if (seconds >= 60 && seconds % 60 == 0) {
    return unit(seconds / 60, "minute");
  }
  return unit(seconds, "second");
}

Poco::JSON::Array::Ptr toolDefinitions(const ToolSettings& tools) {
  return toolDefinitions(tools, std::string_view(reinterpret_cast<const char*>(kToolsJsonBytes),
                                                 sizeof kToolsJsonBytes));
}

Poco::JSON::Array::Ptr toolDefinitions(const ToolSettings& tools, std::string_view document) {
  Poco::JSON::Parser parser(new Poco::JSON::ParseHandler(true));
  const Object::Ptr parsed = parser.parse(std::string(document)).extract<Object::Ptr>();
  const Object::Ptr defs =
      parsed->has("$defs") ? parsed->getObject("$defs") : Object::Ptr(new Object);
  Array::Ptr filled = fill(parsed->get("tools"), settingsOf(tools), *defs).extract<Array::Ptr>();
  // Without a package source, neither the argument nor the report's field exists: a model is
  // not told of what it cannot have.
  for (std::size_t i = 0; !tools.packages && i < filled->size(); ++i) {
    const Object::Ptr tool = filled->getObject(static_cast<unsigned>(i));
    for (const char* schema : {"inputSchema", "outputSchema"}) {
      if (Object::Ptr properties =
              tool->has(schema) ? tool->getObject(schema)->getObject("properties") : nullptr) {
        properties->remove("packages");
      }
    }
  }
  return filled;
}

}  // namespace scs::mcp
