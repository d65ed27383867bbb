// The bearer tokens of --token-file and the tenants they stand for: parsed, loaded from a
// private file, and looked up in constant time.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "result.h"

namespace scs::mcp {

// The bearer tokens of --token-file and the tenants they stand for.
class TokenTable {
 public:
  static constexpr std::size_t kMinTokenLength = 16;

  // Parses a token file: one token per line, or NAME:TOKEN where NAME ([A-Za-z0-9_.-], at
  // most 64) is the tenant; several tokens may share a name. Surrounding blanks, blank
  // lines and lines starting with # are ignored. A token is printable ASCII without
  // blanks, at least kMinTokenLength long; an unnamed token must not contain ':'. Its tenant
  // is "token-" and the first 12 hex digits of its SHA-256. Returns the table, or a sentence
  // naming the bad line (never quoting a token) when a line is malformed, a token appears
  // twice, or there is no token at all.
  static Result<TokenTable> parse(const std::string& text);

  // Reads and parses the file at `path`. Refuses a file that is not a regular file or that
  // users other than its owner and group may read, write or execute.
  static Result<TokenTable> load(const std::string& path);

  // The tenant of `token`, or nullopt. Compares SHA-256 digests against every entry in time
  // that depends on neither the token nor where it matched.
  std::optional<std::string> tenantOf(std::string_view token) const;

  std::size_t size() const { return entries_.size(); }
  // Every tenant the tokens stand for, each once, sorted.
  std::vector<std::string> tenants() const;

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Entry {
    Digest digest;
    std::string tenant;
  };
  static Digest digestOf(std::string_view token);

  std::vector<Entry> entries_;
};

}  // namespace scs::mcp
