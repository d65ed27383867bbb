#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/ParseHandler.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/side_channel.h"
#include "mcp/tools.h"
#include "mocks/core_stack.h"
#include "support/base64.h"
#include "support/json.h"
#include "support/json_schema.h"
#include "support/ustar.h"

namespace scs::mcp {
namespace {

using namespace std::chrono_literals;
using Poco::JSON::Array;
using Poco::JSON::Object;
using scs::testing::compact;
using scs::testing::parseOrdered;
using ::testing::HasSubstr;
using ::testing::Not;

// PNG signature, then bytes that are not UTF-8.
const std::string kPngBytes = std::string("\x89PNG\r\n\x1a\n\x00\x01\xFE", 11);
const std::string kPngBase64 = "iVBORw0KGgoAAf4=";

using scs::testing::base64Decode;

class ResultsToolsTest : public ::testing::Test {
 protected:
  ResultsToolsTest() : tools_(core_.runs, core_.limits, files_, std::chrono::seconds(3600)) {}

  static policy::FileSettings fileSettings() {
    policy::FileSettings files;
    files.max_stdin_bytes = 16;
    return files;
  }

  Object::Ptr call(const std::string& name, const std::string& arguments) {
    return tools_.call(name, parseOrdered(arguments));
  }

  Object::Ptr toolDefinition(const std::string& name) {
    const Array::Ptr tools = tools_.definitions();
    for (std::size_t i = 0; i < tools->size(); ++i) {
      if (tools->getObject(i)->getValue<std::string>("name") == name) {
        return tools->getObject(i);
      }
    }
    ADD_FAILURE() << "no tool " << name;
    return new Object;
  }

  // A successful result's structuredContent, checked against the output schema and the text.
  Object::Ptr structured(const std::string& tool, const Object::Ptr& result) {
    EXPECT_FALSE(result->getValue<bool>("isError")) << compact(result);
    const Object::Ptr content = result->getObject("structuredContent");
    if (!content) {
      ADD_FAILURE() << compact(result);
      return new Object;
    }
    const Object::Ptr text = result->getArray("content")->getObject(0);
    EXPECT_EQ(text->getValue<std::string>("type"), "text");
    EXPECT_EQ(compact(parseOrdered(text->getValue<std::string>("text"))), compact(content));
    EXPECT_THAT(scs::testing::schemaViolations(
                    content, toolDefinition(tool)->getObject("outputSchema"), "structuredContent"),
                ::testing::IsEmpty());
    return content;
  }

  std::string errorText(const Object::Ptr& result) {
    EXPECT_TRUE(result->getValue<bool>("isError")) << compact(result);
    return result->getArray("content")->getObject(0)->getValue<std::string>("text");
  }

  std::string start(const std::string& arguments) {
    return structured("start_run", call("start_run", arguments))->getValue<std::string>("run_id");
  }

  Object::Ptr finalResult(const std::string& run_id) {
    return call("get_result", R"({"run_id":")" + run_id + R"(","wait_seconds":20})");
  }

  // The archive the fake backend was last given.
  std::map<std::string, std::string> lastMembers() {
    const auto sandboxes = core_.backend.sandboxes();
    return sandboxes.empty() ? std::map<std::string, std::string>()
                             : scs::testing::ustarFiles(sandboxes.back().archive);
  }

  policy::FileSettings files_ = fileSettings();
  mocks::CoreStack core_;
  Tools tools_;
};

TEST_F(ResultsToolsTest, AnUncaughtExceptionIsReportedAndTheTrailerIsNotOutput) {
  const std::string id =
      start(R"({"code":"#fake:stdout=before\\n\n#fake:exception=ValueError:bad\\svalue"})");
  const Object::Ptr result = finalResult(id);
  const Object::Ptr report = structured("get_result", result);
  EXPECT_EQ(report->getValue<std::string>("status"), "failed");
  EXPECT_EQ(report->getValue<int>("exit_code"), 1);
  EXPECT_EQ(report->getValue<std::string>("stdout"), "before\n");
  EXPECT_FALSE(report->has("stdout_bytes"));  // the whole stream: its count says nothing more
  const Object::Ptr exception = report->getObject("exception");
  ASSERT_TRUE(exception) << compact(report);
  EXPECT_EQ(exception->getValue<std::string>("type"), "ValueError");
  EXPECT_EQ(exception->getValue<std::string>("message"), "bad value");
  // The traceback is on stderr, where Python printed it; the report does not repeat it unless
  // asked for every field.
  EXPECT_THAT(report->getValue<std::string>("stderr"), HasSubstr("ValueError: bad value"));
  EXPECT_FALSE(exception->has("traceback"));
  const Object::Ptr full =
      structured("get_result", call("get_result", R"({"run_id":")" + id + R"(","verbose":true})"));
  EXPECT_THAT(full->getObject("exception")->getValue<std::string>("traceback"),
              HasSubstr("ValueError: bad value"));
  EXPECT_FALSE(report->has("files"));
  EXPECT_EQ(result->getArray("content")->size(), 1u);
}

TEST_F(ResultsToolsTest, UsageReachesTheReport) {
  const Object::Ptr report =
      structured("get_result",
                 finalResult(start(R"({"code":"#fake:peak_memory=12345678\n#fake:cpu_ms=250"})")));
  EXPECT_EQ(report->getValue<std::int64_t>("peak_memory_bytes"), 12345678);
  EXPECT_DOUBLE_EQ(report->getValue<double>("cpu_seconds"), 0.25);
  EXPECT_FALSE(report->has("exception"));
}

TEST_F(ResultsToolsTest, EachFileComesOnceAsAnImageOrAResourceListedWithoutItsBytes) {
  const std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\"/>";
  const std::string id =
      start(R"({"code":"#fake:outfile=notes.txt:h\\xc3\\xa9llo\n)"
            R"(#fake:outfile=plot.png:\\x89PNG\\r\\n\\x1a\\n\\x00\\x01\\xfe\n)"
            R"(#fake:outfile=sub/chart.svg:<svg\\sxmlns=\"http://www.w3.org/2000/svg\"/>\n)"
            R"(#fake:outfile=fake.png:hello\n)"
            R"(#fake:outfile=data.bin:\\xff\\xfe"})");
  const Object::Ptr result = finalResult(id);
  const Object::Ptr report = structured("get_result", result);
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  const Array::Ptr files = report->getArray("files");
  ASSERT_TRUE(files) << compact(report);
  ASSERT_EQ(files->size(), 5u);
  // Listed by path, size, media type and digest; the bytes are in the content blocks only.
  const Object::Ptr notes = files->getObject(0);
  EXPECT_EQ(notes->getValue<std::string>("path"), "notes.txt");
  EXPECT_EQ(notes->getValue<int>("size"), 6);
  EXPECT_EQ(notes->getValue<std::string>("mime_type"), "text/plain");
  EXPECT_EQ(notes->getValue<std::string>("sha256"),
            "3c48591d8d098a4538f5e013dfcf406e948eac4d3277b10bf614e295d6068179");
  EXPECT_FALSE(notes->has("content"));
  EXPECT_EQ(files->getObject(1)->getValue<std::string>("path"), "plot.png");
  EXPECT_EQ(files->getObject(1)->getValue<int>("size"), 11);
  EXPECT_EQ(files->getObject(1)->getValue<std::string>("mime_type"), "image/png");
  EXPECT_EQ(files->getObject(2)->getValue<std::string>("mime_type"), "image/svg+xml");
  EXPECT_EQ(files->getObject(3)->getValue<std::string>("mime_type"), "application/octet-stream");
  EXPECT_FALSE(report->has("files_truncated"));
  // Nothing of a file's content is in the text block.
  const std::string text = result->getArray("content")->getObject(0)->getValue<std::string>("text");
  EXPECT_THAT(text, Not(HasSubstr(kPngBase64)));
  EXPECT_THAT(text, Not(HasSubstr("svg xmlns")));

  // Text first, then one block per file in file order: an image block for the raster image,
  // an embedded resource for every other file. The SVG, which the program wrote and which can
  // carry script, is never an image block.
  const Array::Ptr content = result->getArray("content");
  ASSERT_EQ(content->size(), 6u) << compact(result);
  const auto path = [&](std::size_t i) {
    return content->getObject(i)->getObject("_meta")->getValue<std::string>("io.scs/path");
  };
  const Object::Ptr text_file = content->getObject(1);
  EXPECT_EQ(path(1), "notes.txt");
  EXPECT_EQ(text_file->getValue<std::string>("type"), "resource");
  EXPECT_EQ(text_file->getObject("resource")->getValue<std::string>("text"), "h\xC3\xA9llo");
  EXPECT_EQ(text_file->getObject("resource")->getValue<std::string>("uri"),
            "scs://runs/" + id + "/out/notes.txt");
  EXPECT_FALSE(text_file->has("annotations"));
  const Object::Ptr png = content->getObject(2);
  EXPECT_EQ(path(2), "plot.png");
  EXPECT_EQ(png->getValue<std::string>("type"), "image");
  EXPECT_EQ(png->getValue<std::string>("mimeType"), "image/png");
  EXPECT_EQ(base64Decode(png->getValue<std::string>("data")), kPngBytes);
  const Object::Ptr chart = content->getObject(3);
  EXPECT_EQ(path(3), "sub/chart.svg");
  EXPECT_EQ(chart->getValue<std::string>("type"), "resource");
  EXPECT_EQ(chart->getObject("resource")->getValue<std::string>("text"), svg);
  EXPECT_EQ(chart->getObject("resource")->getValue<std::string>("mimeType"), "image/svg+xml");
  EXPECT_EQ(compact(chart->getObject("annotations")), R"({"audience":["user"]})");
  // Named .png but not one: a file, never an image block.
  const Object::Ptr fake = content->getObject(4);
  EXPECT_EQ(path(4), "fake.png");
  EXPECT_EQ(fake->getValue<std::string>("type"), "resource");
  EXPECT_EQ(fake->getObject("resource")->getValue<std::string>("text"), "hello");
  const Object::Ptr binary = content->getObject(5);
  EXPECT_EQ(path(5), "data.bin");
  EXPECT_EQ(base64Decode(binary->getObject("resource")->getValue<std::string>("blob")), "\xff\xfe");
  EXPECT_EQ(compact(binary->getObject("annotations")), R"({"audience":["user"]})");

  // stop_run on the finished run answers the same way.
  const Object::Ptr stopped = call("stop_run", R"({"run_id":")" + id + R"("})");
  EXPECT_EQ(stopped->getArray("content")->size(), 6u);
}

// Issue 24's target: a report with one 200 KB PNG hands a model a text block of at most 1,000
// characters, and the whole result is at most 1.4 times the PNG's base64: the bytes once.
TEST_F(ResultsToolsTest, APlotIsHandedOverOnceInFewCharacters) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::mt19937 random(7);
  while (png.size() < 200 * 1024) {
    png.push_back(static_cast<char>(random() & 0xff));
  }
  std::string code = "#fake:outfile=plot.png:";
  for (const unsigned char byte : png) {
    char escape[8];
    std::snprintf(escape, sizeof escape, "\\\\x%02x", byte);
    code += escape;
  }
  const std::string id = start(R"({"code":")" + code + R"("})");
  const Object::Ptr result = finalResult(id);
  const Object::Ptr report = structured("get_result", result);
  ASSERT_EQ(report->getArray("files")->size(), 1u) << compact(report);
  const std::string text = result->getArray("content")->getObject(0)->getValue<std::string>("text");
  const std::size_t base64_size = (png.size() + 2) / 3 * 4;
  EXPECT_LE(text.size(), 1000u) << text;
  EXPECT_LE(static_cast<double>(compact(result).size()), 1.4 * static_cast<double>(base64_size))
      << compact(result).size() << " characters for " << base64_size << " of base64";
  EXPECT_EQ(result->getArray("content")->size(), 2u);
  EXPECT_EQ(base64Decode(result->getArray("content")->getObject(1)->getValue<std::string>("data")),
            png);
}

TEST_F(ResultsToolsTest, AMalformedTrailerIsIgnoredAndStillStrippedFromStdout) {
  const Object::Ptr report = structured(
      "get_result",
      finalResult(start(R"({"code":"#fake:stdout=x\n#fake:trailer={\"exception\":[1"})")));
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(report->getValue<std::string>("stdout"), "x");
  EXPECT_FALSE(report->has("exception"));
  EXPECT_FALSE(report->has("files"));
}

TEST_F(ResultsToolsTest, StdinIsDeliveredAndCapped) {
  const std::string id = start(R"({"code":"#fake:echo_stdin","stdin":"hello\nworld"})");
  const Object::Ptr report = structured("get_result", finalResult(id));
  EXPECT_EQ(report->getValue<std::string>("stdout"), "hello\nworld");
  EXPECT_EQ(lastMembers()[launcher::kStdinPath], "hello\nworld");

  finalResult(start(R"({"code":"pass"})"));
  EXPECT_EQ(lastMembers().count(launcher::kStdinPath), 0u);
  EXPECT_THAT(lastMembers()[launcher::kControlPath], HasSubstr(R"("stdin":false)"));

  EXPECT_THAT(errorText(call("start_run", R"({"code":"pass","stdin":"01234567890123456"})")),
              HasSubstr("max is 16 bytes"));
  EXPECT_THAT(errorText(call("start_run", R"({"code":"pass","stdin":5})")),
              HasSubstr("\"stdin\" must be a string"));
}

TEST_F(ResultsToolsTest, TheControlDirectoryIsReservedForTheServer) {
  EXPECT_THAT(errorText(call("start_run", R"({"code":"pass","files":[)"
                                          R"({"path":".scs/control.json","content":"{}"}]})")),
              HasSubstr("\".scs\""));
}

TEST_F(ResultsToolsTest, ARunningRunShowsItsOutputSoFarFromAnOffset) {
  const std::string id =
      start(R"({"code":"#fake:stdout=hello\\n\n#fake:stderr=warn\n#fake:hang"})");
  // The program prints as it starts; the run goes on.
  Object::Ptr live;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  do {
    live = structured("get_result", call("get_result", R"({"run_id":")" + id + R"("})"));
  } while (live->getValue<int>("stderr_bytes") < 4 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(live->getValue<std::string>("status"), "running");
  EXPECT_EQ(live->getValue<std::string>("stdout"), "hello\n");
  EXPECT_EQ(live->getValue<int>("stdout_bytes"), 6);
  EXPECT_EQ(live->getValue<std::string>("stderr"), "warn");
  EXPECT_FALSE(live->has("stdout_offset"));

  const Object::Ptr newer = structured(
      "get_result",
      call("get_result", R"({"run_id":")" + id + R"(","stdout_offset":6,"stderr_offset":2})"));
  EXPECT_EQ(newer->getValue<std::string>("stdout"), "");
  EXPECT_EQ(newer->getValue<int>("stdout_offset"), 6);
  EXPECT_EQ(newer->getValue<std::string>("stderr"), "rn");
  EXPECT_EQ(newer->getValue<int>("stderr_offset"), 2);
  EXPECT_EQ(newer->getValue<int>("stdout_bytes"), 6);

  const Object::Ptr stopped =
      structured("stop_run", call("stop_run", R"({"run_id":")" + id + R"("})"));
  EXPECT_EQ(stopped->getValue<std::string>("status"), "stopped");
  EXPECT_EQ(stopped->getValue<std::string>("stdout"), "hello\n");

  // Offsets work on a final report too.
  const Object::Ptr tail = structured(
      "get_result", call("get_result", R"({"run_id":")" + id + R"(","stdout_offset":3})"));
  EXPECT_EQ(tail->getValue<std::string>("stdout"), "lo\n");
  EXPECT_EQ(tail->getValue<int>("stdout_offset"), 3);
  EXPECT_EQ(tail->getValue<std::string>("stderr"), "warn");
  EXPECT_EQ(tail->getValue<int>("stderr_offset"), 0);
}

TEST_F(ResultsToolsTest, BadOffsetsAreToolErrors) {
  const std::string id = start(R"({"code":"pass"})");
  for (const std::string bad : {"-1", "1.5", "\"3\"", "true", "1e30"}) {
    EXPECT_THAT(
        errorText(call("get_result", R"({"run_id":")" + id + R"(","stdout_offset":)" + bad + "}")),
        HasSubstr("stdout_offset"))
        << bad;
  }
  EXPECT_THAT(errorText(call("get_result", R"({"run_id":")" + id + R"(","stderr_offset":-5})")),
              HasSubstr("stderr_offset"));
}

// The top-level description says what the tool is for; the details are in the parameters' and
// the report's descriptions, where forms and models both show them (issue 13): the whole
// definition teaches them.
TEST_F(ResultsToolsTest, ToolsListTeachesTheResultsFeatures) {
  const Object::Ptr start_tool = toolDefinition("start_run");
  const std::string start_text = compact(start_tool);
  for (const char* needle : {"/workspace/out", "stdin", "numpy", "pandas", "scipy", "matplotlib",
                             "sympy", "minimal image", "sys.path.insert(0, "}) {
    EXPECT_THAT(start_text, HasSubstr(needle));
  }
  const Object::Ptr start_input = start_tool->getObject("inputSchema")->getObject("properties");
  EXPECT_EQ(start_input->getObject("stdin")->getValue<std::string>("type"), "string");

  const Object::Ptr get_tool = toolDefinition("get_result");
  const std::string get_text = compact(get_tool);
  for (const char* needle : {"stdout_offset", "stderr_offset", "running", "peak_memory_bytes",
                             "cpu_seconds", "exception", "files", "verbose", "sandbox_error"}) {
    EXPECT_THAT(get_text, HasSubstr(needle));
  }
  const Object::Ptr get_input = get_tool->getObject("inputSchema")->getObject("properties");
  EXPECT_EQ(get_input->getObject("stdout_offset")->getValue<std::string>("type"), "integer");
  EXPECT_EQ(get_input->getObject("stderr_offset")->getValue<int>("minimum"), 0);

  const Object::Ptr output = get_tool->getObject("outputSchema")->getObject("properties");
  for (const char* key : {"exception", "files", "files_truncated", "files_omitted", "stdout_offset",
                          "stderr_offset"}) {
    EXPECT_TRUE(output->has(key)) << key;
  }
  EXPECT_THAT(compact(output->getObject("files")), HasSubstr("mime_type"));
  EXPECT_THAT(compact(output->getObject("files")), HasSubstr("sha256"));
  EXPECT_THAT(compact(output->getObject("files")), Not(HasSubstr("content")));
  EXPECT_THAT(start_text, Not(HasSubstr("standard library only. There")));
}

}  // namespace
}  // namespace scs::mcp

namespace scs::mcp {
namespace {

// Issue 13 at the tools: a short run answered in one call, and sessions from open to close.
class SessionToolsTest : public ResultsToolsTest {};

TEST_F(SessionToolsTest, StartRunWithAWaitAnswersAShortRunWithItsReport) {
  const Object::Ptr report = structured(
      "start_run", call("start_run", R"({"code":"#fake:stdout=once","wait_seconds":20})"));
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(report->getValue<std::string>("stdout"), "once");
  const Object::Ptr pending = structured("start_run", core_.whileTimePasses([&] {
    return call("start_run", R"({"code":"#fake:hang","wait_seconds":0.05})");
  }));
  EXPECT_EQ(pending->getValue<std::string>("status"), "running");
  call("stop_run", R"({"run_id":")" + pending->getValue<std::string>("run_id") + R"("})");
  EXPECT_THAT(errorText(call("start_run", R"({"code":"x","wait_seconds":61})")),
              HasSubstr("\"wait_seconds\" must be a number from 0 to 60"));
}

TEST_F(SessionToolsTest, ASessionFromOpenToClose) {
  const Object::Ptr opened = structured(
      "open_session",
      call("open_session",
           R"({"limits":{"memory_gb":2},"files":[{"path":"data.csv","content":"a,b\n"}]})"));
  const std::string id = opened->getValue<std::string>("session_id");
  EXPECT_EQ(opened->getValue<std::string>("status"), "open");
  EXPECT_EQ(opened->getObject("limits")->getValue<double>("memory_gb"), 2);
  EXPECT_FALSE(opened->getValue<std::string>("expires_at").empty());

  const std::string in_session = R"(,"session_id":")" + id + R"(","wait_seconds":20})";
  EXPECT_EQ(
      structured("start_run", call("start_run", R"({"code":"#fake:set=df=frame")" + in_session))
          ->getValue<std::string>("status"),
      "succeeded");
  const Object::Ptr second = structured(
      "start_run",
      call("start_run", R"({"code":"#fake:get=df","limits":{"timeout_seconds":5})" + in_session));
  EXPECT_EQ(second->getValue<std::string>("result"), "frame");
  EXPECT_EQ(second->getValue<std::string>("session_id"), id);
  EXPECT_TRUE(second->getValue<bool>("session_alive"));
  // Its effective limits, the session's memory and its own timeout, only when asked for.
  EXPECT_FALSE(second->has("limits"));
  const Object::Ptr full = structured(
      "get_result", call("get_result", R"({"run_id":")" + second->getValue<std::string>("run_id") +
                                           R"(","verbose":true})"));
  EXPECT_EQ(full->getObject("limits")->getValue<double>("memory_gb"), 2);
  EXPECT_EQ(full->getObject("limits")->getValue<double>("timeout_seconds"), 5);
  // The session's files came with its first run.
  EXPECT_EQ(lastMembers().count("main.py"), 1u);

  EXPECT_THAT(errorText(call("start_run", R"({"code":"x","limits":{"memory_gb":4})" + in_session)),
              HasSubstr("memory_gb and cpus belong to the session"));
  EXPECT_THAT(errorText(call("open_session", R"({"limits":{"timeout_seconds":5}})")),
              HasSubstr("pass timeout_seconds to each start_run"));

  const Object::Ptr closed =
      structured("close_session", call("close_session", R"({"session_id":")" + id + R"("})"));
  EXPECT_EQ(closed->getValue<std::string>("status"), "ended");
  EXPECT_EQ(closed->getValue<std::string>("reason"), "it was closed by close_session");
  EXPECT_THAT(errorText(call("start_run", R"({"code":"x")" + in_session)), HasSubstr("has ended"));
  EXPECT_THAT(errorText(call("close_session", R"({"session_id":"nope"})")),
              HasSubstr("Unknown session_id"));
  EXPECT_THAT(errorText(call("start_run", R"({"code":"x","session_id":"nope"})")),
              HasSubstr("Unknown session_id"));
}

}  // namespace
}  // namespace scs::mcp
