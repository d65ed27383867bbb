// A started sandbox's streams: pumpOutput() demultiplexes the attach stream into the sink
// (the engine's own errors kept apart, capped), and StdinWriter's thread writes its deliveries.

#include "sandbox_io.h"

#include <vector>

#include "stream_demux.h"

namespace scs::docker {
namespace {

constexpr std::size_t kReadChunk = 64u << 10;
constexpr std::size_t kMaxSystemError = 4096;

}  // namespace

PumpResult pumpOutput(Connection& attach, backend::OutputSink& sink) {
  PumpResult result;
  StreamDemux demux([&](FrameType type, std::string_view payload) {
    switch (type) {
      case FrameType::kStdout:
        sink.write(backend::Stream::kStdout, payload);
        break;
      case FrameType::kStderr:
        sink.write(backend::Stream::kStderr, payload);
        break;
      case FrameType::kSystemErr:
        if (result.system_error.size() < kMaxSystemError) {
          result.system_error.append(
              payload.substr(0, kMaxSystemError - result.system_error.size()));
        }
        break;
      case FrameType::kStdin:
        break;
    }
  });
  std::vector<char> buffer(kReadChunk);
  std::ptrdiff_t got = 0;
  while ((got = attach.read(buffer.data(), buffer.size())) > 0) {
    demux.feed(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
  }
  result.broke = got < 0;
  result.malformed = demux.malformed();
  return result;
}

StdinWriter::StdinWriter(Connection& attach, std::function<std::optional<Delivery>()> take,
                         std::function<void()> release)
    : attach_(attach), release_(std::move(release)) {
  // Set by the thread before it ends; read only after finish() has joined it.
  thread_ = std::thread([this, take = std::move(take)] {
    while (std::optional<Delivery> delivery = take()) {
      delivered_at_ = delivered_at_.value_or(delivery->delivered_at);
      if (!delivery->write) {
        return;
      }
      written_ = attach_.write(delivery->archive) && (!delivery->last || attach_.shutdownWrite());
      written_at_ = written_at_.value_or(std::chrono::steady_clock::now());
      if (!written_ || delivery->last) {
        return;
      }
    }
  });
}

StdinWriter::~StdinWriter() { finish(); }

void StdinWriter::finish() {
  if (thread_.joinable()) {
    release_();
    attach_.abort();
    thread_.join();
  }
}

}  // namespace scs::docker
