// HTTP/1.1 framing on a raw engine socket: the response head parsed (Poco's parser, behind our
// own checks), and a chunked or length-delimited body decoded as an abortable Connection.
#include "http_framing.h"

#include <Poco/Exception.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/String.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>
#include <sstream>

namespace scs::docker {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

std::optional<ResponseHead> parseResponseHead(std::string_view head) {
  // Poco skips a header line without a colon and reads a head cut short without complaint;
  // neither is a reply from the engine, so both are refused here first.
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") {
    return std::nullopt;
  }
  for (std::size_t at = head.find('\n'); at + 1 < head.size() - 2; at = head.find('\n', at + 1)) {
    const std::string_view line = head.substr(at + 1, head.find('\n', at + 1) - at - 1);
    if (line.find(':') == std::string_view::npos) {
      return std::nullopt;
    }
  }
  std::istringstream in{std::string(head)};
  Poco::Net::HTTPResponse response;
  try {
    response.read(in);
  } catch (const Poco::Exception&) {
    return std::nullopt;
  }
  ResponseHead result;
  result.status = static_cast<int>(response.getStatus());
  if (result.status < 100 || result.status > 599) {
    return std::nullopt;
  }
  for (const auto& [name, value] : response) {
    result.headers[Poco::toLower(name)] = value;
  }
  return result;
}

ConnectionPtr framedBody(const ResponseHead& head, ConnectionPtr raw) {
  ConnectionPtr body = std::move(raw);
  const auto encoding = head.headers.find("transfer-encoding");
  const auto length = head.headers.find("content-length");
  if (head.status != 101 && encoding != head.headers.end() &&
      Poco::toLower(encoding->second).find("chunked") != std::string::npos) {
    body = std::make_unique<ChunkedConnection>(std::move(body));
  } else if (head.status != 101 && length != head.headers.end()) {
    std::uint64_t bytes = 0;
    const auto& text = length->second;
    if (std::from_chars(text.data(), text.data() + text.size(), bytes).ec != std::errc()) {
      return nullptr;
    }
    body = std::make_unique<LengthConnection>(std::move(body), bytes);
  }
  return body;
}

ChunkedConnection::ChunkedConnection(ConnectionPtr inner) : inner_(std::move(inner)) {}

bool ChunkedConnection::write(std::string_view bytes) { return inner_->write(bytes); }

bool ChunkedConnection::shutdownWrite() { return inner_->shutdownWrite(); }

void ChunkedConnection::abort() { inner_->abort(); }

bool ChunkedConnection::readLine(std::string* line) {
  line->clear();
  while (line->size() < 4096) {
    char byte = 0;
    if (inner_->read(&byte, 1) != 1) {
      return false;
    }
    if (byte == '\n') {
      if (!line->empty() && line->back() == '\r') {
        line->pop_back();
      }
      return true;
    }
    line->push_back(byte);
  }
  return false;
}

std::ptrdiff_t ChunkedConnection::read(char* buffer, std::size_t size) {
  if (broken_) {
    return -1;
  }
  if (finished_) {
    return 0;
  }
  std::string line;
  if (left_in_chunk_ == 0) {
    if (!readLine(&line)) {
      broken_ = true;
      return -1;
    }
    // The CRLF that closes the previous chunk's payload.
    if (line.empty() && !readLine(&line)) {
      broken_ = true;
      return -1;
    }
    const std::string_view digits = trim(std::string_view(line).substr(0, line.find(';')));
    std::uint64_t length = 0;
    const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), length, 16);
    if (digits.empty() || parsed.ec != std::errc() || parsed.ptr != digits.data() + digits.size()) {
      broken_ = true;
      return -1;
    }
    if (length == 0) {
      do {
        if (!readLine(&line)) {
          broken_ = true;
          return -1;
        }
      } while (!line.empty());
      finished_ = true;
      return 0;
    }
    left_in_chunk_ = length;
  }
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size, left_in_chunk_));
  const std::ptrdiff_t got = inner_->read(buffer, want);
  if (got <= 0) {
    broken_ = true;
    return -1;
  }
  left_in_chunk_ -= static_cast<std::uint64_t>(got);
  return got;
}

LengthConnection::LengthConnection(ConnectionPtr inner, std::uint64_t length)
    : inner_(std::move(inner)), left_(length) {}

bool LengthConnection::write(std::string_view bytes) { return inner_->write(bytes); }

bool LengthConnection::shutdownWrite() { return inner_->shutdownWrite(); }

void LengthConnection::abort() { inner_->abort(); }

std::ptrdiff_t LengthConnection::read(char* buffer, std::size_t size) {
  if (left_ == 0) {
    return 0;
  }
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size, left_));
  const std::ptrdiff_t got = inner_->read(buffer, want);
  if (got == 0) {
    return -1;  // the peer closed before the announced length
  }
  if (got > 0) {
    left_ -= static_cast<std::uint64_t>(got);
  }
  return got;
}

}  // namespace scs::docker
