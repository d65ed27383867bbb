#include "runs/output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace scs::runs {
namespace {

using backend::Stream;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kReplacement = "\xEF\xBF\xBD";

// Writes to stdout under a cap, and the snapshot they leave.
struct CapCase {
  const char* name;
  std::size_t cap;
  std::vector<std::string> writes;
  std::string text;
  std::uint64_t bytes;
  bool truncated;
};

void PrintTo(const CapCase& c, std::ostream* os) { *os << c.name; }

class OutputCapTest : public ::testing::TestWithParam<CapCase> {};

TEST_P(OutputCapTest, KeepsTheHeadAndTheTailAroundTheCap) {
  const CapCase& c = GetParam();
  OutputCapture capture(c.cap);
  for (const std::string& bytes : c.writes) {
    capture.write(Stream::kStdout, bytes);
  }
  const CapturedOutput out = capture.snapshot(Stream::kStdout);
  EXPECT_EQ(out.text, c.text);
  EXPECT_EQ(out.bytes, c.bytes);
  EXPECT_EQ(out.truncated, c.truncated);
}

INSTANTIATE_TEST_SUITE_P(
    OutputCaptureTest, OutputCapTest,
    ::testing::Values(
        CapCase{"UnderCapKeepsEverything", 64, {"hello ", "world\n"}, "hello world\n", 12, false},
        CapCase{"ExactlyAtCapIsNotTruncated", 10, {"0123", "456789"}, "0123456789", 10, false},
        CapCase{"OneByteOverCapIsTruncated",
                10,
                {"0123456789X"},
                "01234\n[... 1 bytes omitted ...]\n6789X",
                11,
                true},
        CapCase{"AWriteLargerThanTheTailKeepsItsEnd",
                8,
                {"abcdefghijklmnopqrstuvwxyz"},
                "abcd\n[... 18 bytes omitted ...]\nwxyz",
                26,
                true}),
    [](const ::testing::TestParamInfo<CapCase>& info) { return std::string(info.param.name); });

TEST(OutputCaptureTest, OverCapKeepsHeadAndTailWithTheTraceback) {
  const std::size_t cap = 4096;
  OutputCapture capture(cap);
  const std::string head = "starting the job\n";
  const std::string traceback =
      "Traceback (most recent call last):\n  File \"main.py\", line 9, in <module>\n"
      "ValueError: boom\n";
  capture.write(Stream::kStderr, head);
  std::uint64_t written = head.size();
  for (int i = 0; i < 1000; ++i) {
    const std::string line = "progress line " + std::to_string(i) + "\n";
    capture.write(Stream::kStderr, line);
    written += line.size();
  }
  capture.write(Stream::kStderr, traceback);
  written += traceback.size();

  const CapturedOutput out = capture.snapshot(Stream::kStderr);
  EXPECT_TRUE(out.truncated);
  EXPECT_EQ(out.bytes, written);
  EXPECT_THAT(out.text, StartsWith(head + "progress line 0\n"));
  EXPECT_THAT(out.text, EndsWith("progress line 999\n" + traceback));
  EXPECT_THAT(out.text,
              HasSubstr("\n[... " + std::to_string(written - cap) + " bytes omitted ...]\n"));
  EXPECT_EQ(capture.snapshot(Stream::kStdout).bytes, 0u);
}

TEST(OutputCaptureTest, StreamsAreCappedAndCountedSeparately) {
  OutputCapture capture(8);
  capture.write(Stream::kStdout, "out");
  capture.write(Stream::kStderr, "error output that is long");
  EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "out");
  EXPECT_FALSE(capture.snapshot(Stream::kStdout).truncated);
  EXPECT_TRUE(capture.snapshot(Stream::kStderr).truncated);
  EXPECT_EQ(capture.snapshot(Stream::kStderr).bytes, 25u);
}

TEST(OutputCaptureTest, AGigabyteInChunksStaysBounded) {
  const std::size_t cap = 1u << 20;
  const std::size_t chunk_size = 64u << 10;
  const std::size_t chunks = (std::size_t{1} << 30) / chunk_size;
  OutputCapture capture(cap);
  std::string chunk(chunk_size, 'x');
  for (std::size_t i = 0; i < chunks; ++i) {
    chunk.front() = static_cast<char>('a' + i % 26);
    chunk.back() = static_cast<char>('A' + i % 26);
    capture.write(Stream::kStdout, chunk);
  }
  EXPECT_LE(capture.retainedCapacity(), cap);

  const CapturedOutput out = capture.snapshot(Stream::kStdout);
  EXPECT_EQ(out.bytes, std::uint64_t{1} << 30);
  EXPECT_TRUE(out.truncated);
  const std::string marker =
      "\n[... " + std::to_string((std::uint64_t{1} << 30) - cap) + " bytes omitted ...]\n";
  EXPECT_EQ(out.text.size(), cap + marker.size());
  EXPECT_EQ(out.text.front(), 'a');
  const char last = static_cast<char>('A' + (chunks - 1) % 26);
  EXPECT_EQ(out.text.back(), last);
  EXPECT_THAT(out.text, HasSubstr(marker));
}

TEST(OutputCaptureTest, InvalidUtf8IsReplaced) {
  OutputCapture capture(64);
  capture.write(Stream::kStdout, "ok \xFF\xFE end");
  EXPECT_EQ(capture.snapshot(Stream::kStdout).text, "ok " + kReplacement + kReplacement + " end");
}

TEST(OutputCaptureTest, AMultibyteCharacterCutAtTheBoundaryIsReplaced) {
  // Head and tail keep 4 bytes each; the euro sign (E2 82 AC) straddles the head's end and
  // the first kept tail byte is the middle of a snowman (E2 98 83).
  OutputCapture capture(8);
  capture.write(Stream::kStdout,
                "abc\xE2\x82\xAC"
                "0123456789\xE2\x98\x83yz");
  const CapturedOutput out = capture.snapshot(Stream::kStdout);
  EXPECT_TRUE(out.truncated);
  EXPECT_THAT(out.text, StartsWith("abc" + kReplacement + "\n[... "));
  EXPECT_THAT(out.text, EndsWith("]\n" + kReplacement + kReplacement + "yz"));
  EXPECT_EQ(toValidUtf8(out.text), out.text);
}

TEST(OutputCaptureTest, ConcurrentWritersAreCountedExactly) {
  OutputCapture capture(1024);
  const int kWrites = 20000;
  std::thread out_writer([&] {
    for (int i = 0; i < kWrites; ++i) {
      capture.write(Stream::kStdout, "0123456789");
    }
  });
  std::thread err_writer([&] {
    for (int i = 0; i < kWrites; ++i) {
      capture.write(Stream::kStderr, "abc");
    }
  });
  for (int i = 0; i < 100; ++i) {
    EXPECT_LE(capture.snapshot(Stream::kStdout).text.size(), 1024u + 64u);
  }
  out_writer.join();
  err_writer.join();
  EXPECT_EQ(capture.snapshot(Stream::kStdout).bytes, 10u * kWrites);
  EXPECT_EQ(capture.snapshot(Stream::kStderr).bytes, 3u * kWrites);
  EXPECT_THAT(capture.snapshot(Stream::kStdout).text, EndsWith("0123456789"));
}

TEST(ToValidUtf8Test, ValidTextIsUnchanged) {
  const std::string text = "plain, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, nul\0byte";
  EXPECT_EQ(toValidUtf8(text), text);
  EXPECT_EQ(toValidUtf8(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(toValidUtf8(""), "");
}

TEST(ToValidUtf8Test, IllFormedSequencesBecomeOneReplacementPerMaximalSubpart) {
  EXPECT_EQ(toValidUtf8("\x80"), kReplacement);                     // lone continuation
  EXPECT_EQ(toValidUtf8("\xC0\xAF"), kReplacement + kReplacement);  // overlong '/'
  EXPECT_EQ(toValidUtf8("\xE0\x80\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(toValidUtf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(toValidUtf8("\xF4\x90\x80\x80"),
            kReplacement + kReplacement + kReplacement + kReplacement);  // above U+10FFFF
  EXPECT_EQ(toValidUtf8("\xF5"), kReplacement);
  EXPECT_EQ(toValidUtf8("a\xE2\x82"), "a" + kReplacement);  // cut at the end
  EXPECT_EQ(toValidUtf8("\xE2\x82z"), kReplacement + "z");  // cut in the middle
  EXPECT_EQ(toValidUtf8("\xF0\x9F\x98"), kReplacement);
  EXPECT_EQ(toValidUtf8("\xC3"), kReplacement);
}

}  // namespace
}  // namespace scs::runs
