#pragma once

// The one ustar reader of the tests: reads back an archive the core built, checking every
// header, so a test or a fuzz oracle can compare what went in with what came out.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scs::testing {

// One entry of an uncompressed ustar archive as read back, header checked.
struct TarEntry {
  std::string name;  // prefix + "/" + name when the prefix field is used
  char type = 0;
  std::uint32_t mode = 0;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string content;
};

// Reads an archive, checking every header (checksum, magic, version, NUL-terminated octal
// fields, sizes, block padding, the two zero blocks at the end and nothing after them).
// Returns an explanation on the first problem.
std::optional<std::string> readUstar(std::string_view archive, std::vector<TarEntry>* entries);

// The regular files of a well-formed archive by name; empty when it is not well formed.
std::map<std::string, std::string> ustarFiles(std::string_view archive);

}  // namespace scs::testing
