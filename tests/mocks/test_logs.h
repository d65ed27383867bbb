#pragma once

#include <Poco/AutoPtr.h>
#include <Poco/Channel.h>
#include <Poco/Logger.h>
#include <Poco/Message.h>
#include <scs/backend/backend.h>

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scs::mocks {

// A plugin's LogSink that drops every line, for tests that read none.
class NullLog : public backend::LogSink {
 public:
  void log(backend::LogLevel, std::string_view) override {}
};

// A plugin's LogSink that keeps every line, for tests that look for one.
class RecordingLog : public backend::LogSink {
 public:
  void log(backend::LogLevel level, std::string_view message) override {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.emplace_back(level, std::string(message));
  }

  // A line at `level` that is exactly `text`.
  bool has(backend::LogLevel level, const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [entry_level, entry_text] : entries_) {
      if (entry_level == level && entry_text == text) {
        return true;
      }
    }
    return false;
  }

  // A line at any level that contains `text`.
  bool contains(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [level, line] : entries_) {
      if (line.find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<backend::LogLevel, std::string>> entries_;
};

// Records what is logged through one of the core's Poco loggers while it lives.
class LogCapture : public Poco::Channel {
 public:
  explicit LogCapture(const std::string& name, int level = Poco::Message::PRIO_INFORMATION)
      : logger_(Poco::Logger::get(name)) {
    previous_ = logger_.getChannel();
    previous_level_ = logger_.getLevel();
    logger_.setChannel(this);
    logger_.setLevel(level);
  }
  bool has(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Poco::Message& message : messages_) {
      if (message.getText().find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  ~LogCapture() override {
    logger_.setChannel(previous_);
    logger_.setLevel(previous_level_);
  }
  void log(const Poco::Message& message) override {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.push_back(message);
  }
  std::vector<Poco::Message> messages() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  Poco::Logger& logger_;
  Poco::AutoPtr<Poco::Channel> previous_;
  int previous_level_ = 0;
  std::mutex mutex_;
  std::vector<Poco::Message> messages_;
};

}  // namespace scs::mocks
