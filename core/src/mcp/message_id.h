#pragma once

// A JSON-RPC message's structure read as its bytes stream past, before any tree is built: its
// id, so that the error answering a message too long or too intricate to parse can carry it
// and the client matches it to its request instead of waiting for its own timeout; and its
// shape (how many values, how deep), so that a message whose tree would cost far more memory
// than its bytes is refused before Poco's parser builds it. Poco's parser needs the whole text
// and has no limit but depth; this reads only the structure (strings, nesting, separators)
// and keeps at most one short value, so a message of any size costs no memory. Written by
// hand because no library we use parses JSON incrementally or with limits; fuzzed through
// Server::parse (fuzz/fuzz_jsonrpc.cc).

#include <Poco/Dynamic/Var.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace scs::mcp {

class MessageScanner {
 public:
  // The next bytes of the message.
  void feed(std::string_view bytes);

  // The top-level "id" member seen so far when it is a string or an integer (the last one,
  // as a parser keeps it); nullopt when there is none, or it is of another type or too long.
  std::optional<Poco::Dynamic::Var> id() const { return id_; }

  // Values so far, as the parser would make them, counted from above: one per object and
  // array, one per separator (a member or an element after the first), and the message. A
  // tree costs hundreds of bytes per value whatever the value's own bytes.
  std::size_t values() const { return values_; }
  // The deepest nesting of objects and arrays so far; the message itself is depth 1.
  int deepest() const { return deepest_; }

 private:
  static constexpr std::size_t kMaxValueBytes = 256;

  void structural(char c);
  void valueEnded();

  int depth_ = 0;  // of objects and arrays; the message itself is depth 1
  int deepest_ = 0;
  std::size_t values_ = 1;
  bool in_string_ = false;      // inside a string (a member name or a value)
  bool escaped_ = false;        // the previous byte in that string was a backslash
  bool in_name_ = false;        // the string is a member name of the message
  bool expect_name_ = false;    // the next string at depth 1 is a member name
  bool id_value_next_ = false;  // the value of a top-level "id" comes next
  bool capturing_ = false;      // reading that value
  std::string name_;            // the member name being read, or last read (bounded)
  std::string value_;           // the "id" value being read (bounded)
  std::optional<Poco::Dynamic::Var> id_;
};

}  // namespace scs::mcp
