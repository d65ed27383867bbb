#pragma once

// A run's files: start_run's `code` and `files` validated into a list (the code file first), the
// ustar archive delivered to the sandbox, and strict Base64.

#include <Poco/Dynamic/Var.h>
#include <scs/backend/launcher_protocol.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "result.h"

namespace scs::policy {

struct FileSettings {
  std::size_t max_files = 100;
  std::size_t max_total_bytes = 10u << 20;  // code plus every file, decoded
  std::size_t max_path_bytes = 255;
  std::size_t max_stdin_bytes = 1u << 20;  // start_run's optional stdin
};

struct File {
  std::string path;     // normalised, relative, validated
  std::string content;  // decoded bytes
};

// Validates start_run's `code` and `files` (SPEC section 1): relative normalised paths,
// no "..", no absolute path, no NUL, no backslash, `code_file` (the language's: main.py,
// main.sh, main.js) reserved, encodings utf-8 or base64, caps on count and total size, and the
// top-level ".scs" reserved for the sandbox's control files. Returns every file including the
// code as `code_file` (first).
Result<std::vector<File>> resolveFiles(
    const std::string& code, const Poco::Dynamic::Var& files, const FileSettings& settings,
    std::string_view code_file = backend::launcher::kCodeFilePython);

// An uncompressed POSIX ustar archive of `files`: regular files only, owner uid/gid from
// `uid`/`gid`, mode 0644, parent directories (mode 0755) emitted before their files.
std::string buildArchive(const std::vector<File>& files, int uid, int gid);

// The same archive written one file at a time, for a tree too large to hold twice (a package
// layer, core/src/packages): `add` appends a file of mode 0644 or, with `executable`, 0755,
// modified at `mtime` (unix seconds; a package's bytecode is valid only beside sources of the
// time it was compiled from), and any parent directory not yet written; `finish` ends the
// archive and hands it over. Throws std::invalid_argument for a path that does not fit a ustar
// header.
class ArchiveWriter {
 public:
  ArchiveWriter(int uid, int gid) : uid_(uid), gid_(gid) {}
  void add(const std::string& path, std::string_view content, bool executable = false,
           std::int64_t mtime = 0);
  std::size_t size() const { return archive_.size(); }
  std::string finish();

 private:
  int uid_;
  int gid_;
  std::string archive_;
  std::set<std::string> directories_;  // written already
};

// Base64 with Poco's codec: the standard alphabet, padded, no line breaks. Decoding is strict
// (no whitespace, no excess padding, nothing cut short): nullopt otherwise.
std::optional<std::string> decodeBase64(std::string_view text);
std::string encodeBase64(std::string_view bytes);

}  // namespace scs::policy
