#include "logging.h"

#include <Poco/AutoPtr.h>
#include <Poco/ConsoleChannel.h>
#include <Poco/FormattingChannel.h>
#include <Poco/Message.h>
#include <Poco/PatternFormatter.h>

#include <cstdio>
#include <exception>
#include <iostream>

namespace scs::logging {

std::optional<int> parseLevel(const std::string& name) {
  if (name == "debug") {
    return Poco::Message::PRIO_DEBUG;
  }
  if (name == "info") {
    return Poco::Message::PRIO_INFORMATION;
  }
  if (name == "warning") {
    return Poco::Message::PRIO_WARNING;
  }
  if (name == "error") {
    return Poco::Message::PRIO_ERROR;
  }
  return std::nullopt;
}

void setUp(int level) {
  Poco::AutoPtr<Poco::PatternFormatter> formatter(
      new Poco::PatternFormatter("%Y-%m-%dT%H:%M:%S.%iZ %p %s: %t"));
  formatter->setProperty(Poco::PatternFormatter::PROP_TIMES, "UTC");
  // ConsoleChannel's default stream is std::clog, which is stderr.
  Poco::AutoPtr<Poco::ConsoleChannel> console(new Poco::ConsoleChannel(std::clog));
  Poco::AutoPtr<Poco::FormattingChannel> channel(new Poco::FormattingChannel(formatter, console));
  // Loggers copy their parent's channel and level when they are created: set the root for
  // those to come, and every logger that already exists (the "" prefix) for the rest.
  Poco::Logger::root().setChannel(channel);
  Poco::Logger::root().setLevel(level);
  Poco::Logger::setChannel("", channel);
  Poco::Logger::setLevel("", level);
}

BackendLogSink::BackendLogSink() : logger_(Poco::Logger::get("scs.backend")) {}

void BackendLogSink::log(backend::LogLevel level, std::string_view message) {
  // Called by plugins: nothing may be thrown back across the boundary.
  try {
    write(level, std::string(message));
  } catch (const std::exception& e) {
    std::fputs("scs.backend: a log message was lost: ", stderr);
    std::fputs(e.what(), stderr);
    std::fputs("\n", stderr);
  }
}

void BackendLogSink::write(backend::LogLevel level, const std::string& text) {
  switch (level) {
    case backend::LogLevel::kDebug:
      logger_.debug(text);
      break;
    case backend::LogLevel::kInfo:
      logger_.information(text);
      break;
    case backend::LogLevel::kWarning:
      logger_.warning(text);
      break;
    case backend::LogLevel::kError:
      logger_.error(text);
      break;
  }
}

}  // namespace scs::logging
