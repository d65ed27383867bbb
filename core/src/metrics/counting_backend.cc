#include "metrics/counting_backend.h"

namespace scs::metrics {

using namespace backend;

CapacityReply CountingBackend::capacity() {
  CapacityReply reply = inner_.capacity();
  count("capacity", reply.status);
  return reply;
}

CreateReply CountingBackend::create(const SandboxSpec& spec) {
  CreateReply reply = inner_.create(spec);
  count("create", reply.status);
  return reply;
}

InspectReply CountingBackend::inspect(const std::string& id) {
  InspectReply reply = inner_.inspect(id);
  count("inspect", reply.status);
  return reply;
}

Status CountingBackend::deliver(const std::string& id, const std::string& archive) {
  Status status = inner_.deliver(id, archive);
  count("deliver", status);
  return status;
}

Status CountingBackend::start(const std::string& id, OutputSink* sink) {
  Status status = inner_.start(id, sink);
  count("start", status);
  return status;
}

WaitReply CountingBackend::wait(const std::string& id, std::chrono::milliseconds timeout) {
  WaitReply reply = inner_.wait(id, timeout);
  count("wait", reply.status);
  return reply;
}

ProgressReply CountingBackend::progress(const std::string& id) {
  ProgressReply reply = inner_.progress(id);
  count("progress", reply.status);
  return reply;
}

Status CountingBackend::kill(const std::string& id) {
  Status status = inner_.kill(id);
  count("kill", status);
  return status;
}

Status CountingBackend::remove(const std::string& id) {
  Status status = inner_.remove(id);
  count("remove", status);
  return status;
}

ListReply CountingBackend::list(const std::string& label_key) {
  ListReply reply = inner_.list(label_key);
  count("list", reply.status);
  return reply;
}

}  // namespace scs::metrics
