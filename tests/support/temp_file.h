#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace scs::testing {

// A file in /tmp with `content` and permission bits `mode`, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& content, mode_t mode = 0600) {
    char name[] = "/tmp/scs-test-XXXXXX";
    const int fd = ::mkstemp(name);
    path_ = name;
    std::ofstream(path_) << content;
    ::fchmod(fd, mode);
    ::close(fd);
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace scs::testing
