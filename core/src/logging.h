#pragma once

#include <Poco/Logger.h>
#include <scs/backend/backend.h>

#include <optional>
#include <string>
#include <string_view>

namespace scs::logging {

// Poco priority for "debug", "info", "warning" or "error"; nullopt for anything else.
std::optional<int> parseLevel(const std::string& name);

// Sends every Poco logger (existing and future) to stderr, one line per message:
// "2026-11-30T04:08:00.123Z <Priority> <source>: <text>", at `level` and above. stdout is
// the protocol and never sees a log line. Call before starting any thread that logs.
void setUp(int level);

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
