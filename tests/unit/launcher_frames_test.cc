// The stdin frames' codec (scs/backend/launcher_frames.h) against the streams of
// tests/golden/stdin_frames.json, which tests/launcher/test_frames.py decodes with PID 1's codec
// (docker/scs_launcher/frames.py): split anywhere, each stream is the same frames or refused.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>
#include <scs/backend/launcher_frames.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/golden.h"

namespace scs {
namespace {

namespace launcher = backend::launcher;
using launcher::FrameKind;
using launcher::StdinFrame;

using testing::goldenBytes;
using testing::readGolden;

std::string kindName(FrameKind kind) {
  switch (kind) {
    case FrameKind::kRun:
      return "run";
    case FrameKind::kInterrupt:
      return "interrupt";
    case FrameKind::kSession:
      return "session";
    case FrameKind::kEgress:
      return "egress";
  }
  return "?";
}

FrameKind kindNamed(const std::string& name) {
  return name == "run"         ? FrameKind::kRun
         : name == "interrupt" ? FrameKind::kInterrupt
         : name == "session"   ? FrameKind::kSession
                               : FrameKind::kEgress;
}

// A frame as one comparable line.
std::string describe(const StdinFrame& frame) {
  std::ostringstream out;
  out << kindName(frame.kind) << " payload=" << frame.payload << " seconds=" << frame.seconds
      << " type=" << (frame.egress_type ? std::string(1, frame.egress_type) : "")
      << " stream=" << frame.stream << " value=" << frame.value;
  return out.str();
}

std::string describe(const Poco::JSON::Object::Ptr& frame) {
  std::ostringstream out;
  out << frame->getValue<std::string>("kind")
      << " payload=" << goldenBytes(frame->optValue<std::string>("payload", ""))
      << " seconds=" << frame->optValue<std::uint64_t>("seconds", 0)
      << " type=" << frame->optValue<std::string>("type", "")
      << " stream=" << frame->optValue<std::uint64_t>("stream", 0)
      << " value=" << frame->optValue<std::uint64_t>("value", 0);
  return out.str();
}

// The frames of `data` fed in pieces cut at `splits`; false when the reader refused it.
bool decode(const std::string& data, const std::vector<std::size_t>& splits, bool skip_nul,
            unsigned kinds, std::vector<std::string>& got) {
  launcher::StdinFrameReader reader(skip_nul, kinds);
  std::vector<StdinFrame> frames;
  std::size_t at = 0;
  std::vector<std::size_t> ends = splits;
  ends.push_back(data.size());
  for (const std::size_t end : ends) {
    if (!reader.feed(std::string_view(data).substr(at, end - at), frames)) {
      EXPECT_FALSE(reader.error().empty());
      return false;
    }
    at = end;
  }
  for (const StdinFrame& frame : frames) {
    got.push_back(describe(frame));
  }
  return true;
}

TEST(LauncherFramesTest, EveryGoldenStreamDecodesAsTheFileSaysWhereverItIsSplit) {
  const auto golden = readGolden("stdin_frames.json");
  ASSERT_TRUE(golden) << "tests/golden/stdin_frames.json";
  const auto cases = golden->getArray("cases");
  ASSERT_GE(cases->size(), 20u);
  for (std::size_t i = 0; i < cases->size(); ++i) {
    const auto one = cases->getObject(static_cast<unsigned>(i));
    const std::string name = one->getValue<std::string>("name");
    const std::string data = goldenBytes(one->getValue<std::string>("bytes"));
    const bool skip_nul = one->optValue<bool>("skip_nul", false);
    unsigned kinds = launcher::kEveryFrameKind;
    if (const auto named = one->getArray("kinds")) {
      kinds = 0;
      for (std::size_t k = 0; k < named->size(); ++k) {
        kinds |=
            launcher::kindBit(kindNamed(named->getElement<std::string>(static_cast<unsigned>(k))));
      }
    }
    const bool refused = one->optValue<bool>("error", false);
    std::vector<std::string> expected;
    if (!refused) {
      const auto frames = one->getArray("frames");
      for (std::size_t f = 0; f < frames->size(); ++f) {
        expected.push_back(describe(frames->getObject(static_cast<unsigned>(f))));
      }
    }
    std::vector<std::vector<std::size_t>> ways = {{}, {}};
    for (std::size_t at = 1; at < data.size(); ++at) {
      ways[1].push_back(at);  // a byte at a time
      ways.push_back({at});
    }
    for (const auto& splits : ways) {
      std::vector<std::string> got;
      const bool read = decode(data, splits, skip_nul, kinds, got);
      EXPECT_EQ(read, !refused) << name << " split at " << (splits.empty() ? 0 : splits[0]);
      if (read && !refused) {
        EXPECT_EQ(got, expected) << name;
      }
    }
  }
}

TEST(LauncherFramesTest, EachEncoderWritesTheGoldenBytes) {
  const auto golden = readGolden("stdin_frames.json");
  ASSERT_TRUE(golden) << "tests/golden/stdin_frames.json";
  const auto encoded = golden->getArray("encoded");
  ASSERT_GE(encoded->size(), 7u);
  for (std::size_t i = 0; i < encoded->size(); ++i) {
    const auto one = encoded->getObject(static_cast<unsigned>(i));
    const auto frame = one->getObject("frame");
    const std::string payload = goldenBytes(frame->optValue<std::string>("payload", ""));
    std::string written;
    switch (kindNamed(frame->getValue<std::string>("kind"))) {
      case FrameKind::kRun:
        written = launcher::runFrame(payload);
        break;
      case FrameKind::kInterrupt:
        written = launcher::interruptFrame();
        break;
      case FrameKind::kSession:
        written = launcher::sessionFrame(frame->getValue<std::uint64_t>("seconds"));
        break;
      case FrameKind::kEgress:
        written = launcher::egressFrame(frame->getValue<std::string>("type")[0],
                                        frame->getValue<std::uint32_t>("stream"),
                                        frame->getValue<std::uint64_t>("value"), payload);
        break;
    }
    EXPECT_EQ(written, goldenBytes(one->getValue<std::string>("bytes")));
  }
}

TEST(LauncherFramesTest, ARefusedCallGivesNoneOfItsFrames) {
  launcher::StdinFrameReader reader;
  std::vector<StdinFrame> frames;
  ASSERT_TRUE(reader.feed(launcher::interruptFrame(), frames));
  EXPECT_FALSE(reader.feed(launcher::runFrame("x") + "SCS-BAD\n", frames));
  ASSERT_EQ(frames.size(), 1u);  // the earlier call's, not the refused call's run
  EXPECT_EQ(frames[0].kind, FrameKind::kInterrupt);
}

TEST(LauncherFramesTest, ARefusedStreamStaysRefused) {
  launcher::StdinFrameReader reader;
  std::vector<StdinFrame> frames;
  EXPECT_FALSE(reader.feed("SCS-BAD\n", frames));
  EXPECT_EQ(reader.error(), "unknown frame 'SCS-BAD'");
  EXPECT_FALSE(reader.feed(launcher::interruptFrame(), frames));
  EXPECT_TRUE(frames.empty());
}

TEST(LauncherFramesTest, WhatIsWrittenReadsBack) {
  const std::string written =
      launcher::sessionFrame(610) + launcher::runFrame(std::string("\0bundle\n", 8)) +
      launcher::interruptFrame() + launcher::egressFrame('D', 7, 0, "data") +
      launcher::egressFrame('C', 7, 4096);
  EXPECT_EQ(written.substr(0, 17), "SCS-SESSION 610\nS");
  launcher::StdinFrameReader reader;
  std::vector<StdinFrame> frames;
  ASSERT_TRUE(reader.feed(written, frames)) << reader.error();
  ASSERT_EQ(frames.size(), 5u);
  EXPECT_EQ(describe(frames[0]), "session payload= seconds=610 type= stream=0 value=0");
  EXPECT_EQ(frames[1].payload, std::string("\0bundle\n", 8));
  EXPECT_EQ(frames[2].kind, FrameKind::kInterrupt);
  EXPECT_EQ(describe(frames[3]), "egress payload=data seconds=0 type=D stream=7 value=4");
  EXPECT_EQ(describe(frames[4]), "egress payload= seconds=0 type=C stream=7 value=4096");
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(LauncherFramesTest, TheLargestRunFrameHeaderIsWithinTheHeaderCap) {
  const std::string header =
      std::string(launcher::kRunFrame) + " " + std::to_string(launcher::kMaxFrameBytes);
  EXPECT_LE(header.size(), launcher::kMaxFrameHeaderBytes);
  StdinFrame frame;
  std::uint64_t size = 0;
  ASSERT_TRUE(launcher::parseFrameHeader(header, frame, size));
  EXPECT_EQ(size, launcher::kMaxFrameBytes);
  EXPECT_FALSE(launcher::parseFrameHeader(header + "0", frame, size));
}

}  // namespace
}  // namespace scs
