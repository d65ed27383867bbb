// The Docker plugin's EngineSocket mocked, with a scripted Connection, a forwarder that lets a
// backend own the socket while the test keeps the mock, and matchers for calls and JSON bodies.
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "engine_socket.h"

namespace scs::docker {

// Readable gmock messages.
inline void PrintTo(const HttpCall& call, std::ostream* os) {
  *os << call.method << " " << call.path << (call.upgrade ? " (upgrade)" : "");
}

}  // namespace scs::docker

namespace scs::docker::testing {

class MockEngineSocket : public EngineSocket {
 public:
  MOCK_METHOD(HttpReply, call, (const HttpCall& call), (override));
  MOCK_METHOD(OpenReply, open, (const HttpCall& call), (override));
};

// A connection whose reads are scripted by the test, possibly from another thread: reads
// return the pushed chunks in order, then block until finish() (end of stream) or abort().
// Everything written is recorded. The state is shared, so the test keeps a handle after the
// connection itself has been handed to the code under test.
class ScriptedConnection : public Connection {
 public:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::string> chunks;
    bool finished = false;
    bool aborted = false;
    bool write_shut = false;
    bool fail_writes = false;
    // Like the in-sandbox launcher: nothing is read back before stdin has been closed.
    bool hold_until_write_shut = false;
    std::string written;

    void push(std::string chunk) {
      if (chunk.empty()) {
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        chunks.push_back(std::move(chunk));
      }
      cv.notify_all();
    }
    void finish() {
      {
        std::lock_guard<std::mutex> lock(mu);
        finished = true;
      }
      cv.notify_all();
    }
    bool wasAborted() {
      std::lock_guard<std::mutex> lock(mu);
      return aborted;
    }
    // Blocks until every pushed chunk has been read.
    void waitConsumed() {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return chunks.empty() || aborted; });
    }
    std::string writtenBytes() {
      std::lock_guard<std::mutex> lock(mu);
      return written;
    }
    bool writeShut() {
      std::lock_guard<std::mutex> lock(mu);
      return write_shut;
    }
  };

  explicit ScriptedConnection(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // A connection that yields `chunks` and then end of stream.
  static ConnectionPtr finished(std::initializer_list<std::string> chunks,
                                std::shared_ptr<State>* handle = nullptr) {
    auto state = std::make_shared<State>();
    for (const auto& chunk : chunks) {
      if (!chunk.empty()) {  // an empty read would mean end of stream
        state->chunks.push_back(chunk);
      }
    }
    state->finished = true;
    if (handle != nullptr) {
      *handle = state;
    }
    return std::make_unique<ScriptedConnection>(state);
  }

  bool write(std::string_view bytes) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->aborted || state_->fail_writes) {
      return false;
    }
    state_->written.append(bytes);
    return true;
  }

  bool shutdownWrite() override {
    bool ok = false;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->write_shut = true;
      ok = !state_->aborted;
    }
    state_->cv.notify_all();
    return ok;
  }

  std::ptrdiff_t read(char* buffer, std::size_t size) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait(lock, [&] {
      return state_->aborted || ((!state_->hold_until_write_shut || state_->write_shut) &&
                                 (!state_->chunks.empty() || state_->finished));
    });
    if (state_->aborted) {
      return -1;
    }
    if (state_->chunks.empty()) {
      return 0;
    }
    std::string& front = state_->chunks.front();
    const std::size_t take = std::min(size, front.size());
    front.copy(buffer, take);
    front.erase(0, take);
    if (front.empty()) {
      state_->chunks.pop_front();
    }
    lock.unlock();
    state_->cv.notify_all();
    return static_cast<std::ptrdiff_t>(take);
  }

  void abort() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->aborted = true;
    }
    state_->cv.notify_all();
  }

 private:
  std::shared_ptr<State> state_;
};

// Lets a backend own a transport while the test keeps the mock.
class ForwardingEngineSocket : public EngineSocket {
 public:
  explicit ForwardingEngineSocket(EngineSocket* target) : target_(target) {}
  HttpReply call(const HttpCall& c) override { return target_->call(c); }
  OpenReply open(const HttpCall& c) override { return target_->open(c); }

 private:
  EngineSocket* target_;
};

// A connection whose state the test scripts; see ScriptedConnection.
inline ConnectionPtr scripted(std::shared_ptr<ScriptedConnection::State>* handle) {
  *handle = std::make_shared<ScriptedConnection::State>();
  return std::make_unique<ScriptedConnection>(*handle);
}

// Replies for the mock.
inline HttpReply reply(int status, std::string body = "") {
  HttpReply result;
  result.status = status;
  result.body = std::move(body);
  return result;
}

inline OpenReply opened(int status, ConnectionPtr connection) {
  OpenReply result;
  result.reply.status = status;
  result.connection = std::move(connection);
  return result;
}

MATCHER_P2(IsCall, method, path, "") { return arg.method == method && arg.path == path; }

// Compares two parsed JSON trees: same keys, same array order, equal scalars (integers by
// value). On a difference, *where names its path.
inline bool jsonTreeEqual(const Poco::Dynamic::Var& a, const Poco::Dynamic::Var& b,
                          const std::string& path, std::string* where) {
  using Poco::JSON::Array;
  using Poco::JSON::Object;
  const auto differ = [&] {
    *where = path.empty() ? "(root)" : path;
    return false;
  };
  if (a.type() == typeid(Object::Ptr) || b.type() == typeid(Object::Ptr)) {
    if (a.type() != b.type()) {
      return differ();
    }
    const auto oa = a.extract<Object::Ptr>();
    const auto ob = b.extract<Object::Ptr>();
    if (oa->getNames() != ob->getNames()) {
      *where = path + " (keys differ)";
      return false;
    }
    for (const auto& key : oa->getNames()) {
      if (!jsonTreeEqual(oa->get(key), ob->get(key), path + "/" + key, where)) {
        return false;
      }
    }
    return true;
  }
  if (a.type() == typeid(Array::Ptr) || b.type() == typeid(Array::Ptr)) {
    if (a.type() != b.type()) {
      return differ();
    }
    const auto aa = a.extract<Array::Ptr>();
    const auto ab = b.extract<Array::Ptr>();
    if (aa->size() != ab->size()) {
      *where = path + " (lengths differ)";
      return false;
    }
    for (unsigned i = 0; i < aa->size(); ++i) {
      if (!jsonTreeEqual(aa->get(i), ab->get(i), path + "/" + std::to_string(i), where)) {
        return false;
      }
    }
    return true;
  }
  if (a.isEmpty() || b.isEmpty()) {
    return a.isEmpty() && b.isEmpty() ? true : differ();
  }
  if (a.isBoolean() || b.isBoolean()) {
    return a.isBoolean() && b.isBoolean() && a.extract<bool>() == b.extract<bool>() ? true
                                                                                    : differ();
  }
  if (a.isString() || b.isString()) {
    return a.isString() && b.isString() && a.extract<std::string>() == b.extract<std::string>()
               ? true
               : differ();
  }
  if (a.isInteger() && b.isInteger()) {
    return a.convert<Poco::Int64>() == b.convert<Poco::Int64>() ? true : differ();
  }
  return a.convert<double>() == b.convert<double>() ? true : differ();
}

// Matches an HttpCall whose body is JSON equal, as a tree, to `expected`.
MATCHER_P(JsonBodyEq, expected, "") {
  Poco::JSON::Parser parser;
  Poco::Dynamic::Var actual_tree;
  try {
    actual_tree = parser.parse(arg.body);
  } catch (const Poco::Exception& e) {
    *result_listener << "the body is not JSON: " << e.displayText();
    return false;
  }
  Poco::JSON::Parser expected_parser;
  const Poco::Dynamic::Var expected_tree = expected_parser.parse(std::string(expected));
  std::string where;
  if (!jsonTreeEqual(actual_tree, expected_tree, "", &where)) {
    *result_listener << "the bodies differ at " << where << "; body: " << arg.body;
    return false;
  }
  return true;
}

}  // namespace scs::docker::testing
