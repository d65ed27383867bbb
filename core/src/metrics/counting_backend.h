#pragma once

// A RuntimeBackend that forwards every call to another and counts the answers that are not ok
// (Metrics::engineFailed), so engine errors are counted in one place whichever part of the core
// made the call. It changes no argument and no answer.

#include <scs/backend/backend.h>

#include "metrics/metrics.h"

namespace scs::metrics {

class CountingBackend final : public backend::RuntimeBackend {
 public:
  // Both must outlive this object.
  CountingBackend(backend::RuntimeBackend& inner, Metrics& metrics)
      : inner_(inner), metrics_(metrics) {}

  backend::CapacityReply capacity() override;
  backend::Status supports(const backend::Posture& posture) override;
  backend::CreateReply create(const backend::SandboxSpec& spec) override;
  backend::InspectReply inspect(const std::string& id) override;
  backend::Status deliver(const std::string& id, const std::string& archive) override;
  backend::Status start(const std::string& id, backend::OutputSink* sink) override;
  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override;
  backend::ProgressReply progress(const std::string& id) override;
  backend::Status kill(const std::string& id) override;
  backend::Status remove(const std::string& id) override;
  backend::ListReply list(const std::string& label_key) override;
  backend::Status buildImage(backend::ImageLayer layer) override;
  backend::Status removeImage(const std::string& image) override;
  backend::ImageListReply listImages(const std::string& label_key) override;
  // Not counted: a runtime without snapshots answers kUnsupported by design.
  backend::Status snapshots(const backend::Posture& posture) override;
  backend::Status snapshot(const std::string& id) override;
  backend::Status resume(const std::string& id, backend::OutputSink* sink) override;
  backend::SavedReply saved(const std::string& id) override;
  backend::Status adopt(const std::string& id, const std::string& saved) override;

 private:
  // Counts the answer's status under `call` unless it is ok; returns the answer unchanged.
  template <typename Reply>
  Reply counted(const char* call, Reply reply) {
    const backend::Status& status = statusOf(reply);
    if (!status.ok()) {
      metrics_.engineFailed(call, status.code);
    }
    return reply;
  }
  static const backend::Status& statusOf(const backend::Status& status) { return status; }
  template <typename Reply>
  static const backend::Status& statusOf(const Reply& reply) {
    return reply.status;
  }

  backend::RuntimeBackend& inner_;
  Metrics& metrics_;
};

}  // namespace scs::metrics
