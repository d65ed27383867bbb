#pragma once

// The server's end of egress (issue 44): each sandbox whose tenant has a policy gets an
// EgressChannel, which takes PID 1's frames out of the sandbox's stdout, and for each stream
// reads the proxy request (proxy_handshake.h), decides by the policy (host_policy.h: canonical
// form, deny, allow, then resolution), dials the vetted address only, checks a TLS stream's
// server name against the host asked for, and carries the bytes both ways under the frames'
// credit. Every refusal is immediate and says why, to the program and in the run's report.
//
// Threads: the backend's output thread calls EgressSink::write(), which never blocks (a
// stream's bytes from the sandbox are bounded by the credit the server gave); each stream has
// a thread of its own for its handshake, dial and relay, which holds its channel; close()
// resets every stream without waiting, and the service's destructor waits for every thread.

#include <Poco/Net/StreamSocket.h>
#include <scs/backend/backend.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "egress/broker.h"
#include "egress/credentials.h"
#include "egress/frames.h"
#include "egress/host_policy.h"

namespace scs::egress {

struct EgressLimits {
  std::size_t streams_per_sandbox = 16;  // open at once
  std::size_t streams_per_tenant = 64;   // open at once, over all of a tenant's sandboxes
  std::uint64_t bytes_per_sandbox = std::uint64_t{1} << 30;  // up and down, over its life
  std::chrono::seconds idle{60};       // a stream with no byte either way for this long ends
  std::chrono::seconds connect{10};    // to dial the host
  std::chrono::seconds handshake{10};  // for the proxy request, and a TLS ClientHello
};

// What a run's program did through the relay: each host:port reached with its bytes, and each
// refusal with its reason (the same refusal counted once).
struct NetworkReport {
  struct Host {
    std::string target;  // "api.github.com:443"
    std::uint64_t streams = 0;
    std::uint64_t bytes_up = 0;             // from the program
    std::uint64_t bytes_down = 0;           // to the program
    std::uint64_t credential_requests = 0;  // requests the server added a credential to
  };
  struct Refusal {
    std::string target;  // as asked for ("example.com:443"), or empty before a request was read
    std::string reason;
    std::uint64_t count = 0;
  };
  // At most kMaxEntries of each, so that a program naming a new host per connection cannot
  // grow the report (or a model's context); what did not fit is counted.
  static constexpr std::size_t kMaxEntries = 32;
  std::vector<Host> reached;
  std::vector<Refusal> refused;
  std::uint64_t more_reached = 0;  // connections to hosts past the cap
  std::uint64_t more_refused = 0;  // refusals past the cap
  bool empty() const {
    return reached.empty() && refused.empty() && more_reached == 0 && more_refused == 0;
  }
};

// Counts for /metrics; called without any lock of the relay's held, from stream threads.
class EgressEvents {
 public:
  virtual ~EgressEvents() = default;
  virtual void streamEnded(const std::string& tenant, std::uint64_t bytes_up,
                           std::uint64_t bytes_down) = 0;
  // `reason`: a fixed word ("not_allowed", "forbidden_address", "bad_request",
  // "unreachable", "connect_failed", "server_name", "limit", "idle", "protocol", "brokered":
  // a brokered stream's TLS or request refused).
  virtual void streamRefused(const std::string& tenant, std::string_view reason) = 0;
};

class EgressChannel;

// Brokered credentials (issue 48): the operator's credentials and the CA that ends a brokered
// host's TLS. Both null: no stream is brokered.
struct Brokering {
  const CredentialStore* credentials = nullptr;
  CertificateAuthority* authority = nullptr;
};

// What PID 1 is told of a sandbox's egress in its control file.
struct LauncherEgress {
  std::string nonce;
  std::string ca_pem;  // the brokering CA, which the programs trust; empty without one
  std::vector<std::pair<std::string, std::string>> environment;  // placeholders: (name, value)
};

// One per server: the policy and limits every channel applies, and the tenants' open streams.
class EgressService {
 public:
  EgressService(const EgressPolicy& policy, EgressLimits limits, EgressEvents* events = nullptr,
                Brokering brokering = {});
  ~EgressService();

  const EgressPolicy& policy() const { return policy_; }
  const EgressLimits& limits() const { return limits_; }
  bool enabledFor(std::string_view tenant) const { return policy_.enabledFor(tenant); }

  // A channel for one sandbox of `tenant`; `label` names it in the log ("run 3f2a…").
  std::shared_ptr<EgressChannel> open(std::string tenant, std::string label);

 private:
  friend class EgressChannel;
  bool takeTenantStream(const std::string& tenant);
  void giveTenantStream(const std::string& tenant);
  void threadStarted();
  void threadEnded();

  const EgressPolicy& policy_;
  const EgressLimits limits_;
  EgressEvents* events_;
  const Brokering brokering_;
  std::mutex mutex_;
  std::map<std::string, std::size_t, std::less<>> tenant_streams_;
  std::vector<std::weak_ptr<EgressChannel>> channels_;  // closed at shutdown
  std::size_t threads_ = 0;
  std::condition_variable threads_ended_;
};

class EgressChannel : public std::enable_shared_from_this<EgressChannel> {
 public:
  EgressChannel(EgressService& service, std::string tenant, std::string label);
  ~EgressChannel();
  EgressChannel(const EgressChannel&) = delete;
  EgressChannel& operator=(const EgressChannel&) = delete;

  // The sandbox's egress nonce, which only its control file carries.
  const std::string& nonce() const { return nonce_; }
  // What its control file tells PID 1: the nonce, and the tenant's CA and placeholders.
  LauncherEgress launcherEgress() const;

  // How frames reach the sandbox's stdin (RuntimeBackend::deliver on its id). Set once the
  // sandbox exists, before it can write a frame.
  void attach(std::function<bool(const std::string& bytes)> deliver);

  // The sandbox's stdout as it arrives (the backend's output thread): PID 1's frames are taken
  // out and acted on, the program's bytes appended to `output`. Never blocks.
  void onStdout(std::string_view bytes, std::string& output);
  // The sandbox has ended: its streams are reset. Never blocks.
  void onEnded(std::string& output);

  // What happened since the last call (a session's runs each take theirs).
  NetworkReport takeReport();

  // Resets every stream; their threads end on their own (each holds the channel).
  void close();

 private:
  struct Stream;
  void onFrame(Frame frame);
  void resetAllLocked(std::string_view why);
  void serve(const std::shared_ptr<Stream>& stream);  // serveStream(), whatever it throws
  void serveStream(const std::shared_ptr<Stream>& stream);
  bool send(const Frame& frame);
  void account(const std::string& target, std::uint64_t up, std::uint64_t down, bool opened,
               std::uint64_t credential_requests = 0);
  // Starts a brokered stream's thread between the relay's end of a socketpair (returned) and
  // `upstream`; the relay then carries the program's bytes to that end as to a host.
  Poco::Net::StreamSocket startBroker(Poco::Net::StreamSocket& upstream, const std::string& host,
                                      const std::string& reached, std::uint16_t port,
                                      bool terminate);
  void refuse(const std::string& target, const std::string& reason, std::string_view kind);
  // Counts a refusal in the report, within its cap; true when it is a new entry (logged).
  bool recordRefusalLocked(const std::string& target, const std::string& reason);

  EgressService& service_;
  const std::string tenant_;
  const std::string label_;
  const std::string nonce_;
  StdoutFrames frames_;  // only the output thread touches it

  std::mutex mutex_;
  std::function<bool(const std::string&)> deliver_;
  std::map<std::uint32_t, std::shared_ptr<Stream>> streams_;
  std::uint32_t last_stream_ = 0;
  std::uint64_t bytes_total_ = 0;
  bool ended_ = false;
  NetworkReport report_;
};

// The sink a sandbox with egress is started with: stdout through its channel, then on to
// `downstream` (the run's capture, a session's sink). Outlives the sandbox, as every sink must.
class EgressSink : public backend::OutputSink {
 public:
  EgressSink(std::shared_ptr<EgressChannel> channel, backend::OutputSink* downstream)
      : channel_(std::move(channel)), downstream_(downstream) {}
  void write(backend::Stream stream, std::string_view bytes) override;
  void ended() override;
  EgressChannel& channel() { return *channel_; }

 private:
  std::shared_ptr<EgressChannel> channel_;
  backend::OutputSink* downstream_;
  std::string output_;  // reused between writes
};

}  // namespace scs::egress
