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
#include <scs/backend/launcher_frames.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <map>
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

// A quantity of the forms the tests and the backend use ("2", "500m", "16Gi", "1G", "512Mi"), in
// millicores for cpu and in bytes otherwise; 0 when it is none of them.
std::int64_t amountOf(const std::string& quantity, bool cpu) {
  std::size_t digits = 0;
  while (digits < quantity.size() && std::isdigit(static_cast<unsigned char>(quantity[digits]))) {
    ++digits;
  }
  if (digits == 0) {
    return 0;
  }
  const std::int64_t number = std::stoll(quantity.substr(0, digits));
  static const std::map<std::string, std::int64_t> kScale = {
      {"", 1},           {"k", 1000},       {"M", 1000000},    {"G", 1000000000},
      {"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30}, {"Ti", 1LL << 40}};
  const std::string suffix = quantity.substr(digits);
  if (suffix == "m") {
    return cpu ? number : (number + 999) / 1000;
  }
  const auto it = kScale.find(suffix);
  return it == kScale.end() ? 0 : number * it->second * (cpu ? 1000 : 1);
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
// or the Pod deleted), later writes are dropped and nothing waits. Every write also reaches the
// container's log, whose tail the kubelet keeps; in the mode no_output_before_attach, what is
// written before the attach reaches only the log, as with containerd.
class ContainerOutput : public backend::OutputSink {
 public:
  static constexpr std::size_t kLogTail = 2048;  // the kubelet's FallbackToLogsOnError bytes

  void write(backend::Stream stream, std::string_view bytes) override {
    std::unique_lock lock(mutex_);
    log_.append(bytes);
    if (log_.size() > kLogTail) {
      log_.erase(0, log_.size() - kLogTail);
    }
    if (drop_unattached_ && !attached_) {
      return;
    }
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
  void dropUnattached() {
    std::lock_guard lock(mutex_);
    drop_unattached_ = true;
  }
  void attached() {
    std::lock_guard lock(mutex_);
    attached_ = true;
  }
  // The log's last 80 lines within its last 2048 bytes, as the kubelet reads them.
  std::string logTail() const {
    std::lock_guard lock(mutex_);
    std::size_t at = log_.size();
    int lines = 0;
    while (at > 0 && !(log_[at - 1] == '\n' && at != log_.size() && ++lines == 80)) {
      --at;
    }
    return log_.substr(at);
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable room_;
  std::deque<std::pair<int, std::string>> queue_;
  std::size_t queued_ = 0;
  bool ended_ = false;
  bool closed_ = false;
  bool drop_unattached_ = false;
  bool attached_ = false;
  std::string log_;
};

// The container of one Pod: a sandbox of the fake engine (plugins/fake), which plays the
// `#fake:` script of the code it is given as the sandbox's launcher would.
struct Container {
  std::string id;          // in the fake engine
  bool session = false;    // its launcher serves a session: --session, or the session frame came
  bool delivered = false;  // a run's bundle reached it
  ContainerOutput output;
  bool attached = false;  // stdinOnce: one attach a container (guarded by State::mutex)
  // Guarded by State::mutex: a launcher that refuses as it starts (refuseNextLauncher), and
  // the exit the kubelet saw when it was not the engine's own (that refusal, a group OOM kill).
  std::string refusal;
  std::optional<int> exit_code;
  bool oom_killed = false;
};

// What a list or watch of Pods asks for: fieldSelector metadata.name=NAME, labelSelector,
// resourceVersion and timeoutSeconds.
struct PodQuery {
  std::string name;
  std::vector<std::string> not_phases;  // status.phase!=PHASE
  std::string selector;
  std::string version;
  int seconds = 30;

  explicit PodQuery(const Poco::URI& uri) {
    for (const auto& [key, value] : uri.getQueryParameters()) {
      if (key == "fieldSelector") {
        std::istringstream terms(value);
        std::string term;
        while (std::getline(terms, term, ',')) {
          if (term.rfind("metadata.name=", 0) == 0) {
            name = term.substr(14);
          } else if (term.rfind("status.phase!=", 0) == 0) {
            not_phases.push_back(term.substr(14));
          }
        }
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
    const Object::Ptr status = pod->getObject("status");
    const std::string phase = status ? status->optValue<std::string>("phase", "") : "";
    return (name.empty() || pod_name == name) && matches(selector, labelsOf(pod)) &&
           std::find(not_phases.begin(), not_phases.end(), phase) == not_phases.end();
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
                                    std::optional<int> exit_code = std::nullopt,
                                    const std::string& message = "") {
    Object::Ptr detail = new Object;
    if (!reason.empty()) {
      detail->set("reason", reason);
    }
    if (!message.empty()) {
      detail->set("message", message);
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
      std::vector<std::shared_ptr<Container>> gone;
      for (auto it = pods.begin(); it != pods.end();) {
        advance(it->first, it->second);
        if (finishDeletion(it->first, it->second, &gone)) {
          it = pods.erase(it);
        } else {
          ++it;
        }
      }
      // Taken whole under the lock: a DELETE adds to it while the kills below run unlocked.
      std::vector<std::string> killing;
      killing.swap(to_kill);
      if (!killing.empty()) {
        lock.unlock();
        for (const std::string& id : killing) {
          engine.kill(id);
        }
        lock.lock();
      }
      if (!gone.empty()) {
        lock.unlock();
        for (const std::shared_ptr<Container>& container : gone) {
          container->output.close();
          engine.remove(container->id);
        }
        lock.lock();
      }
      changed.wait_for(lock, std::chrono::milliseconds(10));
    }
  }

  // A Pod being deleted gracefully is gone once its container has ended and its end is
  // recorded: a DELETED event, its container to `gone`. Requires mutex.
  bool finishDeletion(const Key& key, const Object::Ptr& pod,
                      std::vector<std::shared_ptr<Container>>* gone) {
    if (!pod->getObject("metadata")->has("deletionTimestamp")) {
      return false;
    }
    const auto live = containers.find(key);
    const std::string phase = pod->getObject("status")->getValue<std::string>("phase");
    if (live != containers.end() && phase != "Succeeded" && phase != "Failed" &&
        phase != "Pending") {
      return false;
    }
    record(key, "DELETED", pod);
    if (live != containers.end()) {
      gone->push_back(live->second);
      containers.erase(live);
    }
    return true;
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
    Container& container = *live->second;
    if (phase == "Pending" && !hold_pending) {
      status->set("phase", "Running");
      record->set("state", containerState("running", ""));
      record->set("ready", true);
      this->record(key, "MODIFIED", pod);
      if (!container.refusal.empty()) {  // before it reads stdin, so before any attach
        container.output.write(backend::Stream::kStderr,
                               "sandbox launcher: rejected " + container.refusal + "\n");
        container.exit_code = backend::launcher::kRejectedExit;
        container.output.ended();
      }
    } else if (phase == "Running" && modes.oom_group && !container.oom_killed &&
               !container.output.isEnded() && engine.progress(container.id).oom_killed) {
      container.oom_killed = true;  // every process of the container's cgroup, PID 1's too
      container.exit_code = 137;
      to_kill.push_back(container.id);
    } else if (phase == "Running" && container.output.isEnded()) {
      const backend::Exit exit =
          container.id.empty() ? backend::Exit{} : engine.wait(container.id, {}).exit;
      const int code = container.exit_code.value_or(exit.exit_code.value_or(137));
      const bool oom = container.oom_killed || exit.oom_killed;
      status->set("phase", code == 0 ? "Succeeded" : "Failed");
      // FallbackToLogsOnError: a failed container that wrote no termination log (the launcher
      // never does) has its log's tail as the message.
      const Object::Ptr spec_container =
          pod->getObject("spec")->getArray("containers")->getObject(0);
      const bool from_logs =
          code != 0 && spec_container->optValue<std::string>("terminationMessagePolicy", "") ==
                           "FallbackToLogsOnError";
      record->set("state", containerState("terminated",
                                          oom         ? "OOMKilled"
                                          : code == 0 ? "Completed"
                                                      : "Error",
                                          code, from_logs ? container.output.logTail() : ""));
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
  Modes modes;
  std::map<std::string, Object::Ptr> runtime_classes;  // by name
  std::string fail_next_attach;                        // its message
  bool silence_next_attach = false;
  std::string refuse_next_launcher;  // why
  int close_replies = 0;
  int pings = 0;  // that reached an attach, answered or not
  // The time of watches' timeoutSeconds and of the intermediary's idle cut (setClock()).
  std::function<std::chrono::steady_clock::time_point()> now = [] {
    return std::chrono::steady_clock::now();
  };
  std::vector<std::string> to_kill;  // the engine's sandboxes the kubelet ends, outside the lock
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
      std::vector<Object::Ptr> quotas;
      for (const Object::Ptr& quota : state_.quotas[path[3]]) {
        quotas.push_back(withUsage(quota, path[3]));
      }
      return list("ResourceQuotaList", quotas, state_.version);
    }
    if (method == "GET" && path == std::vector<std::string>{"api", "v1", "pods"}) {
      const PodQuery query(uri);
      std::vector<Object::Ptr> items;
      for (const auto& [where, pod] : state_.pods) {
        if (query.selects(where.second, pod)) {
          items.push_back(pod);
        }
      }
      return list("PodList", items, state_.version);
    }
    if (method == "GET" && path.size() == 5 && path[0] == "apis" && path[1] == "node.k8s.io" &&
        path[2] == "v1" && path[3] == "runtimeclasses") {
      const auto it = state_.runtime_classes.find(path[4]);
      if (it == state_.runtime_classes.end()) {
        *code = 404;
        return status(404, "NotFound", "runtimeclasses.node.k8s.io \"" + path[4] + "\" not found");
      }
      return it->second;
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
        if (method == "DELETE" && state_.modes.graceful_deletion &&
            uri.getRawQuery().find("gracePeriodSeconds=0") == std::string::npos) {
          // The kubelet ends the container, and only then is the Pod gone (runKubelet()).
          if (!pod->getObject("metadata")->has("deletionTimestamp")) {
            pod->getObject("metadata")->set("deletionTimestamp", "2026-12-01T00:00:01Z");
            pod->getObject("metadata")->set("deletionGracePeriodSeconds", 1);
            state_.record(it->first, "MODIFIED", pod);
            if (const auto container = state_.containers.find(it->first);
                container != state_.containers.end() && !container->second->id.empty()) {
              state_.to_kill.push_back(container->second->id);
            }
          }
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
    if (Object::Ptr invalid = invalidProfile(name, spec)) {
      *code = 422;
      return invalid;
    }
    // The built-in admission plugins, then the webhooks.
    if (Object::Ptr refused = admitRuntimeClass(name, spec)) {
      *code = 403;
      return refused;
    }
    if (state_.modes.admission_tolerations) {
      addTolerations(spec);
    }
    if (state_.admission) {
      state_.admission(pod);
      spec = pod->getObject("spec");
    }
    // ResourceQuota validates, after every mutation.
    if (Object::Ptr exceeded = exceededQuota(ns, name, spec)) {
      *code = 403;
      return exceeded;
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

  // Validation of a seccomp localhostProfile (ValidateSeccompProfileField): a path beneath the
  // kubelet's seccomp directory, so neither absolute nor with "..". Null when valid.
  static Object::Ptr invalidProfile(const std::string& name, const Object::Ptr& spec) {
    std::vector<Object::Ptr> contexts = {spec->getObject("securityContext")};
    const Array::Ptr containers = spec->getArray("containers");
    for (std::size_t i = 0; i < containers->size(); ++i) {
      contexts.push_back(
          containers->getObject(static_cast<unsigned>(i))->getObject("securityContext"));
    }
    for (const Object::Ptr& context : contexts) {
      const Object::Ptr profile = context ? context->getObject("seccompProfile") : nullptr;
      const std::string path =
          profile ? profile->optValue<std::string>("localhostProfile", "") : "";
      if (!path.empty() &&
          (path.front() == '/' || ("/" + path + "/").find("/../") != std::string::npos)) {
        return status(422, "Invalid",
                      "Pod \"" + name + "\" is invalid: localhostProfile: Invalid value: \"" +
                          path + "\": must be a relative path");
      }
    }
    return nullptr;
  }

  // The RuntimeClass admission plugin: a Pod of a RuntimeClass the cluster does not hold is
  // refused; otherwise its scheduling is merged in (a nodeSelector that conflicts is refused)
  // and its overhead set. Null when admitted.
  Object::Ptr admitRuntimeClass(const std::string& name, Object::Ptr spec) {
    const std::string runtime = spec->optValue<std::string>("runtimeClassName", "");
    if (runtime.empty()) {
      return nullptr;
    }
    const auto it = state_.runtime_classes.find(runtime);
    if (it == state_.runtime_classes.end()) {
      return status(403, "Forbidden",
                    "pods \"" + name + "\" is forbidden: pod rejected: RuntimeClass \"" + runtime +
                        "\" not found");
    }
    if (const Object::Ptr overhead = it->second->getObject("overhead")) {
      spec->set("overhead", copy(overhead->getObject("podFixed")));
    }
    const Object::Ptr scheduling = it->second->getObject("scheduling");
    if (!scheduling) {
      return nullptr;
    }
    if (const Object::Ptr selector = scheduling->getObject("nodeSelector")) {
      Object::Ptr merged = spec->getObject("nodeSelector");
      if (!merged) {
        merged = new Object;
        spec->set("nodeSelector", merged);
      }
      for (const std::string& key : selector->getNames()) {
        if (merged->has(key) && merged->get(key).toString() != selector->get(key).toString()) {
          return status(403, "Forbidden",
                        "pods \"" + name + "\" is forbidden: pod rejected: conflict with the " +
                            "RuntimeClass's nodeSelector " + key);
        }
        merged->set(key, selector->get(key));
      }
    }
    if (const Array::Ptr tolerations = scheduling->getArray("tolerations")) {
      for (std::size_t i = 0; i < tolerations->size(); ++i) {
        addToleration(spec, copy(tolerations->getObject(static_cast<unsigned>(i))));
      }
    }
    return nullptr;
  }

  static void addToleration(Object::Ptr spec, const Object::Ptr& toleration) {
    Array::Ptr tolerations = spec->getArray("tolerations");
    if (!tolerations) {
      tolerations = new Array;
      spec->set("tolerations", tolerations);
    }
    for (std::size_t i = 0; i < tolerations->size(); ++i) {
      if (text(tolerations->getObject(static_cast<unsigned>(i))) == text(toleration)) {
        return;
      }
    }
    tolerations->add(toleration);
  }

  // DefaultTolerationSeconds on every Pod; PodTolerationRestriction's on one not BestEffort.
  static void addTolerations(Object::Ptr spec) {
    for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
      addToleration(
          spec, parse(std::string(R"({"key":")") + key +
                      R"(","operator":"Exists","effect":"NoExecute","tolerationSeconds":300})"));
    }
    const Object::Ptr resources =
        spec->getArray("containers")->getObject(0)->getObject("resources");
    if (resources && (resources->has("requests") || resources->has("limits"))) {
      addToleration(
          spec,
          parse(
              R"({"key":"node.kubernetes.io/memory-pressure","operator":"Exists","effect":"NoSchedule"})"));
    }
  }

  // What a Pod counts against a quota's keys: its containers' requests and limits.
  static std::map<std::string, std::int64_t> usageOf(const Object::Ptr& spec) {
    std::map<std::string, std::int64_t> usage;
    const Array::Ptr containers = spec->getArray("containers");
    for (std::size_t i = 0; containers && i < containers->size(); ++i) {
      const Object::Ptr resources =
          containers->getObject(static_cast<unsigned>(i))->getObject("resources");
      for (const char* kind : {"requests", "limits"}) {
        const Object::Ptr amounts = resources ? resources->getObject(kind) : nullptr;
        for (const char* resource : {"cpu", "memory"}) {
          if (amounts && amounts->has(resource)) {
            const std::int64_t amount =
                amountOf(amounts->getValue<std::string>(resource), std::string(resource) == "cpu");
            usage[std::string(kind) + "." + resource] += amount;
            if (std::string(kind) == "requests") {
              usage[resource] += amount;
            }
          }
        }
      }
    }
    usage["pods"] = 1;
    return usage;
  }

  // What the namespace's Pods that have not ended use. Requires state_.mutex.
  std::map<std::string, std::int64_t> usedIn(const std::string& ns) const {
    std::map<std::string, std::int64_t> used;
    for (const auto& [where, pod] : state_.pods) {
      const std::string phase = pod->getObject("status")->getValue<std::string>("phase");
      if (where.first == ns && phase != "Succeeded" && phase != "Failed") {
        for (const auto& [key, amount] : usageOf(pod->getObject("spec"))) {
          used[key] += amount;
        }
      }
    }
    return used;
  }

  static std::string quantityText(const std::string& key, std::int64_t amount) {
    return key.find("cpu") != std::string::npos ? std::to_string(amount) + "m"
                                                : std::to_string(amount);
  }

  // The quota with its status: hard, and what the namespace uses of each key of it.
  Object::Ptr withUsage(const Object::Ptr& quota, const std::string& ns) const {
    Object::Ptr result = copy(quota);
    const Object::Ptr hard = result->getObject("spec")->getObject("hard");
    const std::map<std::string, std::int64_t> used = usedIn(ns);
    Object::Ptr used_json = new Object;
    for (const std::string& key : hard->getNames()) {
      const auto it = used.find(key);
      used_json->set(key, quantityText(key, it == used.end() ? 0 : it->second));
    }
    Object::Ptr quota_status = new Object;
    quota_status->set("hard", copy(hard));
    quota_status->set("used", used_json);
    result->set("status", quota_status);
    return result;
  }

  // The quota admission plugin: the Pod is refused when, with it, the namespace would use more
  // of a key than a quota's hard. Null when admitted.
  Object::Ptr exceededQuota(const std::string& ns, const std::string& name,
                            const Object::Ptr& spec) const {
    const std::map<std::string, std::int64_t> used = usedIn(ns);
    const std::map<std::string, std::int64_t> asked = usageOf(spec);
    for (const Object::Ptr& quota :
         state_.quotas.count(ns) ? state_.quotas.at(ns) : std::vector<Object::Ptr>{}) {
      const Object::Ptr hard = quota->getObject("spec")->getObject("hard");
      for (const std::string& key : hard->getNames()) {
        const auto wanted = asked.find(key);
        const std::int64_t in_use = used.count(key) ? used.at(key) : 0;
        const std::int64_t limit =
            amountOf(hard->getValue<std::string>(key), key.find("cpu") != std::string::npos);
        if (wanted != asked.end() && in_use + wanted->second > limit) {
          return status(403, "Forbidden",
                        "pods \"" + name + "\" is forbidden: exceeded quota: " +
                            quota->getObject("metadata")->getValue<std::string>("name") +
                            ", requested: " + key + "=" + quantityText(key, wanted->second) +
                            ", used: " + key + "=" + quantityText(key, in_use) +
                            ", limited: " + key + "=" + hard->getValue<std::string>(key));
        }
      }
    }
    return nullptr;
  }

  // The Pod's first container runs in the fake engine, started at once: its launcher idles on
  // stdin until an attach brings the code (or, told to refuse, it refuses as it starts).
  void startContainer(const std::pair<std::string, std::string>& key,
                      const Object::Ptr& container) {
    auto live = std::make_shared<Container>();
    if (state_.modes.no_output_before_attach) {
      live->output.dropUnattached();
    }
    live->refusal = std::exchange(state_.refuse_next_launcher, "");
    if (!live->refusal.empty()) {
      state_.containers[key] = live;
      return;
    }
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

// Each whole frame of a session's stdin, read with the launcher's codec, as the one delivery
// it is for the fake, written again; "" for bytes that are no frame (the fake refuses it).
std::vector<std::string> takeFrames(backend::launcher::StdinFrameReader& reader,
                                    std::string_view bytes) {
  namespace launcher = backend::launcher;
  std::vector<launcher::StdinFrame> frames;
  std::vector<std::string> deliveries;
  if (!reader.feed(bytes, frames)) {
    return {std::string()};
  }
  for (const launcher::StdinFrame& frame : frames) {
    deliveries.push_back(
        frame.kind == launcher::FrameKind::kRun         ? launcher::runFrame(frame.payload)
        : frame.kind == launcher::FrameKind::kInterrupt ? launcher::interruptFrame()
        : frame.kind == launcher::FrameKind::kEgress
            ? launcher::egressFrame(frame.egress_type, frame.stream, frame.value, frame.payload)
            : launcher::sessionFrame(frame.seconds));
  }
  return deliveries;
}

}  // namespace

void KubeApiDouble::Handler::watch(Poco::Net::HTTPServerRequest& request,
                                   Poco::Net::HTTPServerResponse& response) {
  const Poco::URI uri(request.getURI());
  std::vector<std::string> path;
  uri.getPathSegments(path);
  const PodQuery query(uri);
  std::unique_lock lock(state_.mutex);
  // Read before the request is recorded: a test that saw it and then moved the clock moved it
  // after the watch began, as the API server's timeoutSeconds runs from the request's arrival.
  const auto now = state_.now;
  const auto arrived = now();
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
  const auto deadline = arrived + std::chrono::seconds(query.seconds);
  lock.lock();
  while (!state_.stopping && !state_.closing && now() < deadline) {
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
      state_.changed.wait_for(lock, std::chrono::milliseconds(10));  // a test's clock too
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
  using Poco::Net::WebSocket;
  const Poco::URI uri(request.getURI());
  std::vector<std::string> path;
  uri.getPathSegments(path);
  std::map<std::string, std::string> asked;  // the query: container, stdin, stdout, stderr
  for (const auto& [key, value] : uri.getQueryParameters()) {
    asked[key] = value;
  }
  std::shared_ptr<Container> live;
  bool drop = false;
  bool silence = false;
  int code = 0;
  Object::Ptr refused;
  std::string failure;  // after the upgrade, on channel 3
  Modes modes;
  std::function<std::chrono::steady_clock::time_point()> now;
  std::chrono::steady_clock::time_point arrived;
  {
    std::lock_guard lock(state_.mutex);
    modes = state_.modes;
    now = state_.now;
    arrived = now();  // before the request is recorded, as a watch's
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
    } else if (!refused && asked["container"] != "sandbox") {
      code = 400;  // the API server's own check, before any upgrade
      refused = status(400, "BadRequest", "container " + asked["container"] + " is not valid");
    } else if (!refused &&
               (pod->second->getObject("status")->getValue<std::string>("phase") != "Running" ||
                container == state_.containers.end() || container->second->attached ||
                container->second->output.isEnded())) {
      code = 400;
      refused = status(400, "BadRequest", "container sandbox is not running or is attached");
    } else if (!refused) {
      failure = std::exchange(state_.fail_next_attach, "");
      live = container->second;
      live->attached = true;
      live->output.attached();
      drop = std::exchange(state_.drop_next_attach, false);
      silence = std::exchange(state_.silence_next_attach, false);
    }
    if (refused && code == 400 && live == nullptr && asked["container"] == "sandbox" &&
        modes.attach_failure_after_upgrade) {
      failure = refused->getValue<std::string>("message");  // the kubelet's words, upgraded first
      refused = nullptr;
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
    Container* container;
    ~Closing() {
      if (container != nullptr) {
        container->output.close();  // the client is gone: its program never waits
      }
    }
  } closing{live.get()};
  WebSocket ws(request, response);
  // The end the API server sends, and the client's close frame in answer, which it awaits.
  const auto finish = [&](const std::string& final_status) {
    sendMessage(ws, 3, final_status);
    ws.shutdown();
    // Frames sent before the client saw the close (a ping) may come first; a second at most.
    Poco::Buffer<char> frame(0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until &&
           ws.poll(Poco::Timespan(0, 50000), Poco::Net::Socket::SELECT_READ)) {
      int flags = 0;
      frame.resize(0);
      if (ws.receiveFrame(frame, flags) <= 0 && flags == 0) {
        return;  // closed without answering
      }
      if ((flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) {
        std::lock_guard lock(state_.mutex);
        ++state_.close_replies;
        return;
      }
    }
  };
  try {
    if (!failure.empty()) {
      finish(text(status(500, "InternalError", failure)));
      return;
    }
    const bool with_stdin = asked["stdin"] == "true";
    const std::map<int, bool> sends = {{1, asked["stdout"] == "true"},
                                       {2, asked["stderr"] == "true"}};
    sendMessage(ws, 1, "");  // the API server's first, empty, message
    std::string input;
    backend::launcher::StdinFrameReader frames_in;  // once the sandbox is a session's
    Poco::Buffer<char> frame(0);
    auto active = arrived;  // the last frame either way
    const auto idle_cut = std::chrono::milliseconds(modes.idle_cut_ms);
    bool silent = false;
    while (!state_.closing) {
      if (modes.idle_cut_ms > 0 && now() - active > idle_cut) {
        ws.close();  // the intermediary drops the connection: no close frame
        return;
      }
      if (ws.poll(Poco::Timespan(0, 10000), Poco::Net::Socket::SELECT_READ)) {
        int flags = 0;
        frame.resize(0);
        const int got = ws.receiveFrame(frame, flags);
        const int opcode = flags & WebSocket::FRAME_OP_BITMASK;
        if ((got == 0 && flags == 0) || got < 0 || opcode == WebSocket::FRAME_OP_CLOSE) {
          return;  // the client went away: the container runs on, as the kubelet's would
        }
        if (opcode == WebSocket::FRAME_OP_PING) {
          std::lock_guard lock(state_.mutex);
          ++state_.pings;
        }
        if (silent) {
          continue;  // half-open: nothing the client sends arrives, nothing comes back
        }
        active = now();
        if (opcode == WebSocket::FRAME_OP_PING) {
          ws.sendFrame(frame.begin(), got,
                       static_cast<int>(WebSocket::FRAME_FLAG_FIN) |
                           static_cast<int>(WebSocket::FRAME_OP_PONG));
          continue;
        }
        const std::string message(frame.begin(), frame.size());
        if (message.size() >= 1 && message[0] == 0 && with_stdin) {
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
            for (const std::string& one : takeFrames(frames_in, input)) {
              deliver(*live, one);
            }
            input.clear();
          }
        } else if (message == std::string("\xff\x00", 2) && with_stdin) {  // v5: stdin ends
          if (!live->session && !live->delivered) {
            live->delivered = true;
            deliver(*live, input);
          }
          if (drop) {
            ws.close();  // without a close frame, the output unread
            return;
          }
          silent = silence;
        }
      }
      if (silent) {
        continue;
      }
      bool ended = false;
      for (const auto& [channel, bytes] : live->output.take(&ended)) {
        if (sends.at(channel)) {
          sendMessage(ws, channel, bytes);
          active = now();
        }
      }
      if (ended) {
        break;
      }
    }
    finish(R"({"metadata":{},"status":"Success"})");
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
      server_(std::make_unique<TlsServer>(new Factory(*state_, token_))) {
  addRuntimeClass("runc", "", "");
}

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

KubeApiDouble::Modes KubeApiDouble::faithful() {
  Modes modes;
  modes.attach_failure_after_upgrade = true;
  modes.no_output_before_attach = true;
  modes.oom_group = true;
  modes.graceful_deletion = true;
  modes.admission_tolerations = true;
  return modes;  // idle_cut_ms is a choice of the cluster's network, not of Kubernetes
}

void KubeApiDouble::setModes(const Modes& modes) {
  std::lock_guard lock(state_->mutex);
  state_->modes = modes;
}

void KubeApiDouble::addRuntimeClass(const std::string& name, const std::string& scheduling_json,
                                    const std::string& overhead_json) {
  Object::Ptr runtime_class = parse(R"({"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass",)"
                                    R"("metadata":{"name":")" +
                                    name + R"("},"handler":")" + name + R"("})");
  if (!scheduling_json.empty()) {
    runtime_class->set("scheduling", parse(scheduling_json));
  }
  if (!overhead_json.empty()) {
    runtime_class->set("overhead", parse(R"({"podFixed":)" + overhead_json + "}"));
  }
  std::lock_guard lock(state_->mutex);
  state_->runtime_classes[name] = runtime_class;
}

void KubeApiDouble::failNextAttach(const std::string& message) {
  std::lock_guard lock(state_->mutex);
  state_->fail_next_attach = message;
}

void KubeApiDouble::silenceNextAttach() {
  std::lock_guard lock(state_->mutex);
  state_->silence_next_attach = true;
}

void KubeApiDouble::refuseNextLauncher(const std::string& why) {
  std::lock_guard lock(state_->mutex);
  state_->refuse_next_launcher = why;
}

void KubeApiDouble::addPod(const std::string& ns, const std::string& pod_json) {
  const Object::Ptr pod = parse(pod_json);
  const std::string name = pod->getObject("metadata")->getValue<std::string>("name");
  std::lock_guard lock(state_->mutex);
  pod->getObject("metadata")->set("namespace", ns);
  state_->pods[{ns, name}] = pod;
  state_->record({ns, name}, "ADDED", pod);
}

int KubeApiDouble::closeReplies() const {
  std::lock_guard lock(state_->mutex);
  return state_->close_replies;
}

int KubeApiDouble::pingsSeen() const {
  std::lock_guard lock(state_->mutex);
  return state_->pings;
}

void KubeApiDouble::setClock(std::function<std::chrono::steady_clock::time_point()> now) {
  std::lock_guard lock(state_->mutex);
  state_->now = std::move(now);
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
