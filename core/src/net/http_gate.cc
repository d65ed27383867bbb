// HttpGate: one thread accepting connections and reading request heads without blocking
// (deadline, size cap, oldest dropped), then each whole head handed to its lane's workers.

#include "net/http_gate.h"

#include <Poco/Logger.h>
#include <Poco/Net/HTTPServerConnection.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Net/StreamSocketImpl.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "net/tenant_slots.h"

namespace scs::net {
namespace {

constexpr std::size_t kReadChunk = 16 << 10;
constexpr std::string_view kHeadEnd = "\r\n\r\n";

Poco::Logger& logger() { return Poco::Logger::get("scs.http"); }

// A connection's socket whose first bytes the gate has already read: they are received again
// before anything else, so that Poco's connection reads the request from its first byte.
class ReplayingSocketImpl final : public Poco::Net::StreamSocketImpl {
 public:
  ReplayingSocketImpl(poco_socket_t fd, std::string read)
      : StreamSocketImpl(fd), read_(std::move(read)) {}

  int receiveBytes(void* buffer, int length, int flags = 0) override {
    if (at_ < read_.size() && length > 0) {
      const std::size_t n = std::min(read_.size() - at_, static_cast<std::size_t>(length));
      std::memcpy(buffer, read_.data() + at_, n);
      at_ += n;
      return static_cast<int>(n);
    }
    return StreamSocketImpl::receiveBytes(buffer, length, flags);
  }

  bool poll(const Poco::Timespan& timeout, int mode) override {
    if ((mode & Poco::Net::Socket::SELECT_READ) != 0 && at_ < read_.size()) {
      return true;
    }
    return StreamSocketImpl::poll(timeout, mode);
  }

  int available() override {
    return static_cast<int>(read_.size() - at_) + StreamSocketImpl::available();
  }

  // What the gate read up to the end of the head: the whole head, as sent.
  std::string head() const {
    const std::size_t end = read_.find(kHeadEnd);
    return end == std::string::npos ? std::string() : read_.substr(0, end + kHeadEnd.size());
  }

 private:
  std::string read_;
  std::size_t at_ = 0;
};

void setBlocking(int fd, bool blocking) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

const char* reasonOf(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

}  // namespace

std::string rawRequestHead(Poco::Net::HTTPServerRequest& request) {
  auto* parsed = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(&request);
  if (parsed == nullptr) {
    return {};
  }
  const auto* replaying = dynamic_cast<const ReplayingSocketImpl*>(parsed->socket().impl());
  return replaying == nullptr ? std::string() : replaying->head();
}

struct HttpGate::Impl {
  // A connection whose request head is still arriving.
  struct Pending {
    int fd;
    std::string read;
    std::chrono::steady_clock::time_point deadline;
  };

  // A complete request head, waiting for a worker of its lane.
  struct Job {
    int fd;
    std::string read;
    std::optional<TenantSlots::Slot> slot;
  };

  struct Lane {
    GateLane settings;
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Job> jobs;
    std::set<int> serving;  // the sockets of the requests its workers serve
    std::vector<std::thread> workers;
  };

  Impl(GateSettings gate_settings, Poco::Net::HTTPRequestHandlerFactory::Ptr handler_factory,
       Poco::Net::HTTPServerParams::Ptr server_params, Classify classifier, RefusalBody body)
      : settings(std::move(gate_settings)),
        factory(std::move(handler_factory)),
        params(std::move(server_params)),
        classify(std::move(classifier)),
        refusal(std::move(body)),
        slots(settings.max_in_flight_per_tenant) {
    for (const GateLane& lane : settings.lanes) {
      lanes.push_back(std::make_unique<Lane>());
      lanes.back()->settings = lane;
    }
  }

  void acceptAll();
  void readHead(Pending& pending, bool* done);
  void admit(Pending& pending, std::size_t head_length);
  void refuse(int fd, int status, const std::string& message, bool retry_after = false);
  void gateThread();
  void workerThread(Lane& lane);

  const GateSettings settings;
  const Poco::Net::HTTPRequestHandlerFactory::Ptr factory;
  const Poco::Net::HTTPServerParams::Ptr params;
  const Classify classify;
  const RefusalBody refusal;
  TenantSlots slots;
  std::vector<std::unique_ptr<Lane>> lanes;

  Poco::Net::ServerSocket socket;
  int wake_read = -1;
  int wake_write = -1;
  std::deque<Pending> pending;
  std::atomic<bool> stopping{false};
  std::thread gate;
  bool started = false;
  std::once_flag stopped;
  std::once_flag joined;
};

void HttpGate::Impl::refuse(int fd, int status, const std::string& message, bool retry_after) {
  const std::string body = refusal(message);
  std::string reply =
      "HTTP/1.1 " + std::to_string(status) + " " + reasonOf(status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n";
  if (retry_after) {
    reply += "Retry-After: 1\r\n";
  }
  reply += "\r\n" + body;
  // A short answer into an empty send buffer: one non-blocking send is all it takes, and the
  // gate never waits for a client.
  (void)::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  char discard[4096];
  while (::recv(fd, discard, sizeof(discard), MSG_DONTWAIT) > 0) {
  }
  ::close(fd);
}

void HttpGate::Impl::acceptAll() {
  while (true) {
    const int fd =
        ::accept4(socket.impl()->sockfd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      return;  // EAGAIN: none left; anything else: the next poll tells again
    }
    if (pending.size() >= settings.max_pending) {
      // The oldest has been waiting longest for its head: the slowest client gives way.
      ::close(pending.front().fd);
      pending.pop_front();
      logger().debug("gate: too many connections without a request head; closed the oldest");
    }
    pending.push_back({fd, {}, std::chrono::steady_clock::now() + settings.head_timeout});
  }
}

void HttpGate::Impl::readHead(Pending& connection, bool* done) {
  char buffer[kReadChunk];
  while (true) {
    const ssize_t n = ::recv(connection.fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      ::close(connection.fd);
      *done = true;
      return;
    }
    if (n < 0) {
      return;  // the rest of the head is still to come
    }
    const std::size_t searched_from =
        connection.read.size() >= kHeadEnd.size() - 1 ? connection.read.size() - 3 : 0;
    connection.read.append(buffer, static_cast<std::size_t>(n));
    const std::size_t end = connection.read.find(kHeadEnd, searched_from);
    if (end != std::string::npos && end + kHeadEnd.size() <= settings.max_head_bytes) {
      admit(connection, end + kHeadEnd.size());
      *done = true;
      return;
    }
    if (connection.read.size() >= settings.max_head_bytes) {
      refuse(
          connection.fd, 431,
          "the request head is longer than " + std::to_string(settings.max_head_bytes) + " bytes.");
      *done = true;
      return;
    }
  }
}

void HttpGate::Impl::admit(Pending& connection, std::size_t head_length) {
  Poco::Net::HTTPRequest head;
  try {
    std::istringstream text(connection.read.substr(0, head_length));
    head.read(text);
  } catch (const Poco::Exception& e) {
    refuse(connection.fd, 400, "the request head is malformed: " + e.message() + ".");
    return;
  }
  GateAdmission admission;
  try {
    admission = classify(head);
  } catch (const std::exception& e) {
    logger().error(std::string("gate: classifying a request failed: ") + e.what());
    refuse(connection.fd, 503, "the server could not take the request.");
    return;
  }
  Job job{connection.fd, std::move(connection.read), std::nullopt};
  if (admission.tenant) {
    job.slot = slots.take(*admission.tenant);
    if (!job.slot) {
      logger().warning("gate: tenant " + *admission.tenant + " has " + std::to_string(slots.cap()) +
                       " requests in flight; refused another");
      refuse(job.fd, 429,
             "this client has " + std::to_string(slots.cap()) +
                 " requests in flight, the most one client may have; retry when one has been "
                 "answered.",
             true);
      return;
    }
  }
  Lane& lane = *lanes.at(std::min(admission.lane, lanes.size() - 1));
  std::unique_lock lock(lane.mutex);
  if (lane.jobs.size() >= lane.settings.queued) {
    lock.unlock();
    logger().warning("gate: the " + lane.settings.name + " lane's queue is full");
    refuse(job.fd, 503, "the server is busy; retry shortly.", true);
    return;
  }
  lane.jobs.push_back(std::move(job));
  lane.ready.notify_one();
}

void HttpGate::Impl::gateThread() {
  std::vector<pollfd> fds;
  while (!stopping) {
    const auto now = std::chrono::steady_clock::now();
    while (!pending.empty() && pending.front().deadline <= now) {
      refuse(pending.front().fd, 408,
             "the request head did not arrive within " +
                 std::to_string(settings.head_timeout.count() / 1000) + " s.");
      pending.pop_front();
    }
    fds.clear();
    fds.push_back({wake_read, POLLIN, 0});
    fds.push_back({socket.impl()->sockfd(), POLLIN, 0});
    for (const Pending& connection : pending) {
      fds.push_back({connection.fd, POLLIN, 0});
    }
    int timeout = -1;
    if (!pending.empty()) {
      timeout = static_cast<int>(std::max<std::int64_t>(
          1, std::chrono::duration_cast<std::chrono::milliseconds>(pending.front().deadline - now)
                     .count() +
                 1));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      continue;  // EINTR
    }
    // Heads first (the connections polled are the first pending.size() entries), then new
    // connections, which join the end of the queue.
    std::size_t index = 2;
    for (auto it = pending.begin(); it != pending.end() && index < fds.size(); ++index) {
      bool done = false;
      if ((fds[index].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        readHead(*it, &done);
      }
      it = done ? pending.erase(it) : std::next(it);
    }
    if ((fds[1].revents & POLLIN) != 0) {
      acceptAll();
    }
  }
  for (const Pending& connection : pending) {
    ::close(connection.fd);
  }
  pending.clear();
  socket.close();
}

void HttpGate::Impl::workerThread(Lane& lane) {
  while (true) {
    Job job{-1, {}, std::nullopt};
    {
      std::unique_lock lock(lane.mutex);
      lane.ready.wait(lock, [&] { return stopping || !lane.jobs.empty(); });
      if (stopping) {
        return;  // what is still queued is closed by stop()
      }
      job = std::move(lane.jobs.front());
      lane.jobs.pop_front();
    }
    setBlocking(job.fd, true);
    {
      std::lock_guard lock(lane.mutex);
      lane.serving.insert(job.fd);
    }
    try {
      Poco::Net::StreamSocket connection_socket(
          new ReplayingSocketImpl(job.fd, std::move(job.read)));
      Poco::Net::HTTPServerConnection connection(connection_socket, params, factory);
      connection.run();
    } catch (const Poco::Exception& e) {
      logger().debug("gate: a connection ended: " + e.displayText());
    } catch (const std::exception& e) {
      logger().error(std::string("gate: serving a request failed: ") + e.what());
    }
    std::lock_guard lock(lane.mutex);  // before the descriptor's number can be reused
    lane.serving.erase(job.fd);
  }
}

HttpGate::HttpGate(GateSettings settings, Poco::Net::HTTPRequestHandlerFactory::Ptr factory,
                   Poco::Net::HTTPServerParams::Ptr params, Classify classify, RefusalBody refusal)
    : impl_(std::make_unique<Impl>(std::move(settings), std::move(factory), std::move(params),
                                   std::move(classify), std::move(refusal))) {}

HttpGate::~HttpGate() {
  stop();
  join();
}

void HttpGate::start(Poco::Net::ServerSocket socket) {
  Impl& impl = *impl_;
  impl.socket = std::move(socket);
  setBlocking(impl.socket.impl()->sockfd(), false);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Poco::Net::NetException("cannot make the gate's wake-up pipe");
  }
  impl.wake_read = wake[0];
  impl.wake_write = wake[1];
  for (auto& lane : impl.lanes) {
    for (std::size_t i = 0; i < lane->settings.workers; ++i) {
      lane->workers.emplace_back([&impl, lane = lane.get()] { impl.workerThread(*lane); });
    }
  }
  impl.gate = std::thread([&impl] { impl.gateThread(); });
  impl.started = true;
}

void HttpGate::stop() {
  Impl& impl = *impl_;
  if (!impl.started) {
    return;
  }
  std::call_once(impl.stopped, [&impl] {
    impl.stopping = true;
    const char byte = 0;
    (void)::write(impl.wake_write, &byte, 1);
    for (auto& lane : impl.lanes) {
      std::lock_guard lock(lane->mutex);
      for (const Impl::Job& job : lane->jobs) {
        ::close(job.fd);
      }
      lane->jobs.clear();
      // As HTTPServer::stopAll(true) does: a handler writing an answer ends soon.
      for (const int fd : lane->serving) {
        ::shutdown(fd, SHUT_RDWR);
      }
      lane->ready.notify_all();
    }
  });
}

void HttpGate::join() {
  Impl& impl = *impl_;
  if (!impl.started) {
    return;
  }
  std::call_once(impl.joined, [&impl] {
    if (impl.gate.joinable()) {
      impl.gate.join();
    }
    for (auto& lane : impl.lanes) {
      for (std::thread& worker : lane->workers) {
        worker.join();
      }
      for (const Impl::Job& job : lane->jobs) {  // queued by the gate as it stopped
        ::close(job.fd);
      }
      lane->jobs.clear();
    }
    ::close(impl.wake_read);
    ::close(impl.wake_write);
  });
}

std::size_t HttpGate::inFlight(const std::string& tenant) const {
  return impl_->slots.held(tenant);
}

}  // namespace scs::net
