// Feeds bytes to egress::RequestRewriter as the plaintext a program sends a brokered host
// (issue 48: the server adds the host's credential to each request; written inside the
// sandbox, so untrusted), whole, cut at two places the input chooses, in pieces of a size it
// chooses, and a byte at a time. Every split must give the same output, the same refusal and
// the same counts and flags. The output must be what an independent, whole-buffer reading of the
// input says: each accepted request's head rewritten (the rules' headers removed and set once at
// the end, this host's placeholders replaced in their own header's values only, a repeated
// Content-Length sent once, and on a request with a body its Connection headers replaced by one
// "Connection: close") and its body as it came; all of it when nothing was refused, a prefix
// holding every accepted head when something was; and nothing after the body of a request that
// had one. Every accepted head must use a carried method, name the rules' host (one Host,
// origin-form target) when there is one, expect nothing but 100-continue, hold this host's
// placeholders only in their own header's values, and stay within the size and substitution
// caps. No output may hold a placeholder of this host or another's. A refusal must be one the
// input explains (a placeholder where it may not be, a method, a host, a cap). The output fed
// again, with the same headers to set, must come back the same. Every refusal's response must be
// complete, its reason free of secrets.
//
// Input: byte 0 picks where the stream is cut, byte 1 the rules; the rest is the stream.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "egress/http_requests.h"
#include "support/checks.h"

namespace scs::fuzz {
namespace {

using egress::RequestRewriter;
using egress::RequestRules;
using Refused = RequestRewriter::Refused;

// Secrets are upper case and placeholders are not, so that a secret put in a value can never
// make a placeholder with the bytes around it: what the output holds of a placeholder came
// from the program as it is.
RequestRules rulesFor(std::uint8_t choice) {
  RequestRules rules;
  switch (choice % 4) {
    case 0:  // as the credential store makes them
      rules.set.push_back({"X-Api-Key", "APIKEY_SECRET"});
      rules.substitute.push_back({"scs-placeholder-0a1b", "SECRET_ONE", "Authorization"});
      rules.foreign.push_back("scs-placeholder-9f8e");
      rules.host = "api.github.com";
      break;
    case 1:  // short, for the fuzzer to find; a secret of 8000 bytes makes heads grow past the cap
      rules.set.push_back({"x-k", "KEYVALUE"});
      rules.substitute.push_back({"%o", "SECRETO", "a"});
      rules.substitute.push_back({"%oo", std::string(8000, 'Q'), "a"});
      rules.foreign.push_back("%f");
      rules.host = "h";
      rules.port = 8080;
      break;
    case 2:  // none: requests pass as they came, but for the rules that hold for every host
      break;
    default:  // several of each, overlapping, one in a header the server sets
      rules.set.push_back({"Authorization", "BASIC QUJD"});
      rules.set.push_back({"X-Api-Key", "APIKEY"});
      rules.substitute.push_back({"%o", "SECRETO", "X-Token"});
      rules.substitute.push_back({"o%", "SECRETP", "x_token"});
      rules.substitute.push_back({"%q", "SECRETQ", "Authorization"});
      rules.foreign.push_back("%f");
      rules.foreign.push_back("%x%");
      rules.host = "h";
      break;
  }
  return rules;
}

struct Outcome {
  std::string out;
  std::optional<Refused> refused;
  std::uint64_t requests = 0;
  bool between = false;
  bool closing = false;
};

Outcome drive(const RequestRules& rules, std::string_view stream,
              const std::vector<std::size_t>& cuts) {
  RequestRewriter rewriter(rules);
  Outcome outcome;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= cuts.size() && !outcome.refused; ++i) {
    const std::size_t end = i < cuts.size() ? cuts[i] : stream.size();
    outcome.refused = rewriter.feed(stream.substr(start, end - start), outcome.out);
    start = end;
  }
  outcome.requests = rewriter.requests();
  outcome.between = rewriter.betweenRequests();
  outcome.closing = rewriter.closing();
  return outcome;
}

void checkSame(const Outcome& a, const Outcome& b, std::string_view stream) {
  SCS_FUZZ_CHECK(a.out == b.out, stream);
  SCS_FUZZ_CHECK(a.refused.has_value() == b.refused.has_value(), stream);
  if (a.refused && b.refused) {
    SCS_FUZZ_CHECK(a.refused->status == b.refused->status && a.refused->token == b.refused->token &&
                       a.refused->reason == b.refused->reason,
                   stream);
  }
  SCS_FUZZ_CHECK(a.requests == b.requests && a.between == b.between && a.closing == b.closing,
                 stream);
}

char fold(char c) {
  if (c >= 'A' && c <= 'Z') {
    return static_cast<char>(c - 'A' + 'a');
  }
  return c == '_' ? '-' : c;
}

bool sameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (fold(a[i]) != fold(b[i])) {
      return false;
    }
  }
  return true;
}

bool isBlank(char c) { return c == ' ' || c == '\t'; }

// The lines of a head without its final CRLF CRLF.
std::vector<std::string_view> headLines(std::string_view head) {
  head.remove_suffix(4);
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = head.find("\r\n", start);
    lines.push_back(head.substr(start, end - start));
    if (end == std::string_view::npos) {
      return lines;
    }
    start = end + 2;
  }
}

// "name:value" with the value's surrounding blanks counted apart.
struct Field {
  std::string_view name;
  std::string_view before;  // the name, the colon and the blanks after it
  std::string_view value;
  std::string_view after;  // the blanks after the value
};

Field fieldOf(std::string_view line) {
  const std::size_t colon = line.find(':');
  Field field;
  field.name = line.substr(0, colon);
  std::size_t begin = colon + 1;
  while (begin < line.size() && isBlank(line[begin])) {
    ++begin;
  }
  std::size_t end = line.size();
  while (end > begin && isBlank(line[end - 1])) {
    --end;
  }
  field.before = line.substr(0, begin);
  field.value = line.substr(begin, end - begin);
  field.after = line.substr(end);
  return field;
}

std::vector<std::string_view> listItems(std::string_view value) {
  std::vector<std::string_view> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = value.find(',', start);
    std::string_view item = value.substr(start, comma - start);
    while (!item.empty() && isBlank(item.front())) {
      item.remove_prefix(1);
    }
    while (!item.empty() && isBlank(item.back())) {
      item.remove_suffix(1);
    }
    items.push_back(item);
    if (comma == std::string_view::npos) {
      return items;
    }
    start = comma + 1;
  }
}

bool isContentLength(std::string_view name) { return sameName(name, "content-length"); }

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    };
    if (lower(a[i]) != lower(b[i])) {
      return false;
    }
  }
  return true;
}

bool isCarriedMethod(std::string_view method) {
  for (const std::string_view carried :
       {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    if (method == carried) {
      return true;
    }
  }
  return false;
}

// The parts of a head a whole-buffer reading needs.
struct HeadFacts {
  std::string_view method;
  std::string_view target;
  std::vector<Field> fields;
  bool chunked = false;
  std::uint64_t length = 0;
  bool body() const { return chunked || length > 0; }
};

std::uint64_t decimal(std::string_view digits);

HeadFacts factsOf(std::string_view head) {
  const std::vector<std::string_view> lines = headLines(head);
  HeadFacts facts;
  const std::string_view line = lines[0];
  const std::size_t space = line.find(' ');
  facts.method = line.substr(0, space);
  if (space != std::string_view::npos) {
    const std::size_t second = line.find(' ', space + 1);
    facts.target = line.substr(
        space + 1, second == std::string_view::npos ? std::string_view::npos : second - space - 1);
  }
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].find(':') == std::string_view::npos) {
      continue;
    }
    facts.fields.push_back(fieldOf(lines[i]));
    const Field& field = facts.fields.back();
    if (sameName(field.name, "transfer-encoding")) {
      facts.chunked = true;
    } else if (isContentLength(field.name)) {
      facts.length = decimal(listItems(field.value)[0]);
    }
  }
  return facts;
}

// Whether the head names the rules' host as the rewriter must require.
bool namesTheHost(const HeadFacts& facts, const RequestRules& rules) {
  if (!facts.target.starts_with('/') && !(facts.target == "*" && facts.method == "OPTIONS")) {
    return false;
  }
  std::vector<std::string_view> hosts;
  for (const Field& field : facts.fields) {
    if (equalsIgnoringCase(field.name, "host")) {
      hosts.push_back(field.value);
    }
  }
  // A bare name only for port 443, which is what it means to a front end.
  return hosts.size() == 1 &&
         ((rules.port == 443 && equalsIgnoringCase(hosts[0], rules.host)) ||
          equalsIgnoringCase(hosts[0], rules.host + ":" + std::to_string(rules.port)));
}

// At each byte, the longest of the placeholders whose header is `name` that starts there; else
// the byte.
std::string substituted(std::string_view name, std::string_view value, const RequestRules& rules,
                        std::size_t& count) {
  std::string out;
  std::size_t at = 0;
  while (at < value.size()) {
    const egress::Substitution* best = nullptr;
    for (const egress::Substitution& substitution : rules.substitute) {
      if (sameName(name, substitution.header) &&
          value.substr(at).starts_with(substitution.placeholder) &&
          (best == nullptr || substitution.placeholder.size() > best->placeholder.size())) {
        best = &substitution;
      }
    }
    if (best == nullptr) {
      out.push_back(value[at++]);
    } else {
      out += best->value;
      at += best->placeholder.size();
      ++count;
    }
  }
  return out;
}

// What an accepted head must become, and how many placeholders it replaces.
std::string rewrittenHead(std::string_view head, const RequestRules& rules, std::size_t& count) {
  const std::vector<std::string_view> lines = headLines(head);
  const bool body = factsOf(head).body();
  std::size_t lengths = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const Field field = fieldOf(lines[i]);
    if (isContentLength(field.name)) {
      lengths += listItems(field.value).size();
    }
  }
  count = 0;
  std::string out = std::string(lines[0]) + "\r\n";
  bool length_written = false;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const Field field = fieldOf(lines[i]);
    if (std::any_of(rules.set.begin(), rules.set.end(), [&](const egress::HeaderRule& rule) {
          return sameName(field.name, rule.name);
        })) {
      continue;
    }
    if (body && equalsIgnoringCase(field.name, "connection")) {
      continue;
    }
    if (lengths > 1 && isContentLength(field.name)) {
      if (!length_written) {
        out += std::string(field.name) + ": " + std::string(listItems(field.value)[0]) + "\r\n";
        length_written = true;
      }
      continue;
    }
    out += std::string(field.before) + substituted(field.name, field.value, rules, count) +
           std::string(field.after) + "\r\n";
  }
  for (const egress::HeaderRule& rule : rules.set) {
    out += rule.name + ": " + rule.value + "\r\n";
  }
  if (body) {
    out += "Connection: close\r\n";
  }
  return out + "\r\n";
}

std::size_t allowedHeadBytes(const RequestRules& rules) {
  std::size_t allowed = RequestRewriter::kMaxHeadBytes + RequestRewriter::kMaxHeadGrowthBytes;
  for (const egress::HeaderRule& rule : rules.set) {
    allowed += rule.name.size() + rule.value.size() + 4;
  }
  return allowed;
}

struct Request {
  std::string_view head;
  std::string_view body;  // as framed; when the stream ends first, the part sent so far
  bool whole = true;      // the body is not cut short by the end of the stream
};

std::uint64_t decimal(std::string_view digits) {
  std::uint64_t value = 0;
  for (const char c : digits) {
    value = std::min<std::uint64_t>(value * 10 + static_cast<std::uint64_t>(c - '0'),
                                    std::uint64_t{1} << 62);
  }
  return value;
}

struct BodyEnd {
  std::size_t end;  // where the body ends, or where what is sent of it ends
  bool whole;
};

// The body after `at`, framed by the head, read leniently: only accepted heads come here, and a
// malformed body is refused at its first fault, before any output this reading could differ on.
// When the stream ends first, what is sent of it: data as it comes, chunk-size and trailer lines
// only whole.
BodyEnd bodyEnd(std::string_view stream, std::size_t at, std::string_view head) {
  bool chunked = false;
  std::uint64_t length = 0;
  const std::vector<std::string_view> lines = headLines(head);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const Field field = fieldOf(lines[i]);
    if (sameName(field.name, "transfer-encoding")) {
      chunked = true;
    } else if (isContentLength(field.name)) {
      length = decimal(listItems(field.value)[0]);
    }
  }
  if (!chunked) {
    if (length > stream.size() - at) {
      return {stream.size(), false};
    }
    return {at + static_cast<std::size_t>(length), true};
  }
  while (true) {
    const std::size_t line_end = stream.find("\r\n", at);
    if (line_end == std::string_view::npos) {
      return {at, false};
    }
    std::uint64_t size = 0;
    for (std::size_t i = at; i < line_end; ++i) {
      const char c = stream[i];
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0 || size > (std::uint64_t{1} << 60)) {
        break;
      }
      size = size * 16 + static_cast<std::uint64_t>(digit);
    }
    at = line_end + 2;
    if (size == 0) {
      break;
    }
    if (size + 2 > stream.size() - at) {
      return {stream.size(), false};
    }
    at += static_cast<std::size_t>(size) + 2;
  }
  // The last chunk: trailer lines up to an empty one.
  while (true) {
    const std::size_t line_end = stream.find("\r\n", at);
    if (line_end == std::string_view::npos) {
      return {at, false};
    }
    const bool empty = line_end == at;
    at = line_end + 2;
    if (empty) {
      return {at, true};
    }
  }
}

// The first `count` requests of `stream`, as a whole-buffer reading frames them.
std::vector<Request> requestsOf(std::string_view stream, std::uint64_t count) {
  std::vector<Request> requests;
  std::size_t at = 0;
  while (requests.size() < count) {
    const std::size_t head_end = stream.find("\r\n\r\n", at);
    if (head_end == std::string_view::npos) {
      break;
    }
    Request request;
    request.head = stream.substr(at, head_end + 4 - at);
    const BodyEnd end = bodyEnd(stream, head_end + 4, request.head);
    request.whole = end.whole;
    request.body = stream.substr(head_end + 4, end.end - head_end - 4);
    requests.push_back(request);
    at = end.end;
  }
  return requests;
}

// Where this host's placeholders may stand: the values of their own header in accepted heads,
// as [begin, end) offsets into the stream, with the header each belongs to.
struct Home {
  std::size_t begin;
  std::size_t end;
  std::string_view name;
};

std::vector<Home> homesOf(std::string_view stream, const std::vector<Request>& requests) {
  std::vector<Home> homes;
  for (const Request& request : requests) {
    for (const std::string_view line : headLines(request.head)) {
      if (line.find(':') == std::string_view::npos) {
        continue;
      }
      const Field field = fieldOf(line);
      const auto begin = static_cast<std::size_t>(field.value.data() - stream.data());
      homes.push_back({begin, begin + field.value.size(), field.name});
    }
  }
  return homes;
}

// Whether one of this host's placeholders, wholly in stream[0, limit), lies outside its own
// header's values.
bool ownPlaceholderMisplaced(std::string_view stream, std::size_t limit,
                             const std::vector<Home>& homes, const RequestRules& rules) {
  for (const egress::Substitution& substitution : rules.substitute) {
    const std::string_view placeholder = substitution.placeholder;
    for (std::size_t at = stream.find(placeholder); at != std::string_view::npos;
         at = stream.find(placeholder, at + 1)) {
      if (at + placeholder.size() > limit) {
        break;
      }
      const bool home = std::any_of(homes.begin(), homes.end(), [&](const Home& h) {
        return h.begin <= at && at + placeholder.size() <= h.end &&
               sameName(h.name, substitution.header);
      });
      if (!home) {
        return true;
      }
    }
  }
  return false;
}

bool foreignBefore(std::string_view stream, std::size_t limit, const RequestRules& rules) {
  return std::any_of(rules.foreign.begin(), rules.foreign.end(), [&](const std::string& foreign) {
    const std::size_t at = stream.find(foreign);
    return at != std::string_view::npos && at + foreign.size() <= limit;
  });
}

// What every head sent must hold, read from the output alone.
void checkHeadsOut(std::string_view out, std::uint64_t count, const RequestRules& rules) {
  const std::vector<Request> emitted = requestsOf(out, count);
  SCS_FUZZ_CHECK(emitted.size() == count, out);
  for (std::size_t r = 0; r < emitted.size(); ++r) {
    const Request& request = emitted[r];
    const HeadFacts facts = factsOf(request.head);
    SCS_FUZZ_CHECK(isCarriedMethod(facts.method), request.head);
    for (const egress::HeaderRule& rule : rules.set) {
      const auto named = std::count_if(facts.fields.begin(), facts.fields.end(),
                                       [&](const Field& f) { return sameName(f.name, rule.name); });
      SCS_FUZZ_CHECK(named == 1, request.head);
    }
    if (!rules.host.empty()) {
      SCS_FUZZ_CHECK(namesTheHost(facts, rules), request.head);
    }
    // A request with a body is the last, and says so once, at the end of its head.
    const auto connections =
        std::count_if(facts.fields.begin(), facts.fields.end(),
                      [](const Field& f) { return equalsIgnoringCase(f.name, "connection"); });
    if (facts.body()) {
      SCS_FUZZ_CHECK(r + 1 == emitted.size(), out);
      SCS_FUZZ_CHECK(connections == 1 && request.head.ends_with("\r\nConnection: close\r\n\r\n"),
                     request.head);
      if (request.whole) {
        SCS_FUZZ_CHECK(request.body.data() + request.body.size() == out.data() + out.size(), out);
      }
    }
  }
  // No placeholder of this host anywhere: replaced in its header, refused elsewhere.
  for (const egress::Substitution& substitution : rules.substitute) {
    SCS_FUZZ_CHECK(out.find(substitution.placeholder) == std::string_view::npos, out);
  }
}

void checkRefusal(const Refused& refused, std::string_view stream, const RequestRules& rules) {
  static constexpr std::array<std::pair<int, std::string_view>, 8> kKinds = {{
      {400, "bad-request"},
      {403, "placeholder"},
      {405, "method"},
      {421, "misdirected"},
      {431, "head-too-large"},
      {501, "unsupported"},
      {505, "http-version"},
      {500, "misconfigured"},
  }};
  SCS_FUZZ_CHECK(
      std::find(kKinds.begin(), kKinds.end(),
                std::pair<int, std::string_view>(refused.status, refused.token)) != kKinds.end(),
      refused.token);
  SCS_FUZZ_CHECK(refused.status != 500, refused.reason);  // the rules here are all valid
  SCS_FUZZ_CHECK(!refused.reason.empty() && refused.reason.size() <= 512, refused.reason);
  SCS_FUZZ_CHECK(std::none_of(refused.reason.begin(), refused.reason.end(),
                              [](unsigned char c) { return c < 0x20 || c >= 0x7F; }),
                 refused.reason);
  for (const egress::HeaderRule& rule : rules.set) {
    SCS_FUZZ_CHECK(refused.reason.find(rule.value) == std::string::npos ||
                       stream.find(rule.value) != std::string_view::npos,
                   refused.reason);
  }
  for (const egress::Substitution& substitution : rules.substitute) {
    SCS_FUZZ_CHECK(refused.reason.find(substitution.value) == std::string::npos ||
                       stream.find(substitution.value) != std::string_view::npos,
                   refused.reason);
  }
  static constexpr std::array<std::pair<int, std::string_view>, 8> kTexts = {{
      {400, "Bad Request"},
      {403, "Forbidden"},
      {405, "Method Not Allowed"},
      {421, "Misdirected Request"},
      {431, "Request Header Fields Too Large"},
      {501, "Not Implemented"},
      {505, "HTTP Version Not Supported"},
      {500, "Internal Server Error"},
  }};
  const auto text = std::find_if(kTexts.begin(), kTexts.end(),
                                 [&](const auto& entry) { return entry.first == refused.status; });
  const std::string response = egress::refusalResponse(refused);
  const std::string body = refused.reason + "\n";
  SCS_FUZZ_CHECK(
      response == "HTTP/1.1 " + std::to_string(refused.status) + " " + std::string(text->second) +
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Proxy-Error: " +
                      refused.token + "\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nConnection: close\r\n\r\n" + body,
      response);
}

// A refusal in a head falls on the head after the accepted ones: what it must be refused for.
void checkHeadRefusal(const Refused& refused, std::string_view waiting, const RequestRules& rules) {
  if (refused.status == 405) {
    SCS_FUZZ_CHECK(!isCarriedMethod(waiting.substr(0, waiting.find(' '))), waiting);
    return;
  }
  const std::size_t end = waiting.find("\r\n\r\n");
  if (refused.status == 421) {
    SCS_FUZZ_CHECK(!rules.host.empty() && end != std::string_view::npos, waiting);
    SCS_FUZZ_CHECK(!namesTheHost(factsOf(waiting.substr(0, end + 4)), rules), waiting);
    return;
  }
  if (refused.status == 431 && end != std::string_view::npos &&
      end + 4 <= RequestRewriter::kMaxHeadBytes) {
    std::size_t count = 0;
    const std::string rewritten = rewrittenHead(waiting.substr(0, end + 4), rules, count);
    SCS_FUZZ_CHECK(
        count > RequestRewriter::kMaxSubstitutions || rewritten.size() > allowedHeadBytes(rules),
        waiting);
  }
}

void check(std::string_view stream, std::uint8_t cut, std::uint8_t choice) {
  const RequestRules rules = rulesFor(choice);
  const Outcome whole = drive(rules, stream, {});

  const std::size_t first_cut = stream.empty() ? 0 : cut % (stream.size() + 1);
  const std::size_t second_cut = first_cut + (stream.size() - first_cut) / 2;
  checkSame(whole, drive(rules, stream, {first_cut, second_cut}), stream);
  std::vector<std::size_t> cuts;
  const std::size_t piece = 1 + cut % 13;
  for (std::size_t at = piece; at < stream.size(); at += piece) {
    cuts.push_back(at);
  }
  checkSame(whole, drive(rules, stream, cuts), stream);
  if (stream.size() <= 2048) {
    cuts.resize(stream.size());
    for (std::size_t i = 0; i < cuts.size(); ++i) {
      cuts[i] = i;
    }
    checkSame(whole, drive(rules, stream, cuts), stream);
  }

  // The output, as an independent reading of the input says it must be.
  const std::vector<Request> accepted = requestsOf(stream, whole.requests);
  SCS_FUZZ_CHECK(accepted.size() == whole.requests, stream);
  std::string expected;
  std::size_t heads_end = 0;  // where the last accepted head ends in `expected`
  std::size_t read = 0;       // bytes of the input those requests span
  bool body = false;          // the last accepted request has a body
  for (const Request& request : accepted) {
    SCS_FUZZ_CHECK(!body, stream);  // nothing is carried after a request with a body
    SCS_FUZZ_CHECK(request.head.size() <= RequestRewriter::kMaxHeadBytes, stream);
    const HeadFacts facts = factsOf(request.head);
    SCS_FUZZ_CHECK(isCarriedMethod(facts.method), request.head);
    SCS_FUZZ_CHECK(rules.host.empty() || namesTheHost(facts, rules), request.head);
    for (const Field& field : facts.fields) {
      SCS_FUZZ_CHECK(!equalsIgnoringCase(field.name, "expect") ||
                         equalsIgnoringCase(field.value, "100-continue"),
                     request.head);
    }
    std::size_t count = 0;
    const std::string rewritten = rewrittenHead(request.head, rules, count);
    SCS_FUZZ_CHECK(count <= RequestRewriter::kMaxSubstitutions, request.head);
    SCS_FUZZ_CHECK(rewritten.size() <= allowedHeadBytes(rules), request.head);
    expected += rewritten;
    heads_end = expected.size();
    expected += request.body;
    read += request.head.size() + request.body.size();
    body = facts.body();
  }
  SCS_FUZZ_CHECK(whole.closing == body, stream);
  const bool closed = body && accepted.back().whole;  // all after `read` is dropped
  const std::vector<Home> homes = homesOf(stream, accepted);
  if (whole.refused) {
    SCS_FUZZ_CHECK(whole.out.size() >= heads_end && expected.starts_with(whole.out), whole.out);
    SCS_FUZZ_CHECK(!whole.between, stream);
    checkRefusal(*whole.refused, stream, rules);
    if (whole.refused->status == 403) {
      SCS_FUZZ_CHECK(foreignBefore(stream, stream.size(), rules) ||
                         ownPlaceholderMisplaced(stream, stream.size(), homes, rules),
                     stream);
    }
    if (!body) {
      checkHeadRefusal(*whole.refused, stream.substr(read), rules);
    } else {
      SCS_FUZZ_CHECK(whole.refused->status == 400 || whole.refused->status == 403, stream);
    }
    // Up to the end of the last accepted head every byte was read: no placeholder out of place.
    if (!accepted.empty()) {
      const std::size_t heads =
          static_cast<std::size_t>(accepted.back().head.data() - stream.data()) +
          accepted.back().head.size();
      SCS_FUZZ_CHECK(!ownPlaceholderMisplaced(stream, heads, homes, rules), stream);
      SCS_FUZZ_CHECK(!foreignBefore(stream, heads, rules), stream);
    }
  } else {
    SCS_FUZZ_CHECK(whole.out == expected, whole.out);
    if (closed) {
      SCS_FUZZ_CHECK(whole.between, stream);
    } else if (accepted.empty() || accepted.back().whole) {
      // Past the requests read, only a head not yet whole (and under the cap) may wait.
      const std::string_view waiting = stream.substr(read);
      SCS_FUZZ_CHECK(waiting.find("\r\n\r\n") == std::string_view::npos &&
                         waiting.size() < RequestRewriter::kMaxHeadBytes,
                     stream);
      SCS_FUZZ_CHECK(whole.between == waiting.empty(), stream);
    } else {
      SCS_FUZZ_CHECK(!whole.between, stream);
    }
    // Every placeholder read: this host's in their own header, no other host's at all.
    SCS_FUZZ_CHECK(!ownPlaceholderMisplaced(stream, read, homes, rules), stream);
    SCS_FUZZ_CHECK(!foreignBefore(stream, closed ? read : stream.size(), rules), stream);
  }
  checkHeadsOut(whole.out, whole.requests, rules);
  for (const std::string& foreign : rules.foreign) {
    SCS_FUZZ_CHECK(whole.out.find(foreign) == std::string::npos, whole.out);
  }

  // What was sent is what the rules make again of it: the set headers and "Connection: close"
  // move to where they are. Heads the secrets made longer than a head may be are not fed again.
  const std::vector<Request> emitted = requestsOf(whole.out, whole.requests);
  if (std::all_of(emitted.begin(), emitted.end(), [](const Request& r) {
        return r.head.size() <= RequestRewriter::kMaxHeadBytes;
      })) {
    RequestRules again;
    again.set = rules.set;
    const Outcome repeated = drive(again, whole.out, {});
    SCS_FUZZ_CHECK(
        !repeated.refused && repeated.out == whole.out && repeated.requests == whole.requests,
        whole.out);
  }
}

}  // namespace
}  // namespace scs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2 || size > 20000) {
    return 0;
  }
  scs::fuzz::check(std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2), data[0],
                   data[1]);
  return 0;
}
