#pragma once

#include <scs/backend/backend.h>

#include <mutex>
#include <string>
#include <string_view>

namespace scs::mocks {

// An OutputSink that keeps everything a backend writes, for tests that read it back.
class RecordingSink : public backend::OutputSink {
 public:
  void write(backend::Stream stream, std::string_view bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    (stream == backend::Stream::kStdout ? out_ : err_).append(bytes);
    ++writes_;
  }
  void ended() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++ends_;
  }
  int ends() {
    std::lock_guard<std::mutex> lock(mu_);
    return ends_;
  }
  std::string out() {
    std::lock_guard<std::mutex> lock(mu_);
    return out_;
  }
  std::string err() {
    std::lock_guard<std::mutex> lock(mu_);
    return err_;
  }
  int writes() {
    std::lock_guard<std::mutex> lock(mu_);
    return writes_;
  }

 private:
  std::mutex mu_;
  std::string out_;
  std::string err_;
  int writes_ = 0;
  int ends_ = 0;
};

}  // namespace scs::mocks
