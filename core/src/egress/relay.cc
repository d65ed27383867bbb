#include "egress/relay.h"

#include <Poco/Logger.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Net/StreamSocketImpl.h>
#include <Poco/Timespan.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <utility>

#include "egress/proxy_handshake.h"

namespace scs::egress {

namespace {

using Clock = std::chrono::steady_clock;

Poco::Logger& logger() { return Poco::Logger::get("scs.egress"); }

constexpr std::size_t kReadChunk = kMaxStdinPayloadBytes;

std::string randomNonce() {
  std::random_device random;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string nonce;
  for (int i = 0; i < 32; ++i) {
    nonce.push_back(kHex[random() % 16]);
  }
  return nonce;
}

std::string targetText(const std::string& host, std::uint16_t port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

int millisUntil(Clock::time_point at) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 60'000));
}

// What tunnelProblem() answers while the first bytes do not yet decide.
const std::string kUndecided = "undecided";

// Whether a tunnel's first bytes may be carried to `port` of `target`: empty when they may, why
// not when they may not, kUndecided while a ClientHello is incomplete. Plain bytes may go to
// any port but 443; a TLS ClientHello must name the host (none for an IP literal), once, and
// not hide it (Encrypted Client Hello).
std::string tunnelProblem(std::string_view first, std::uint16_t port, const Target& target) {
  constexpr unsigned char kHandshakeRecord = 0x16;
  if (static_cast<unsigned char>(first[0]) != kHandshakeRecord) {
    return port == 443 ? "port 443 carries TLS only, and this stream is not TLS" : "";
  }
  const ClientHello hello = readClientHello(first);
  switch (hello.state) {
    case ClientHello::State::kNeedMore:
      return kUndecided;
    case ClientHello::State::kNotTls:
    case ClientHello::State::kMalformed:
      return "its TLS ClientHello could not be read";
    case ClientHello::State::kHello:
      break;
  }
  if (hello.encrypted_client_hello) {
    return "it offers Encrypted Client Hello, which hides the server it asks for";
  }
  if (hello.several_names) {
    return "its TLS ClientHello names several servers";
  }
  if (target.address ? !hello.server_name.empty() : hello.server_name != target.host) {
    return "its TLS server name \"" + hello.server_name.substr(0, 255) +
           "\" is not the host it connected to";
  }
  return "";
}

}  // namespace

// One connection of the program's. The fields under "guarded" are the channel's mutex's.
struct EgressChannel::Stream {
  explicit Stream(std::uint32_t id_) : id(id_), wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Stream() {
    if (wake_fd >= 0) {
      ::close(wake_fd);
    }
  }
  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto written = ::write(wake_fd, &one, sizeof one);
  }
  void drainWake() const {
    std::uint64_t count = 0;
    [[maybe_unused]] const auto read = ::read(wake_fd, &count, sizeof count);
  }

  const std::uint32_t id;
  const int wake_fd;
  // guarded
  std::string inbound;                     // from the program, not yet taken by the stream's thread
  std::uint64_t received = 0;              // data bytes from the program in all
  std::uint64_t allowed = kInitialWindow;  // what the program may have sent in all
  std::uint64_t credit = kInitialWindow;   // bytes the server may still send the program
  bool program_fin = false;
  bool reset = false;
  std::string reset_reason;  // the server's own reason for a reset (a cap, the sandbox's end)
  bool done = false;         // its thread has finished
  bool told = false;         // PID 1 was sent the reset
};

EgressService::EgressService(const EgressPolicy& policy, EgressLimits limits, EgressEvents* events,
                             Brokering brokering)
    : policy_(policy), limits_(limits), events_(events), brokering_(brokering) {}

EgressService::~EgressService() {
  std::vector<std::weak_ptr<EgressChannel>> channels;
  {
    std::lock_guard lock(mutex_);
    channels.swap(channels_);
  }
  for (const auto& weak : channels) {
    if (const auto channel = weak.lock()) {
      channel->close();
    }
  }
  // A stream's thread may be in a dial (at most limits_.connect) or a poll (woken by its reset).
  std::unique_lock lock(mutex_);
  threads_ended_.wait(lock, [this] { return threads_ == 0; });
}

void EgressService::threadStarted() {
  std::lock_guard lock(mutex_);
  ++threads_;
}

void EgressService::threadEnded() {
  std::lock_guard lock(mutex_);
  if (--threads_ == 0) {
    threads_ended_.notify_all();
  }
}

std::shared_ptr<EgressChannel> EgressService::open(std::string tenant, std::string label) {
  auto channel = std::make_shared<EgressChannel>(*this, std::move(tenant), std::move(label));
  std::lock_guard lock(mutex_);
  std::erase_if(channels_, [](const auto& weak) { return weak.expired(); });
  channels_.push_back(channel);
  return channel;
}

bool EgressService::takeTenantStream(const std::string& tenant) {
  std::lock_guard lock(mutex_);
  std::size_t& open = tenant_streams_[tenant];
  if (open >= limits_.streams_per_tenant) {
    return false;
  }
  ++open;
  return true;
}

void EgressService::giveTenantStream(const std::string& tenant) {
  std::lock_guard lock(mutex_);
  const auto found = tenant_streams_.find(tenant);
  if (found != tenant_streams_.end() && found->second > 0 && --found->second == 0) {
    tenant_streams_.erase(found);
  }
}

EgressChannel::EgressChannel(EgressService& service, std::string tenant, std::string label)
    : service_(service),
      tenant_(std::move(tenant)),
      label_(std::move(label)),
      nonce_(randomNonce()),
      frames_(nonce_) {}

EgressChannel::~EgressChannel() = default;

LauncherEgress EgressChannel::launcherEgress() const {
  LauncherEgress egress{nonce_, {}, {}};
  if (const CredentialStore* credentials = service_.brokering_.credentials) {
    egress.environment = credentials->environmentFor(tenant_);
    const bool brokers = std::any_of(credentials->all().begin(), credentials->all().end(),
                                     [&](const Credential& c) { return c.tenant == tenant_; });
    if (brokers && service_.brokering_.authority != nullptr) {
      egress.ca_pem = service_.brokering_.authority->certificatePem();
    }
  }
  return egress;
}

void EgressChannel::attach(std::function<bool(const std::string&)> deliver) {
  std::lock_guard lock(mutex_);
  deliver_ = std::move(deliver);
}

bool EgressChannel::send(const Frame& frame) {
  std::function<bool(const std::string&)> deliver;
  {
    std::lock_guard lock(mutex_);
    if (ended_ || !deliver_) {
      return false;
    }
    deliver = deliver_;
  }
  return deliver(encodeStdinFrame(frame));
}

void EgressChannel::onStdout(std::string_view bytes, std::string& output) {
  std::vector<Frame> frames;
  frames_.feed(bytes, output, frames);
  for (Frame& frame : frames) {
    onFrame(std::move(frame));
  }
  if (!frames_.violation().empty()) {
    std::lock_guard lock(mutex_);
    if (!ended_) {
      logger().warning("egress " + label_ + ": " + frames_.violation() +
                       "; every stream of the sandbox is reset");
      resetAllLocked("the sandbox's frames broke the protocol");
      ended_ = true;
    }
  }
}

void EgressChannel::onEnded(std::string& output) {
  frames_.finish(output);
  std::lock_guard lock(mutex_);
  resetAllLocked("the sandbox ended");
  ended_ = true;
}

void EgressChannel::resetAllLocked(std::string_view why) {
  for (auto& [id, stream] : streams_) {
    if (!stream->reset) {
      stream->reset = true;
      stream->reset_reason = std::string(why);
    }
    stream->wake();
  }
}

void EgressChannel::onFrame(Frame frame) {
  std::vector<Frame> replies;  // sent once the lock is let go
  {
    std::lock_guard lock(mutex_);
    if (ended_) {
      return;
    }
    const auto found = streams_.find(frame.stream);
    Stream* stream = found == streams_.end() ? nullptr : found->second.get();
    switch (frame.type) {
      case FrameType::kOpen: {
        if (stream != nullptr || frame.stream <= last_stream_) {
          replies.push_back({FrameType::kReset, frame.stream, 0, {}});
          break;
        }
        last_stream_ = frame.stream;
        // A stream leaves streams_ as its thread ends (finish()): these are the open ones.
        const std::size_t open = streams_.size();
        const bool sandbox_full = open >= service_.limits().streams_per_sandbox;
        if (sandbox_full || !service_.takeTenantStream(tenant_)) {
          replies.push_back({FrameType::kReset, frame.stream, 0, {}});
          const std::string reason =
              sandbox_full ? "more than " + std::to_string(service_.limits().streams_per_sandbox) +
                                 " connections at once"
                           : "more than " + std::to_string(service_.limits().streams_per_tenant) +
                                 " connections at once for this tenant";
          recordRefusalLocked("", reason);
          if (service_.events_ != nullptr) {
            service_.events_->streamRefused(tenant_, "limit");
          }
          break;
        }
        auto created = std::make_shared<Stream>(frame.stream);
        service_.threadStarted();
        try {
          std::thread([self = shared_from_this(), created] {
            self->serve(created);
            self->service_.threadEnded();
          }).detach();
          streams_[frame.stream] = created;
        } catch (const std::system_error&) {  // no thread to be had: as a cap would
          service_.threadEnded();
          service_.giveTenantStream(tenant_);
          replies.push_back({FrameType::kReset, frame.stream, 0, {}});
          recordRefusalLocked("", "the server could not start a connection's thread");
        }
        break;
      }
      case FrameType::kData:
        if (stream == nullptr || stream->reset) {
          break;  // a stream the server has already let go
        }
        stream->received += frame.payload.size();
        if (stream->received > stream->allowed) {
          stream->reset = true;
          stream->reset_reason = "the sandbox sent past its credit";
        } else {
          stream->inbound += frame.payload;
        }
        stream->wake();
        break;
      case FrameType::kCredit:
        if (stream != nullptr) {
          // PID 1 gives back what it wrote: never more than a window is outstanding.
          stream->credit = std::min<std::uint64_t>(stream->credit + frame.value, kInitialWindow);
          stream->wake();
        }
        break;
      case FrameType::kFin:
        if (stream != nullptr) {
          stream->program_fin = true;
          stream->wake();
        }
        break;
      case FrameType::kReset:
        if (stream != nullptr) {
          stream->reset = true;
          stream->wake();
        }
        break;
    }
  }
  for (const Frame& reply : replies) {
    send(reply);
  }
}

void EgressChannel::account(const std::string& target, std::uint64_t up, std::uint64_t down,
                            bool opened, std::uint64_t credential_requests) {
  std::lock_guard lock(mutex_);
  auto host = std::find_if(report_.reached.begin(), report_.reached.end(),
                           [&](const NetworkReport::Host& h) { return h.target == target; });
  if (host == report_.reached.end() && report_.reached.size() < NetworkReport::kMaxEntries) {
    report_.reached.push_back({target, 0, 0, 0});
    host = std::prev(report_.reached.end());
  }
  if (host != report_.reached.end()) {
    host->streams += opened ? 1 : 0;
    host->bytes_up += up;
    host->bytes_down += down;
    host->credential_requests += credential_requests;
  } else if (opened) {
    ++report_.more_reached;
  }
  bytes_total_ += up + down;
  if (bytes_total_ > service_.limits().bytes_per_sandbox) {
    resetAllLocked("past the sandbox's " + std::to_string(service_.limits().bytes_per_sandbox) +
                   " bytes of egress");
  }
}

void EgressChannel::refuse(const std::string& target, const std::string& reason,
                           std::string_view kind) {
  bool fresh = false;
  {
    std::lock_guard lock(mutex_);
    fresh = recordRefusalLocked(target, reason);
  }
  if (fresh) {  // one line per distinct refusal, at most kMaxEntries a channel
    logger().information("egress " + label_ + " of tenant " + tenant_ + ": refused " +
                         (target.empty() ? std::string("a stream") : target) + ": " + reason);
  }
  if (service_.events_ != nullptr) {
    service_.events_->streamRefused(tenant_, kind);
  }
}

bool EgressChannel::recordRefusalLocked(const std::string& target, const std::string& reason) {
  const auto same = std::find_if(
      report_.refused.begin(), report_.refused.end(),
      [&](const NetworkReport::Refusal& r) { return r.target == target && r.reason == reason; });
  if (same != report_.refused.end()) {
    ++same->count;
    return false;
  }
  if (report_.refused.size() >= NetworkReport::kMaxEntries) {
    ++report_.more_refused;
    return false;
  }
  report_.refused.push_back({target, reason, 1});
  return true;
}

NetworkReport EgressChannel::takeReport() {
  std::lock_guard lock(mutex_);
  NetworkReport taken = std::move(report_);
  report_ = {};
  return taken;
}

void EgressChannel::close() {
  std::lock_guard lock(mutex_);
  resetAllLocked("the sandbox ended");
  ended_ = true;
}

// A stream's life on its own thread: the proxy request, the policy's decision, the dial, the
// server name of a TLS stream, then the bytes both ways until both sides are done.
void EgressChannel::serve(const std::shared_ptr<Stream>& stream) {
  try {
    serveStream(stream);
  } catch (const std::exception& e) {
    // A socket call that throws ends this stream, never the server.
    logger().error("egress " + label_ + ": stream " + std::to_string(stream->id) +
                   " failed: " + e.what());
    bool first = false;
    {
      std::lock_guard lock(mutex_);
      first = !stream->done;
      stream->done = true;
      streams_.erase(stream->id);
    }
    if (first) {
      service_.giveTenantStream(tenant_);
    }
    send({FrameType::kReset, stream->id, 0, {}});
  }
}

void EgressChannel::serveStream(const std::shared_ptr<Stream>& stream) {
  const auto started = Clock::now();
  const EgressLimits& limits = service_.limits();
  const std::uint32_t id = stream->id;

  // Moves what the program has sent into `into` and gives it the same credit back. False once
  // the stream is reset.
  struct Taken {
    bool reset = false;
    bool fin = false;
    std::uint64_t credit = 0;
  };
  const auto take = [&](std::string* into) {
    Taken taken;
    std::size_t moved = 0;
    {
      std::lock_guard lock(mutex_);
      taken.reset = stream->reset;
      taken.fin = stream->program_fin;
      taken.credit = stream->credit;
      if (into != nullptr && !stream->inbound.empty()) {
        moved = stream->inbound.size();
        into->append(stream->inbound);
        stream->inbound.clear();
        stream->allowed += moved;
      }
    }
    if (moved > 0) {
      send({FrameType::kCredit, id, static_cast<std::uint32_t>(moved), {}});
    }
    return taken;
  };
  const auto sendData = [&](std::string_view bytes) {
    while (!bytes.empty()) {
      const std::size_t n = std::min(bytes.size(), kMaxStdinPayloadBytes);
      send({FrameType::kData, id, 0, std::string(bytes.substr(0, n))});
      bytes.remove_prefix(n);
    }
  };
  // Waits until the stream's wake fd or `socket` (with `events`; -1 for none) is ready, or
  // `until`. False at `until`.
  const auto await = [&](int socket, short events, Clock::time_point until) {
    std::array<pollfd, 2> fds{pollfd{stream->wake_fd, POLLIN, 0}, pollfd{socket, events, 0}};
    while (true) {
      const int ready = ::poll(fds.data(), socket >= 0 ? 2 : 1, millisUntil(until));
      if (ready > 0) {
        if (fds[0].revents != 0) {
          stream->drainWake();
        }
        return std::pair<bool, short>{true, fds[1].revents};
      }
      if (ready == 0 && Clock::now() >= until) {
        return std::pair<bool, short>{false, short{0}};
      }
      if (ready < 0 && errno != EINTR) {
        return std::pair<bool, short>{false, short{0}};
      }
    }
  };
  // Ends the stream's thread; a reset of the server's own (a cap, a broken credit) is told to
  // PID 1, which then closes the program's connection.
  const auto finish = [&] {
    service_.giveTenantStream(tenant_);
    bool tell = false;
    {
      std::lock_guard lock(mutex_);
      stream->done = true;
      tell = stream->reset && !stream->reset_reason.empty() && !stream->told;
      stream->told = stream->told || tell;
      // Forgotten at once, so that its descriptor goes with its thread, not with the channel.
      const auto found = streams_.find(id);
      if (found != streams_.end() && found->second == stream) {
        streams_.erase(found);
      }
    }
    if (tell) {
      send({FrameType::kReset, id, 0, {}});
    }
  };

  // A refusal: in the report before the program can see it (a run that ends on it finds it
  // there), then `reply` and the stream's end.
  const auto refuseWith = [&](const std::string& target, const std::string& reply,
                              const std::string& reason, std::string_view kind) {
    refuse(target, reason, kind);
    sendData(reply);
    send({FrameType::kFin, id, 0, {}});
    finish();
  };

  // 1. The proxy request.
  ProxyHandshake handshake;
  ProxyHandshake::Step step;
  const auto handshake_until = started + limits.handshake;
  while (true) {
    std::string bytes;
    const Taken taken = take(&bytes);
    if (taken.reset) {
      finish();
      return;
    }
    if (!bytes.empty()) {
      step = handshake.feed(bytes);
      // A reply (SOCKS5's method choice) may already be followed by the request in the same
      // bytes: the handshake is fed again, with nothing new, until it needs more.
      while (step.kind == ProxyHandshake::Step::Kind::kReply) {
        sendData(step.reply);
        step = handshake.feed({});
      }
      if (step.kind != ProxyHandshake::Step::Kind::kNeedMore) {
        break;
      }
    }
    if (taken.fin) {  // the program closed before it asked for anything
      send({FrameType::kFin, id, 0, {}});
      finish();
      return;
    }
    if (!await(-1, 0, handshake_until).first) {
      const std::string why =
          "no proxy request within " + std::to_string(limits.handshake.count()) + " s";
      refuseWith("", handshake.refused(Refusal::kTimedOut, why), why, "protocol");
      return;
    }
  }
  if (step.kind == ProxyHandshake::Step::Kind::kRefuse) {
    refuseWith("", step.reply, step.reason, "bad_request");
    return;
  }
  const ProxyRequest request = step.request;
  std::string asked = targetText(request.host, request.port);

  // 2. The policy: canonical form, deny, allow; then resolution, and the dial.
  const Result<Target> parsed = parseTarget(request.host);
  if (const Error* error = std::get_if<Error>(&parsed)) {
    refuseWith(asked, handshake.refused(Refusal::kBadRequest, error->message), error->message,
               "bad_request");
    return;
  }
  const Target& target = std::get<Target>(parsed);
  asked = targetText(target.host, request.port);
  const Decision decision = service_.policy().decide(tenant_, target, request.port);
  if (!decision.allowed) {
    refuseWith(asked, handshake.refused(Refusal::kNotAllowed, decision.reason), decision.reason,
               "not_allowed");
    return;
  }
  const CredentialStore* credentials = service_.brokering_.credentials;
  const bool brokered =
      credentials != nullptr && credentials->brokered(tenant_, target.host, request.port);
  if (brokered && request.protocol == ProxyProtocol::kHttp) {
    const std::string why = asked +
                            " has a credential, which this server adds over HTTPS only: ask for "
                            "an https:// URL";
    refuseWith(asked, handshake.refused(Refusal::kNotAllowed, why), why, "brokered");
    return;
  }
  const Result<std::vector<Poco::Net::IPAddress>> resolved =
      service_.policy().resolve(tenant_, target, request.port);
  if (const Error* error = std::get_if<Error>(&resolved)) {
    const bool forbidden = error->kind == ErrorKind::kRefused;
    refuseWith(
        asked,
        handshake.refused(forbidden ? Refusal::kNotAllowed : Refusal::kUnreachable, error->message),
        error->message, forbidden ? "forbidden_address" : "unreachable");
    return;
  }
  Poco::Net::StreamSocket upstream;
  std::string dialed;
  std::string dial_error;
  bool timed_out = false;
  for (const Poco::Net::IPAddress& address :
       std::get<std::vector<Poco::Net::IPAddress>>(resolved)) {
    try {
      upstream = Poco::Net::StreamSocket(address.family());
      upstream.connect(Poco::Net::SocketAddress(address, request.port),
                       Poco::Timespan(limits.connect.count(), 0));
      dialed = address.toString();
      break;
    } catch (const Poco::TimeoutException&) {
      timed_out = true;
      dial_error = "timed out after " + std::to_string(limits.connect.count()) + " s";
    } catch (const Poco::Exception& e) {
      dial_error = e.displayText();
    }
  }
  if (dialed.empty()) {
    const std::string why = "could not connect to " + asked + ": " + dial_error;
    refuseWith(asked,
               handshake.refused(timed_out ? Refusal::kTimedOut : Refusal::kConnectFailed, why),
               why, "connect_failed");
    return;
  }
  if (take(nullptr).reset) {
    finish();
    return;
  }

  // 3. The tunnel is open; its first bytes are read before any is carried: a TLS stream's
  // ClientHello must name the host asked for, and port 443 carries TLS only.
  std::string pending = std::move(step.rest);
  if (request.protocol == ProxyProtocol::kHttp) {
    pending.insert(0, request.forward);
  } else {
    sendData(handshake.granted());
    // One deadline for the whole ClientHello, from the tunnel's opening: a hello sent a byte at
    // a time holds the host's connection no longer.
    const auto hello_until = Clock::now() + limits.handshake;
    std::string problem;
    while (true) {
      if (!pending.empty()) {
        problem = tunnelProblem(pending, request.port, target);
        if (problem != kUndecided) {
          break;
        }
      }
      const std::size_t had = pending.size();
      const Taken taken = take(&pending);
      if (taken.reset) {
        finish();
        return;
      }
      if (pending.size() > had) {
        continue;
      }
      if (taken.fin) {  // nothing more will come: an empty tunnel carries nothing
        problem = pending.empty() ? std::string() : "its TLS ClientHello ended unfinished";
        break;
      }
      if (!await(-1, 0, hello_until).first) {
        problem = "no TLS ClientHello in time";
        break;
      }
    }
    if (!problem.empty()) {
      refuse(asked, problem, "server_name");
      send({FrameType::kReset, id, 0, {}});
      finish();
      return;
    }
  }

  // 3b. A host with a credential: the server ends the program's TLS and adds it (broker.h). A
  // plain HTTP request of a tenant with placeholders is read too, so that one carried to a host
  // it does not belong to is refused. Either way the relay then carries the program's bytes to
  // the broker's socketpair as it would to the host.
  if (brokered) {
    constexpr char kHandshakeRecord = 0x16;
    if (!pending.empty() && pending[0] != kHandshakeRecord) {
      const std::string why =
          "this stream is not TLS; a host with a credential is reached over "
          "HTTPS only";
      refuse(asked, why, "brokered");
      send({FrameType::kReset, id, 0, {}});
      finish();
      return;
    }
    upstream = startBroker(upstream, target.host, asked, request.port, true);
  } else if (request.protocol == ProxyProtocol::kHttp && credentials != nullptr &&
             !credentials->environmentFor(tenant_).empty()) {
    // (A plain request never goes to a brokered host, refused above: every placeholder of the
    // tenant is a foreign one here; rulesFor() would copy the secrets only to count them.)
    upstream = startBroker(upstream, target.host, asked, request.port, false);
  }

  // 4. The bytes both ways.
  const std::string& reached = asked;
  account(reached, 0, 0, true);
  const int fd = upstream.impl()->sockfd();
  upstream.setBlocking(false);
  std::size_t offset = 0;
  bool upstream_eof = false;
  bool upstream_shut = false;
  std::uint64_t up_total = 0;
  std::uint64_t down_total = 0;
  std::string end = "closed";
  std::vector<char> buffer(kReadChunk);
  auto idle_until = Clock::now() + limits.idle;
  while (true) {
    Taken taken;
    if (offset >= pending.size()) {
      pending.clear();
      offset = 0;
      taken = take(&pending);
    } else {
      taken = take(nullptr);
    }
    if (taken.reset) {
      std::lock_guard lock(mutex_);
      end = stream->reset_reason.empty() ? "reset by the program" : stream->reset_reason;
      break;
    }
    if (taken.fin && offset >= pending.size() && !upstream_shut) {
      ::shutdown(fd, SHUT_WR);
      upstream_shut = true;
    }
    if (upstream_eof && upstream_shut) {
      break;
    }
    short events = 0;
    if (!upstream_eof && taken.credit > 0) {
      events |= POLLIN;
    }
    if (offset < pending.size()) {
      events |= POLLOUT;
    }
    const auto [ready, revents] = await(events != 0 ? fd : -1, events, idle_until);
    if (!ready) {
      end = "idle for " + std::to_string(limits.idle.count()) + " s";
      refuse(reached, "the connection was idle for " + std::to_string(limits.idle.count()) + " s",
             "idle");
      break;
    }
    // An error is read out after what arrived before it (a brokered stream's answer, ahead of
    // the reset its end's close left), unless nothing can be read now.
    if ((revents & POLLERR) != 0 && (events & POLLIN) == 0) {
      end = "the host reset the connection";
      break;
    }
    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && (events & POLLIN) != 0) {
      const std::size_t want = std::min<std::uint64_t>(taken.credit, buffer.size());
      const ssize_t n = ::recv(fd, buffer.data(), want, 0);
      if (n > 0) {
        {
          std::lock_guard lock(mutex_);
          stream->credit -= static_cast<std::uint64_t>(n);
        }
        // Counted before the program can have it, as a refusal is.
        account(reached, 0, static_cast<std::uint64_t>(n), false);
        down_total += static_cast<std::uint64_t>(n);
        sendData(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
        idle_until = Clock::now() + limits.idle;
      } else if (n == 0) {
        upstream_eof = true;
        send({FrameType::kFin, id, 0, {}});
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        end = std::string("the host's connection failed: ") + std::strerror(errno);
        break;
      }
    }
    if ((revents & POLLOUT) != 0 && offset < pending.size()) {
      const ssize_t n = ::send(fd, pending.data() + offset, pending.size() - offset, MSG_NOSIGNAL);
      if (n > 0) {
        offset += static_cast<std::size_t>(n);
        up_total += static_cast<std::uint64_t>(n);
        account(reached, static_cast<std::uint64_t>(n), 0, false);
        idle_until = Clock::now() + limits.idle;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        end = std::string("the host's connection failed: ") + std::strerror(errno);
        break;
      }
    }
  }
  const bool clean = upstream_eof && upstream_shut;
  if (!clean) {
    const linger hard{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    {
      std::lock_guard lock(mutex_);
      stream->told = true;
    }
    send({FrameType::kReset, id, 0, {}});
  }
  upstream.close();
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  logger().information("egress " + label_ + " of tenant " + tenant_ + ": " + reached + " (" +
                       dialed + ") " + std::to_string(up_total) + " bytes up, " +
                       std::to_string(down_total) + " down in " + std::to_string(seconds) + " s; " +
                       end);
  if (service_.events_ != nullptr) {
    service_.events_->streamEnded(tenant_, up_total, down_total);
  }
  finish();
}

Poco::Net::StreamSocket EgressChannel::startBroker(Poco::Net::StreamSocket& upstream,
                                                   const std::string& host,
                                                   const std::string& reached, std::uint16_t port,
                                                   bool terminate) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    throw std::system_error(errno, std::generic_category(), "socketpair");
  }
  const int host_fd = ::dup(upstream.impl()->sockfd());
  upstream.close();
  if (host_fd < 0) {
    ::close(pair[0]);
    ::close(pair[1]);
    throw std::system_error(errno, std::generic_category(), "dup");
  }
  BrokerSettings settings;
  settings.host = host;
  settings.terminate = terminate;
  settings.handshake = service_.limits().handshake;
  settings.idle = service_.limits().idle;
  RequestRules rules = service_.brokering_.credentials->rulesFor(tenant_, host, port);
  if (!terminate) {
    // A plain http:// stream (its first request read by the proxy handshake, whose Host may
    // name the default port or none): its requests are read whole, as a brokered host's are,
    // so that one carrying a placeholder never reaches the host in part, but not held to a
    // host, as no credential is added to them.
    rules.host.clear();
  }
  service_.threadStarted();
  try {
    std::thread([self = shared_from_this(), broker_fd = pair[1], host_fd, settings, reached,
                 rules = std::move(rules)]() mutable {
      BrokerEvents events;
      events.requests = [&](std::uint64_t requests) {
        self->account(reached, 0, 0, false, requests);
      };
      events.refused = [&](const std::string& reason) {
        self->refuse(reached, reason, "brokered");
      };
      try {
        runBroker(broker_fd, host_fd, self->service_.brokering_.authority, settings,
                  std::move(rules), events);
      } catch (const std::exception& e) {
        logger().error("egress " + self->label_ + ": a brokered stream failed: " + e.what());
      }
      self->service_.threadEnded();
    }).detach();
  } catch (const std::system_error&) {
    service_.threadEnded();
    ::close(pair[1]);
    ::close(host_fd);
    ::close(pair[0]);
    throw;
  }
  return Poco::Net::StreamSocket(new Poco::Net::StreamSocketImpl(pair[0]));
}

void EgressSink::write(backend::Stream stream, std::string_view bytes) {
  if (stream != backend::Stream::kStdout) {
    downstream_->write(stream, bytes);
    return;
  }
  output_.clear();
  channel_->onStdout(bytes, output_);
  if (!output_.empty()) {
    downstream_->write(stream, output_);
  }
}

void EgressSink::ended() {
  output_.clear();
  channel_->onEnded(output_);
  if (!output_.empty()) {
    downstream_->write(backend::Stream::kStdout, output_);
  }
  downstream_->ended();
}

}  // namespace scs::egress
