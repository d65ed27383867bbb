#pragma once

// Logging: every Poco logger sent to stderr as text or JSON lines at the chosen level (stdout
// is the protocol), and the LogSink plugins log through.

#include <Poco/Logger.h>
#include <Poco/Message.h>
#include <scs/backend/backend.h>

#include <optional>
#include <string>
#include <string_view>

namespace scs::logging {

// Poco priority for "debug", "info", "warning" or "error"; nullopt for anything else.
std::optional<int> parseLevel(const std::string& name);

enum class Format { kText, kJson };

// Sends every Poco logger (existing and future) to stderr, one line per message, at `level`
// and above. Text: "2026-11-30T04:08:00.123Z <Priority> <source>: <text>"; JSON (for a log
// shipper): one object per line with the same fields, see formatJson(). stdout is the
// protocol and never sees a log line. Call before starting any thread that logs.
void setUp(int level, Format format = Format::kText);

// {"time":"2026-11-30T04:08:00.123Z","level":"Information","source":"scs.runs","message":"..."}
// with the message made valid UTF-8; no newline.
std::string formatJson(const Poco::Message& message);

// The plugin's LogSink: forwards to the Poco logger "scs.backend". Thread-safe.
class BackendLogSink : public backend::LogSink {
 public:
  BackendLogSink();
  void log(backend::LogLevel level, std::string_view message) override;

 private:
  void write(backend::LogLevel level, const std::string& text);

  Poco::Logger& logger_;
};

}  // namespace scs::logging
