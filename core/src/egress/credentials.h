#pragma once

// Brokered credentials (issue 48): secrets the operator gives the server for one tenant and one
// allowed host, which the server adds to that host's requests on the way out, so that the
// sandbox never holds them. Made from --egress-credential at startup and never changed after.
//
// An entry names a header the server sets on every request to the host, or an environment
// variable the program is given a placeholder in, which the server replaces in one header of
// that host's requests (Authorization unless named) and refuses anywhere else it can read:
//   alice=api.github.com:Authorization=file:/etc/scs/alice-github   (the file: "Bearer ghp_…")
//   alice=api.github.com:$GITHUB_TOKEN=env:ALICE_GITHUB_TOKEN        (the variable: "ghp_…")
//   alice=api.example.com:$EXAMPLE_KEY@X-Api-Key=file:/etc/scs/alice-example
// The value is read once, here: from a file the server reads (its owner's alone), or
// from an environment variable of the server's; never from the command line. It is held in
// memory the server wipes when it ends, and no log line, report, metric or error carries it.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "egress/http_requests.h"
#include "result.h"

namespace scs::egress {

// What every placeholder begins with; the rest is 32 random hex digits.
inline constexpr std::string_view kPlaceholderPrefix = "scs-placeholder-";

// A credential's value: moved, never copied, wiped when it goes.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}
  Secret(Secret&& other) noexcept : value_(std::move(other.value_)) { other.value_.clear(); }
  Secret& operator=(Secret&& other) noexcept;
  Secret(const Secret&) = delete;
  Secret& operator=(const Secret&) = delete;
  ~Secret();
  const std::string& reveal() const { return value_; }

 private:
  std::string value_;
};

struct Credential {
  std::string tenant;
  std::string host;  // canonical (host_policy's parsePattern), a name, never an address
  std::uint16_t port = 443;
  // The header set on every request (`variable` empty), or the one header a placeholder is
  // replaced in (`variable` non-empty, `placeholder` what the program is given in it).
  std::string header;
  std::string variable;
  std::string placeholder;
  std::string source;  // "file /etc/scs/alice-github" or "environment variable X": for logs
  std::shared_ptr<const Secret> secret;
  std::string target() const { return host + ":" + std::to_string(port); }
};

// Reads a value from the server's environment; tests give their own.
using EnvironmentReader = std::string (*)(const char* name, bool* found);

class CredentialStore {
 public:
  explicit CredentialStore(EnvironmentReader environment = nullptr);

  // "TENANT=HOST[:PORT]:HEADER=SOURCE" or "TENANT=HOST[:PORT]:$VARIABLE[@HEADER]=SOURCE",
  // SOURCE "file:PATH" or "env:NAME" (a variable of the server's; see forgetEnvironment()).
  // Refused, with a sentence naming the entry (never its value): a host that is not a plain name
  // (no wildcard, no address), a header that is not a token or is one the server owns (Host,
  // Content-Length, Transfer-Encoding, Connection, Upgrade, Keep-Alive, TE, Trailer, Expect,
  // Proxy-*; "_" taken for "-"), a variable that is not [A-Z_][A-Z0-9_]* of at most 128
  // characters or is one the sandbox's programs depend on, the same header twice for a tenant's
  // host, a variable twice for a tenant or more than 64 for one, a file that cannot be read or
  // that others than its owner may read, write or run, an unset variable, a value that is
  // empty, longer than 8 KiB or holds a control character.
  Result<Done> add(std::string_view entry);

  // Wipes and unsets the server's variables that add() read values from, so that no process
  // the server starts later inherits them (pip, the engine's helpers); buildCredentials() calls
  // it once every entry is read, at startup, before the server serves. unsetenv is not safe
  // against a concurrent getenv: the threads running then are the heap trimmer's and the
  // backend's watchers. Tests' readers are left alone.
  void forgetEnvironment();

  bool empty() const { return credentials_.empty(); }
  const std::vector<Credential>& all() const { return credentials_; }

  // Whether `tenant`'s requests to host:port are brokered (any credential for it).
  bool brokered(std::string_view tenant, std::string_view host, std::uint16_t port) const;
  // The rules a brokered stream's requests get: the host (each request must name it), its
  // headers and placeholders, and the tenant's other placeholders as foreign. For a host
  // without credentials, the host and the foreign.
  RequestRules rulesFor(std::string_view tenant, std::string_view host, std::uint16_t port) const;
  // The variables the tenant's programs are given: (name, placeholder).
  std::vector<std::pair<std::string, std::string>> environmentFor(std::string_view tenant) const;
  // Every host with a credential (the CA's name constraints).
  std::vector<std::string> hosts() const;

 private:
  EnvironmentReader environment_;
  std::vector<Credential> credentials_;
  std::vector<std::string> read_variables_;
};

}  // namespace scs::egress
