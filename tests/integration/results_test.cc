// Issue 7 against the real engine and the default (scientific) image: charts out as image
// blocks, the scientific stack, structured exceptions, signals, live output, stdin, usage, an
// exact count under a 1 GB flood, and no symlink followed out of /workspace/out. Fails (never
// skips) when the engine or the image is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "integration/harness.h"
#include "support/base64.h"

namespace scs::integration {
namespace {

using namespace std::chrono_literals;
using Poco::JSON::Array;
using Poco::JSON::Object;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using scs::testing::base64Decode;

Object::Ptr argumentsOf(const std::string& run_id) {
  Object::Ptr arguments = new Object;
  arguments->set("run_id", run_id);
  return arguments;
}

class ResultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    problem_ = new std::string(engineProblem());
    if (!problem_->empty()) {
      return;
    }
    server_ = launchServer().release();
    runs_ = new std::map<std::string, std::string>;
    const auto start = [](const std::string& name, const std::string& code,
                          const std::string& stdin_text = "") {
      Object::Ptr arguments = startRunArguments({code, Limits{.timeout_seconds = 300}, nullptr});
      if (!stdin_text.empty()) {
        arguments->set("stdin", stdin_text);
      }
      (*runs_)[name] = text(callToolOk(*server_, "start_run", arguments), "run_id");
    };
    // The live run first, so that it runs while the others queue.
    start("live", "import time\nprint('early line')\ntime.sleep(120)\nprint('late line')\n");
    start("chart", R"PY(import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [4, 1, 9])
plt.title("issue 7")
plt.savefig("/workspace/out/plot.png")
print("saved")
)PY");
    start("imports", R"PY(import numpy, pandas, scipy, matplotlib
import numpy as np
data = np.ones(20_000_000)
total = 0.0
for _ in range(20):
    total += float(data.sum())
print("ok", matplotlib.get_backend().lower(), total)
)PY");
    start("exception",
          "def check(value):\n    raise ValueError('bad input ' + str(value))\n\n"
          "print('before')\ncheck(42)\n");
    start("sigsegv", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n");
    start("stdin", "import sys\ndata = sys.stdin.read()\nprint(len(data), data.upper())\n",
          "hello\nworld");
    start("flood", R"PY(import sys
open("/workspace/out/note.txt", "w").write("flooded")
out = sys.stdout.buffer
block = b"x" * (1 << 20)
for _ in range(1024):
    out.write(block)
)PY");
    start("symlink", R"PY(import os
os.symlink("/etc/passwd", "/workspace/out/passwd")
os.symlink("/etc", "/workspace/out/etc")
open("/workspace/out/ok.txt", "w").write("fine")
)PY");
  }

  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      server_->closeStdin();
      server_->waitExit(10s);
    }
    delete server_;
    delete runs_;
    delete problem_;
    server_ = nullptr;
    runs_ = nullptr;
    problem_ = nullptr;
  }

  void SetUp() override { ASSERT_TRUE(problem_->empty()) << *problem_; }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr) {
      std::cerr << "server log tail:\n" << tail(server_->stderrText()) << "\n";
    }
  }

  static const std::string& runId(const std::string& name) { return runs_->at(name); }

  // get_result's whole CallToolResult once the run is final.
  static Object::Ptr finalResult(const std::string& name) {
    awaitFinal(*server_, runId(name), 420s);
    return server_->callTool("get_result", argumentsOf(runId(name)));
  }

  static Object::Ptr report(const std::string& name) {
    return finalResult(name)->getObject("structuredContent");
  }

  static testing::McpProcess* server_;
  static std::map<std::string, std::string>* runs_;
  static std::string* problem_;
};

testing::McpProcess* ResultsTest::server_ = nullptr;
std::map<std::string, std::string>* ResultsTest::runs_ = nullptr;
std::string* ResultsTest::problem_ = nullptr;

TEST_F(ResultsTest, OutputPrintedEarlyIsVisibleBeforeTheRunEnds) {
  Object::Ptr live;
  const bool seen = eventually(
      [&] {
        live = snapshot(*server_, runId("live"));
        return live->has("stdout") && stream(live, "stdout") == "early line\n";
      },
      120s);
  ASSERT_TRUE(seen) << describe(live);
  EXPECT_EQ(text(live, "status"), "running");
  EXPECT_EQ(integer(live, "stdout_bytes"), 11);

  Object::Ptr arguments = argumentsOf(runId("live"));
  arguments->set("stdout_offset", 6);
  const Object::Ptr from_offset = callToolOk(*server_, "get_result", arguments);
  EXPECT_EQ(stream(from_offset, "stdout"), "line\n");
  EXPECT_EQ(integer(from_offset, "stdout_offset"), 6);

  const Object::Ptr stopped = callToolOk(*server_, "stop_run", argumentsOf(runId("live")));
  EXPECT_EQ(text(stopped, "status"), "stopped");
  EXPECT_EQ(stream(stopped, "stdout"), "early line\n");
}

TEST_F(ResultsTest, AMatplotlibChartComesBackAsAPngImageBlock) {
  const Object::Ptr result = finalResult("chart");
  const Object::Ptr structured = result->getObject("structuredContent");
  ASSERT_EQ(text(structured, "status"), "succeeded")
      << describe(structured) << "\nIs the scientific image built? Run docker/build-image.sh.";
  const Array::Ptr files = structured->getArray("files");
  ASSERT_TRUE(files) << describe(structured);
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ(files->getObject(0)->getValue<std::string>("path"), "plot.png");
  EXPECT_EQ(files->getObject(0)->getValue<std::string>("mime_type"), "image/png");

  const Array::Ptr content = result->getArray("content");
  ASSERT_EQ(content->size(), 2u);
  const Object::Ptr image = content->getObject(1);
  EXPECT_EQ(image->getValue<std::string>("type"), "image");
  EXPECT_EQ(image->getValue<std::string>("mimeType"), "image/png");
  const std::string png = base64Decode(image->getValue<std::string>("data"));
  EXPECT_THAT(png, StartsWith(std::string("\x89PNG\r\n\x1a\n", 8)));
  EXPECT_GT(png.size(), 1000u);
  EXPECT_EQ(static_cast<std::int64_t>(png.size()),
            files->getObject(0)->getValue<std::int64_t>("size"));
  // Once: the image block holds the bytes, the text block only the listing.
  const std::string text_block = content->getObject(0)->getValue<std::string>("text");
  EXPECT_LE(text_block.size(), 1000u) << text_block;
  EXPECT_EQ(fileContent(result, "plot.png"), png);
}

TEST_F(ResultsTest, TheScientificStackImportsAndUsageIsReported) {
  const Object::Ptr structured = report("imports");
  ASSERT_EQ(text(structured, "status"), "succeeded")
      << describe(structured) << "\nIs the scientific image built? Run docker/build-image.sh.";
  EXPECT_THAT(stream(structured, "stdout"), StartsWith("ok agg "));
  ASSERT_TRUE(structured->has("peak_memory_bytes")) << describe(structured);
  ASSERT_TRUE(structured->has("cpu_seconds")) << describe(structured);
  EXPECT_GT(integer(structured, "peak_memory_bytes"), 150'000'000);  // 20 M doubles
  EXPECT_GT(number(structured, "cpu_seconds"), 0.0);
}

TEST_F(ResultsTest, AnUncaughtValueErrorIsStructured) {
  const Object::Ptr structured = report("exception");
  EXPECT_EQ(text(structured, "status"), "failed") << describe(structured);
  EXPECT_EQ(integer(structured, "exit_code"), 1);
  EXPECT_EQ(stream(structured, "stdout"), "before\n");
  const Object::Ptr exception = structured->getObject("exception");
  ASSERT_TRUE(exception) << describe(structured);
  EXPECT_EQ(exception->getValue<std::string>("type"), "ValueError");
  EXPECT_EQ(exception->getValue<std::string>("message"), "bad input 42");
  // The traceback is stderr, where Python printed it, and not repeated in the exception.
  EXPECT_FALSE(exception->has("traceback"));
  const std::string stderr_text = stream(structured, "stderr");
  EXPECT_THAT(stderr_text, StartsWith("Traceback (most recent call last):\n"
                                      "  File \"/workspace/main.py\", line 5, in <module>\n"));
  EXPECT_THAT(stderr_text, HasSubstr("in check"));
  EXPECT_THAT(stderr_text, HasSubstr("ValueError: bad input 42"));
  EXPECT_THAT(stderr_text, Not(HasSubstr("runpy")));
  EXPECT_THAT(stderr_text, Not(HasSubstr("<string>")));
}

TEST_F(ResultsTest, ASegfaultStillEndsWithTheSignalNamed) {
  const Object::Ptr structured = report("sigsegv");
  EXPECT_EQ(text(structured, "status"), "failed") << describe(structured);
  EXPECT_EQ(absentOrNull(structured, "signal") ? "<none>" : text(structured, "signal"), "SIGSEGV")
      << describe(structured);
  EXPECT_FALSE(structured->has("exception"));
}

TEST_F(ResultsTest, StdinReachesTheProgram) {
  const Object::Ptr structured = report("stdin");
  EXPECT_EQ(text(structured, "status"), "succeeded") << describe(structured);
  EXPECT_EQ(stream(structured, "stdout"), "11 HELLO\nWORLD\n");
}

TEST_F(ResultsTest, AGigabyteFloodIsCountedExactlyWithoutTheTrailer) {
  const Object::Ptr result = finalResult("flood");
  const Object::Ptr structured = result->getObject("structuredContent");
  EXPECT_EQ(text(structured, "status"), "succeeded") << describe(structured);
  EXPECT_EQ(integer(structured, "stdout_bytes"), std::int64_t{1} << 30);
  EXPECT_TRUE(flag(structured, "stdout_truncated"));
  EXPECT_THAT(stream(structured, "stdout"), Not(HasSubstr("SCS-TRAILER")));
  EXPECT_EQ(stream(structured, "stdout").back(), 'x');
  const Array::Ptr files = structured->getArray("files");
  ASSERT_TRUE(files) << describe(structured);
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ(fileContent(result, files->getObject(0)->getValue<std::string>("path")), "flooded");
}

TEST_F(ResultsTest, ASymlinkInOutIsNotFollowed) {
  const Object::Ptr result = finalResult("symlink");
  const Object::Ptr structured = result->getObject("structuredContent");
  EXPECT_EQ(text(structured, "status"), "succeeded") << describe(structured);
  const Array::Ptr files = structured->getArray("files");
  ASSERT_TRUE(files) << describe(structured);
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ(files->getObject(0)->getValue<std::string>("path"), "ok.txt");
  std::ostringstream all;
  result->stringify(all);
  EXPECT_THAT(all.str(), Not(HasSubstr("root:x:0:0")));
  EXPECT_THAT(all.str(), Not(HasSubstr("cm9vdDp4OjA6")));  // "root:x:0:" in base64
}

}  // namespace
}  // namespace scs::integration
