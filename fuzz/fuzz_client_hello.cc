// Feeds bytes to egress::readClientHello as the first bytes inside a CONNECT or SOCKS5 tunnel
// (issue 44: written inside the sandbox, so untrusted), and every prefix of them, each in a
// buffer of exactly its size so that AddressSanitizer sees any read past the end. A prefix
// must answer kNeedMore or exactly what the whole input answers: never a hello before the
// whole one, never a verdict that more bytes overturn. kNotTls must agree with an independent
// reading of the first record's header. A hello must keep its answer when its handshake
// message, reassembled here independently, is cut into records of other sizes, and when
// anything follows it; its server name is in lower case.
//
// Input: the stream.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "egress/proxy_handshake.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

using egress::ClientHello;

bool same(const ClientHello& a, const ClientHello& b) {
  return a.state == b.state && a.server_name == b.server_name &&
         a.several_names == b.several_names && a.encrypted_client_hello == b.encrypted_client_hello;
}

ClientHello readExactly(std::string_view bytes) {
  const std::unique_ptr<char[]> copy(new char[std::max<std::size_t>(bytes.size(), 1)]);
  std::copy(bytes.begin(), bytes.end(), copy.get());
  return egress::readClientHello(std::string_view(copy.get(), bytes.size()));
}

std::size_t byteAt(std::string_view bytes, std::size_t at) {
  return static_cast<std::uint8_t>(bytes[at]);
}

// The handshake message of a stream read as a hello was: handshake records, each whole,
// payloads concatenated until the message's own length is there. Nullopt when that fails.
std::optional<std::string> reassembled(std::string_view stream) {
  std::string message;
  while (message.size() < 4 ||
         message.size() <
             4 + ((byteAt(message, 1) << 16) | (byteAt(message, 2) << 8) | byteAt(message, 3))) {
    if (stream.size() < 5 || stream[0] != 22) {
      return std::nullopt;
    }
    const std::size_t length = (byteAt(stream, 3) << 8) | byteAt(stream, 4);
    if (stream.size() < 5 + length) {
      return std::nullopt;
    }
    message.append(stream.substr(5, length));
    stream.remove_prefix(5 + length);
  }
  return message;
}

std::string inRecords(std::string_view message, std::size_t size) {
  std::string out;
  for (std::size_t at = 0; at < message.size(); at += size) {
    const std::string_view fragment = message.substr(at, size);
    out += std::string{22, 3, 3, static_cast<char>(fragment.size() >> 8),
                       static_cast<char>(fragment.size() & 0xFF)};
    out.append(fragment);
  }
  return out;
}

void check(std::string_view stream) {
  const ClientHello whole = readExactly(stream);
  if (whole.state != ClientHello::State::kHello) {
    SCS_FUZZ_CHECK(
        whole.server_name.empty() && !whole.several_names && !whole.encrypted_client_hello, stream);
  }

  // Every prefix when the input is short, else a spread of them and the last few.
  const std::size_t step = stream.size() <= 512 ? 1 : stream.size() / 128;
  for (std::size_t size = 0; size < stream.size(); size += step) {
    const ClientHello prefix = readExactly(stream.substr(0, size));
    SCS_FUZZ_CHECK(prefix.state == ClientHello::State::kNeedMore || same(prefix, whole),
                   printable(stream.substr(0, size)));
    if (prefix.state == ClientHello::State::kNeedMore) {
      SCS_FUZZ_CHECK(prefix.server_name.empty(), stream);
    }
  }
  for (std::size_t back = 1; back <= std::min<std::size_t>(stream.size(), 8); ++back) {
    const ClientHello prefix = readExactly(stream.substr(0, stream.size() - back));
    SCS_FUZZ_CHECK(prefix.state == ClientHello::State::kNeedMore || same(prefix, whole), stream);
  }

  // Not TLS exactly when the first record's header says so: not a handshake record, or a
  // record-layer version outside 3.1 to 3.4.
  const bool foreign =
      !stream.empty() && (stream[0] != 22 || (stream.size() > 1 && stream[1] != 3) ||
                          (stream.size() > 2 && (byteAt(stream, 2) < 1 || byteAt(stream, 2) > 4)));
  SCS_FUZZ_CHECK((whole.state == ClientHello::State::kNotTls) == foreign, stream);

  if (whole.state != ClientHello::State::kHello) {
    return;
  }
  SCS_FUZZ_CHECK(std::none_of(whole.server_name.begin(), whole.server_name.end(),
                              [](unsigned char c) { return std::isupper(c) != 0; }),
                 whole.server_name);
  SCS_FUZZ_CHECK(!whole.several_names || !whole.server_name.empty(), stream);
  const std::optional<std::string> message = reassembled(stream);
  SCS_FUZZ_CHECK(message.has_value() && message->size() <= ClientHello::kMaxHelloBytes, stream);
  for (const std::size_t size : {std::size_t{1}, 1 + stream.size() % 97, std::size_t{1} << 14}) {
    if (size == 1 && message->size() > 2048) {
      continue;
    }
    SCS_FUZZ_CHECK(same(readExactly(inRecords(*message, size)), whole), stream);
  }
  SCS_FUZZ_CHECK(same(readExactly(std::string(stream) + "\x17\x03\x03\x00\x01x"), whole), stream);
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 40000) {
    return 0;
  }
  scs::fuzz::check(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
