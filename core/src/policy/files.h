#pragma once

// A run's files: start_run's `code` and `files` validated into a list (the code file first), the
// ustar archive delivered to the sandbox, and strict Base64.

#include <Poco/Dynamic/Var.h>
#include <scs/backend/launcher_protocol.h>

#include <cstddef>
#include <optional>
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

// Base64 with Poco's codec: the standard alphabet, padded, no line breaks. Decoding is strict
// (no whitespace, no excess padding, nothing cut short): nullopt otherwise.
std::optional<std::string> decodeBase64(std::string_view text);
std::string encodeBase64(std::string_view bytes);

}  // namespace scs::policy
