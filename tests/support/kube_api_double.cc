#include "support/kube_api_double.h"

#include <Poco/JSON/Array.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/URI.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <sstream>

#include "json_access.h"

namespace scs::testing {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

Object::Ptr parse(const std::string& text) { return json::parseObject(text); }

std::string text(const Object::Ptr& object) { return json::stringify(object); }

Object::Ptr copy(const Object::Ptr& object) { return parse(text(object)); }

Object::Ptr status(int code, const std::string& reason, const std::string& message) {
  Object::Ptr s = new Object;
  s->set("kind", "Status");
  s->set("apiVersion", "v1");
  s->set("status", "Failure");
  s->set("reason", reason);
  s->set("message", message);
  s->set("code", code);
  return s;
}

Object::Ptr list(const std::string& kind, const std::vector<Object::Ptr>& items,
                 std::uint64_t version) {
  Object::Ptr l = new Object;
  l->set("kind", kind);
  l->set("apiVersion", "v1");
  Object::Ptr metadata = new Object;
  metadata->set("resourceVersion", std::to_string(version));
  l->set("metadata", metadata);
  Array::Ptr array = new Array;
  for (const auto& item : items) {
    array->add(item);
  }
  l->set("items", array);
  return l;
}

bool allDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The API server's canonical form of a quantity, for the two forms the backend sends: bytes as a
// whole number keep their decimal format, with the largest SI suffix that is exact ("1073741824"
// stays, "2000000000" -> "2G"); cpu in millicores becomes whole cores when it can ("2000m" ->
// "2").
std::string canonical(const std::string& quantity) {
  if (allDigits(quantity)) {
    std::uint64_t n = std::stoull(quantity);
    const char* suffixes[] = {"", "k", "M", "G", "T", "P", "E"};
    int power = 0;
    while (n != 0 && n % 1000 == 0 && power < 6) {
      n /= 1000;
      ++power;
    }
    return std::to_string(n) + suffixes[power];
  }
  if (quantity.size() > 1 && quantity.back() == 'm' &&
      allDigits(quantity.substr(0, quantity.size() - 1))) {
    const std::uint64_t milli = std::stoull(quantity.substr(0, quantity.size() - 1));
    if (milli % 1000 == 0) {
      return std::to_string(milli / 1000);
    }
  }
  return quantity;
}

void canonicalizeAmounts(Object::Ptr amounts) {
  if (!amounts) {
    return;
  }
  for (const std::string& name : amounts->getNames()) {
    if (amounts->get(name).isString()) {
      amounts->set(name, canonical(amounts->getValue<std::string>(name)));
    }
  }
}

// The labels of a Pod.
std::map<std::string, std::string> labelsOf(const Object::Ptr& pod) {
  std::map<std::string, std::string> labels;
  const Object::Ptr metadata = pod->getObject("metadata");
  const Object::Ptr map = metadata ? metadata->getObject("labels") : nullptr;
  if (map) {
    for (const std::string& key : map->getNames()) {
      labels[key] = map->get(key).toString();
    }
  }
  return labels;
}

// A labelSelector of equality and existence requirements, comma-separated: k=v, k==v, k!=v,
// k, !k.
bool matches(const std::string& selector, const std::map<std::string, std::string>& labels) {
  std::istringstream in(selector);
  std::string requirement;
  while (std::getline(in, requirement, ',')) {
    if (requirement.empty()) {
      continue;
    }
    if (requirement.front() == '!') {
      if (labels.count(requirement.substr(1)) != 0) {
        return false;
      }
      continue;
    }
    const std::size_t bang = requirement.find("!=");
    const std::size_t equals = requirement.find('=');
    if (bang != std::string::npos) {
      const auto it = labels.find(requirement.substr(0, bang));
      if (it != labels.end() && it->second == requirement.substr(bang + 2)) {
        return false;
      }
    } else if (equals != std::string::npos) {
      const std::size_t value_at =
          requirement.compare(equals, 2, "==") == 0 ? equals + 2 : equals + 1;
      const auto it = labels.find(requirement.substr(0, equals));
      if (it == labels.end() || it->second != requirement.substr(value_at)) {
        return false;
      }
    } else if (labels.count(requirement) == 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

struct KubeApiDouble::State {
  mutable std::mutex mutex;
  std::uint64_t version = 1000;
  std::uint64_t uids = 0;
  std::vector<Object::Ptr> nodes;
  std::map<std::string, std::vector<Object::Ptr>> policies;  // by namespace
  std::map<std::string, std::vector<Object::Ptr>> quotas;
  std::map<std::pair<std::string, std::string>, Object::Ptr> pods;  // (namespace, name)
  std::function<void(Object::Ptr&)> admission;
  int failures = 0;
  int failure_status = 500;
  std::vector<std::string> requests;
};

class KubeApiDouble::Handler : public Poco::Net::HTTPRequestHandler {
 public:
  Handler(State& state, const std::string& token) : state_(state), token_(token) {}

  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    const std::string body((std::istreambuf_iterator<char>(request.stream())),
                           std::istreambuf_iterator<char>());
    const Poco::URI uri(request.getURI());
    int code = 200;
    const Object::Ptr answer = serve(request, uri, body, &code);
    response.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(code));
    response.setContentType("application/json");
    response.send() << text(answer);
  }

 private:
  Object::Ptr serve(Poco::Net::HTTPServerRequest& request, const Poco::URI& uri,
                    const std::string& body, int* code) {
    std::lock_guard lock(state_.mutex);
    state_.requests.push_back(request.getMethod() + " " + uri.getPathAndQuery());
    if (state_.failures > 0) {
      --state_.failures;
      *code = state_.failure_status;
      return status(*code, "InternalError", "injected failure " + std::to_string(*code));
    }
    if (request.get("Authorization", "") != "Bearer " + token_) {
      *code = 401;
      return status(401, "Unauthorized", "Unauthorized");
    }
    std::vector<std::string> path;
    uri.getPathSegments(path);
    const std::string& method = request.getMethod();
    if (method == "GET" && path == std::vector<std::string>{"api", "v1", "nodes"}) {
      return list("NodeList", state_.nodes, state_.version);
    }
    if (path.size() == 5 && path[0] == "api" && path[2] == "namespaces" &&
        path[4] == "resourcequotas" && method == "GET") {
      return list("ResourceQuotaList", state_.quotas[path[3]], state_.version);
    }
    if (path.size() == 6 && path[0] == "apis" && path[1] == "networking.k8s.io" &&
        path[3] == "namespaces" && path[5] == "networkpolicies" && method == "GET") {
      return list("NetworkPolicyList", state_.policies[path[4]], state_.version);
    }
    if (path.size() >= 5 && path[0] == "api" && path[2] == "namespaces" && path[4] == "pods") {
      const std::string& ns = path[3];
      if (path.size() == 5 && method == "POST") {
        return create(ns, body, code);
      }
      if (path.size() == 5 && method == "GET") {
        std::string selector;
        for (const auto& [key, value] : uri.getQueryParameters()) {
          if (key == "labelSelector") {
            selector = value;
          }
        }
        std::vector<Object::Ptr> items;
        for (const auto& [where, pod] : state_.pods) {
          if (where.first == ns && matches(selector, labelsOf(pod))) {
            items.push_back(pod);
          }
        }
        return list("PodList", items, state_.version);
      }
      if (path.size() == 6) {
        const auto it = state_.pods.find({ns, path[5]});
        if (it == state_.pods.end()) {
          *code = 404;
          return status(404, "NotFound", "pods \"" + path[5] + "\" not found");
        }
        const Object::Ptr pod = it->second;
        if (method == "GET") {
          return pod;
        }
        if (method == "DELETE") {
          state_.pods.erase(it);
          ++state_.version;
          return pod;
        }
      }
    }
    *code = 404;
    return status(404, "NotFound", "the server could not find the requested resource");
  }

  Object::Ptr create(const std::string& ns, const std::string& body, int* code) {
    Object::Ptr pod = parse(body);
    const Object::Ptr metadata = pod ? pod->getObject("metadata") : nullptr;
    if (!pod || !pod->has("kind") || pod->get("kind").toString() != "Pod" || !metadata ||
        !metadata->has("name") ||
        (metadata->has("namespace") && metadata->get("namespace").toString() != ns)) {
      *code = 400;
      return status(400, "BadRequest", "the body is not a Pod of namespace " + ns);
    }
    const std::string name = metadata->get("name").toString();
    if (state_.pods.count({ns, name}) != 0) {
      *code = 409;
      return status(409, "AlreadyExists", "pods \"" + name + "\" already exists");
    }
    Object::Ptr spec = pod->getObject("spec");
    const Array::Ptr containers = spec ? spec->getArray("containers") : nullptr;
    if (!containers || containers->size() == 0) {
      *code = 422;
      return status(422, "Invalid",
                    "Pod \"" + name + "\" is invalid: spec.containers: Required value");
    }
    if (state_.admission) {
      state_.admission(pod);
      spec = pod->getObject("spec");
    }
    for (const char* key : {"hostNetwork", "hostPID", "hostIPC"}) {  // Go's omitempty
      if (spec->has(key) && spec->get(key).isBoolean() && !spec->getValue<bool>(key)) {
        spec->remove(key);
      }
    }
    Poco::JSON::Array::Ptr stored_containers = spec->getArray("containers");
    Array::Ptr statuses = new Array;
    for (std::size_t i = 0; i < stored_containers->size(); ++i) {
      Object::Ptr container = stored_containers->getObject(static_cast<unsigned>(i));
      Object::Ptr resources = container->getObject("resources");
      if (resources) {
        canonicalizeAmounts(resources->getObject("limits"));
        canonicalizeAmounts(resources->getObject("requests"));
      }
      container->set("terminationMessagePath", "/dev/termination-log");
      Object::Ptr running = new Object;
      running->set("startedAt", "2026-12-01T00:00:00Z");
      Object::Ptr state = new Object;
      state->set("running", running);
      Object::Ptr record = new Object;
      record->set("name", container->get("name"));
      record->set("state", state);
      record->set("ready", true);
      statuses->add(record);
    }
    pod->getObject("metadata")->set("namespace", ns);
    pod->getObject("metadata")
        ->set("uid", "00000000-0000-4000-8000-" + std::to_string(100000000000 + ++state_.uids));
    pod->getObject("metadata")->set("resourceVersion", std::to_string(++state_.version));
    spec->set("nodeName",
              state_.nodes.empty()
                  ? "node-1"
                  : state_.nodes.front()->getObject("metadata")->get("name").toString());
    Object::Ptr pod_status = new Object;
    pod_status->set("phase", "Running");
    pod_status->set("containerStatuses", statuses);
    pod->set("status", pod_status);
    state_.pods[{ns, name}] = pod;
    *code = 201;
    return copy(pod);
  }

  State& state_;
  const std::string& token_;
};

namespace {

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  Factory(KubeApiDouble::State& state, const std::string& token) : state_(state), token_(token) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new KubeApiDouble::Handler(state_, token_);
  }

 private:
  KubeApiDouble::State& state_;
  const std::string& token_;
};

}  // namespace

KubeApiDouble::KubeApiDouble(std::string token)
    : token_(std::move(token)),
      state_(std::make_unique<State>()),
      server_(std::make_unique<TlsServer>(new Factory(*state_, token_))) {}

KubeApiDouble::~KubeApiDouble() = default;

std::string KubeApiDouble::url() const { return server_->url(); }

void KubeApiDouble::addNode(const std::string& name, const std::string& cpu,
                            const std::string& memory) {
  std::lock_guard lock(state_->mutex);
  state_->nodes.push_back(parse(
      R"({"metadata":{"name":")" + name + R"("},"status":{"allocatable":{"cpu":")" + cpu +
      R"(","memory":")" + memory + R"("},"conditions":[{"type":"Ready","status":"True"}]}})"));
}

void KubeApiDouble::addNetworkPolicy(const std::string& ns, const std::string& spec_json) {
  std::lock_guard lock(state_->mutex);
  const std::size_t n = state_->policies[ns].size();
  state_->policies[ns].push_back(parse(R"({"metadata":{"name":"policy-)" + std::to_string(n) +
                                       R"("},"spec":)" + spec_json + "}"));
}

void KubeApiDouble::addResourceQuota(const std::string& ns, const std::string& hard_json) {
  std::lock_guard lock(state_->mutex);
  state_->quotas[ns].push_back(
      parse(R"({"metadata":{"name":"quota"},"spec":{"hard":)" + hard_json + "}}"));
}

void KubeApiDouble::setAdmission(std::function<void(Poco::JSON::Object::Ptr&)> admission) {
  std::lock_guard lock(state_->mutex);
  state_->admission = std::move(admission);
}

void KubeApiDouble::failNext(int count, int status_code) {
  std::lock_guard lock(state_->mutex);
  state_->failures = count;
  state_->failure_status = status_code;
}

Poco::JSON::Object::Ptr KubeApiDouble::pod(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(state_->mutex);
  const auto it = state_->pods.find({ns, name});
  return it == state_->pods.end() ? nullptr : copy(it->second);
}

std::size_t KubeApiDouble::podCount() const {
  std::lock_guard lock(state_->mutex);
  return state_->pods.size();
}

std::vector<std::string> KubeApiDouble::requests() const {
  std::lock_guard lock(state_->mutex);
  return state_->requests;
}

}  // namespace scs::testing
