#include "launcher/side_channel.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "policy/files.h"
#include "support/golden.h"

namespace scs::runs {
namespace {

using namespace std::string_literals;
using ::testing::HasSubstr;

const std::string kNonce = "0123456789abcdef0123456789abcdef";

launcher::RunResults parsedOk(const std::string& trailer, const launcher::OutFileCaps& caps = {}) {
  auto parsed = launcher::parseTrailer(trailer, caps);
  if (auto* problem = std::get_if<Error>(&parsed)) {
    ADD_FAILURE() << "parse failed: " << problem->message << "\n" << trailer;
    return {};
  }
  return std::get<launcher::RunResults>(parsed);
}

std::string parseProblem(const std::string& trailer) {
  auto parsed = launcher::parseTrailer(trailer, launcher::OutFileCaps{});
  if (!std::holds_alternative<Error>(parsed)) {
    ADD_FAILURE() << "parsed: " << trailer;
    return {};
  }
  return std::get<Error>(parsed).message;
}

std::string fileJson(const std::string& path, const std::string& base64) {
  return R"({"path":")" + path + R"(","size":1,"content_base64":")" + base64 + R"("})";
}

TEST(SideChannelTest, MarkerIsNewlineNulTagNonceNul) {
  EXPECT_EQ(launcher::trailerMarker(kNonce), "\n\0SCS-TRAILER-"s + kNonce + "\0"s);
}

TEST(SideChannelTest, ControlFilesCarryTheNonceTheCapsTheWatchdogAndStdin) {
  const launcher::OutFileCaps caps{3, 100, 200};
  const std::vector<policy::File> without = launcher::controlFiles(kNonce, caps, 70, std::nullopt);
  ASSERT_EQ(without.size(), 1u);
  EXPECT_EQ(without[0].path, ".scs/control.json");
  const auto control =
      Poco::JSON::Parser().parse(without[0].content).extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(control->getValue<std::string>("nonce"), kNonce);
  EXPECT_EQ(control->getValue<std::string>("out_dir"), "/workspace/out");
  EXPECT_EQ(control->getValue<int>("max_files"), 3);
  EXPECT_EQ(control->getValue<int>("max_file_bytes"), 100);
  EXPECT_EQ(control->getValue<int>("max_total_bytes"), 200);
  EXPECT_FALSE(control->getValue<bool>("stdin"));
  EXPECT_EQ(control->getValue<int>("watchdog_seconds"), 70);
  EXPECT_EQ(control->getValue<std::string>("language"), "python");
  const auto bash =
      Poco::JSON::Parser()
          .parse(launcher::controlFiles(kNonce, caps, 70, std::nullopt, policy::Language::kBash)[0]
                     .content)
          .extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(bash->getValue<std::string>("language"), "bash");

  const std::vector<policy::File> with = launcher::controlFiles(kNonce, caps, 70, "line\0two"s);
  ASSERT_EQ(with.size(), 2u);
  EXPECT_THAT(with[0].content, HasSubstr(R"("stdin":true)"));
  EXPECT_EQ(with[1].path, ".scs/stdin");
  EXPECT_EQ(with[1].content, "line\0two"s);
}

TEST(SideChannelTest, TrailerCapHoldsEveryFileAtItsCapInBase64) {
  const launcher::OutFileCaps caps{20, 8u << 20, 16u << 20};
  EXPECT_GE(launcher::trailerCapBytes(caps), (16u << 20) / 3 * 4 + 20 * 1024);
}

TEST(SideChannelTest, ParsesExceptionAndFiles) {
  const launcher::RunResults results = parsedOk(
      R"({"exception":{"type":"ValueError","message":"bad \u00e9","traceback":"Traceback ...\nValueError: bad"},)"
      R"("files":[{"path":"plot.png","size":3,"content_base64":"iVBO"},)"
      R"({"path":"sub/a.txt","size":5,"content_base64":"aGVsbG8="}],)"
      R"("files_truncated":false,"files_omitted":0})"
      "\n");
  ASSERT_TRUE(results.exception);
  EXPECT_EQ(results.exception->type, "ValueError");
  EXPECT_EQ(results.exception->message, "bad \xC3\xA9");
  EXPECT_EQ(results.exception->traceback, "Traceback ...\nValueError: bad");
  ASSERT_EQ(results.files.size(), 2u);
  EXPECT_EQ(results.files[0].path, "plot.png");
  EXPECT_EQ(results.files[0].content, "\x89PN");
  EXPECT_EQ(results.files[1].path, "sub/a.txt");
  EXPECT_EQ(results.files[1].content, "hello");
  EXPECT_FALSE(results.files_truncated);
  EXPECT_EQ(results.files_omitted, 0u);
}

TEST(SideChannelTest, NullExceptionAndNoFilesIsAnEmptyResult) {
  const launcher::RunResults results =
      parsedOk(R"({"exception":null,"files":[],"files_truncated":false})");
  EXPECT_FALSE(results.exception);
  EXPECT_TRUE(results.files.empty());
  EXPECT_FALSE(results.files_truncated);
}

TEST(SideChannelTest, TheWarmImportsSecondsAreReadAndOnlyADurationIs) {
  EXPECT_DOUBLE_EQ(*parsedOk(R"({"warm_seconds":0.8})").warm_seconds, 0.8);
  EXPECT_FALSE(parsedOk(R"({"warm_seconds":null})").warm_seconds);
  EXPECT_FALSE(parsedOk(R"({})").warm_seconds);
  for (const char* bad : {R"({"warm_seconds":-1})", R"({"warm_seconds":"1"})",
                          R"({"warm_seconds":true})", R"({"warm_seconds":1e9})"}) {
    EXPECT_THAT(parseProblem(bad), HasSubstr("warm_seconds")) << bad;
  }
}

TEST(SideChannelTest, TheLaunchersOwnTruncationIsKept) {
  const launcher::RunResults results =
      parsedOk(R"({"exception":null,"files":[],"files_truncated":true,"files_omitted":4})");
  EXPECT_TRUE(results.files_truncated);
  EXPECT_EQ(results.files_omitted, 4u);
}

TEST(SideChannelTest, ACountBeyondInt64IsStillACount) {
  EXPECT_EQ(parsedOk(R"({"files_omitted":9223372036854775808})").files_omitted,
            9223372036854775808u);
}

TEST(SideChannelTest, MalformedTrailersAreErrors) {
  EXPECT_THAT(parseProblem("not json"), HasSubstr("not JSON"));
  EXPECT_THAT(parseProblem("[1,2]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(parseProblem("{\"exception\":null}\n{}\n"), HasSubstr("more than one line"));
  EXPECT_THAT(parseProblem(R"({"exception":"boom"})"), HasSubstr("exception"));
  EXPECT_THAT(parseProblem(R"({"exception":{"type":"E","message":1,"traceback":""}})"),
              HasSubstr("exception"));
  EXPECT_THAT(parseProblem(R"({"files":{}})"), HasSubstr("files"));
  EXPECT_THAT(parseProblem(R"({"files":[{"path":"a"}]})"), HasSubstr("content_base64"));
  EXPECT_THAT(parseProblem(R"({"files":[)" + fileJson("a", "QUJD=") + "]}"),
              HasSubstr("not base64"));
  EXPECT_THAT(parseProblem(R"({"files_omitted":-1})"), HasSubstr("files_omitted"));
  EXPECT_THAT(parseProblem(R"({"files_omitted":true})"), HasSubstr("files_omitted"));
  EXPECT_THAT(parseProblem(R"({"files_omitted":false})"), HasSubstr("files_omitted"));
  EXPECT_THAT(parseProblem(R"({"files_omitted":-9223372036854775809})"),
              HasSubstr("files_omitted"));
  EXPECT_THAT(parseProblem(R"({"files_truncated":"yes"})"), HasSubstr("files_truncated"));
  // Cut short, as when the run was killed in the middle of the trailer.
  EXPECT_THAT(parseProblem(R"({"exception":null,"files":[{"path":"a","si)"), HasSubstr("not JSON"));
}

TEST(SideChannelTest, UnsafePathsAreLeftOutAndCounted) {
  const launcher::RunResults results =
      parsedOk(R"({"files":[)" + fileJson("/etc/passwd", "eA==") + "," + fileJson("../x", "eA==") +
               "," + fileJson("a//b", "eA==") + "," + fileJson("./a", "eA==") + "," +
               fileJson("", "eA==") + "," + fileJson("ok/name.txt", "eA==") + "]}");
  ASSERT_EQ(results.files.size(), 1u);
  EXPECT_EQ(results.files[0].path, "ok/name.txt");
  EXPECT_EQ(results.files_omitted, 5u);
  EXPECT_TRUE(results.files_truncated);
}

TEST(SideChannelTest, CapsOnCountSizeAndTotalAreEnforcedHereToo) {
  // "QUJD" is 3 bytes, "QUJDREVG" is 6.
  const std::string trailer = R"({"files":[)" + fileJson("a", "QUJD") + "," +
                              fileJson("big", "QUJDREVG") + "," + fileJson("b", "QUJD") + "," +
                              fileJson("c", "QUJD") + "]}";
  const launcher::RunResults by_size = parsedOk(trailer, launcher::OutFileCaps{10, 5, 100});
  ASSERT_EQ(by_size.files.size(), 3u);
  EXPECT_EQ(by_size.files_omitted, 1u);
  EXPECT_TRUE(by_size.files_truncated);

  const launcher::RunResults by_count = parsedOk(trailer, launcher::OutFileCaps{2, 100, 100});
  ASSERT_EQ(by_count.files.size(), 2u);
  EXPECT_EQ(by_count.files[1].path, "big");
  EXPECT_EQ(by_count.files_omitted, 2u);

  // A file that does not fit is left out; a later, smaller one may still fit.
  const launcher::RunResults by_total = parsedOk(trailer, launcher::OutFileCaps{10, 100, 7});
  ASSERT_EQ(by_total.files.size(), 2u);
  EXPECT_EQ(by_total.files[1].path, "b");
  EXPECT_EQ(by_total.files_omitted, 2u);
}

TEST(SideChannelTest, LongExceptionFieldsAreCapped) {
  const std::string long_text(20000, 'x');
  const launcher::RunResults results =
      parsedOk(R"({"exception":{"type":")" + long_text + R"(","message":")" + long_text +
               R"(","traceback":")" + long_text + "END\"}}");
  ASSERT_TRUE(results.exception);
  EXPECT_LE(results.exception->type.size(), 300u);
  EXPECT_LE(results.exception->message.size(), 8u * 1024 + 3);
  EXPECT_LE(results.exception->traceback.size(), 8u * 1024 + 6);
  EXPECT_THAT(results.exception->traceback, ::testing::EndsWith("xxEND"));
}

TEST(SideChannelTest, MimeTypesComeFromTheBytesForImagesAndTheNameOtherwise) {
  struct Case {
    const char* name;
    std::string bytes;
    const char* mime;
  };
  for (const Case& c :
       std::vector<Case>{{"plot.png", "\x89PNG\r\n\x1a\nrest", "image/png"},
                         {"no_extension", "\x89PNG\r\n\x1a\nrest", "image/png"},
                         {"fake.png", "hello", "application/octet-stream"},
                         {"a.jpg", "\xFF\xD8\xFF\xE0", "image/jpeg"},
                         {"a.gif", "GIF89a...", "image/gif"},
                         {"chart.SVG", "<?xml version=\"1.0\"?><svg></svg>", "image/svg+xml"},
                         {"chart.svg", "not an image", "application/octet-stream"},
                         {"data.csv", "a,b\n1,2\n", "text/csv"},
                         {"notes.txt", "hi", "text/plain"},
                         {"r.json", "{}", "application/json"},
                         {"doc.pdf", "%PDF-1.7", "application/pdf"},
                         {"blob", "\x01\x02", "application/octet-stream"}}) {
    EXPECT_EQ(launcher::mimeTypeOf(c.name, c.bytes), c.mime) << c.name;
  }

  EXPECT_TRUE(launcher::isDisplayableImage("image/png", "\x89PNG\r\n\x1a\n"));
  EXPECT_FALSE(launcher::isDisplayableImage("image/png", "GIF89a"));
  // The program wrote it: an SVG can carry <script> and onload=, so it is a file, not an image.
  EXPECT_FALSE(launcher::isDisplayableImage("image/svg+xml", "<svg onload=\"alert(1)\"/>"));
  EXPECT_TRUE(
      launcher::isDisplayableImage("image/webp", std::string("RIFF\x10\0\0\0WEBPVP8 ", 16)));
  EXPECT_EQ(launcher::mimeTypeOf("x.bin", std::string("RIFF\x10\0\0\0WEBPVP8 ", 16)), "image/webp");
  EXPECT_FALSE(launcher::isDisplayableImage("application/pdf", "%PDF-1.7"));
  EXPECT_FALSE(launcher::isDisplayableImage("text/plain", "hi"));
}

// tests/golden/trailers.json: what PID 1 writes (tests/launcher/test_report.py holds report.py
// to each `stdout` byte for byte) is what the server reads, field by field.
TEST(SideChannelTest, TheGoldenTrailersReadAsPid1MeantThem) {
  const auto golden = testing::readGolden("trailers.json");
  ASSERT_TRUE(golden) << "tests/golden/trailers.json";
  const auto cases = golden->getArray("cases");
  ASSERT_GE(cases->size(), 4u);
  for (std::size_t i = 0; i < cases->size(); ++i) {
    const auto one = cases->getObject(static_cast<unsigned>(i));
    const std::string name = one->getValue<std::string>("name");
    const auto read = one->getObject("read");
    const launcher::RunResults got =
        parsedOk(testing::goldenBytes(one->getValue<std::string>("stdout")));
    const auto exit = read->getObject("exit");
    ASSERT_TRUE(got.exit.has_value()) << name;
    EXPECT_EQ(got.exit->code,
              exit->has("code") ? std::optional<int>(exit->getValue<int>("code")) : std::nullopt)
        << name;
    EXPECT_EQ(got.exit->signal, exit->has("signal")
                                    ? std::optional<int>(exit->getValue<int>("signal"))
                                    : std::nullopt)
        << name;
    if (read->isNull("exception")) {
      EXPECT_FALSE(got.exception.has_value()) << name;
    } else {
      const auto exception = read->getObject("exception");
      ASSERT_TRUE(got.exception.has_value()) << name;
      EXPECT_EQ(got.exception->type, exception->getValue<std::string>("type")) << name;
      EXPECT_EQ(got.exception->message, exception->getValue<std::string>("message")) << name;
      EXPECT_EQ(got.exception->traceback, exception->getValue<std::string>("traceback")) << name;
    }
    const auto files = read->getArray("files");
    ASSERT_EQ(got.files.size(), files->size()) << name;
    for (std::size_t f = 0; f < files->size(); ++f) {
      const auto expected = files->getObject(static_cast<unsigned>(f));
      EXPECT_EQ(got.files[f].path, expected->getValue<std::string>("path")) << name;
      EXPECT_EQ(got.files[f].content,
                testing::goldenBytes(expected->getValue<std::string>("content")))
          << name;
    }
    EXPECT_EQ(got.files_truncated, read->getValue<bool>("files_truncated")) << name;
    EXPECT_EQ(got.files_omitted, read->getValue<std::uint64_t>("files_omitted")) << name;
    const auto text = [&](const std::string& key) {
      return read->has(key) ? std::optional<std::string>(read->getValue<std::string>(key))
                            : std::nullopt;
    };
    EXPECT_EQ(got.result, text("result")) << name;
    EXPECT_EQ(got.refused, text("refused")) << name;
    EXPECT_EQ(got.launcher_error, text("launcher_error")) << name;
    EXPECT_EQ(got.session_over, read->optValue<bool>("session_over", false)) << name;
    EXPECT_EQ(got.warm_seconds, read->has("warm_seconds")
                                    ? std::optional<double>(read->getValue<double>("warm_seconds"))
                                    : std::nullopt)
        << name;
  }
}

// The files of a run whose one file, at `path`, holds "{}".
Result<std::vector<policy::File>> resolveOneFile(const std::string& path) {
  Poco::JSON::Array::Ptr files = new Poco::JSON::Array;
  Poco::JSON::Object::Ptr file = new Poco::JSON::Object;
  file->set("path", path);
  file->set("content", "{}");
  files->add(file);
  return policy::resolveFiles("print(1)", files, policy::FileSettings{});
}

TEST(ReservedControlPathTest, FilesUnderDotScsAreRefused) {
  for (const std::string path : {".scs/control.json", ".scs", "./.scs/stdin", ".scs/x/y"}) {
    const auto resolved = resolveOneFile(path);
    ASSERT_TRUE(std::holds_alternative<Error>(resolved)) << path;
    EXPECT_THAT(std::get<Error>(resolved).message, HasSubstr("\".scs\"")) << path;
  }
  for (const std::string path : {".scsx/a", "a/.scs/b", "scs/control.json"}) {
    EXPECT_TRUE(std::holds_alternative<std::vector<policy::File>>(resolveOneFile(path))) << path;
  }
}

}  // namespace
}  // namespace scs::runs
