#include "support/kube_api_double.h"

#include <Poco/Buffer.h>
#include <Poco/JSON/Array.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/URI.h>
#include <scs/backend/launcher_protocol.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "fake_backend.h"
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

// Answers `answer` as JSON with `code`.
void reply(Poco::Net::HTTPServerResponse& response, int code, const Object::Ptr& answer) {
  response.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(code));
  response.setContentType("application/json");
  response.send() << text(answer);
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

constexpr std::size_t kQueueCap = 4u << 20;  // output waiting for attach, before the program waits

// What the container writes, as the kubelet holds it for attach: queued until an attach reads
// it; the program waits while the queue is full (as on a pipe). Once closed (the attach is gone,
// or the Pod deleted), later writes are dropped and nothing waits.
class ContainerOutput : public backend::OutputSink {
 public:
  void write(backend::Stream stream, std::string_view bytes) override {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return closed_ || queued_ < kQueueCap; });
    if (!closed_ && !bytes.empty()) {
      queue_.emplace_back(stream == backend::Stream::kStdout ? 1 : 2, std::string(bytes));
      queued_ += bytes.size();
    }
  }
  void ended() override {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  // Takes what is queued; `*ended` once the program has ended, or the output was closed, and
  // nothing more will come.
  std::deque<std::pair<int, std::string>> take(bool* ended) {
    std::lock_guard lock(mutex_);
    std::deque<std::pair<int, std::string>> taken;
    taken.swap(queue_);
    queued_ = 0;
    *ended = ended_ || closed_;
    room_.notify_all();
    return taken;
  }
  bool isEnded() const {
    std::lock_guard lock(mutex_);
    return ended_;
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    room_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable room_;
  std::deque<std::pair<int, std::string>> queue_;
  std::size_t queued_ = 0;
  bool ended_ = false;
  bool closed_ = false;
};

// The container of one Pod: a sandbox of the fake engine (plugins/fake), which plays the
// `#fake:` script of the code it is given as the sandbox's launcher would.
struct Container {
  std::string id;  // in the fake engine
  bool session = false;    // its launcher serves a session: --session, or the session frame came
  bool delivered = false;  // a run's bundle reached it
  ContainerOutput output;
  bool attached = false;  // stdinOnce: one attach a container (guarded by State::mutex)
};

// What a list or watch of Pods asks for: fieldSelector metadata.name=NAME, labelSelector,
// resourceVersion and timeoutSeconds.
struct PodQuery {
  std::string name;
  std::string selector;
  std::string version;
  int seconds = 30;

  explicit PodQuery(const Poco::URI& uri) {
    for (const auto& [key, value] : uri.getQueryParameters()) {
      if (key == "fieldSelector" && value.rfind("metadata.name=", 0) == 0) {
        name = value.substr(14);
      } else if (key == "labelSelector") {
        selector = value;
      } else if (key == "resourceVersion") {
        version = value;
      } else if (key == "timeoutSeconds" && allDigits(value)) {
        seconds = std::stoi(value);
      }
    }
  }

  // Whether the Pod `pod_name` with `pod` as its object is one it asks for.
  bool selects(const std::string& pod_name, const Object::Ptr& pod) const {
    return (name.empty() || pod_name == name) && matches(selector, labelsOf(pod));
  }
};

}  // namespace

struct KubeApiDouble::State {
  using Key = std::pair<std::string, std::string>;  // (namespace, name)

  // One change of a Pod, as a watch reports it.
  struct Event {
    std::uint64_t version = 0;
    Key key;
    std::string type;  // ADDED, MODIFIED, DELETED
    std::string object;
  };
  static constexpr std::size_t kEventsKept = 256;

  State() : kubelet([this] { runKubelet(); }) {}

  ~State() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    kubelet.join();
    for (auto& [key, container] : containers) {
      container->output.close();  // no program of the engine waits to write as it ends
    }
  }

  // A change to the Pod at `key`: a new resourceVersion, and an event for watches. Requires
  // mutex.
  void record(const Key& key, const std::string& type, const Object::Ptr& pod) {
    pod->getObject("metadata")->set("resourceVersion", std::to_string(++version));
    events.push_back({version, key, type, text(pod)});
    if (events.size() > kEventsKept) {
      events.pop_front();
      oldest_watchable = events.front().version - 1;
    }
    changed.notify_all();
  }

  static Object::Ptr containerState(const std::string& state, const std::string& reason,
                                    std::optional<int> exit_code = std::nullopt) {
    Object::Ptr detail = new Object;
    if (!reason.empty()) {
      detail->set("reason", reason);
    }
    if (exit_code) {
      detail->set("exitCode", *exit_code);
    }
    if (state != "waiting") {
      detail->set("startedAt", "2026-12-01T00:00:00Z");
    }
    Object::Ptr wrapper = new Object;
    wrapper->set(state, detail);
    return wrapper;
  }

  // The kubelet, on its own time: a Pending Pod runs (unless held), and a running one whose
  // container ended (the fake's exit) is recorded as terminated, with the phase that follows.
  void runKubelet() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      for (auto& [key, pod] : pods) {
        advance(key, pod);
      }
      changed.wait_for(lock, std::chrono::milliseconds(10));
    }
  }

  void advance(const Key& key, const Object::Ptr& pod) {
    Object::Ptr status = pod->getObject("status");
    const auto live = containers.find(key);
    if (live == containers.end() || !status) {
      return;
    }
    const Array::Ptr records = status->getArray("containerStatuses");
    Object::Ptr record = records && records->size() > 0 ? records->getObject(0) : nullptr;
    const std::string phase = status->getValue<std::string>("phase");
    if (phase == "Pending" && !hold_pending) {
      status->set("phase", "Running");
      record->set("state", containerState("running", ""));
      record->set("ready", true);
      this->record(key, "MODIFIED", pod);
    } else if (phase == "Running" && live->second->output.isEnded()) {
      const backend::Exit exit = engine.wait(live->second->id, {}).exit;
      const int code = exit.exit_code.value_or(137);
      status->set("phase", code == 0 ? "Succeeded" : "Failed");
      record->set("state", containerState("terminated",
                                          exit.oom_killed ? "OOMKilled"
                                          : code == 0     ? "Completed"
                                                          : "Error",
                                          code));
      record->set("ready", false);
      this->record(key, "MODIFIED", pod);
    }
  }

  mutable std::mutex mutex;
  std::uint64_t version = 1000;
  std::uint64_t uids = 0;
  std::vector<Object::Ptr> nodes;
  std::map<std::string, std::vector<Object::Ptr>> policies;  // by namespace
  std::map<std::string, std::vector<Object::Ptr>> quotas;
  std::map<std::pair<std::string, std::string>, Object::Ptr> pods;  // (namespace, name)
  std::function<void(Object::Ptr&)> admission;
  // Declared before the engine, which ends its sandboxes (and their writes) first.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Container>> containers;
  fake::FakeBackend engine{fake::Options{}, nullptr};
  bool drop_next_attach = false;
  bool hold_pending = false;
  int failures = 0;
  int failure_status = 500;
  std::vector<std::string> requests;
  std::deque<Event> events;            // the last kEventsKept changes, oldest first
  std::uint64_t oldest_watchable = 0;  // a watch from an older version is told 410 Gone
  std::condition_variable changed;
  bool stopping = false;
  // Requests being handled, and whether the double is going away: a watch or an attach ends
  // then, and a new request is answered 503, so no handler outlives the state.
  int active = 0;
  std::atomic<bool> closing{false};
  std::thread kubelet;  // last: started once everything above exists

  void closeHandlers() {
    std::unique_lock lock(mutex);
    closing = true;
    changed.notify_all();
    changed.wait(lock, [&] { return active == 0; });
  }
};

namespace {

// One request being handled, counted for KubeApiDouble's destructor.
class Handling {
 public:
  explicit Handling(KubeApiDouble::State& state) : state_(state) {
    std::lock_guard lock(state_.mutex);
    ++state_.active;
  }
  ~Handling() {
    std::lock_guard lock(state_.mutex);
    --state_.active;
    state_.changed.notify_all();
  }
  Handling(const Handling&) = delete;
  Handling& operator=(const Handling&) = delete;

 private:
  KubeApiDouble::State& state_;
};

}  // namespace

class KubeApiDouble::Handler : public Poco::Net::HTTPRequestHandler {
 public:
  Handler(State& state, const std::string& token) : state_(state), token_(token) {}

  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    const Handling handling(state_);
    if (state_.closing) {
      reply(response, 503, status(503, "ServiceUnavailable", "the double is going away"));
      return;
    }
    if (Poco::icompare(request.get("Upgrade", ""), "websocket") == 0) {
      attach(request, response);
      return;
    }
    if (request.getMethod() == "GET" && isWatch(Poco::URI(request.getURI()))) {
      watch(request, response);
      return;
    }
    const std::string body((std::istreambuf_iterator<char>(request.stream())),
                           std::istreambuf_iterator<char>());
    const Poco::URI uri(request.getURI());
    int code = 200;
    const Object::Ptr answer = serve(request, uri, body, &code);
    for (const std::shared_ptr<Container>& container : deleted_) {  // outside the lock
      container->output.close();
      state_.engine.remove(container->id);
    }
    reply(response, code, answer);
  }

 private:
  // Records the request as `seen` and answers what every request meets first: a failure
  // failNext() injected, or 401 without the token; null when the request may go on. Requires
  // state_.mutex.
  Object::Ptr refusal(Poco::Net::HTTPServerRequest& request, const std::string& seen, int* code) {
    state_.requests.push_back(seen);
    if (state_.failures > 0) {
      --state_.failures;
      *code = state_.failure_status;
      return status(*code, "InternalError", "injected failure " + std::to_string(*code));
    }
    if (request.get("Authorization", "") != "Bearer " + token_) {
      *code = 401;
      return status(401, "Unauthorized", "Unauthorized");
    }
    return nullptr;
  }

  Object::Ptr serve(Poco::Net::HTTPServerRequest& request, const Poco::URI& uri,
                    const std::string& body, int* code) {
    std::lock_guard lock(state_.mutex);
    if (Object::Ptr refused =
            refusal(request, request.getMethod() + " " + uri.getPathAndQuery(), code)) {
      return refused;
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
        const PodQuery query(uri);
        std::vector<Object::Ptr> items;
        for (const auto& [where, pod] : state_.pods) {
          if (where.first == ns && query.selects(where.second, pod)) {
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
          const auto key = it->first;
          state_.record(key, "DELETED", pod);
          state_.pods.erase(it);
          if (const auto container = state_.containers.find(key);
              container != state_.containers.end()) {
            deleted_.push_back(container->second);  // its program ends once the lock is free
            state_.containers.erase(container);
          }
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
      Object::Ptr record = new Object;
      record->set("name", container->get("name"));
      record->set("state", State::containerState("waiting", "ContainerCreating"));
      record->set("ready", false);
      statuses->add(record);
    }
    pod->getObject("metadata")->set("namespace", ns);
    pod->getObject("metadata")
        ->set("uid", "00000000-0000-4000-8000-" + std::to_string(100000000000 + ++state_.uids));
    spec->set("nodeName",
              state_.nodes.empty()
                  ? "node-1"
                  : state_.nodes.front()->getObject("metadata")->get("name").toString());
    Object::Ptr pod_status = new Object;
    pod_status->set("phase", "Pending");
    pod_status->set("containerStatuses", statuses);
    pod->set("status", pod_status);
    state_.pods[{ns, name}] = pod;
    state_.record({ns, name}, "ADDED", pod);
    startContainer({ns, name}, stored_containers->getObject(0));
    *code = 201;
    return copy(pod);
  }

  // The Pod's first container runs in the fake engine, started at once: its launcher idles on
  // stdin until an attach brings the code.
  void startContainer(const std::pair<std::string, std::string>& key,
                      const Object::Ptr& container) {
    auto live = std::make_shared<Container>();
    backend::SandboxSpec spec;
    spec.run_id = key.second;
    spec.command = json::strings(json::array(container, "command"));
    for (const std::string& word : spec.command) {
      spec.session = spec.session || word == "--session";
    }
    live->session = spec.session;
    const backend::CreateReply created = state_.engine.create(spec);
    live->id = created.id;
    state_.engine.start(live->id, &live->output);
    state_.containers[key] = live;
  }

  // The code to the container's program. A bundle the program refuses (a script the fake
  // engine cannot play) ends the container, as the launcher ends the sandbox over a bad bundle.
  void deliver(Container& live, const std::string& bundle) {
    const backend::Status delivered = state_.engine.deliver(live.id, bundle);
    if (!delivered.ok()) {
      live.output.write(backend::Stream::kStderr,
                        "sandbox launcher: rejected bundle: " + delivered.message + "\n");
      state_.engine.kill(live.id);
    }
  }

  static bool isWatch(const Poco::URI& uri) {
    for (const auto& [key, value] : uri.getQueryParameters()) {
      if (key == "watch" && (value == "1" || value == "true")) {
        return true;
      }
    }
    return false;
  }

  // GET /api/v1/namespaces/{ns}/pods?watch=1 with resourceVersion, fieldSelector
  // (metadata.name=NAME), labelSelector and timeoutSeconds: every change of a matching Pod after
  // that version, one JSON event per line as it happens, until timeoutSeconds; a version older
  // than the changes kept is told 410 Gone (an ERROR event), as the API server tells it.
  void watch(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response);

  // GET .../pods/{name}/attach as a WebSocket on v5.channel.k8s.io: stdin to the container's
  // launcher (the whole bundle at the close of stdin; a session's frames one by one as they
  // complete), its output back on channels 1 and 2, the Status on 3 once it has ended.
  void attach(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response);

  State& state_;
  const std::string& token_;
  std::vector<std::shared_ptr<Container>> deleted_;  // by this request
};

namespace {

void sendMessage(Poco::Net::WebSocket& ws, int channel, const std::string& payload) {
  const std::string message = std::string(1, static_cast<char>(channel)) + payload;
  ws.sendFrame(message.data(), static_cast<int>(message.size()),
               Poco::Net::WebSocket::FRAME_BINARY);
}

// Takes each whole frame of a session's stdin ("SCS-RUN <bytes>\n" and the bundle, or
// "SCS-INTERRUPT\n") off the front of `buffer`.
// Whether `input` holds a whole ustar archive: headers and contents up to the two zero blocks
// that end it. The launcher of a sandbox prepared for a run reads its bundle to that end, since
// such a sandbox's stdin stays open (it could have become a session's).
bool wholeArchive(const std::string& input) {
  constexpr std::size_t kBlock = 512;
  for (std::size_t at = 0; at + 2 * kBlock <= input.size();) {
    if (input.compare(at, 2 * kBlock, std::string(2 * kBlock, '\0')) == 0) {
      return true;
    }
    const std::size_t size = std::stoull(input.substr(at + 124, 11), nullptr, 8);
    at += kBlock + (size + kBlock - 1) / kBlock * kBlock;
  }
  return false;
}

std::vector<std::string> takeFrames(std::string& buffer) {
  std::vector<std::string> frames;
  while (true) {
    const std::size_t newline = buffer.find('\n');
    if (newline == std::string::npos) {
      return frames;
    }
    std::size_t size = newline + 1;
    if (buffer.rfind("SCS-RUN ", 0) == 0) {
      size += std::stoull(buffer.substr(8, newline - 8));
      if (buffer.size() < size) {
        return frames;
      }
    }
    frames.push_back(buffer.substr(0, size));
    buffer.erase(0, size);
  }
}

}  // namespace

void KubeApiDouble::Handler::watch(Poco::Net::HTTPServerRequest& request,
                                   Poco::Net::HTTPServerResponse& response) {
  const Poco::URI uri(request.getURI());
  std::vector<std::string> path;
  uri.getPathSegments(path);
  const PodQuery query(uri);
  std::unique_lock lock(state_.mutex);
  int code = 400;
  Object::Ptr refused = refusal(request, "GET " + uri.getPathAndQuery(), &code);
  if (!refused && (path.size() != 5 || path[0] != "api" || path[2] != "namespaces" ||
                   path[4] != "pods" || !allDigits(query.version))) {
    refused = status(400, "BadRequest", "this double watches pods from a resourceVersion");
  }
  if (refused) {
    lock.unlock();
    reply(response, code, refused);
    return;
  }
  const std::string ns = path[3];
  std::uint64_t from = std::stoull(query.version);
  response.setChunkedTransferEncoding(true);
  response.setContentType("application/json");
  const bool expired = from < state_.oldest_watchable;
  lock.unlock();
  std::ostream& out = response.send();
  if (expired) {
    out << R"({"type":"ERROR","object":)"
        << text(status(410, "Expired", "too old resource version: " + query.version)) << "}\n";
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(query.seconds);
  lock.lock();
  while (!state_.stopping && !state_.closing && std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> lines;
    for (const State::Event& event : state_.events) {
      if (event.version <= from || event.key.first != ns) {
        continue;
      }
      from = event.version;
      if (!query.selects(event.key.second, parse(event.object))) {
        continue;
      }
      lines.push_back(R"({"type":")" + event.type + R"(","object":)" + event.object + "}\n");
    }
    if (lines.empty()) {
      state_.changed.wait_until(lock, deadline);
      continue;
    }
    lock.unlock();
    for (const std::string& line : lines) {
      out << line;
    }
    out.flush();
    if (!out) {
      return;  // the client went away
    }
    lock.lock();
  }
}

void KubeApiDouble::Handler::attach(Poco::Net::HTTPServerRequest& request,
                                    Poco::Net::HTTPServerResponse& response) {
  const Poco::URI uri(request.getURI());
  std::vector<std::string> path;
  uri.getPathSegments(path);
  std::shared_ptr<Container> live;
  bool drop = false;
  int code = 0;
  Object::Ptr refused;
  {
    std::lock_guard lock(state_.mutex);
    const auto pod = path.size() == 7 && path[0] == "api" && path[2] == "namespaces" &&
                             path[4] == "pods" && path[6] == "attach"
                         ? state_.pods.find({path[3], path[5]})
                         : state_.pods.end();
    const auto container =
        pod == state_.pods.end() ? state_.containers.end() : state_.containers.find(pod->first);
    refused = refusal(request, "ATTACH " + uri.getPathAndQuery(), &code);
    if (!refused && pod == state_.pods.end()) {
      code = 404;
      refused = status(404, "NotFound", "pods not found");
    } else if (!refused &&
               (pod->second->getObject("status")->getValue<std::string>("phase") != "Running" ||
                container == state_.containers.end() || container->second->attached)) {
      code = 400;
      refused = status(400, "BadRequest", "container sandbox is not running or is attached");
    } else if (!refused) {
      live = container->second;
      live->attached = true;
      drop = std::exchange(state_.drop_next_attach, false);
    }
  }
  if (refused) {
    reply(response, code, refused);
    return;
  }
  const bool v5 =
      request.get("Sec-WebSocket-Protocol", "").find("v5.channel.k8s.io") != std::string::npos;
  response.set("Sec-WebSocket-Protocol", v5 ? "v5.channel.k8s.io" : "v4.channel.k8s.io");
  struct Closing {
    Container& container;
    ~Closing() { container.output.close(); }  // the client is gone: its program never waits
  } closing{*live};
  Poco::Net::WebSocket ws(request, response);
  try {
    sendMessage(ws, 1, "");  // the API server's first, empty, message
    std::string input;
    Poco::Buffer<char> frame(0);
    while (!state_.closing) {
      if (ws.poll(Poco::Timespan(0, 10000), Poco::Net::Socket::SELECT_READ)) {
        int flags = 0;
        frame.resize(0);
        const int got = ws.receiveFrame(frame, flags);
        if (got <= 0 || (flags & Poco::Net::WebSocket::FRAME_OP_BITMASK) ==
                            Poco::Net::WebSocket::FRAME_OP_CLOSE) {
          return;  // the client went away: the container runs on, as the kubelet's would
        }
        const std::string message(frame.begin(), frame.size());
        if (message.size() >= 1 && message[0] == 0) {
          input += message.substr(1);
          const std::string becomes = std::string(backend::launcher::kSessionFrame) + " ";
          if (!live->session && !live->delivered && input.rfind(becomes, 0) == 0 &&
              input.find('\n') != std::string::npos) {
            const std::size_t header = input.find('\n') + 1;
            deliver(*live, input.substr(0, header));  // the prepared sandbox becomes a session's
            input.erase(0, header);
            live->session = true;
          } else if (!live->session && !live->delivered && input.size() > becomes.size() &&
                     input.rfind(becomes, 0) != 0 && wholeArchive(input)) {
            live->delivered = true;
            deliver(*live, input);
          }
          if (live->session) {
            for (const std::string& one : takeFrames(input)) {
              deliver(*live, one);
            }
          }
        } else if (message == std::string("\xff\x00", 2)) {  // v5: stdin ends
          if (!live->session && !live->delivered) {
            live->delivered = true;
            deliver(*live, input);
          }
          if (drop) {
            ws.close();  // without a close frame, the output unread
            return;
          }
        }
      }
      bool ended = false;
      for (const auto& [channel, bytes] : live->output.take(&ended)) {
        sendMessage(ws, channel, bytes);
      }
      if (ended) {
        break;
      }
    }
    sendMessage(ws, 3, R"({"metadata":{},"status":"Success"})");
    ws.shutdown();
  } catch (const Poco::Exception&) {
    // the client dropped the connection
  }
}

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

KubeApiDouble::~KubeApiDouble() {
  state_->closeHandlers();  // every watch and attach ends, and no handler uses the state after
  server_.reset();
  state_->closeHandlers();  // one that began while the server stopped has ended too
}

std::string KubeApiDouble::url() const { return server_->url(); }

std::string KubeApiDouble::kubeconfig(const std::string& ns) const {
  return "apiVersion: v1\nkind: Config\ncurrent-context: double\nclusters:\n- name: double\n"
         "  cluster:\n    server: " +
         url() + "\n    certificate-authority-data: " +
         json::encodeBase64(Certificates::get().pem("ca.crt")) +
         "\nusers:\n- name: scs\n  user:\n    token: " + token_ +
         "\ncontexts:\n- name: double\n  context:\n    cluster: double\n    user: scs\n"
         "    namespace: " +
         ns + "\n";
}

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

void KubeApiDouble::holdPending(bool hold) {
  std::lock_guard lock(state_->mutex);
  state_->hold_pending = hold;
}

void KubeApiDouble::expireWatchHistory() {
  std::lock_guard lock(state_->mutex);
  state_->events.clear();
  state_->oldest_watchable = ++state_->version;  // other objects of the cluster changed too
}

void KubeApiDouble::dropNextAttach() {
  std::lock_guard lock(state_->mutex);
  state_->drop_next_attach = true;
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
