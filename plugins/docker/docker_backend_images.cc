// Derived images for runs that ask for packages: the layer's files are unpacked into a created,
// never started container of the base image, which is committed under the layer's name. The
// engine's builder (POST /build) would need a Dockerfile in the context and, on newer engines,
// BuildKit; the commit keeps the base image's configuration exactly, with no build step that
// runs anything.

#include <Poco/JSON/Object.h>

#include "docker_backend.h"
#include "docker_backend_sandbox.h"

namespace scs::docker {

namespace {

// Writing a layer of a few hundred megabytes may take the engine longer than one API call.
constexpr std::chrono::minutes kLayerWriteTimeout{10};

// The base image's name and id when the layer was made: a base rebuilt under the same name
// gets the layer anew instead of serving files made for the old one.
constexpr const char* kBaseLabel = "io.scs.base-image";
constexpr const char* kBaseIdLabel = "io.scs.base-image-id";

std::string labelOf(const std::map<std::string, std::string>& labels, const char* key) {
  const auto found = labels.find(key);
  return found == labels.end() ? std::string() : found->second;
}

}  // namespace

backend::Status DockerBackend::buildImage(backend::ImageLayer layer) {
  return guardedStatus("build image", [&]() -> backend::Status {
    EngineReply<json::ObjectPtr> base = client_.inspectImage(layer.base_image);
    if (!base.status.ok()) {
      return base.status;
    }
    const std::string base_id = json::string(base.value, "Id").value_or("");
    if (EngineReply<json::ObjectPtr> made = client_.inspectImage(layer.image); made.status.ok()) {
      const json::ObjectPtr made_labels =
          json::object(json::object(made.value, "Config"), "Labels");
      if (json::string(made_labels, kBaseIdLabel).value_or("") == base_id) {
        return {};  // made before, by this server or an earlier one, on this very base
      }
      // The base was rebuilt under the same name since: the layer goes on the new one.
      if (backend::Status removed = client_.removeImage(layer.image); !removed.ok()) {
        return removed;
      }
    }
    json::ObjectPtr config = json::object(base.value, "Config");
    if (config.isNull()) {
      return {backend::Code::kInternal,
              "build image: the record of " + layer.base_image + " has no Config"};
    }
    json::ObjectPtr labels = json::object(config, "Labels");
    if (labels.isNull()) {
      labels = new Poco::JSON::Object();
      config->set("Labels", labels);
    }
    for (const auto& [key, value] : layer.labels) {
      labels->set(key, value);
    }
    labels->set(kBaseLabel, layer.base_image);
    labels->set(kBaseIdLabel, base_id);

    json::ObjectPtr create = new Poco::JSON::Object();
    create->set("Image", layer.base_image);
    Poco::JSON::Array::Ptr command = new Poco::JSON::Array();
    command->add("/bin/true");  // never started; an imported image may have no command
    create->set("Cmd", command);
    create->set("Entrypoint", Poco::JSON::Array::Ptr(new Poco::JSON::Array()));
    create->set("NetworkDisabled", true);
    json::ObjectPtr build_labels = new Poco::JSON::Object();
    for (const auto& [key, value] : layer.build_labels) {
      build_labels->set(key, value);
    }
    create->set("Labels", build_labels);
    std::vector<std::string> warnings;
    EngineReply<std::string> container = client_.create("", create, &warnings);
    if (!container.status.ok()) {
      return container.status;
    }
    backend::Status status =
        client_.putArchive(container.value, std::move(layer.archive), kLayerWriteTimeout);
    if (status.ok()) {
      status = client_.commit(container.value, layer.image, config, kLayerWriteTimeout);
    }
    if (const backend::Status removed = client_.remove(container.value); !removed.ok()) {
      log(backend::LogLevel::kWarning, "build image: the container " + shortId(container.value) +
                                           " it used is left: " + removed.message);
    }
    if (!status.ok()) {
      client_.removeImage(layer.image);  // a commit that failed late may have left it
    }
    return status;
  });
}

backend::Status DockerBackend::removeImage(const std::string& image) {
  return guardedStatus("remove image", [&] { return client_.removeImage(image); });
}

backend::ImageListReply DockerBackend::listImages(const std::string& label_key) {
  return guarded<backend::ImageListReply>("list images", [&] {
    backend::ImageListReply reply;
    EngineReply<std::vector<ImageSummary>> listed = client_.listImages(label_key);
    reply.status = listed.status;
    std::map<std::string, std::string> base_ids;  // the id each base's name stands for now
    for (auto& image : listed.value) {
      const std::string base = labelOf(image.labels, kBaseLabel);
      if (base_ids.count(base) == 0) {
        EngineReply<json::ObjectPtr> record = client_.inspectImage(base);
        base_ids[base] =
            record.status.ok() ? json::string(record.value, "Id").value_or("") : std::string();
      }
      const bool current = labelOf(image.labels, kBaseIdLabel) == base_ids[base];
      for (const std::string& tag : image.tags) {
        reply.images.push_back({tag, base, current, image.labels});
      }
    }
    return reply;
  });
}

}  // namespace scs::docker
