// A TLS ClientHello read without a TLS library: OpenSSL parses a hello only as a server in the
// middle of a handshake, and we must read one we never answer, from bytes that may stop
// anywhere. Every length is checked against what encloses it, so an input can only be a
// hello, not one yet, not TLS, or malformed; never a read past its end.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "egress/proxy_handshake.h"

namespace scs::egress {
namespace {

constexpr std::uint8_t kHandshakeRecord = 22;
constexpr std::size_t kRecordHeaderBytes = 5;
constexpr std::size_t kMaxRecordBytes = 1 << 14;  // RFC 8446 section 5.1: 2^14 of plaintext
constexpr std::uint8_t kClientHelloType = 1;
constexpr std::size_t kHandshakeHeaderBytes = 4;
constexpr std::size_t kRandomBytes = 32;
constexpr std::size_t kMaxSessionIdBytes = 32;
constexpr std::uint16_t kServerNameExtension = 0;
constexpr std::uint8_t kHostNameType = 0;
constexpr std::uint16_t kEncryptedClientHelloExtension = 0xfe0d;

// Reads big-endian fields and length-prefixed vectors from a span it never leaves.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  bool empty() const { return in_.empty(); }

  bool number(std::size_t bytes, std::size_t* value) {
    if (in_.size() < bytes) {
      return false;
    }
    *value = 0;
    for (std::size_t i = 0; i < bytes; ++i) {
      *value = (*value << 8) | static_cast<std::uint8_t>(in_[i]);
    }
    in_.remove_prefix(bytes);
    return true;
  }

  bool skip(std::size_t bytes, std::string_view* taken = nullptr) {
    if (in_.size() < bytes) {
      return false;
    }
    if (taken != nullptr) {
      *taken = in_.substr(0, bytes);
    }
    in_.remove_prefix(bytes);
    return true;
  }

  // A vector whose length takes `length_bytes` bytes.
  bool vector(std::size_t length_bytes, std::string_view* body) {
    std::size_t size = 0;
    return number(length_bytes, &size) && skip(size, body);
  }

 private:
  std::string_view in_;
};

// RFC 6066 section 3: a non-empty list of (name_type, HostName) whose only defined type is
// host_name; another type cannot even be skipped, so it is malformed.
bool readServerNames(std::string_view data, ClientHello* hello) {
  Reader reader(data);
  std::string_view list;
  if (!reader.vector(2, &list) || !reader.empty() || list.empty()) {
    return false;
  }
  Reader entries(list);
  bool first = true;
  while (!entries.empty()) {
    std::size_t type = 0;
    std::string_view name;
    if (!entries.number(1, &type) || type != kHostNameType || !entries.vector(2, &name) ||
        name.empty()) {
      return false;
    }
    if (first) {
      hello->server_name.assign(name);
      std::transform(hello->server_name.begin(), hello->server_name.end(),
                     hello->server_name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    } else {
      hello->several_names = true;
    }
    first = false;
  }
  return true;
}

// The ClientHello's body (after its type and length), RFC 8446 section 4.1.2.
bool readBody(std::string_view body, ClientHello* hello) {
  Reader reader(body);
  std::string_view session_id;
  std::string_view cipher_suites;
  std::string_view compression_methods;
  if (!reader.skip(2) || !reader.skip(kRandomBytes) || !reader.vector(1, &session_id) ||
      session_id.size() > kMaxSessionIdBytes || !reader.vector(2, &cipher_suites) ||
      cipher_suites.empty() || cipher_suites.size() % 2 != 0 ||
      !reader.vector(1, &compression_methods) || compression_methods.empty()) {
    return false;
  }
  if (reader.empty()) {
    return true;  // no extensions at all (a TLS 1.2 client may send none)
  }
  std::string_view extensions;
  if (!reader.vector(2, &extensions) || !reader.empty()) {
    return false;
  }
  Reader list(extensions);
  std::set<std::size_t> seen;
  while (!list.empty()) {
    std::size_t type = 0;
    std::string_view data;
    if (!list.number(2, &type) || !list.vector(2, &data) || !seen.insert(type).second) {
      return false;
    }
    if (type == kServerNameExtension && !readServerNames(data, hello)) {
      return false;
    }
    if (type == kEncryptedClientHelloExtension) {
      hello->encrypted_client_hello = true;
    }
  }
  return true;
}

// Plausible for the first record of a TLS stream: a handshake record, record-layer version
// 3.1 to 3.4 (an SSLv2 hello, plain HTTP or SSH is something else, not a broken hello).
ClientHello::State recordHeaderProblem(std::string_view header, bool first) {
  const ClientHello::State wrong =
      first ? ClientHello::State::kNotTls : ClientHello::State::kMalformed;
  if (static_cast<std::uint8_t>(header[0]) != kHandshakeRecord) {
    return wrong;
  }
  if (header.size() > 1 && header[1] != 3) {
    return wrong;
  }
  if (header.size() > 2 && (header[2] < 1 || header[2] > 4)) {
    return wrong;
  }
  return ClientHello::State::kNeedMore;
}

}  // namespace

ClientHello readClientHello(std::string_view bytes) {
  ClientHello hello;
  std::string message;  // the handshake message, reassembled from the records' payloads
  bool first = true;
  while (true) {
    // Only whole records are read: an answer never changes when more bytes come.
    const std::string_view header = bytes.substr(0, kRecordHeaderBytes);
    if (header.empty()) {
      return hello;
    }
    hello.state = recordHeaderProblem(header, first);
    if (hello.state != ClientHello::State::kNeedMore || header.size() < kRecordHeaderBytes) {
      return hello;
    }
    const std::size_t length =
        (static_cast<std::size_t>(static_cast<std::uint8_t>(header[3])) << 8) |
        static_cast<std::uint8_t>(header[4]);
    if (length == 0 || length > kMaxRecordBytes) {
      hello.state = ClientHello::State::kMalformed;
      return hello;
    }
    if (bytes.size() < kRecordHeaderBytes + length) {
      return hello;
    }
    message.append(bytes.substr(kRecordHeaderBytes, length));
    bytes.remove_prefix(kRecordHeaderBytes + length);
    first = false;

    if (static_cast<std::uint8_t>(message[0]) != kClientHelloType) {
      hello.state = ClientHello::State::kMalformed;
      return hello;
    }
    if (message.size() < kHandshakeHeaderBytes) {
      continue;
    }
    const std::size_t body_size =
        (static_cast<std::size_t>(static_cast<std::uint8_t>(message[1])) << 16) |
        (static_cast<std::size_t>(static_cast<std::uint8_t>(message[2])) << 8) |
        static_cast<std::uint8_t>(message[3]);
    const std::size_t total = kHandshakeHeaderBytes + body_size;
    // A client's first flight holds nothing after its hello, so extra bytes are not a hello.
    if (total > ClientHello::kMaxHelloBytes || message.size() > total) {
      hello.state = ClientHello::State::kMalformed;
      return hello;
    }
    if (message.size() < total) {
      continue;
    }
    hello.state = readBody(std::string_view(message).substr(kHandshakeHeaderBytes), &hello)
                      ? ClientHello::State::kHello
                      : ClientHello::State::kMalformed;
    if (hello.state != ClientHello::State::kHello) {
      hello.server_name.clear();
      hello.several_names = false;
      hello.encrypted_client_hello = false;
    }
    return hello;
  }
}

}  // namespace scs::egress
