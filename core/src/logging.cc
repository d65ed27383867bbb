// Logging set-up: the text and JSON formatters on a stderr channel for every Poco logger, and
// BackendLogSink, which forwards a plugin's messages to "scs.backend" without throwing back.

#include "logging.h"

#include <Poco/AutoPtr.h>
#include <Poco/ConsoleChannel.h>
#include <Poco/FormattingChannel.h>
#include <Poco/JSON/Object.h>
#include <Poco/Message.h>
#include <Poco/PatternFormatter.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>

#include "common/utf8.h"

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

namespace {

constexpr const char* kTimeFormat = "%Y-%m-%dT%H:%M:%S.%iZ";

// Poco has no JSON formatter; this one writes the fields of the text format, with the
// PatternFormatter it derives from rendering the time and the priority's name as that does.
class JsonFormatter : public Poco::PatternFormatter {
 public:
  JsonFormatter() : PatternFormatter(kTimeFormat) { setProperty(PROP_TIMES, "UTC"); }

  void format(const Poco::Message& message, std::string& text) override {
    std::string time;
    PatternFormatter::format(message, time);
    Poco::JSON::Object line(Poco::JSON_PRESERVE_KEY_ORDER);
    line.set("time", time);
    line.set("level", getPriorityName(message.getPriority()));
    line.set("source", common::toValidUtf8(message.getSource()));
    line.set("message", common::toValidUtf8(message.getText()));
    std::ostringstream out;
    line.stringify(out);
    text = out.str();
  }
};

}  // namespace

std::string formatJson(const Poco::Message& message) {
  JsonFormatter formatter;
  std::string text;
  formatter.format(message, text);
  return text;
}

void setUp(int level, Format format) {
  Poco::AutoPtr<Poco::Formatter> formatter;
  if (format == Format::kJson) {
    formatter = new JsonFormatter;
  } else {
    Poco::AutoPtr<Poco::PatternFormatter> pattern(
        new Poco::PatternFormatter(std::string(kTimeFormat) + " %p %s: %t"));
    pattern->setProperty(Poco::PatternFormatter::PROP_TIMES, "UTC");
    formatter = pattern;
  }
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
