#include "launcher/output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/utf8.h"

namespace scs::launcher {
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
  EXPECT_EQ(common::toValidUtf8(out.text), out.text);
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
  EXPECT_EQ(common::toValidUtf8(text), text);
  EXPECT_EQ(common::toValidUtf8(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(common::toValidUtf8(""), "");
}

TEST(ToValidUtf8Test, IllFormedSequencesBecomeOneReplacementPerMaximalSubpart) {
  EXPECT_EQ(common::toValidUtf8("\x80"), kReplacement);                     // lone continuation
  EXPECT_EQ(common::toValidUtf8("\xC0\xAF"), kReplacement + kReplacement);  // overlong '/'
  EXPECT_EQ(common::toValidUtf8("\xE0\x80\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(common::toValidUtf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(common::toValidUtf8("\xF4\x90\x80\x80"),
            kReplacement + kReplacement + kReplacement + kReplacement);  // above U+10FFFF
  EXPECT_EQ(common::toValidUtf8("\xF5"), kReplacement);
  EXPECT_EQ(common::toValidUtf8("a\xE2\x82"), "a" + kReplacement);  // cut at the end
  EXPECT_EQ(common::toValidUtf8("\xE2\x82z"), kReplacement + "z");  // cut in the middle
  EXPECT_EQ(common::toValidUtf8("\xF0\x9F\x98"), kReplacement);
  EXPECT_EQ(common::toValidUtf8("\xC3"), kReplacement);
}

// A model is handed a window of each stream (issue 45): head and tail from offset 0, with the
// offset that reads the middle; from a later offset as much as fits, and where to read on.
TEST(OutputWindowTest, FromTheStartTheHeadAndTheTailNameTheOffsetOfTheRest) {
  OutputCapture capture(1u << 20);
  std::string written;
  for (int line = 0; line < 1000; ++line) {
    written += "line " + std::to_string(line) + "; ";
  }
  capture.write(Stream::kStdout, written);
  capture.close();
  const CapturedOutput out = capture.snapshot(Stream::kStdout, 0, 200);
  EXPECT_TRUE(out.truncated);
  EXPECT_EQ(out.bytes, written.size());
  EXPECT_THAT(out.text, StartsWith(written.substr(0, 100)));
  EXPECT_THAT(out.text, EndsWith(written.substr(written.size() - 100)));
  EXPECT_THAT(out.text, HasSubstr("\n[... " + std::to_string(written.size() - 200) +
                                  " bytes left out of this report: get_result with "
                                  "stdout_offset=100 reads on from here ...]\n"));
  EXPECT_LE(out.text.size(), 200 + kMarkerRoom);

  // Reading on from the named offset, window by window, gives back every byte once.
  std::string read;
  std::uint64_t from = 100;
  read = written.substr(0, 100);
  for (int step = 0; step < 100 && from < written.size(); ++step) {
    const CapturedOutput part = capture.snapshot(Stream::kStdout, from, 1000);
    EXPECT_EQ(part.offset, from);
    const std::size_t marker = part.text.find("\n[... ");
    read += part.text.substr(0, marker);
    if (marker == std::string::npos) {
      break;
    }
    const std::string named = "stdout_offset=";
    const std::size_t at = part.text.find(named, marker);
    ASSERT_NE(at, std::string::npos) << part.text.substr(marker);
    from = std::stoull(part.text.substr(at + named.size()));
    EXPECT_EQ(from, part.offset + marker);
  }
  EXPECT_EQ(read, written);
}

TEST(OutputWindowTest, AWindowNeverCutsACharacterAndNamesItsStream) {
  OutputCapture capture(1u << 16);
  std::string written;
  for (int i = 0; i < 400; ++i) {
    written += "\xC3\xA9\xE2\x82\xAC";  // é€: 2 and 3 bytes
  }
  capture.write(Stream::kStderr, written);
  for (std::uint64_t window : {101u, 102u, 103u, 104u, 105u}) {
    const CapturedOutput out = capture.snapshot(Stream::kStderr, 0, window);
    EXPECT_EQ(out.text.find(kReplacement), std::string::npos) << window;
    EXPECT_THAT(out.text, HasSubstr("get_result with stderr_offset=")) << window;
    const CapturedOutput on = capture.snapshot(Stream::kStderr, 8, window);
    EXPECT_EQ(on.text.find(kReplacement), std::string::npos) << window;
    EXPECT_EQ(on.offset, 7u) << "moved back to the start of the character";
  }
}

TEST(OutputWindowTest, AStreamThatFitsIsWholeAndOneThatDroppedItsMiddleSaysSoToo) {
  OutputCapture capture(64);
  capture.write(Stream::kStdout, "short\n");
  EXPECT_EQ(capture.snapshot(Stream::kStdout, 0, 30).text, "short\n");
  EXPECT_FALSE(capture.snapshot(Stream::kStdout, 0, 30).truncated);

  capture.write(Stream::kStdout, std::string(200, 'a') + "END");
  const CapturedOutput whole = capture.snapshot(Stream::kStdout, 0, 0);
  EXPECT_THAT(whole.text, HasSubstr("bytes omitted"));  // the capture's own cut
  const CapturedOutput windowed = capture.snapshot(Stream::kStdout, 0, 20);
  // "short\n" takes seven characters as JSON carries it: the newline is escaped.
  EXPECT_THAT(windowed.text, StartsWith("short\naaa\n[..."));
  EXPECT_THAT(windowed.text, EndsWith("aaaaaaaEND"));
  EXPECT_THAT(windowed.text, HasSubstr("stdout_offset=9 reads on"));
  // Read from there: the rest of the head, the capture's marker, then the tail.
  const CapturedOutput on = capture.snapshot(Stream::kStdout, 9, 1000);
  EXPECT_THAT(on.text, HasSubstr("bytes omitted"));
  EXPECT_THAT(on.text, EndsWith("END"));
}

// A window counts characters as the report's JSON carries them, from above: an escaped newline
// or quote two, a control character six, a multi-byte character its bytes.
TEST(OutputWindowTest, AWindowCountsCharactersAsTheJsonTextCarriesThem) {
  OutputCapture capture(1u << 16);
  capture.write(Stream::kStdout, std::string(1000, '\n'));
  capture.write(Stream::kStderr, std::string(1000, '\x01'));
  EXPECT_EQ(capture.charactersFrom(Stream::kStdout, 0, 1u << 20), 2000u);
  EXPECT_EQ(capture.charactersFrom(Stream::kStderr, 10, 1u << 20), 5940u);
  EXPECT_EQ(capture.charactersFrom(Stream::kStdout, 0, 100), 101u) << "counted up to most + 1";
  const CapturedOutput out = capture.snapshot(Stream::kStdout, 0, 100);
  EXPECT_THAT(out.text, StartsWith(std::string(25, '\n') + "\n[... 950 bytes left out"));
  EXPECT_THAT(out.text, EndsWith("...]\n" + std::string(25, '\n')));
}

TEST(OutputWindowTest, SharesKeepBothStreamsTogetherWithinTheWindow) {
  EXPECT_EQ(windowShares(0, 1u << 20, 1u << 20), (std::pair<std::uint64_t, std::uint64_t>{0, 0}));
  const std::uint64_t content = 30'000 - 2 * kMarkerRoom;
  // Both fit: neither is cut.
  EXPECT_EQ(windowShares(30'000, 100, 200).first, content);
  // A short stderr is whole; stdout takes the rest.
  EXPECT_EQ(windowShares(30'000, 1u << 20, 500),
            (std::pair<std::uint64_t, std::uint64_t>{content - 500, 500}));
  // Both long: half each.
  const auto [out, err] = windowShares(30'000, 1u << 20, 1u << 20);
  EXPECT_EQ(out + err, content);
  EXPECT_EQ(out, err);
}

}  // namespace
}  // namespace scs::launcher
