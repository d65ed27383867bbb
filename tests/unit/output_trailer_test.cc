#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "launcher/output.h"
#include "launcher/side_channel.h"

namespace scs::runs {
namespace {

using namespace std::string_literals;
using backend::Stream;

const std::string kNonce = "0123456789abcdef0123456789abcdef";
const std::string kMarker = launcher::trailerMarker(kNonce);
const std::string kReplacement = "\xEF\xBF\xBD";

// Output with near misses: a marker with the wrong nonce, a prefix that restarts on its own
// first byte, and a prefix cut by a different byte.
const std::string kUserOutput =
    "line one\n\n\0SCS-TRAILER-ffffffffffffffffffffffffffffffff\0 "s
    "\n\n\n\0SCS\n\0SCS-TRAILER-0123x tail\n"s;
const std::string kTrailer = "{\"exception\":null,\"files\":[]}\n";

TEST(TrailerDetectionTest, TheMarkerIsFoundWhereverTheWritesSplitIt) {
  const std::string stream = kUserOutput + kMarker + kTrailer;
  for (std::size_t a = 0; a <= stream.size(); ++a) {
    for (std::size_t b = a; b <= stream.size(); ++b) {
      launcher::OutputCapture capture(4096, kMarker, 4096);
      capture.write(Stream::kStdout, stream.substr(0, a));
      capture.write(Stream::kStdout, stream.substr(a, b - a));
      capture.write(Stream::kStdout, stream.substr(b));
      const launcher::CapturedOutput live = capture.snapshot(Stream::kStdout);
      ASSERT_EQ(live.bytes, kUserOutput.size()) << "split at " << a << ", " << b;
      capture.close();
      const launcher::CapturedOutput out = capture.snapshot(Stream::kStdout);
      ASSERT_EQ(out.text, common::toValidUtf8(kUserOutput)) << "split at " << a << ", " << b;
      ASSERT_EQ(out.bytes, kUserOutput.size());
      const launcher::OutputCapture::Trailer trailer = capture.takeTrailer();
      ASSERT_TRUE(trailer.found);
      ASSERT_FALSE(trailer.overflowed);
      ASSERT_EQ(trailer.bytes, kTrailer) << "split at " << a << ", " << b;
    }
  }
}

TEST(TrailerDetectionTest, OneByteAtATime) {
  const std::string stream = kUserOutput + kMarker + kTrailer;
  launcher::OutputCapture capture(4096, kMarker, 4096);
  for (const char byte : stream) {
    capture.write(Stream::kStdout, std::string(1, byte));
  }
  capture.close();
  EXPECT_EQ(capture.snapshot(Stream::kStdout).bytes, kUserOutput.size());
  EXPECT_EQ(capture.takeTrailer().bytes, kTrailer);
}

TEST(TrailerDetectionTest, APartialMatchIsShownAndIsOutputWhenTheStreamEnds) {
  launcher::OutputCapture capture(4096, kMarker, 4096);
  const std::string partial = kMarker.substr(0, 10);
  capture.write(Stream::kStdout, "abc" + partial);
  const launcher::CapturedOutput live = capture.snapshot(Stream::kStdout);
  EXPECT_EQ(live.text, common::toValidUtf8("abc" + partial));
  EXPECT_EQ(live.bytes, 3u + partial.size());
  EXPECT_EQ(capture.snapshot(Stream::kStdout, 3).text, common::toValidUtf8(partial));
  capture.close();
  const launcher::CapturedOutput out = capture.snapshot(Stream::kStdout);
  EXPECT_EQ(out.bytes, 3u + partial.size());
  EXPECT_EQ(out.text, common::toValidUtf8("abc" + partial));
  EXPECT_FALSE(capture.takeTrailer().found);
}

TEST(TrailerDetectionTest, ALineEndIsShownAtOnceThoughAMarkerStartsWithOne) {
  launcher::OutputCapture capture(4096, kMarker, 4096);
  capture.write(Stream::kStdout, "progress 1\n");
  EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "progress 1\n");
  EXPECT_EQ(capture.snapshot(Stream::kStdout).bytes, 11u);
  capture.write(Stream::kStdout, kMarker + kTrailer);
  capture.close();
  EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "progress 1\n");
  EXPECT_EQ(capture.takeTrailer().bytes, kTrailer);
}

TEST(TrailerDetectionTest, AFailedMatchReleasesTheHeldBytes) {
  launcher::OutputCapture capture(4096, kMarker, 4096);
  capture.write(Stream::kStdout, "abc" + kMarker.substr(0, 20));
  capture.write(Stream::kStdout, "Z and more");
  const launcher::CapturedOutput live = capture.snapshot(Stream::kStdout);
  EXPECT_EQ(live.bytes, 3u + 20u + 10u);
  EXPECT_EQ(live.text, common::toValidUtf8("abc" + kMarker.substr(0, 20) + "Z and more"));
}

TEST(TrailerDetectionTest, OutputIsCompleteAtTheTrailersLineEndAndTheListenerHearsItOnce) {
  launcher::OutputCapture capture(4096, kMarker, 4096);
  int heard = 0;
  capture.setListener([&] { ++heard; });
  capture.write(Stream::kStdout, kUserOutput + kMarker + kTrailer.substr(0, 10));
  EXPECT_FALSE(capture.outputComplete());
  EXPECT_EQ(heard, 0);
  capture.write(Stream::kStdout, kTrailer.substr(10));
  EXPECT_TRUE(capture.outputComplete());
  EXPECT_EQ(heard, 1);
  capture.write(Stream::kStdout, "\n");
  EXPECT_EQ(heard, 1);
  EXPECT_FALSE(capture.hasEnded());
  capture.ended();
  EXPECT_TRUE(capture.hasEnded());
  EXPECT_EQ(heard, 2);
}

TEST(TrailerDetectionTest, ATrailerCutAtItsCapNeverCompletesTheOutput) {
  launcher::OutputCapture capture(4096, kMarker, 8);
  capture.write(Stream::kStdout, kMarker + kTrailer);
  EXPECT_FALSE(capture.outputComplete());
  capture.close();
  EXPECT_TRUE(capture.takeTrailer().overflowed);
}

// The engine carries the streams apart: the trailer may arrive before the end of stderr.
TEST(TrailerDetectionTest, WithAStderrEndMarkerTheOutputIsCompleteOnlyOnceBothHaveArrived) {
  const std::string end = launcher::stderrEndMarker(kNonce);
  const std::string err = "Traceback\n\0SCS-END-0123x\n"s;  // a near miss is output
  for (std::size_t cut = 0; cut < end.size(); ++cut) {
    launcher::OutputCapture capture(4096, kMarker, 4096, end);
    int heard = 0;
    capture.setListener([&] { ++heard; });
    capture.write(Stream::kStderr, err + end.substr(0, cut));
    capture.write(Stream::kStdout, "out" + kMarker + kTrailer);
    EXPECT_FALSE(capture.outputComplete()) << "cut at " << cut;
    EXPECT_EQ(heard, 0);
    capture.write(Stream::kStderr, end.substr(cut) + "after the end");
    EXPECT_TRUE(capture.outputComplete()) << "cut at " << cut;
    EXPECT_EQ(heard, 1);
    capture.close();
    const launcher::CapturedOutput stderr_text = capture.snapshot(Stream::kStderr);
    EXPECT_EQ(stderr_text.text, common::toValidUtf8(err)) << "cut at " << cut;
    EXPECT_EQ(stderr_text.bytes, err.size());
    EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "out");
  }
}

TEST(TrailerDetectionTest, AStderrEndMarkerNeverCompletedIsOutputWhenTheStreamEnds) {
  const std::string end = launcher::stderrEndMarker(kNonce);
  launcher::OutputCapture capture(4096, kMarker, 4096, end);
  capture.write(Stream::kStderr, "e" + end.substr(0, 5));
  capture.write(Stream::kStdout, kMarker + kTrailer);
  EXPECT_FALSE(capture.outputComplete());
  EXPECT_EQ(capture.snapshot(Stream::kStderr).bytes, 6u);
  capture.close();
  EXPECT_EQ(capture.snapshot(Stream::kStderr).text, common::toValidUtf8("e" + end.substr(0, 5)));
}

TEST(TrailerDetectionTest, EverythingAfterTheMarkerIsTrailerAndIsCapped) {
  launcher::OutputCapture capture(4096, kMarker, 8);
  capture.write(Stream::kStdout, "out" + kMarker + "0123456789");
  capture.write(Stream::kStdout, "more after the trailer");
  EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "out");
  const launcher::OutputCapture::Trailer trailer = capture.takeTrailer();
  EXPECT_TRUE(trailer.found);
  EXPECT_TRUE(trailer.overflowed);
  EXPECT_EQ(trailer.bytes, "01234567");
}

TEST(TrailerDetectionTest, StderrAndCapturesWithoutAMarkerAreNotScanned) {
  launcher::OutputCapture with_marker(4096, kMarker, 4096);
  with_marker.write(Stream::kStderr, kMarker + "x");
  with_marker.close();
  EXPECT_EQ(with_marker.snapshot(Stream::kStderr).bytes, kMarker.size() + 1);
  EXPECT_FALSE(with_marker.takeTrailer().found);

  launcher::OutputCapture without(4096);
  without.write(Stream::kStdout, kMarker + "x");
  without.close();
  EXPECT_EQ(without.snapshot(Stream::kStdout).bytes, kMarker.size() + 1);
  EXPECT_FALSE(without.takeTrailer().found);
}

TEST(TrailerDetectionTest, AFloodIsCountedExactlyWithTheTrailerExcluded) {
  launcher::OutputCapture capture(1024, kMarker, 4096);
  const std::string chunk(65536, 'x');
  const std::uint64_t chunks = 1600;  // 100 MiB
  for (std::uint64_t i = 0; i < chunks; ++i) {
    capture.write(Stream::kStdout, chunk);
  }
  capture.write(Stream::kStdout, kMarker + kTrailer);
  capture.close();
  const launcher::CapturedOutput out = capture.snapshot(Stream::kStdout);
  EXPECT_EQ(out.bytes, chunks * chunk.size());
  EXPECT_TRUE(out.truncated);
  EXPECT_EQ(out.text.back(), 'x');
  EXPECT_EQ(capture.takeTrailer().bytes, kTrailer);
}

// Snapshots from `offsets`, which all start at `offset` and show `text`.
struct OffsetCase {
  const char* name;
  std::vector<std::uint64_t> offsets;
  std::string text;
  std::uint64_t offset;
};

void PrintTo(const OffsetCase& c, std::ostream* os) { *os << c.name; }

class OffsetTest : public ::testing::TestWithParam<OffsetCase> {
 protected:
  // Head "0123456789", dropped "abcdefghij", tail "ABCDEFGHIJ".
  OffsetTest() : capture_(20) {
    capture_.write(Stream::kStdout, "0123456789abcdefghijABCDEFGHIJ");
    capture_.close();
  }
  launcher::OutputCapture capture_;
};

TEST_P(OffsetTest, StartsAtTheOffsetOrTheNextKeptByte) {
  for (const std::uint64_t from : GetParam().offsets) {
    const launcher::CapturedOutput out = capture_.snapshot(Stream::kStdout, from);
    EXPECT_EQ(out.text, GetParam().text) << from;
    EXPECT_EQ(out.offset, GetParam().offset) << from;
    EXPECT_EQ(out.bytes, 30u) << from;
    EXPECT_TRUE(out.truncated) << from;
  }
}

INSTANTIATE_TEST_SUITE_P(
    OffsetTest, OffsetTest,
    ::testing::Values(
        OffsetCase{"ZeroIsTheWholeRetainedText",
                   {0},
                   "0123456789\n[... 10 bytes omitted ...]\nABCDEFGHIJ",
                   0},
        OffsetCase{"InTheHeadStartsThere", {5}, "56789\n[... 10 bytes omitted ...]\nABCDEFGHIJ", 5},
        OffsetCase{"InTheDroppedMiddleStartsAtTheTail", {10, 15, 19}, "ABCDEFGHIJ", 20},
        OffsetCase{"InTheTailStartsThere", {25}, "FGHIJ", 25},
        OffsetCase{"AtOrPastTheEndIsEmpty", {30, 31, 1000000}, "", 30}),
    [](const ::testing::TestParamInfo<OffsetCase>& info) { return std::string(info.param.name); });

TEST(LiveOffsetTest, FetchingFromTheLastCountReassemblesTheStreamExactly) {
  // Characters cut by a write boundary are held back, and the next fetch starts at their
  // first byte, so the concatenated texts equal the stream.
  const std::string stream =
      "ab\xE2\x82\xAC"
      "cd\xF0\x9F\x98\x80"
      "e\xC3\xA9"
      "f";
  for (std::size_t step = 1; step <= 4; ++step) {
    launcher::OutputCapture capture(4096);
    std::string assembled;
    std::uint64_t next = 0;
    for (std::size_t at = 0; at < stream.size(); at += step) {
      capture.write(Stream::kStdout, stream.substr(at, step));
      const launcher::CapturedOutput out = capture.snapshot(Stream::kStdout, next);
      ASSERT_EQ(out.offset, assembled.size()) << "step " << step << " at " << at;
      assembled += out.text;
      next = out.bytes;
    }
    EXPECT_EQ(assembled, stream) << "step " << step;
  }
}

TEST(LiveOffsetTest, ACutCharacterIsReplacedOnlyOnceTheStreamHasEnded) {
  launcher::OutputCapture capture(4096);
  capture.write(Stream::kStdout, "ok\xE2\x82");
  EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "ok");
  EXPECT_EQ(capture.snapshot(Stream::kStdout).bytes, 4u);
  capture.close();
  EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "ok" + kReplacement);
}

}  // namespace
}  // namespace scs::runs
