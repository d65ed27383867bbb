// TestWheels: make_wheels.py run by Debian's Python (the sandbox's) into a mkdtemp directory.

#include "support/wheels.h"

#include <stdlib.h>

#include <cstdio>
#include <stdexcept>
#include <system_error>

namespace scs::testing {

TestWheels::TestWheels(const std::string& flags) {
  std::string pattern = (std::filesystem::temp_directory_path() / "scs-wheels-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp");
  }
  path_ = pattern;
  const std::string command = "/usr/bin/python3 -I " SCS_SOURCE_DIR
                              "/tests/support/make_wheels.py " +
                              path_.string() + " " + flags + " 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    throw std::system_error(errno, std::generic_category(), "popen");
  }
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    output.append(buffer, got);
  }
  if (::pclose(pipe) != 0) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    throw std::runtime_error(command + " failed: " + output);
  }
}

TestWheels::~TestWheels() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace scs::testing
