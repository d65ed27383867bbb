// Brokered credentials (issue 48): the operator's entries, read once at startup. Every error
// names the entry by its tenant, host and name, never by its value.

#include "egress/credentials.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "egress/host_policy.h"

namespace scs::egress {
namespace {

constexpr std::size_t kMaxValueBytes = 8 << 10;

bool isTokenChar(char c) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         kSpecials.find(c) != std::string_view::npos;
}

std::string lowered(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return out;
}

// A header name as the rewriter compares them: lower case, "_" taken for "-".
std::string fieldName(std::string_view name) {
  std::string out = lowered(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

// Headers whose value frames the request or the connection: the server's own, not a credential's.
bool serverOwnedHeader(std::string_view name) {
  static const std::set<std::string, std::less<>> kOwned = {
      "host",    "content-length", "transfer-encoding", "connection", "upgrade", "keep-alive", "te",
      "trailer", "expect"};
  const std::string lower = fieldName(name);
  return kOwned.contains(lower) || lower.starts_with("proxy-");
}

// Variables the launcher sets, or that change how a program or its interpreter loads.
bool reservedVariable(std::string_view name) {
  // clang-format off
  static const std::set<std::string, std::less<>> kReserved = {
      "PATH", "HOME", "USER", "SHELL", "TMPDIR", "LANG", "TERM", "PWD", "TZ", "IFS", "ENV",
      "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUESTS_CA_BUNDLE",
      "CURL_CA_BUNDLE", "MPLBACKEND", "PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS"};
  static constexpr std::string_view kPrefixes[] = {
      "LD_", "PYTHON", "NODE_", "BASH", "SCS_", "LC_", "GIT_", "PIP_", "SSL_", "OPENSSL_",
      "GLIBC_", "GCONV_"};
  // clang-format on
  return kReserved.contains(name) ||
         std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](std::string_view prefix) { return name.starts_with(prefix); });
}

bool isVariableName(std::string_view name) {
  return !name.empty() && name.size() <= 128 && !(name[0] >= '0' && name[0] <= '9') &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
         });
}

std::string randomPlaceholder() {
  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    std::abort();  // no randomness: nothing the server makes would be safe
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kPlaceholderPrefix);
  for (const unsigned char byte : bytes) {
    out += kHex[byte >> 4];
    out += kHex[byte & 0xf];
  }
  return out;
}

std::string defaultEnvironment(const char* name, bool* found) {
  const char* value = std::getenv(name);
  *found = value != nullptr;
  return value != nullptr ? std::string(value) : std::string();
}

}  // namespace

Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    OPENSSL_cleanse(value_.data(), value_.size());
    value_ = std::move(other.value_);
    other.value_.clear();
  }
  return *this;
}

Secret::~Secret() { OPENSSL_cleanse(value_.data(), value_.size()); }

CredentialStore::CredentialStore(EnvironmentReader environment)
    : environment_(environment != nullptr ? environment : &defaultEnvironment) {}

Result<Done> CredentialStore::add(std::string_view entry) {
  const std::size_t equals = entry.find('=');
  const std::string_view tenant = entry.substr(0, equals);
  // The name of the entry in errors: everything before the source, which holds no value.
  const std::size_t value_at =
      equals == std::string_view::npos ? equals : entry.find('=', equals + 1);
  // Without a second "=" the entry may be a value typed where its source belongs: only the
  // tenant is named then, and without any "=" (a token pasted alone) nothing of it.
  const std::string named(equals == std::string_view::npos     ? std::string_view("an entry")
                          : value_at == std::string_view::npos ? tenant
                                                               : entry.substr(0, value_at));
  const auto refuse = [&](const std::string& why) -> Result<Done> {
    return invalid("--egress-credential " + named + "=… is refused: " + why + ".");
  };
  if (equals == std::string_view::npos || tenant.empty() || value_at == std::string_view::npos) {
    return refuse(
        "write TENANT=HOST[:PORT]:HEADER=SOURCE or TENANT=HOST[:PORT]:$VARIABLE=SOURCE, "
        "SOURCE file:PATH or env:NAME");
  }
  const std::string_view where = entry.substr(equals + 1, value_at - equals - 1);
  const std::string_view source = entry.substr(value_at + 1);
  const std::size_t colon = where.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return refuse("it names no header or $VARIABLE after the host");
  }
  const std::string_view name = where.substr(colon + 1);
  const Result<Pattern> pattern = parsePattern(where.substr(0, colon));
  if (const Error* error = std::get_if<Error>(&pattern)) {
    return refuse(error->message);
  }
  const Pattern& host = std::get<Pattern>(pattern);
  if (host.kind != Pattern::Kind::kHost) {
    return refuse("a credential belongs to one host named exactly (no wildcard, no address)");
  }

  Credential credential;
  credential.tenant = std::string(tenant);
  credential.host = host.host;
  credential.port = host.port;
  if (name.starts_with('$')) {
    // "$VARIABLE" or "$VARIABLE@HEADER": the placeholder is replaced in that header only.
    const std::size_t at = name.find('@');
    credential.variable = std::string(name.substr(1, at == std::string_view::npos ? at : at - 1));
    credential.header =
        at == std::string_view::npos ? "Authorization" : std::string(name.substr(at + 1));
    if (!isVariableName(credential.variable)) {
      return refuse("$" + credential.variable.substr(0, 128) +
                    " is not a variable name of [A-Z_][A-Z0-9_]* of at most 128 characters");
    }
    if (reservedVariable(credential.variable)) {
      return refuse("$" + credential.variable +
                    " is a variable the sandbox's programs or their interpreters depend on");
    }
    credential.placeholder = randomPlaceholder();
  } else {
    credential.header = std::string(name);
  }
  if (credential.header.empty() ||
      !std::all_of(credential.header.begin(), credential.header.end(), isTokenChar)) {
    return refuse("the header name is not an HTTP token");
  }
  if (serverOwnedHeader(credential.header)) {
    return refuse("the header " + credential.header +
                  " frames the request or the connection; it is not a credential's");
  }
  // PID 1 takes at most this many placeholders in a control file.
  constexpr std::size_t kMaxVariablesPerTenant = 64;
  if (!credential.variable.empty() &&
      std::count_if(credentials_.begin(), credentials_.end(), [&](const Credential& other) {
        return other.tenant == credential.tenant && !other.variable.empty();
      }) >= static_cast<std::ptrdiff_t>(kMaxVariablesPerTenant)) {
    return refuse("a tenant's programs are given at most " +
                  std::to_string(kMaxVariablesPerTenant) + " placeholders");
  }
  for (const Credential& other : credentials_) {
    if (other.tenant != credential.tenant) {
      continue;
    }
    if (!credential.variable.empty() && other.variable == credential.variable) {
      return refuse("$" + credential.variable + " is given to this tenant's programs already");
    }
    if (other.host == credential.host && other.port == credential.port &&
        fieldName(other.header) == fieldName(credential.header)) {
      return refuse("the header " + credential.header + " is set for this host already");
    }
  }

  std::string value;
  if (source.starts_with("file:")) {
    const std::string path(source.substr(5));
    credential.source = "file " + path;
    struct stat status {};
    if (path.empty() || path[0] != '/') {
      return refuse("the file must be an absolute path");
    }
    if (::stat(path.c_str(), &status) != 0) {
      return refuse("cannot read " + path + ": " + std::strerror(errno));
    }
    if (!S_ISREG(status.st_mode)) {
      return refuse(path + " is not a regular file");
    }
    if ((status.st_mode & 077) != 0) {
      return refuse(path + " may be read or written by others than its owner (chmod 600 it)");
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      return refuse("cannot read " + path);
    }
    value.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    if (value.size() > kMaxValueBytes + 2) {
      OPENSSL_cleanse(value.data(), value.size());
      return refuse(path + " holds more than " + std::to_string(kMaxValueBytes) + " bytes");
    }
    // One line ending, as an editor or `echo` leaves it, is not part of the value.
    if (value.ends_with("\r\n")) {
      value.resize(value.size() - 2);
    } else if (value.ends_with('\n')) {
      value.pop_back();
    }
  } else if (source.starts_with("env:")) {
    const std::string variable(source.substr(4));
    credential.source = "environment variable " + variable;
    bool found = false;
    value = environment_(variable.c_str(), &found);
    if (!found) {
      return refuse("the server's environment has no " + variable);
    }
    if (std::find(read_variables_.begin(), read_variables_.end(), variable) ==
        read_variables_.end()) {
      read_variables_.push_back(variable);  // unset by forgetEnvironment(), once all are read
    }
  } else {
    return refuse(
        "its source must be file:PATH or env:NAME (a value is never given on the "
        "command line)");
  }
  const auto cleanseAndRefuse = [&](const std::string& why) {
    OPENSSL_cleanse(value.data(), value.size());
    return refuse(why);
  };
  if (value.empty()) {
    return cleanseAndRefuse("its value (" + credential.source + ") is empty");
  }
  if (value.size() > kMaxValueBytes) {
    return cleanseAndRefuse("its value (" + credential.source + ") is longer than " +
                            std::to_string(kMaxValueBytes) + " bytes");
  }
  if (std::any_of(value.begin(), value.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return (byte < 0x20 && c != '\t') || byte == 0x7f;
      })) {
    return cleanseAndRefuse("its value (" + credential.source +
                            ") holds a control character, which no header value may");
  }
  credential.secret = std::make_shared<const Secret>(std::move(value));
  credentials_.push_back(std::move(credential));
  return Done{};
}

void CredentialStore::forgetEnvironment() {
  if (environment_ != &defaultEnvironment) {
    return;
  }
  for (const std::string& variable : read_variables_) {
    if (char* value = std::getenv(variable.c_str())) {
      OPENSSL_cleanse(value, std::strlen(value));
    }
    ::unsetenv(variable.c_str());
  }
  read_variables_.clear();
}

bool CredentialStore::brokered(std::string_view tenant, std::string_view host,
                               std::uint16_t port) const {
  return std::any_of(credentials_.begin(), credentials_.end(), [&](const Credential& c) {
    return c.tenant == tenant && c.host == host && c.port == port;
  });
}

RequestRules CredentialStore::rulesFor(std::string_view tenant, std::string_view host,
                                       std::uint16_t port) const {
  RequestRules rules;
  rules.host = std::string(host);
  rules.port = port;
  for (const Credential& credential : credentials_) {
    if (credential.tenant != tenant) {
      continue;
    }
    const bool own = credential.host == host && credential.port == port;
    if (credential.variable.empty()) {
      if (own) {
        rules.set.push_back({credential.header, credential.secret->reveal()});
      }
    } else if (own) {
      rules.substitute.push_back(
          {credential.placeholder, credential.secret->reveal(), credential.header});
    } else {
      rules.foreign.push_back(credential.placeholder);
    }
  }
  return rules;
}

std::vector<std::pair<std::string, std::string>> CredentialStore::environmentFor(
    std::string_view tenant) const {
  std::vector<std::pair<std::string, std::string>> environment;
  for (const Credential& credential : credentials_) {
    if (credential.tenant == tenant && !credential.variable.empty()) {
      environment.emplace_back(credential.variable, credential.placeholder);
    }
  }
  return environment;
}

std::vector<std::string> CredentialStore::hosts() const {
  std::vector<std::string> hosts;
  for (const Credential& credential : credentials_) {
    if (std::find(hosts.begin(), hosts.end(), credential.host) == hosts.end()) {
      hosts.push_back(credential.host);
    }
  }
  return hosts;
}

}  // namespace scs::egress
