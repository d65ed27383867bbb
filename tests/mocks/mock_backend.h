#pragma once

#include <gmock/gmock.h>
#include <scs/backend/backend.h>

#include <chrono>
#include <string>

namespace scs::mocks {

class MockRuntimeBackend : public backend::RuntimeBackend {
 public:
  MOCK_METHOD(backend::CapacityReply, capacity, (), (override));
  MOCK_METHOD(backend::CreateReply, create, (const backend::SandboxSpec& spec), (override));
  MOCK_METHOD(backend::InspectReply, inspect, (const std::string& id), (override));
  MOCK_METHOD(backend::Status, deliver, (const std::string& id, const std::string& archive),
              (override));
  MOCK_METHOD(backend::Status, start, (const std::string& id, backend::OutputSink* sink),
              (override));
  MOCK_METHOD(backend::WaitReply, wait, (const std::string& id, std::chrono::milliseconds timeout),
              (override));
  MOCK_METHOD(backend::Status, kill, (const std::string& id), (override));
  MOCK_METHOD(backend::Status, remove, (const std::string& id), (override));
  MOCK_METHOD(backend::ListReply, list, (const std::string& label_key), (override));
};

}  // namespace scs::mocks
