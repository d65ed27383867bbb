// TokenTable: the --token-file format (TOKEN or NAME:TOKEN per line), the file's permission
// check, and the digest comparison that finds a token's tenant.
#include "mcp/http/token_table.h"

#include <Poco/SHA2Engine.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

#include "mcp/http/text.h"

namespace scs::mcp {
namespace {

using http::trim;

constexpr std::size_t kMaxNameLength = 64;

bool isValidName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxNameLength &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '_' || c == '.' || c == '-';
         });
}

bool isValidToken(const std::string& token) {
  return std::all_of(token.begin(), token.end(),
                     [](unsigned char c) { return c > 0x20 && c < 0x7F; });
}

std::string hex(const unsigned char* bytes, std::size_t count) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xF]);
  }
  return out;
}

}  // namespace

TokenTable::Digest TokenTable::digestOf(std::string_view token) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(token.data(), static_cast<unsigned>(token.size()));
  const Poco::DigestEngine::Digest& bytes = engine.digest();
  Digest digest{};
  std::copy_n(bytes.begin(), std::min(bytes.size(), digest.size()), digest.begin());
  return digest;
}

Result<TokenTable> TokenTable::parse(const std::string& text) {
  TokenTable table;
  std::map<Digest, std::size_t> first_line;
  std::istringstream in(text);
  std::size_t number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    const std::string line = trim(raw);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    const std::string where = "line " + std::to_string(number);
    std::string name;
    std::string token = line;
    if (const auto colon = line.find(':'); colon != std::string::npos) {
      name = trim(line.substr(0, colon));
      token = trim(line.substr(colon + 1));
      if (!isValidName(name)) {
        return invalid(where + ": the tenant name before ':' must be 1 to 64 of A-Z a-z 0-9 _ . -");
      }
    }
    if (!isValidToken(token)) {
      return invalid(where + ": a token is printable ASCII without blanks");
    }
    if (token.size() < kMinTokenLength) {
      return invalid(where + ": the token is shorter than " + std::to_string(kMinTokenLength) +
                     " characters (make one with: openssl rand -hex 32)");
    }
    const Digest digest = digestOf(token);
    if (const auto seen = first_line.find(digest); seen != first_line.end()) {
      return invalid(where + ": the same token as line " + std::to_string(seen->second));
    }
    first_line[digest] = number;
    table.entries_.push_back(Entry{digest, name.empty() ? "token-" + hex(digest.data(), 6) : name});
  }
  if (table.entries_.empty()) {
    return invalid("there is no token in it (one per line, or NAME:TOKEN)");
  }
  return table;
}

Result<TokenTable> TokenTable::load(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return invalid("--token-file: cannot read " + path + ": " +
                   std::generic_category().message(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return invalid("--token-file: " + path + " is not a regular file");
  }
  if ((info.st_mode & S_IRWXO) != 0) {
    std::ostringstream mode;
    mode << std::oct << (info.st_mode & 07777);
    return invalid("--token-file: " + path + " is open to other users (mode 0" + mode.str() +
                   "); make it private with chmod 600 " + path +
                   " (or chmod 640 with the service's group)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return invalid("--token-file: cannot read " + path);
  }
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = parse(text.str());
  if (auto* problem = std::get_if<Error>(&parsed)) {
    return invalid("--token-file " + path + ": " + problem->message);
  }
  return parsed;
}

std::vector<std::string> TokenTable::tenants() const {
  std::set<std::string> names;
  for (const Entry& entry : entries_) {
    names.insert(entry.tenant);
  }
  return {names.begin(), names.end()};
}

std::optional<std::string> TokenTable::tenantOf(std::string_view token) const {
  const Digest digest = digestOf(token);
  const Entry* match = nullptr;
  for (const Entry& entry : entries_) {
    unsigned char difference = 0;
    for (std::size_t i = 0; i < digest.size(); ++i) {
      difference = static_cast<unsigned char>(difference | (entry.digest[i] ^ digest[i]));
    }
    match = difference == 0 ? &entry : match;
  }
  if (match == nullptr) {
    return std::nullopt;
  }
  return match->tenant;
}

}  // namespace scs::mcp
