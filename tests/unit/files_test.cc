#include "policy/files.h"

#include <Poco/Dynamic/Struct.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "policy/language.h"

namespace scs::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Poco::Dynamic::Var parse(const std::string& text) { return Poco::JSON::Parser().parse(text); }

std::vector<File> accepted(const std::string& files_json, const FileSettings& settings = {},
                           const std::string& code = "print(1)\n") {
  auto result = resolveFiles(code, parse(files_json), settings);
  if (const auto* rejected = std::get_if<Error>(&result)) {
    ADD_FAILURE() << rejected->message;
    return {};
  }
  return std::get<std::vector<File>>(result);
}

std::string rejectionOf(const Poco::Dynamic::Var& files, const FileSettings& settings = {},
                        const std::string& code = "print(1)\n") {
  auto result = resolveFiles(code, files, settings);
  if (const auto* rejected = std::get_if<Error>(&result)) {
    return rejected->message;
  }
  ADD_FAILURE() << "accepted";
  return {};
}

std::string rejection(const std::string& files_json) { return rejectionOf(parse(files_json)); }

// `[{"path": <path>, "content": "x"}]`, the path given as JSON text.
std::string onePath(const std::string& path_json) {
  return R"([{"path": )" + path_json + R"(, "content": "x"}])";
}

std::vector<std::string> paths(const std::vector<File>& files) {
  std::vector<std::string> result;
  for (const File& file : files) {
    result.push_back(file.path);
  }
  return result;
}

TEST(ResolveFilesTest, NoFilesMeansJustMainPy) {
  const std::string code = "print('hi')\n";
  for (const Poco::Dynamic::Var& files : {Poco::Dynamic::Var(), parse("[]")}) {
    auto result = resolveFiles(code, files, FileSettings{});
    ASSERT_TRUE(std::holds_alternative<std::vector<File>>(result));
    const auto& resolved = std::get<std::vector<File>>(result);
    ASSERT_EQ(resolved.size(), 1u);
    EXPECT_EQ(resolved[0].path, "main.py");
    EXPECT_EQ(resolved[0].content, code);
  }
}

TEST(ResolveFilesTest, FilesFollowMainPyInOrderAndDecoded) {
  const auto files = accepted(R"([
    {"path": "data/input.csv", "content": "a,b\n1,2\n"},
    {"path": "lib/util.py", "content": "X = 1\n", "encoding": "utf-8"},
    {"path": "blob.bin", "content": "AAEC/w==", "encoding": "base64"},
    {"path": "empty.txt", "content": ""},
    {"path": "unicode/\u00e9t\u00e9.txt", "content": "\u00e9"}
  ])");
  ASSERT_EQ(files.size(), 6u);
  EXPECT_THAT(paths(files), ElementsAre("main.py", "data/input.csv", "lib/util.py", "blob.bin",
                                        "empty.txt", "unicode/\xc3\xa9t\xc3\xa9.txt"));
  EXPECT_EQ(files[1].content, "a,b\n1,2\n");
  EXPECT_EQ(files[3].content, std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(files[4].content, "");
}

TEST(ResolveFilesTest, PathsAreNormalised) {
  EXPECT_THAT(paths(accepted(onePath(R"("./a//b/./c.txt")"))), ElementsAre("main.py", "a/b/c.txt"));
  EXPECT_THAT(paths(accepted(onePath(R"(".//x")"))), ElementsAre("main.py", "x"));
  EXPECT_THAT(paths(accepted(onePath(R"("...")"))), ElementsAre("main.py", "..."));
  EXPECT_THAT(paths(accepted(onePath(R"("a/..b/c..")"))), ElementsAre("main.py", "a/..b/c.."));
}

TEST(ResolveFilesTest, DynamicArraysAndStructsAreAccepted) {
  Poco::DynamicStruct file;
  file["path"] = "x.txt";
  file["content"] = "y";
  const Poco::Dynamic::Array files{file};
  auto result = resolveFiles("", files, FileSettings{});
  ASSERT_TRUE(std::holds_alternative<std::vector<File>>(result));
  EXPECT_THAT(paths(std::get<std::vector<File>>(result)), ElementsAre("main.py", "x.txt"));
}

TEST(ResolveFilesTest, ShapeErrorsNameTheIndexAndTheFix) {
  EXPECT_EQ(rejection(R"({"path": "a"})"),
            R"(files must be an array of {path, content, encoding?} objects, got {"path":"a"})");
  EXPECT_EQ(
      rejectionOf(parse(R"({"files": "a.txt"})").extract<Poco::JSON::Object::Ptr>()->get("files")),
      R"(files must be an array of {path, content, encoding?} objects, got "a.txt")");
  EXPECT_EQ(rejection(R"([{"path": "a", "content": ""}, "b.txt"])"),
            R"(files[1] must be an object with path, content and optional encoding, got "b.txt")");
  EXPECT_EQ(rejection(R"([{"path": "a", "content": "", "mode": 493}])"),
            R"(files[0] has unknown key "mode"; allowed keys are path, content, encoding)");
  EXPECT_EQ(rejection(R"([{"content": "x"}])"), "files[0].path is missing");
  EXPECT_EQ(rejection(R"([{"path": "a"}])"), "files[0].content is missing");
  EXPECT_EQ(rejection(R"([{"path": 5, "content": "x"}])"), "files[0].path must be a string, got 5");
  EXPECT_EQ(rejection(R"([{"path": "a", "content": null}])"),
            "files[0].content must be a string, got null");
  EXPECT_EQ(rejection(R"([{"path": "a", "content": ["x"]}])"),
            R"(files[0].content must be a string, got ["x"])");
  EXPECT_EQ(rejection(R"([{"path": "a", "content": "x", "encoding": "hex"}])"),
            R"(files[0].encoding must be "utf-8" or "base64", got "hex")");
  EXPECT_EQ(rejection(R"([{"path": "a", "content": "x", "encoding": "UTF-8"}])"),
            R"(files[0].encoding must be "utf-8" or "base64", got "UTF-8")");
  EXPECT_EQ(rejection(R"([{"path": "a", "content": "x", "encoding": true}])"),
            "files[0].encoding must be a string, got true");
}

TEST(ResolveFilesTest, BadPathsAreRejectedWithTheIndex) {
  EXPECT_EQ(rejection(R"([{"path": "a", "content": ""}, {"path": "b", "content": ""},
                          {"path": "/etc/passwd", "content": ""}])"),
            R"(files[2].path must be relative, got "/etc/passwd")");
  EXPECT_EQ(rejection(onePath(R"("")")), "files[0].path must not be empty");
  EXPECT_EQ(rejection(onePath(R"("a\u0000b")")),
            R"(files[0].path must not contain a NUL byte, got "a\u0000b")");
  EXPECT_EQ(
      rejection(onePath(R"("dir\\file.py")")),
      R"(files[0].path must separate directories with "/", not a backslash, got "dir\\file.py")");
  EXPECT_EQ(rejection(onePath(R"("a\nb")")),
            R"(files[0].path must not contain control characters, got "a\nb")");
  EXPECT_THAT(rejection(onePath(R"("a\u007fb")")),
              HasSubstr("must not contain control characters"));
  EXPECT_THAT(rejection(onePath(R"("\t")")), HasSubstr("must not contain control characters"));
}

TEST(ResolveFilesTest, DotDotIsRejectedAnywhere) {
  for (const char* path :
       {R"("..")", R"("../x")", R"("a/../b")", R"("a/..")", R"("./../x")", R"("a//..//b")"}) {
    EXPECT_THAT(rejection(onePath(path)), HasSubstr(R"(files[0].path must not contain "..", got )"))
        << path;
  }
}

TEST(ResolveFilesTest, APathMustNameAFile) {
  for (const char* path : {R"("a/")", R"("a/b//")", R"("a/.")", R"(".")", R"("./")", R"("/")"}) {
    const std::string message = rejection(onePath(path));
    EXPECT_THAT(message, ::testing::AnyOf(HasSubstr(R"(must name a file, not end with "/" or ".")"),
                                          HasSubstr("must be relative")))
        << path;
  }
  EXPECT_EQ(rejection(onePath(R"("a/")")),
            R"(files[0].path must name a file, not end with "/" or ".", got "a/")");
}

TEST(ResolveFilesTest, LengthCaps) {
  EXPECT_THAT(rejection(onePath('"' + std::string(256, 'c') + '"')),
              HasSubstr("files[0].path has a component of 256 bytes, max is 255 bytes"));
  FileSettings settings;
  settings.max_path_bytes = 20;
  EXPECT_THAT(rejectionOf(parse(onePath(R"("./dir/../x")")), settings), HasSubstr(".."));
  EXPECT_THAT(rejectionOf(parse(onePath(R"("abcdefghij/klmnopqrst")")), settings),
              HasSubstr("files[0].path is 21 bytes long, max is 20 bytes"));
  // The cap applies to the normalised path.
  EXPECT_THAT(paths(accepted(onePath(R"("./abcdefghij//klmnopqrs")"), settings)),
              ElementsAre("main.py", "abcdefghij/klmnopqrs"));
}

TEST(ResolveFilesTest, PathsMustFitATarHeader) {
  const std::string name100(100, 'n');
  EXPECT_THAT(paths(accepted(onePath('"' + name100 + '"'))), ElementsAre("main.py", name100));
  const std::string path200 = std::string(99, 'd') + "/" + name100;
  EXPECT_THAT(paths(accepted(onePath('"' + path200 + '"'))), ElementsAre("main.py", path200));
  EXPECT_THAT(rejection(onePath('"' + name100 + "n\"")),
              HasSubstr("files[0].path does not fit a tar header: a name must be at most 100 "
                        "bytes after its last \"/\" and 155 bytes before it"));
  // A directory's own entry must fit too: "<150 bytes>/" has no '/' to split at.
  EXPECT_THAT(rejection(onePath('"' + std::string(150, 'd') + "/f\"")),
              HasSubstr("does not fit a tar header"));
  EXPECT_THAT(rejection(onePath('"' + std::string(156, 'd') + "/f\"")),
              HasSubstr("does not fit a tar header"));
}

TEST(ResolveFilesTest, MainPyIsReserved) {
  for (const char* path : {R"("main.py")", R"("./main.py")", R"("main.py/x")"}) {
    EXPECT_THAT(rejection(onePath(path)),
                HasSubstr(R"(files[0].path must not use "main.py", which holds the code argument)"))
        << path;
  }
  EXPECT_THAT(paths(accepted(onePath(R"("sub/main.py")"))), ElementsAre("main.py", "sub/main.py"));
}

// The code goes in its language's file, and only that name is reserved.
TEST(ResolveFilesTest, TheCodeFileIsTheLanguagesAndOnlyItIsReserved) {
  const auto files = parse(R"([{"path": "main.py", "content": "x"}])");
  const auto bash = resolveFiles("echo 1", files, FileSettings{}, codeFileOf(Language::kBash));
  ASSERT_TRUE(std::holds_alternative<std::vector<File>>(bash));
  EXPECT_THAT(paths(std::get<std::vector<File>>(bash)), ElementsAre("main.sh", "main.py"));
  const auto reserved = resolveFiles("1", parse(R"([{"path": "./main.js", "content": "x"}])"),
                                     FileSettings{}, codeFileOf(Language::kJavascript));
  ASSERT_TRUE(std::holds_alternative<Error>(reserved));
  EXPECT_THAT(std::get<Error>(reserved).message,
              HasSubstr(R"(must not use "main.js", which holds the code argument)"));
  EXPECT_EQ(languageNamed("javascript"), Language::kJavascript);
  EXPECT_EQ(languageNamed("Python"), std::nullopt);
  EXPECT_EQ(languageNames(), "python, bash or javascript");
}

TEST(ResolveFilesTest, DuplicatesAndFileDirectoryClashesAreRejected) {
  EXPECT_EQ(rejection(R"([{"path": "a.txt", "content": ""}, {"path": "./a.txt", "content": ""}])"),
            R"(files[1].path "a.txt" duplicates files[0].path)");
  EXPECT_EQ(rejection(R"([{"path": "a/b.py", "content": ""}, {"path": "a", "content": ""}])"),
            R"(files[1].path "a" names a file, but files[0].path uses it as a directory)");
  EXPECT_EQ(
      rejection(R"([{"path": "a", "content": ""}, {"path": "x", "content": ""},
                          {"path": "a/b/c.py", "content": ""}])"),
      R"(files[2].path "a/b/c.py" uses "a" as a directory, but files[0].path names it as a file)");
  EXPECT_THAT(paths(accepted(R"([{"path": "a/b", "content": ""}, {"path": "a/c", "content": ""},
                                 {"path": "ab", "content": ""}])")),
              ElementsAre("main.py", "a/b", "a/c", "ab"));
}

TEST(ResolveFilesTest, Base64IsDecodedStrictly) {
  const auto base64 = [](const std::string& content) {
    return R"([{"path": "f", "content": ")" + content + R"(", "encoding": "base64"}])";
  };
  EXPECT_EQ(accepted(base64("QUJD"))[1].content, "ABC");
  EXPECT_EQ(accepted(base64("QUI="))[1].content, "AB");
  EXPECT_EQ(accepted(base64("QQ=="))[1].content, "A");
  EXPECT_EQ(accepted(base64(""))[1].content, "");
  for (const char* bad : {"QUJD====", "QQ", "QUJ", "Q", "QQ=", "QU JD", "QU\\nJD", "QU*D", "QU-_",
                          "QQ=x", "Q===", "=QQQ", "QQ==QQ=="}) {
    EXPECT_EQ(rejection(base64(bad)),
              "files[0].content is not valid base64: use the standard alphabet (A-Z, a-z, 0-9, +, "
              "/), padded with \"=\" to a multiple of 4 characters, without whitespace")
        << bad;
  }
}

TEST(ResolveFilesTest, CountCap) {
  const auto many = [](int count) {
    std::string json = "[";
    for (int i = 0; i < count; ++i) {
      json +=
          std::string(i ? "," : "") + R"({"path": "f)" + std::to_string(i) + R"(", "content": ""})";
    }
    return json + "]";
  };
  EXPECT_EQ(accepted(many(100)).size(), 101u);
  EXPECT_EQ(rejection(many(101)), "Too many files: 101, max is 100");
  FileSettings settings;
  settings.max_files = 0;
  EXPECT_EQ(rejectionOf(parse(many(1)), settings), "Too many files: 1, max is 0");
}

TEST(ResolveFilesTest, TotalSizeCapCountsCodeAndDecodedBytes) {
  const std::string code(1 << 20, '#');
  const std::string big(10 << 20, 'x');
  EXPECT_EQ(
      rejectionOf(parse(R"([{"path": "big", "content": ")" + big + R"("}])"), FileSettings{}, code),
      "Files too large: 11534336 bytes in total, max is 10485760 bytes");

  FileSettings settings;
  settings.max_total_bytes = 10;
  EXPECT_EQ(accepted(R"([{"path": "f", "content": "12345"}])", settings, "12345").size(), 2u);
  EXPECT_EQ(rejectionOf(parse(R"([{"path": "f", "content": "123456"}])"), settings, "12345"),
            "Files too large: 11 bytes in total, max is 10 bytes");
  EXPECT_EQ(rejectionOf(Poco::Dynamic::Var(), settings, std::string(11, 'x')),
            "Files too large: 11 bytes in total, max is 10 bytes");
  // 12 base64 characters decode to 9 bytes: the decoded size is what counts.
  EXPECT_EQ(accepted(R"([{"path": "f", "content": "QUJDREVGR0hJ", "encoding": "base64"}])",
                     settings, "1")[1]
                .content,
            "ABCDEFGHI");
}

TEST(ResolveFilesTest, HugeValuesMakeShortMessages) {
  const std::string message = rejection(onePath("\"/" + std::string(1 << 16, 'x') + "\""));
  EXPECT_THAT(message, HasSubstr("files[0].path must be relative, got \"/xxx"));
  EXPECT_LT(message.size(), 250u);
}

class ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "scs_archive_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& archive) {
    const std::string path = (dir_ / "bundle.tar").string();
    std::ofstream(path, std::ios::binary) << archive;
    return path;
  }

  // Runs `command`, returning its stdout; fails the test on a non-zero exit.
  static std::string run(const std::string& command) {
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen " << command;
      return {};
    }
    std::string output;
    char buffer[4096];
    for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
      output.append(buffer, n);
    }
    const int status = pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command << "\n" << output;
    return output;
  }

  // The lines of `text`, runs of spaces squeezed to one (tar aligns its columns).
  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> result;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      line.erase(std::unique(line.begin(), line.end(),
                             [](char a, char b) { return a == ' ' && b == ' '; }),
                 line.end());
      result.push_back(line);
    }
    return result;
  }

  static std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  std::filesystem::path dir_;
};

const std::string kLongDir(99, 'd');
const std::string kLongName(100, 'n');

std::vector<File> sampleFiles() {
  return {{"main.py", "print('hi')\n"},
          {"pkg/sub/mod.py", "X = 1\n"},
          {"pkg/data.bin", std::string("\x00\x01\x00\xff\x7f\x00", 6)},
          {"pkg/sub/two.txt", std::string(1000, 'z')},
          {kLongDir + "/" + kLongName, "long path\n"},
          {"empty", ""}};
}

TEST_F(ArchiveTest, BlocksChecksumsAndTrailer) {
  const std::string archive = buildArchive(sampleFiles(), 10001, 10001);
  ASSERT_EQ(archive.size() % 512, 0u);
  EXPECT_EQ(archive.substr(archive.size() - 1024), std::string(1024, '\0'));
  // The first header: main.py, checksum over the header with its own field read as spaces.
  std::string header = archive.substr(0, 512);
  EXPECT_EQ(header.substr(0, 8), std::string("main.py\0", 8));
  EXPECT_EQ(header.substr(257, 8), std::string("ustar\0"
                                               "00",
                                               8));
  const unsigned stored = std::stoul(header.substr(148, 6), nullptr, 8);
  header.replace(148, 8, 8, ' ');
  unsigned sum = 0;
  for (const char byte : header) {
    sum += static_cast<unsigned char>(byte);
  }
  EXPECT_EQ(stored, sum);
  EXPECT_EQ(buildArchive({}, 1, 1), std::string(1024, '\0'));
}

TEST_F(ArchiveTest, TarListsEntriesWithOwnerModesAndDirectoriesFirst) {
  const std::string path = write(buildArchive(sampleFiles(), 10001, 10001));
  EXPECT_THAT(
      lines(run("TZ=UTC tar --numeric-owner -tvf " + path)),
      ElementsAre("-rw-r--r-- 10001/10001 12 1970-01-01 00:00 main.py",
                  "drwxr-xr-x 10001/10001 0 1970-01-01 00:00 pkg/",
                  "drwxr-xr-x 10001/10001 0 1970-01-01 00:00 pkg/sub/",
                  "-rw-r--r-- 10001/10001 6 1970-01-01 00:00 pkg/sub/mod.py",
                  "-rw-r--r-- 10001/10001 6 1970-01-01 00:00 pkg/data.bin",
                  "-rw-r--r-- 10001/10001 1000 1970-01-01 00:00 pkg/sub/two.txt",
                  "drwxr-xr-x 10001/10001 0 1970-01-01 00:00 " + kLongDir + "/",
                  "-rw-r--r-- 10001/10001 10 1970-01-01 00:00 " + kLongDir + "/" + kLongName,
                  "-rw-r--r-- 10001/10001 0 1970-01-01 00:00 empty"));
  EXPECT_THAT(lines(run("TZ=UTC tar -tvf " + path))[0], HasSubstr(" sandbox/sandbox "));
}

TEST_F(ArchiveTest, TarExtractsTheExactBytes) {
  const std::vector<File> files = sampleFiles();
  const std::string path = write(buildArchive(files, 10001, 10001));
  const std::filesystem::path out = dir_ / "out";
  std::filesystem::create_directory(out);
  run("tar -xf " + path + " -C " + out.string());
  for (const File& file : files) {
    EXPECT_EQ(readFile(out / file.path), file.content) << file.path;
  }
  std::size_t regular = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(out)) {
    regular += entry.is_regular_file() ? 1 : 0;
  }
  EXPECT_EQ(regular, files.size());
}

TEST_F(ArchiveTest, PythonTarfileReadsItAsUstar) {
  const std::string path = write(buildArchive(sampleFiles(), 10001, 10002));
  const std::string script =
      "import sys, tarfile\n"
      "t = tarfile.open(sys.argv[1], format=tarfile.USTAR_FORMAT)\n"
      "for m in t:\n"
      "    print(m.name, m.type.decode(), oct(m.mode), m.uid, m.gid, m.uname, m.mtime)\n";
  const auto listed = lines(run("python3 -c \"" + script + "\" " + path));
  ASSERT_EQ(listed.size(), 9u);
  EXPECT_EQ(listed[0], "main.py 0 0o644 10001 10002 sandbox 0");
  EXPECT_EQ(listed[1], "pkg 5 0o755 10001 10002 sandbox 0");
  EXPECT_EQ(listed[7], kLongDir + "/" + kLongName + " 0 0o644 10001 10002 sandbox 0");
}

TEST_F(ArchiveTest, ValidatedFilesRoundTrip) {
  auto result = resolveFiles("print(open('a/b.txt').read())\n",
                             parse(R"([{"path": "./a//b.txt", "content": "hello"},
                {"path": "a/c/d.bin", "content": "AP8A", "encoding": "base64"}])"),
                             FileSettings{});
  ASSERT_TRUE(std::holds_alternative<std::vector<File>>(result));
  const std::string path = write(buildArchive(std::get<std::vector<File>>(result), 10001, 10001));
  EXPECT_THAT(lines(run("tar -tf " + path)),
              ElementsAre("main.py", "a/", "a/b.txt", "a/c/", "a/c/d.bin"));
  const std::filesystem::path out = dir_ / "out";
  std::filesystem::create_directory(out);
  run("tar -xf " + path + " -C " + out.string());
  EXPECT_EQ(readFile(out / "a/c/d.bin"), std::string("\x00\xff\x00", 3));
}

}  // namespace
}  // namespace scs::policy
