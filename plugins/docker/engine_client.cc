// The Engine API calls over an EngineSocket: the API version negotiated, each reply's HTTP
// status mapped to a backend Status quoting the engine's message, and the bodies read.

#include "engine_client.h"

#include <Poco/String.h>
#include <Poco/URI.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace scs::docker {
namespace {

using backend::Code;
using backend::Status;

constexpr std::size_t kMaxQuotedMessage = 300;

// The engine's own words, kept short and printable for a log line.
std::string engineMessage(const HttpReply& reply) {
  std::string message;
  if (const auto object = json::parseObject(reply.body)) {
    message = json::string(object, "message").value_or("");
  }
  if (message.empty()) {
    message = reply.body;
  }
  if (message.size() > kMaxQuotedMessage) {
    message.resize(kMaxQuotedMessage);
    message += "...";
  }
  std::replace_if(
      message.begin(), message.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }, ' ');
  while (!message.empty() && message.back() == ' ') {
    message.pop_back();
  }
  return message;
}

bool isSuccess(int status) { return status >= 200 && status < 300; }

// The `filters` query value that keeps what carries the label `label_key`, URL-encoded.
std::string labelFilter(const std::string& label_key) {
  json::ObjectPtr filters = new Poco::JSON::Object();
  Poco::JSON::Array::Ptr labels = new Poco::JSON::Array();
  labels->add(label_key);
  filters->set("label", labels);
  return urlEncode(json::stringify(filters));
}

}  // namespace

std::optional<ApiVersion> parseApiVersion(std::string_view text) {
  ApiVersion version;
  const std::size_t dot = text.find('.');
  if (dot == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view major = text.substr(0, dot);
  const std::string_view minor = text.substr(dot + 1);
  const auto a = std::from_chars(major.data(), major.data() + major.size(), version.major);
  const auto b = std::from_chars(minor.data(), minor.data() + minor.size(), version.minor);
  if (major.empty() || minor.empty() || a.ec != std::errc() ||
      a.ptr != major.data() + major.size() || b.ec != std::errc() ||
      b.ptr != minor.data() + minor.size()) {
    return std::nullopt;
  }
  return version;
}

Negotiation negotiateApiVersion(const std::string& version_json) {
  const json::ObjectPtr reply = json::parseObject(version_json);
  const auto server = parseApiVersion(json::string(reply, "ApiVersion").value_or(""));
  if (!server) {
    return {{Code::kInternal, "the engine did not report its API version"}, {}};
  }
  const ApiVersion chosen = std::min(*server, kNewestApi);
  if (chosen < kOldestApi) {
    return {
        {Code::kUnsupported, "the engine speaks API " + server->text() +
                                 " at most; this backend needs " + kOldestApi.text() + " or newer"},
        {}};
  }
  const auto server_min = parseApiVersion(json::string(reply, "MinAPIVersion").value_or(""));
  if (server_min && chosen < *server_min) {
    return {
        {Code::kUnsupported, "the engine accepts API " + server_min->text() +
                                 " or newer only; this backend speaks up to " + kNewestApi.text()},
        {}};
  }
  return {{}, chosen};
}

Status statusFromReply(const std::string& operation, const HttpReply& reply) {
  switch (reply.error) {
    case TransportError::kNone:
      break;
    case TransportError::kConnect:
      return {Code::kUnavailable, operation + ": cannot reach the engine: " + reply.error_message};
    case TransportError::kTimeout:
      return {Code::kTimeout,
              operation + ": the engine did not answer in time (" + reply.error_message + ")"};
    case TransportError::kIo:
      return {Code::kUnavailable,
              operation + ": the connection to the engine failed: " + reply.error_message};
  }
  if (isSuccess(reply.status)) {
    return {};
  }
  const std::string what = "the engine refused " + operation + " (HTTP " +
                           std::to_string(reply.status) + "): " + engineMessage(reply);
  if (reply.status == 404) {
    return {Code::kNotFound, what};
  }
  if (reply.status >= 400 && reply.status < 500) {
    return {Code::kRejected, what};
  }
  if (reply.status >= 500 && reply.status < 600) {
    return {Code::kUnavailable, "the engine failed " + operation + " (HTTP " +
                                    std::to_string(reply.status) + "): " + engineMessage(reply)};
  }
  return {Code::kInternal, operation + ": unexpected HTTP " + std::to_string(reply.status) +
                               " from the engine: " + engineMessage(reply)};
}

std::string urlEncode(const std::string& text) {
  std::string out;
  // Every byte outside RFC 3986's unreserved set is escaped, "/" and "&" included.
  Poco::URI::encode(text, "!#$&'()*+,/:;=?@[]\"%<>\\^`{|} ", out);
  return out;
}

EngineClient::EngineClient(EngineSocket& transport, std::chrono::milliseconds timeout)
    : transport_(transport), timeout_(timeout) {}

HttpCall EngineClient::makeCall(const std::string& method, const std::string& path) const {
  HttpCall call;
  call.method = method;
  call.path = versioned(path);
  call.timeout = timeout_;
  return call;
}

std::string EngineClient::versioned(const std::string& path) const {
  return "/v" + version_.text() + path;
}

Status EngineClient::negotiate() {
  HttpCall call;
  call.method = "GET";
  call.path = "/version";
  call.timeout = timeout_;
  const HttpReply reply = transport_.call(call);
  if (reply.error != TransportError::kNone) {
    // Only called at startup, where the caller names the engine: the cause is enough.
    return {reply.error == TransportError::kTimeout ? Code::kTimeout : Code::kUnavailable,
            reply.error_message};
  }
  if (Status status = statusFromReply("version", reply); !status.ok()) {
    return status;
  }
  const Negotiation negotiation = negotiateApiVersion(reply.body);
  if (negotiation.status.ok()) {
    version_ = negotiation.version;
    const json::ObjectPtr about = json::parseObject(reply.body);
    if (const auto engine = json::string(about, "Version")) {
      versions_["engine"] = *engine;
    }
    for (const json::ObjectPtr& component : json::objects(json::array(about, "Components"))) {
      const auto name = json::string(component, "Name");
      const auto version = json::string(component, "Version");
      if (name && version && *name != "Engine") {
        versions_[Poco::toLower(*name)] = *version;
      }
    }
  }
  return negotiation.status;
}

EngineReply<EngineInfo> EngineClient::info() {
  const HttpReply reply = transport_.call(makeCall("GET", "/info"));
  EngineReply<EngineInfo> result{statusFromReply("info", reply)};
  if (!result.status.ok()) {
    return result;
  }
  const json::ObjectPtr info = json::parseObject(reply.body);
  const auto cpus = json::integer(info, "NCPU");
  const auto memory = json::integer(info, "MemTotal");
  if (!cpus || !memory) {
    return {{Code::kInternal, "info: the engine did not report NCPU and MemTotal"}};
  }
  result.value.cpus = static_cast<int>(*cpus);
  result.value.memory_bytes = *memory;
  // Absent before API 1.40, when only cgroup v1 existed.
  result.value.cgroup_version = json::string(info, "CgroupVersion").value_or("1") == "2" ? 2 : 1;
  result.value.experimental = json::boolean(info, "ExperimentalBuild").value_or(false);
  result.value.root_dir = json::string(info, "DockerRootDir").value_or("");
  result.value.versions = versions_;
  if (const json::ObjectPtr runtimes = json::object(info, "Runtimes")) {
    for (const std::string& name : runtimes->getNames()) {
      if (const auto path = json::string(json::object(runtimes, name), "path")) {
        result.value.versions[name + " path"] = *path;
      }
    }
  }
  for (const auto& option : json::strings(json::array(info, "SecurityOptions"))) {
    if (option.rfind("name=seccomp", 0) == 0 &&
        option.find("profile=unconfined") == std::string::npos) {
      result.value.default_seccomp = true;
    }
  }
  return result;
}

EngineReply<std::string> EngineClient::create(const std::string& name, const json::ObjectPtr& body,
                                              std::vector<std::string>* warnings) {
  HttpCall call = makeCall(
      "POST", "/containers/create" + (name.empty() ? std::string() : "?name=" + urlEncode(name)));
  call.body = json::stringify(body);
  call.content_type = "application/json";
  const HttpReply reply = transport_.call(call);
  EngineReply<std::string> result{statusFromReply("create", reply)};
  if (!result.status.ok()) {
    return result;
  }
  const json::ObjectPtr created = json::parseObject(reply.body);
  result.value = json::string(created, "Id").value_or("");
  if (result.value.empty()) {
    return {{Code::kInternal, "create: the engine's reply has no container id"}};
  }
  *warnings = json::strings(json::array(created, "Warnings"));
  return result;
}

EngineReply<json::ObjectPtr> EngineClient::inspect(const std::string& id) {
  const HttpReply reply =
      transport_.call(makeCall("GET", "/containers/" + urlEncode(id) + "/json"));
  EngineReply<json::ObjectPtr> result{statusFromReply("inspect", reply)};
  if (!result.status.ok()) {
    return result;
  }
  result.value = json::parseObject(reply.body);
  if (result.value.isNull()) {
    return {{Code::kInternal, "inspect: the engine's record is not a JSON object"}};
  }
  return result;
}

EngineReply<ConnectionPtr> EngineClient::open(const std::string& operation, HttpCall call) {
  OpenReply reply = transport_.open(call);
  if (reply.reply.error == TransportError::kNone && reply.reply.status == 101 && reply.connection) {
    return {{}, std::move(reply.connection)};  // switched to the hijacked stream
  }
  EngineReply<ConnectionPtr> result{statusFromReply(operation, reply.reply)};
  if (result.status.ok() && !reply.connection) {
    result.status = {Code::kInternal, operation + ": unexpected HTTP " +
                                          std::to_string(reply.reply.status) + " from the engine"};
  }
  if (result.status.ok()) {
    result.value = std::move(reply.connection);
  }
  return result;
}

EngineReply<ConnectionPtr> EngineClient::attach(const std::string& id) {
  HttpCall call = makeCall(
      "POST", "/containers/" + urlEncode(id) + "/attach?stream=1&stdin=1&stdout=1&stderr=1");
  call.upgrade = true;
  return open("attach", std::move(call));
}

EngineReply<ConnectionPtr> EngineClient::openWait(const std::string& id,
                                                  const std::string& condition) {
  return open("wait", makeCall("POST", "/containers/" + urlEncode(id) +
                                           "/wait?condition=" + urlEncode(condition)));
}

EngineReply<WaitOutcome> EngineClient::parseWait(const std::string& body) {
  const json::ObjectPtr reply = json::parseObject(body);
  const auto code = json::integer(reply, "StatusCode");
  if (!code) {
    return {{Code::kInternal, "wait: the engine's reply has no StatusCode"}};
  }
  EngineReply<WaitOutcome> result;
  result.value.status_code = *code;
  result.value.error = json::string(json::object(reply, "Error"), "Message").value_or("");
  return result;
}

Status EngineClient::start(const std::string& id, const std::string& checkpoint,
                           std::chrono::milliseconds timeout) {
  HttpCall call = makeCall(
      "POST", "/containers/" + urlEncode(id) + "/start" +
                  (checkpoint.empty() ? std::string() : "?checkpoint=" + urlEncode(checkpoint)));
  call.timeout = std::max(timeout, timeout_);
  return statusFromReply(checkpoint.empty() ? "start" : "start from checkpoint",
                         transport_.call(call));
}

Status EngineClient::checkpoint(const std::string& id, const std::string& name,
                                const std::string& directory, std::chrono::milliseconds timeout) {
  HttpCall call = makeCall("POST", "/containers/" + urlEncode(id) + "/checkpoints");
  json::ObjectPtr body = json::newObject();
  body->set("CheckpointID", name);
  body->set("CheckpointDir", directory);
  body->set("Exit", true);
  call.body = json::stringify(body);
  call.content_type = "application/json";
  call.timeout = std::max(timeout, timeout_);
  return statusFromReply("checkpoint", transport_.call(call));
}

Status EngineClient::deleteCheckpoint(const std::string& id, const std::string& name) {
  const HttpReply reply = transport_.call(
      makeCall("DELETE", "/containers/" + urlEncode(id) + "/checkpoints/" + urlEncode(name)));
  if (reply.error == TransportError::kNone && reply.status == 404) {
    return {};
  }
  return statusFromReply("delete checkpoint", reply);
}

Status EngineClient::kill(const std::string& id) {
  const HttpReply reply =
      transport_.call(makeCall("POST", "/containers/" + urlEncode(id) + "/kill?signal=KILL"));
  if (reply.error == TransportError::kNone && reply.status == 409) {
    return {};  // not running: nothing left to kill
  }
  return statusFromReply("kill", reply);
}

Status EngineClient::remove(const std::string& id) {
  const HttpReply reply =
      transport_.call(makeCall("DELETE", "/containers/" + urlEncode(id) + "?force=1&v=1"));
  if (reply.error == TransportError::kNone &&
      (reply.status == 404 ||
       (reply.status == 409 &&
        engineMessage(reply).find("already in progress") != std::string::npos))) {
    return {};  // gone, or the engine is already removing it
  }
  return statusFromReply("remove", reply);
}

EngineReply<json::ObjectPtr> EngineClient::inspectImage(const std::string& name) {
  const HttpReply reply = transport_.call(makeCall("GET", "/images/" + urlEncode(name) + "/json"));
  EngineReply<json::ObjectPtr> result{statusFromReply("inspect image", reply)};
  if (!result.status.ok()) {
    return result;
  }
  result.value = json::parseObject(reply.body);
  if (result.value.isNull()) {
    return {{Code::kInternal, "inspect image: the engine's record is not a JSON object"}};
  }
  return result;
}

Status EngineClient::putArchive(const std::string& id, std::string archive,
                                std::chrono::milliseconds timeout) {
  HttpCall call = makeCall("PUT", "/containers/" + urlEncode(id) + "/archive?path=%2F");
  call.body = std::move(archive);
  call.content_type = "application/x-tar";
  call.timeout = std::max(timeout, timeout_);
  return statusFromReply("put archive", transport_.call(call));
}

Status EngineClient::commit(const std::string& id, const std::string& name,
                            const json::ObjectPtr& config, std::chrono::milliseconds timeout) {
  const std::size_t colon = name.rfind(':');
  const bool tagged = colon != std::string::npos && name.find('/', colon) == std::string::npos;
  const std::string repo = tagged ? name.substr(0, colon) : name;
  const std::string tag = tagged ? name.substr(colon + 1) : "latest";
  HttpCall call =
      makeCall("POST", "/commit?container=" + urlEncode(id) + "&repo=" + urlEncode(repo) +
                           "&tag=" + urlEncode(tag) + "&pause=0");
  call.body = json::stringify(config);
  call.content_type = "application/json";
  call.timeout = std::max(timeout, timeout_);
  return statusFromReply("commit", transport_.call(call));
}

Status EngineClient::removeImage(const std::string& name) {
  const HttpReply reply = transport_.call(makeCall("DELETE", "/images/" + urlEncode(name)));
  if (reply.error == TransportError::kNone && reply.status == 404) {
    return {};
  }
  return statusFromReply("remove image", reply);
}

EngineReply<std::vector<ImageSummary>> EngineClient::listImages(const std::string& label_key) {
  const HttpReply reply =
      transport_.call(makeCall("GET", "/images/json?filters=" + labelFilter(label_key)));
  EngineReply<std::vector<ImageSummary>> result{statusFromReply("list images", reply)};
  if (!result.status.ok()) {
    return result;
  }
  const json::ArrayPtr images = json::parseArray(reply.body);
  if (images.isNull()) {
    return {{Code::kInternal, "list images: the engine's reply is not a JSON array"}};
  }
  for (std::size_t i = 0; i < images->size(); ++i) {
    const json::ObjectPtr image = images->getObject(static_cast<unsigned>(i));
    ImageSummary summary;
    summary.tags = json::strings(json::array(image, "RepoTags"));
    for (auto& [key, value] : json::stringMap(json::object(image, "Labels"))) {
      summary.labels.emplace(std::move(key), std::move(value));
    }
    result.value.push_back(std::move(summary));
  }
  return result;
}

EngineReply<std::vector<ContainerSummary>> EngineClient::list(const std::string& label_key) {
  const HttpReply reply =
      transport_.call(makeCall("GET", "/containers/json?all=1&filters=" + labelFilter(label_key)));
  EngineReply<std::vector<ContainerSummary>> result{statusFromReply("list", reply)};
  if (!result.status.ok()) {
    return result;
  }
  const json::ArrayPtr containers = json::parseArray(reply.body);
  if (containers.isNull()) {
    return {{Code::kInternal, "list: the engine's reply is not a JSON array"}};
  }
  for (std::size_t i = 0; i < containers->size(); ++i) {
    const json::ObjectPtr container = containers->getObject(static_cast<unsigned>(i));
    ContainerSummary summary;
    summary.id = json::string(container, "Id").value_or("");
    if (summary.id.empty()) {
      return {{Code::kInternal, "list: a container in the engine's reply has no id"}};
    }
    for (auto& [key, value] : json::stringMap(json::object(container, "Labels"))) {
      summary.labels.emplace(std::move(key), std::move(value));
    }
    result.value.push_back(std::move(summary));
  }
  return result;
}

EngineReply<ConnectionPtr> EngineClient::events(const std::string& filters_json,
                                                const std::string& since) {
  std::string path = "/events?filters=" + urlEncode(filters_json);
  if (!since.empty()) {
    path += "&since=" + urlEncode(since);
  }
  return open("events", makeCall("GET", path));
}

}  // namespace scs::docker
