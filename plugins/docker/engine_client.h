#pragma once

// EngineClient: the Engine API calls the Docker backend makes (version, info, create,
// inspect, attach, wait, start, kill, remove, list, events), and how a reply maps to a Status.

#include <scs/backend/backend.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine_socket.h"
#include "json_access.h"

namespace scs::docker {

struct ApiVersion {
  int major = 0;
  int minor = 0;
  std::string text() const { return std::to_string(major) + "." + std::to_string(minor); }
  auto operator<=>(const ApiVersion&) const = default;
};

// The newest API this client speaks (its fields are the same back to kOldestApi), and the
// oldest that carries every field the create body sends (CgroupnsMode came in 1.41).
inline constexpr ApiVersion kNewestApi{1, 47};
inline constexpr ApiVersion kOldestApi{1, 41};

std::optional<ApiVersion> parseApiVersion(std::string_view text);

// min(server ApiVersion, kNewestApi), refused (kUnsupported) when that is below the server's
// MinAPIVersion or below kOldestApi. `version_json` is the body of GET /version.
struct Negotiation {
  backend::Status status;
  ApiVersion version;
};
Negotiation negotiateApiVersion(const std::string& version_json);

// Maps a transport failure or an HTTP status to a backend status: 2xx ok; 404 kNotFound;
// other 4xx kRejected; 5xx and connection failures kUnavailable; a passed deadline
// kTimeout; anything else kInternal. The engine's "message" is quoted in the status message.
backend::Status statusFromReply(const std::string& operation, const HttpReply& reply);

// An Engine API call's status and, when it is ok, what the engine answered. A plugin speaks
// backend::Status, not the core's Result.
template <typename T>
struct EngineReply {
  backend::Status status;
  T value{};
};

struct EngineInfo {
  int cpus = 0;
  std::int64_t memory_bytes = 0;
  int cgroup_version = 1;
  bool default_seccomp = false;  // SecurityOptions lists a seccomp profile other than unconfined
  bool experimental = false;     // ExperimentalBuild: the checkpoint endpoints answer
  std::string root_dir;          // DockerRootDir: containers/<id>/checkpoints is a container's
  // "engine" and each component GET /version lists (containerd, runc, docker-init), lower case,
  // to its version; "<runtime> path" for each runtime of GET /info.
  std::map<std::string, std::string> versions;
};

struct WaitOutcome {
  std::int64_t status_code = -1;
  std::string error;  // the engine's Error.Message, when it could not run or wait
};

struct ImageSummary {
  std::vector<std::string> tags;  // "repo:tag", as RepoTags lists them
  std::map<std::string, std::string> labels;
};

struct ContainerSummary {
  std::string id;
  std::map<std::string, std::string> labels;
};

// The Engine API calls the backend needs, on versioned paths. Thread-safe.
class EngineClient {
 public:
  EngineClient(EngineSocket& transport, std::chrono::milliseconds timeout);

  // GET /version (unversioned) and the negotiation; must succeed before any other call.
  backend::Status negotiate();
  const ApiVersion& version() const { return version_; }

  EngineReply<EngineInfo> info();
  // POST /containers/create?name=<name>; the value is the new container's id.
  EngineReply<std::string> create(const std::string& name, const json::ObjectPtr& body,
                                  std::vector<std::string>* warnings);
  // GET /containers/{id}/json: the engine's record.
  EngineReply<json::ObjectPtr> inspect(const std::string& id);
  // POST /containers/{id}/attach with stdin, stdout and stderr, hijacked.
  EngineReply<ConnectionPtr> attach(const std::string& id);
  // POST /containers/{id}/wait?condition=...: returns once the engine has registered the
  // wait (the headers arrived); the body, read from the connection, is the outcome.
  EngineReply<ConnectionPtr> openWait(const std::string& id, const std::string& condition);
  // POST /containers/{id}/start; with `checkpoint`, from that checkpoint of the container (its
  // memory and files, as checkpoint() saved them), with up to `timeout` to read it.
  backend::Status start(const std::string& id, const std::string& checkpoint = {},
                        std::chrono::milliseconds timeout = {});
  // POST /containers/{id}/checkpoints {CheckpointID, CheckpointDir, Exit: true}: saves the
  // container's processes and files under `directory` (the engine's own checkpoint directory of
  // another container, which may then start from it), and stops it; up to `timeout`.
  // Experimental engines only.
  backend::Status checkpoint(const std::string& id, const std::string& name,
                             const std::string& directory, std::chrono::milliseconds timeout);
  // DELETE /containers/{id}/checkpoints/{name}. One that is gone counts as deleted.
  backend::Status deleteCheckpoint(const std::string& id, const std::string& name);
  // POST /containers/{id}/kill?signal=KILL. A container that is not running counts as killed.
  backend::Status kill(const std::string& id);
  // DELETE /containers/{id}?force=1&v=1. A container that is gone counts as removed.
  backend::Status remove(const std::string& id);
  // GET /containers/json?all=1 filtered by the label key.
  EngineReply<std::vector<ContainerSummary>> list(const std::string& label_key);
  // GET /images/{name}/json: the image's record; kNotFound when there is none.
  EngineReply<json::ObjectPtr> inspectImage(const std::string& name);
  // PUT /containers/{id}/archive?path=/: unpacks the ustar `archive` into the container's
  // filesystem, with up to `timeout` for the engine to write it.
  backend::Status putArchive(const std::string& id, std::string archive,
                             std::chrono::milliseconds timeout);
  // POST /commit: the container's filesystem as image `name` ("repo:tag") with `config` as its
  // configuration; up to `timeout`.
  backend::Status commit(const std::string& id, const std::string& name,
                         const json::ObjectPtr& config, std::chrono::milliseconds timeout);
  // DELETE /images/{name}. An image that is gone counts as removed; one a container uses is
  // kRejected.
  backend::Status removeImage(const std::string& name);
  // GET /images/json filtered by the label key.
  EngineReply<std::vector<ImageSummary>> listImages(const std::string& label_key);
  // GET /events filtered (the filters JSON object), streamed.
  EngineReply<ConnectionPtr> events(const std::string& filters_json, const std::string& since);

  // Parses the body of a wait reply.
  static EngineReply<WaitOutcome> parseWait(const std::string& body);

 private:
  HttpCall makeCall(const std::string& method, const std::string& path) const;
  std::string versioned(const std::string& path) const;
  EngineReply<ConnectionPtr> open(const std::string& operation, HttpCall call);

  EngineSocket& transport_;
  std::chrono::milliseconds timeout_;
  ApiVersion version_;
  std::map<std::string, std::string> versions_;  // from GET /version, set by negotiate()
};

// Escapes `text` for use as a query value or path segment.
std::string urlEncode(const std::string& text);

}  // namespace scs::docker
