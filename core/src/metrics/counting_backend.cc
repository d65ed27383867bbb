// CountingBackend: each backend call forwarded to the plugin, its reply passed back unchanged
// and counted under the call's name when it is not ok.

#include "metrics/counting_backend.h"

namespace scs::metrics {

using namespace backend;

CapacityReply CountingBackend::capacity() { return counted("capacity", inner_.capacity()); }

Status CountingBackend::supports(const Posture& posture) {
  return counted("supports", inner_.supports(posture));
}

CreateReply CountingBackend::create(const SandboxSpec& spec) {
  return counted("create", inner_.create(spec));
}

InspectReply CountingBackend::inspect(const std::string& id) {
  return counted("inspect", inner_.inspect(id));
}

Status CountingBackend::deliver(const std::string& id, const std::string& archive) {
  return counted("deliver", inner_.deliver(id, archive));
}

Status CountingBackend::start(const std::string& id, OutputSink* sink) {
  return counted("start", inner_.start(id, sink));
}

WaitReply CountingBackend::wait(const std::string& id, std::chrono::milliseconds timeout) {
  return counted("wait", inner_.wait(id, timeout));
}

ProgressReply CountingBackend::progress(const std::string& id) {
  return counted("progress", inner_.progress(id));
}

Status CountingBackend::kill(const std::string& id) { return counted("kill", inner_.kill(id)); }

Status CountingBackend::remove(const std::string& id) {
  return counted("remove", inner_.remove(id));
}

ListReply CountingBackend::list(const std::string& label_key) {
  return counted("list", inner_.list(label_key));
}

Status CountingBackend::buildImage(ImageLayer layer) {
  return counted("build_image", inner_.buildImage(std::move(layer)));
}

Status CountingBackend::removeImage(const std::string& image) {
  return counted("remove_image", inner_.removeImage(image));
}

ImageListReply CountingBackend::listImages(const std::string& label_key) {
  return counted("list_images", inner_.listImages(label_key));
}

Status CountingBackend::snapshots(const Posture& posture) { return inner_.snapshots(posture); }

Status CountingBackend::snapshot(const std::string& id) {
  return counted("snapshot", inner_.snapshot(id));
}

Status CountingBackend::resume(const std::string& id, OutputSink* sink) {
  return counted("resume", inner_.resume(id, sink));
}

backend::SavedReply CountingBackend::saved(const std::string& id) {
  return counted("saved", inner_.saved(id));
}

Status CountingBackend::adopt(const std::string& id, const std::string& saved) {
  return counted("adopt", inner_.adopt(id, saved));
}

}  // namespace scs::metrics
