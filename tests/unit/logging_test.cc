#include "logging.h"

#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace scs::logging {
namespace {

// Issue 15: --log-format json gives a log shipper one object per line with the text format's
// fields.
TEST(JsonLogTest, OneObjectWithTheFieldsOfTheTextFormat) {
  Poco::Message message("scs.runs", "run 1 \"quoted\"\nfinished \xff", Poco::Message::PRIO_WARNING);
  message.setTime(Poco::Timestamp::fromEpochTime(1764547200));  // 2025-12-01T00:00:00Z
  const std::string line = formatJson(message);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  const auto parsed = Poco::JSON::Parser().parse(line).extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(parsed->getValue<std::string>("time"), "2025-12-01T00:00:00.000Z");
  EXPECT_EQ(parsed->getValue<std::string>("level"), "Warning");
  EXPECT_EQ(parsed->getValue<std::string>("source"), "scs.runs");
  EXPECT_EQ(parsed->getValue<std::string>("message"), "run 1 \"quoted\"\nfinished \xEF\xBF\xBD");
  EXPECT_EQ(line.rfind("{\"time\":", 0), 0u) << "the fields in a fixed order";
}

}  // namespace
}  // namespace scs::logging
