#pragma once

// Wheels for the packages tests (issue 29): tests/support/make_wheels.py writes them into a
// private temporary directory that is removed with the object.

#include <filesystem>
#include <string>

namespace scs::testing {

class TestWheels {
 public:
  // `flags`: make_wheels.py's own ("--native --index"). Throws std::runtime_error, with the
  // script's output, when it fails.
  explicit TestWheels(const std::string& flags = "");
  ~TestWheels();
  TestWheels(const TestWheels&) = delete;
  TestWheels& operator=(const TestWheels&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace scs::testing
