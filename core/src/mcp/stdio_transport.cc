// StdioTransport: bounded line reads from stdin (an oversized line answered with the id it
// carried), one worker thread per message up to the cap, and answers written under one lock.

#include "mcp/stdio_transport.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <utility>

#include "mcp/message_id.h"

namespace scs::mcp {
namespace {

constexpr std::size_t kChunkBytes = 64 * 1024;

Poco::Logger& logger() { return Poco::Logger::get("scs.mcp"); }

bool isBlank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; });
}

}  // namespace

StdioTransport::StdioTransport(Server& server, std::size_t max_message_bytes,
                               std::size_t max_in_flight)
    : server_(server),
      max_message_bytes_(max_message_bytes),
      max_in_flight_(std::max<std::size_t>(1, max_in_flight)) {}

StdioTransport::~StdioTransport() { finish(); }

void StdioTransport::serve(std::istream& in, std::ostream& out) {
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    out_ = &out;
  }
  // Bounded reads: a line is never held beyond the cap (plus one byte for a "\r").
  auto chunk = std::make_unique<char[]>(kChunkBytes);
  std::string line;
  bool oversized = false;
  MessageScanner scanner;  // reads the id of an oversized line as it streams past
  while (true) {
    in.getline(chunk.get(), kChunkBytes);
    const auto count = static_cast<std::size_t>(in.gcount());
    const bool end = in.eof() || in.bad();
    const bool chunk_full = in.fail() && !end;
    const bool newline = !in.fail() && !end;
    const std::size_t stored = newline ? count - 1 : count;
    if (!oversized && line.size() + stored > max_message_bytes_ + 1) {
      oversized = true;
      scanner = MessageScanner();
      scanner.feed(line);
      std::string().swap(line);
    }
    if (oversized) {
      scanner.feed(std::string_view(chunk.get(), stored));
    } else {
      line.append(chunk.get(), stored);
    }
    if (chunk_full) {
      in.clear();
      continue;
    }

    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (oversized || line.size() > max_message_bytes_) {
      logger().warning("discarded a message longer than " + std::to_string(max_message_bytes_) +
                       " bytes");
      if (!oversized) {  // one byte over: the "\r" allowance held it
        scanner = MessageScanner();
        scanner.feed(line);
      }
      write(Server::oversizedMessageError(max_message_bytes_, scanner.id()));
    } else if (!isBlank(line)) {
      dispatch(std::move(line));
    }
    line = std::string();
    oversized = false;
    if (end) {
      return;
    }
  }
}

void StdioTransport::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return in_flight_ == 0; });
  joinFinishedLocked();
}

void StdioTransport::dispatch(std::string message) {
  auto shared = std::make_shared<const std::string>(std::move(message));
  auto respond = [this](const std::string& text) {
    if (std::optional<std::string> answer = server_.handle(text)) {
      write(*answer);
    }
  };

  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return in_flight_ < max_in_flight_; });
  joinFinishedLocked();
  ++in_flight_;
  try {
    workers_.emplace_back([this, shared, respond] {
      try {
        respond(*shared);
      } catch (const std::exception& e) {
        logger().error(std::string("cannot answer a message: ") + e.what());
      }
      std::lock_guard<std::mutex> done(mutex_);
      --in_flight_;
      finished_.push_back(std::this_thread::get_id());
      changed_.notify_all();
    });
  } catch (const std::exception& e) {
    // No thread to be had: answer on the reader thread rather than drop the request.
    --in_flight_;
    lock.unlock();
    logger().warning(std::string("handling a message inline: ") + e.what());
    respond(*shared);
  }
}

void StdioTransport::write(const std::string& line) {
  std::lock_guard<std::mutex> lock(write_mutex_);
  if (out_ == nullptr) {
    return;
  }
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
  out_->put('\n');
  out_->flush();
}

void StdioTransport::joinFinishedLocked() {
  for (const std::thread::id& id : finished_) {
    auto worker = std::find_if(workers_.begin(), workers_.end(),
                               [&id](const std::thread& thread) { return thread.get_id() == id; });
    if (worker != workers_.end()) {
      // Its last act was to release mutex_; joining under the lock cannot deadlock.
      worker->join();
      workers_.erase(worker);
    }
  }
  finished_.clear();
}

}  // namespace scs::mcp
