#pragma once

#include <gmock/gmock.h>
#include <scs/backend/backend.h>

#include <chrono>
#include <string>

namespace scs::mocks {

class MockRuntimeBackend : public backend::RuntimeBackend {
 public:
  MOCK_METHOD(backend::CapacityReply, capacity, (), (override));
  MOCK_METHOD(backend::Status, supports, (const backend::Posture& posture), (override));
  MOCK_METHOD(backend::CreateReply, create, (const backend::SandboxSpec& spec), (override));
  MOCK_METHOD(backend::InspectReply, inspect, (const std::string& id), (override));
  MOCK_METHOD(backend::Status, deliver, (const std::string& id, const std::string& archive),
              (override));
  MOCK_METHOD(backend::Status, start, (const std::string& id, backend::OutputSink* sink),
              (override));
  MOCK_METHOD(backend::WaitReply, wait, (const std::string& id, std::chrono::milliseconds timeout),
              (override));
  MOCK_METHOD(backend::ProgressReply, progress, (const std::string& id), (override));
  MOCK_METHOD(backend::Status, kill, (const std::string& id), (override));
  MOCK_METHOD(backend::Status, remove, (const std::string& id), (override));
  MOCK_METHOD(backend::ListReply, list, (const std::string& label_key), (override));
  MOCK_METHOD(backend::Status, buildImage, (backend::ImageLayer layer), (override));
  MOCK_METHOD(backend::Status, removeImage, (const std::string& image), (override));
  MOCK_METHOD(backend::ImageListReply, listImages, (const std::string& label_key), (override));

  // Every call not otherwise expected goes to `real` (the fake backend, in-process), so a
  // test pins only the calls it cares about.
  void delegateTo(backend::RuntimeBackend& real) {
    using ::testing::_;
    ON_CALL(*this, capacity()).WillByDefault([&real] { return real.capacity(); });
    ON_CALL(*this, create(_)).WillByDefault([&real](const auto& spec) {
      return real.create(spec);
    });
    ON_CALL(*this, inspect(_)).WillByDefault([&real](const auto& id) { return real.inspect(id); });
    ON_CALL(*this, deliver(_, _)).WillByDefault([&real](const auto& id, const auto& archive) {
      return real.deliver(id, archive);
    });
    ON_CALL(*this, start(_, _)).WillByDefault([&real](const auto& id, auto* sink) {
      return real.start(id, sink);
    });
    ON_CALL(*this, wait(_, _)).WillByDefault([&real](const auto& id, auto timeout) {
      return real.wait(id, timeout);
    });
    ON_CALL(*this, progress(_)).WillByDefault([&real](const auto& id) {
      return real.progress(id);
    });
    ON_CALL(*this, kill(_)).WillByDefault([&real](const auto& id) { return real.kill(id); });
    ON_CALL(*this, remove(_)).WillByDefault([&real](const auto& id) { return real.remove(id); });
    ON_CALL(*this, list(_)).WillByDefault([&real](const auto& key) { return real.list(key); });
    ON_CALL(*this, buildImage(_)).WillByDefault([&real](backend::ImageLayer layer) {
      return real.buildImage(std::move(layer));
    });
    ON_CALL(*this, removeImage(_)).WillByDefault([&real](const auto& image) {
      return real.removeImage(image);
    });
    ON_CALL(*this, listImages(_)).WillByDefault([&real](const auto& key) {
      return real.listImages(key);
    });
  }
};

}  // namespace scs::mocks
