#include "policy/limits.h"

#include <Poco/Dynamic/Struct.h>
#include <Poco/JSON/ParseHandler.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace scs::policy {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

Poco::Dynamic::Var parse(const std::string& text) { return Poco::JSON::Parser().parse(text); }

// Big enough that nothing is lowered: the shipped settings apply as written.
constexpr HostCapacity kBigHost{64, std::int64_t{256} * kBytesPerGb};

std::string rejection(const LimitPolicy& policy, const Poco::Dynamic::Var& requested) {
  const auto result = policy.resolve(requested);
  if (const auto* rejected = std::get_if<Error>(&result)) {
    return rejected->message;
  }
  ADD_FAILURE() << "accepted";
  return {};
}

std::string rejection(const std::string& json) {
  return rejection(LimitPolicy(LimitSettings{}, kBigHost), parse(json));
}

Limits accepted(const LimitPolicy& policy, const Poco::Dynamic::Var& requested) {
  const auto result = policy.resolve(requested);
  if (const auto* rejected = std::get_if<Error>(&result)) {
    ADD_FAILURE() << rejected->message;
    return {};
  }
  return std::get<Limits>(result);
}

Limits accepted(const std::string& json) {
  return accepted(LimitPolicy(LimitSettings{}, kBigHost), parse(json));
}

std::string roundTrip(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

TEST(FormatNumberTest, ShortestReadableForm) {
  EXPECT_EQ(formatNumber(32), "32");
  EXPECT_EQ(formatNumber(0.25), "0.25");
  EXPECT_EQ(formatNumber(23.5), "23.5");
  EXPECT_EQ(formatNumber(0.125), "0.125");
  EXPECT_EQ(formatNumber(5000000000), "5000000000");
  EXPECT_EQ(formatNumber(1e300), "1e+300");
  EXPECT_EQ(formatNumber(-1), "-1");
  EXPECT_EQ(formatNumber(-0.0), "0");
  EXPECT_EQ(formatNumber(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(formatNumber(std::nextafter(16.0, 17.0)), "16.000000000000004");
}

TEST(LimitPolicyTest, NullOrEmptyMeansDefaults) {
  const Limits defaults{5, 600, 2, 256};
  EXPECT_EQ(accepted(LimitPolicy(LimitSettings{}, kBigHost), Poco::Dynamic::Var()), defaults);
  EXPECT_EQ(accepted("{}"), defaults);
}

TEST(LimitPolicyTest, ValidRequestFillsTheRestFromDefaults) {
  EXPECT_EQ(accepted(R"({"memory_gb": 8, "cpus": 1.5})"), (Limits{8, 600, 1.5, 256}));
  EXPECT_EQ(accepted(R"({"timeout_seconds": 30.5})"), (Limits{5, 30.5, 2, 256}));
  EXPECT_EQ(accepted(R"({"memory_gb": 1, "timeout_seconds": 2, "cpus": 3})"),
            (Limits{1, 2, 3, 256}));
}

TEST(LimitPolicyTest, IntegerAndFloatJsonAreTheSame) {
  EXPECT_EQ(accepted(R"({"memory_gb": 16})"), accepted(R"({"memory_gb": 16.0})"));
  EXPECT_EQ(accepted(R"({"cpus": 4})"), accepted(R"({"cpus": 4e0})"));
  EXPECT_EQ(rejection(R"({"cpus": 8})"), rejection(R"({"cpus": 8.0})"));
}

TEST(LimitPolicyTest, ExactlyTheMaximumIsAccepted) {
  EXPECT_EQ(accepted(R"({"memory_gb": 16, "timeout_seconds": 3600, "cpus": 4})"),
            (Limits{16, 3600, 4, 256}));
}

TEST(LimitPolicyTest, ExactlyTheFloorIsAccepted) {
  EXPECT_EQ(accepted(R"({"memory_gb": 0.125, "timeout_seconds": 0.1, "cpus": 0.1})"),
            (Limits{0.125, 0.1, 0.1, 256}));
}

TEST(LimitPolicyTest, OverTheMaximumIsRejectedWithTheExactShape) {
  EXPECT_EQ(rejection(R"({"memory_gb": 32})"), "Requested 32 GB of memory, max is 16 GB");
  EXPECT_EQ(rejection(R"({"timeout_seconds": 7200})"),
            "Requested 7200 seconds of timeout, max is 3600 seconds");
  EXPECT_EQ(rejection(R"({"cpus": 8})"), "Requested 8 CPUs, max is 4 CPUs");
}

TEST(LimitPolicyTest, TheSmallestStepOverTheMaximumIsRejected) {
  const std::string memory = roundTrip(std::nextafter(16.0, 17.0));
  EXPECT_EQ(rejection(R"({"memory_gb": )" + memory + "}"),
            "Requested 16.000000000000004 GB of memory, max is 16 GB");
  const std::string timeout = roundTrip(std::nextafter(3600.0, 4000.0));
  EXPECT_EQ(rejection(R"({"timeout_seconds": )" + timeout + "}"),
            "Requested 3600.0000000000005 seconds of timeout, max is 3600 seconds");
  const std::string cpus = roundTrip(std::nextafter(4.0, 5.0));
  EXPECT_EQ(rejection(R"({"cpus": )" + cpus + "}"),
            "Requested 4.000000000000001 CPUs, max is 4 CPUs");
}

TEST(LimitPolicyTest, ZeroNegativeAndBelowTheFloorAreRejected) {
  EXPECT_EQ(rejection(R"({"memory_gb": 0})"), "Requested 0 GB of memory, min is 0.125 GB");
  EXPECT_EQ(rejection(R"({"memory_gb": -0.0})"), "Requested 0 GB of memory, min is 0.125 GB");
  EXPECT_EQ(rejection(R"({"memory_gb": 0.124})"), "Requested 0.124 GB of memory, min is 0.125 GB");
  EXPECT_EQ(rejection(R"({"timeout_seconds": -1})"),
            "Requested -1 seconds of timeout, min is 0.1 seconds");
  EXPECT_EQ(rejection(R"({"timeout_seconds": 0.09})"),
            "Requested 0.09 seconds of timeout, min is 0.1 seconds");
  EXPECT_EQ(rejection(R"({"cpus": 0})"), "Requested 0 CPUs, min is 0.1 CPUs");
  EXPECT_EQ(rejection(R"({"cpus": -4})"), "Requested -4 CPUs, min is 0.1 CPUs");
  const std::string below = roundTrip(std::nextafter(0.1, 0.0));
  EXPECT_EQ(rejection(R"({"cpus": )" + below + "}"),
            "Requested 0.09999999999999999 CPUs, min is 0.1 CPUs");
}

TEST(LimitPolicyTest, ZeroIsRejectedEvenWithoutAFloor) {
  LimitSettings settings;
  settings.min_cpus = 0;
  EXPECT_EQ(rejection(LimitPolicy(settings, kBigHost), parse(R"({"cpus": 0})")),
            "Requested 0 CPUs, min is 0 CPUs");
}

TEST(LimitPolicyTest, AbsurdNumbersAreRejected) {
  EXPECT_EQ(rejection(R"({"memory_gb": 1e308})"), "Requested 1e+308 GB of memory, max is 16 GB");
  EXPECT_EQ(rejection(R"({"memory_gb": -1e308})"),
            "Requested -1e+308 GB of memory, min is 0.125 GB");
  EXPECT_EQ(rejection(R"({"cpus": 5000000000})"), "Requested 5000000000 CPUs, max is 4 CPUs");
  EXPECT_EQ(rejection(R"({"cpus": 9223372036854775807})"),
            "Requested 9.223372036854776e+18 CPUs, max is 4 CPUs");
  EXPECT_EQ(rejection(R"({"timeout_seconds": 1e-300})"),
            "Requested 1e-300 seconds of timeout, min is 0.1 seconds");
}

TEST(LimitPolicyTest, NonNumbersAreRejectedShowingTheValue) {
  EXPECT_EQ(rejection(R"({"memory_gb": "abc"})"), R"(memory_gb must be a number, got "abc")");
  EXPECT_EQ(rejection(R"({"memory_gb": "5"})"), R"(memory_gb must be a number, got "5")");
  EXPECT_EQ(rejection(R"({"timeout_seconds": true})"),
            "timeout_seconds must be a number, got true");
  EXPECT_EQ(rejection(R"({"cpus": false})"), "cpus must be a number, got false");
  EXPECT_EQ(rejection(R"({"cpus": null})"), "cpus must be a number, got null");
  EXPECT_EQ(rejection(R"({"cpus": [2]})"), "cpus must be a number, got [2]");
  EXPECT_EQ(rejection(R"({"cpus": {"value": 2}})"), R"(cpus must be a number, got {"value":2})");
}

TEST(LimitPolicyTest, AHugeValueMakesAShortMessage) {
  const std::string message = rejection(R"({"memory_gb": ")" + std::string(1 << 20, 'x') + R"("})");
  EXPECT_THAT(message, HasSubstr("memory_gb must be a number, got \"xxx"));
  EXPECT_LT(message.size(), 200u);
}

TEST(LimitPolicyTest, NanAndInfinityAreRejected) {
  const LimitPolicy policy(LimitSettings{}, kBigHost);
  for (const double value :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity()}) {
    Poco::DynamicStruct requested;
    requested["memory_gb"] = value;
    EXPECT_EQ(rejection(policy, requested), "memory_gb must be a finite number") << value;
  }
}

TEST(LimitPolicyTest, ADynamicStructIsAnObject) {
  Poco::DynamicStruct requested;
  requested["cpus"] = 3;
  requested["timeout_seconds"] = 1.5;
  EXPECT_EQ(accepted(LimitPolicy(LimitSettings{}, kBigHost), requested), (Limits{5, 1.5, 3, 256}));
}

TEST(LimitPolicyTest, NonObjectsAreRejected) {
  const LimitPolicy policy(LimitSettings{}, kBigHost);
  for (const char* json : {"[]", "[1, 2]", R"("memory_gb=4")", "4", "true"}) {
    const Poco::Dynamic::Var value = parse(std::string(R"({"limits": )") + json + "}")
                                         .extract<Poco::JSON::Object::Ptr>()
                                         ->get("limits");
    EXPECT_EQ(rejection(policy, value),
              "limits must be an object with any of memory_gb, timeout_seconds, cpus")
        << json;
  }
}

TEST(LimitPolicyTest, ProcessesIsNotClientSettable) {
  EXPECT_EQ(rejection(R"({"processes": 10})"),
            "processes is not client-settable (every run gets 256)");
  LimitSettings settings;
  settings.defaults.processes = 64;
  EXPECT_EQ(rejection(LimitPolicy(settings, kBigHost), parse(R"({"processes": 256})")),
            "processes is not client-settable (every run gets 64)");
}

TEST(LimitPolicyTest, UnknownKeysAreRejectedByName) {
  EXPECT_EQ(rejection(R"({"foo": 1})"),
            R"(Unknown limit "foo"; allowed limits are memory_gb, timeout_seconds, cpus)");
  EXPECT_EQ(rejection(R"({"memory": 1})"),
            R"(Unknown limit "memory"; allowed limits are memory_gb, timeout_seconds, cpus)");
  // The key is judged before any value.
  EXPECT_EQ(rejection(R"({"cpus": "many", "disk_gb": 1})"),
            R"(Unknown limit "disk_gb"; allowed limits are memory_gb, timeout_seconds, cpus)");
}

TEST(LimitPolicyTest, KeyOrderDoesNotMatter) {
  Poco::JSON::Parser ordered(new Poco::JSON::ParseHandler(/*preserveObjectOrder=*/true));
  const std::vector<std::string> forms{R"({"cpus": 8, "memory_gb": 32, "timeout_seconds": 0})",
                                       R"({"timeout_seconds": 0, "memory_gb": 32, "cpus": 8})",
                                       R"({"memory_gb": 32, "cpus": 8, "timeout_seconds": 0})"};
  const LimitPolicy policy(LimitSettings{}, kBigHost);
  for (const std::string& form : forms) {
    EXPECT_EQ(rejection(policy, ordered.parse(form)), "Requested 32 GB of memory, max is 16 GB");
    EXPECT_EQ(rejection(policy, parse(form)), "Requested 32 GB of memory, max is 16 GB");
  }
  EXPECT_EQ(accepted(policy, ordered.parse(R"({"cpus": 1, "memory_gb": 2})")),
            accepted(policy, ordered.parse(R"({"memory_gb": 2, "cpus": 1})")));
}

TEST(LimitPolicyTest, AmpleHostChangesNothing) {
  std::vector<std::string> adjustments;
  const LimitPolicy policy(LimitSettings{}, kBigHost, &adjustments);
  EXPECT_THAT(adjustments, SizeIs(0));
  EXPECT_EQ(policy.maxima(), (Limits{16, 3600, 4, 256}));
  EXPECT_EQ(policy.defaults(), (Limits{5, 600, 2, 256}));
}

TEST(LimitPolicyTest, UnknownHostFiguresChangeNothing) {
  std::vector<std::string> adjustments;
  const LimitPolicy policy(LimitSettings{}, HostCapacity{}, &adjustments);
  EXPECT_THAT(adjustments, SizeIs(0));
  EXPECT_EQ(policy.maxima(), (Limits{16, 3600, 4, 256}));
}

TEST(LimitPolicyTest, CpusAboveTheHostAreLoweredAndRefusedWithTheHostFigure) {
  std::vector<std::string> adjustments;
  const LimitPolicy policy(LimitSettings{}, HostCapacity{2, 64 * kBytesPerGb}, &adjustments);
  EXPECT_EQ(policy.maxima().cpus, 2);
  EXPECT_EQ(policy.defaults().cpus, 2);
  ASSERT_THAT(adjustments, SizeIs(1));
  EXPECT_EQ(adjustments[0], "Lowered the maximum cpus from 4 to 2: this host has 2 cores.");
  EXPECT_EQ(rejection(policy, parse(R"({"cpus": 3})")),
            "Requested 3 CPUs, max is 2 CPUs (this host has 2 cores)");
  EXPECT_EQ(accepted(policy, parse(R"({"cpus": 2})")).cpus, 2);
  EXPECT_EQ(rejection(policy, parse(R"({"memory_gb": 17})")),
            "Requested 17 GB of memory, max is 16 GB");
}

TEST(LimitPolicyTest, MemoryAboveTheHostIsLoweredAndSoIsTheDefault) {
  std::vector<std::string> adjustments;
  const LimitPolicy policy(LimitSettings{}, HostCapacity{8, 4 * kBytesPerGb}, &adjustments);
  EXPECT_EQ(policy.maxima().memory_gb, 4);
  EXPECT_EQ(policy.defaults().memory_gb, 4);
  EXPECT_THAT(adjustments,
              ::testing::ElementsAre(
                  "Lowered the maximum memory_gb from 16 to 4: this host has 4 GB of memory.",
                  "Lowered the default memory_gb from 5 to its maximum, 4."));
  EXPECT_EQ(rejection(policy, parse(R"({"memory_gb": 5})")),
            "Requested 5 GB of memory, max is 4 GB (this host has 4 GB of memory)");
}

TEST(LimitPolicyTest, HostMemoryIsReadInGibAndFlooredToHundredths) {
  LimitSettings settings;
  settings.maxima.memory_gb = 64;
  const LimitPolicy exact(settings, HostCapacity{8, 47 * kBytesPerGb / 2});
  EXPECT_EQ(rejection(exact, parse(R"({"memory_gb": 32})")),
            "Requested 32 GB of memory, max is 23.5 GB (this host has 23.5 GB of memory)");
  const LimitPolicy odd(settings, HostCapacity{8, 25232015360});  // 23.4991 GiB
  EXPECT_EQ(odd.maxima().memory_gb, 23.49);
  EXPECT_EQ(accepted(odd, parse(R"({"memory_gb": 23.49})")).memory_gb, 23.49);
  EXPECT_THAT(rejection(odd, parse(R"({"memory_gb": 23.5})")),
              HasSubstr("max is 23.49 GB (this host has 23.49 GB of memory)"));
}

TEST(LimitPolicyTest, DefaultsAboveOperatorMaximaAreLowered) {
  LimitSettings settings;
  settings.defaults = {20, 9000, 3, 512};
  std::vector<std::string> adjustments;
  const LimitPolicy policy(settings, kBigHost, &adjustments);
  EXPECT_EQ(policy.defaults(), (Limits{16, 3600, 3, 256}));
  EXPECT_THAT(adjustments, SizeIs(3));
  EXPECT_THAT(adjustments[0], HasSubstr("memory_gb from 20 to its maximum, 16"));
}

}  // namespace
}  // namespace scs::policy
