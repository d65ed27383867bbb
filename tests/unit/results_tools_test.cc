#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/ParseHandler.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "mcp/tools.h"
#include "runs/side_channel.h"
#include "support/base64.h"
#include "support/json.h"

namespace scs::mcp {
namespace {

using namespace std::chrono_literals;
using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;
using scs::testing::compact;
using scs::testing::parseOrdered;
using ::testing::HasSubstr;
using ::testing::Not;

// PNG signature, then bytes that are not UTF-8.
const std::string kPngBytes = std::string("\x89PNG\r\n\x1a\n\x00\x01\xFE", 11);
const std::string kPngBase64 = "iVBORw0KGgoAAf4=";

// A backend that plays the launcher's side of the side channel, scripted by lines of main.py:
//   #out=TEXT / #err=TEXT   written at start ("\n" decoded)
//   #exception=TYPE:MSG     the trailer reports it; exit code 1
//   #file=PATH:BASE64       the trailer returns the file
//   #trailer=TEXT           the trailer's JSON is TEXT instead
//   #echo_stdin             writes .scs/stdin to stdout
//   #hang                   runs until killed (no trailer)
class TrailerRuntime : public backend::RuntimeBackend {
 public:
  backend::CapacityReply capacity() override { return {{}, {8, std::int64_t{64} << 30}}; }

  backend::CreateReply create(const backend::SandboxSpec& spec) override {
    std::lock_guard lock(mutex_);
    const std::string id = "sandbox-" + std::to_string(++next_id_);
    sandboxes_[id].posture = spec.posture;
    return {{}, id};
  }

  backend::InspectReply inspect(const std::string& id) override {
    std::lock_guard lock(mutex_);
    return {{}, sandboxes_[id].posture};
  }

  backend::Status deliver(const std::string& id, const std::string& archive) override {
    std::lock_guard lock(mutex_);
    sandboxes_[id].members = members(archive);
    return {};
  }

  backend::Status start(const std::string& id, backend::OutputSink* sink) override {
    std::lock_guard lock(mutex_);
    Sandbox& sandbox = sandboxes_[id];
    const std::string control = sandbox.members[runs::kControlPath];
    const std::size_t at = control.find("\"nonce\":\"");
    const std::string nonce = at == std::string::npos ? "" : control.substr(at + 9, 32);
    std::string exception = "null";
    std::string files;
    std::optional<std::string> trailer;
    std::istringstream lines(sandbox.members["main.py"]);
    for (std::string line; std::getline(lines, line);) {
      const std::size_t eq = line.find('=');
      const std::string key = line.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : decode(line.substr(eq + 1));
      if (key == "#out") {
        sink->write(backend::Stream::kStdout, value);
      } else if (key == "#err") {
        sink->write(backend::Stream::kStderr, value);
      } else if (key == "#echo_stdin") {
        sink->write(backend::Stream::kStdout, sandbox.members[runs::kStdinPath]);
      } else if (key == "#exception") {
        const std::size_t colon = value.find(':');
        exception = R"({"type":")" + value.substr(0, colon) + R"(","message":")" +
                    value.substr(colon + 1) +
                    R"(","traceback":"Traceback (most recent call )"
                    R"(last):\n  File \"/workspace/main.py\", line 1\n)" +
                    value.substr(0, colon) + ": " + value.substr(colon + 1) + R"(\n"})";
        sandbox.exit_code = 1;
      } else if (key == "#file") {
        const std::size_t colon = value.find(':');
        files += std::string(files.empty() ? "" : ",") + R"({"path":")" + value.substr(0, colon) +
                 R"(","size":0,"content_base64":")" + value.substr(colon + 1) + R"("})";
      } else if (key == "#trailer") {
        trailer = value;
      } else if (key == "#hang") {
        sandbox.hang = true;
      }
    }
    if (!sandbox.hang && !nonce.empty()) {
      sink->write(backend::Stream::kStdout,
                  runs::trailerMarker(nonce) +
                      trailer.value_or(R"({"exception":)" + exception + R"(,"files":[)" + files +
                                       R"(],"files_truncated":false,"files_omitted":0})") +
                      "\n");
    }
    return {};
  }

  backend::WaitReply wait(const std::string& id, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    ++waits_;
    changed_.notify_all();
    changed_.wait_for(lock, timeout, [&] {
      const Sandbox& sandbox = sandboxes_[id];
      return !sandbox.hang || sandbox.killed;
    });
    const Sandbox& sandbox = sandboxes_[id];
    backend::WaitReply reply;
    if (sandbox.killed || !sandbox.hang) {
      reply.exit.exited = true;
      reply.exit.exit_code = sandbox.killed ? 137 : sandbox.exit_code;
      reply.exit.peak_memory_bytes = 12345678;
      reply.exit.cpu_seconds = 0.25;
    }
    return reply;
  }

  backend::Status kill(const std::string& id) override {
    std::lock_guard lock(mutex_);
    sandboxes_[id].killed = true;
    changed_.notify_all();
    return {};
  }

  backend::Status remove(const std::string& id) override { return kill(id); }

  backend::ListReply list(const std::string&) override { return {}; }

  bool waitForWaiter() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return waits_ > 0; });
  }

  std::map<std::string, std::string> lastMembers() {
    std::lock_guard lock(mutex_);
    return sandboxes_.rbegin()->second.members;
  }

 private:
  struct Sandbox {
    backend::Posture posture;
    std::map<std::string, std::string> members;
    int exit_code = 0;
    bool hang = false;
    bool killed = false;
  };

  static std::map<std::string, std::string> members(const std::string& archive) {
    std::map<std::string, std::string> out;
    std::size_t offset = 0;
    while (offset + 512 <= archive.size() && archive[offset] != '\0') {
      const std::string name(archive.data() + offset, strnlen(archive.data() + offset, 100));
      const std::size_t size = std::strtoul(archive.substr(offset + 124, 12).c_str(), nullptr, 8);
      if (archive[offset + 156] == '0') {
        out[name] = archive.substr(offset + 512, size);
      }
      offset += 512 + (size + 511) / 512 * 512;
    }
    return out;
  }

  static std::string decode(const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
        out += '\n';
        ++i;
      } else {
        out += text[i];
      }
    }
    return out;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Sandbox> sandboxes_;
  int next_id_ = 0;
  int waits_ = 0;
};

using scs::testing::base64Decode;

// Every key of `value` is in `schema` (recursively through objects and arrays), with the
// schema's required keys present.
void checkAgainstSchema(const Var& value, const Object::Ptr& schema, const std::string& where,
                        std::vector<std::string>& errors) {
  if (value.type() == typeid(Object::Ptr)) {
    const Object::Ptr object = value.extract<Object::Ptr>();
    const Object::Ptr properties =
        schema->has("properties") ? schema->getObject("properties") : Object::Ptr(new Object);
    if (schema->has("required")) {
      for (const Var& key : *schema->getArray("required")) {
        if (!object->has(key.toString())) {
          errors.push_back(where + "." + key.toString() + ": required but missing");
        }
      }
    }
    for (const auto& [key, member] : *object) {
      if (!properties->has(key)) {
        errors.push_back(where + "." + key + ": not in the schema");
      } else {
        checkAgainstSchema(member, properties->getObject(key), where + "." + key, errors);
      }
    }
  }
  if (value.type() == typeid(Array::Ptr) && schema->has("items")) {
    for (const Var& item : *value.extract<Array::Ptr>()) {
      checkAgainstSchema(item, schema->getObject("items"), where + "[]", errors);
    }
  }
}

class ResultsToolsTest : public ::testing::Test {
 protected:
  ResultsToolsTest()
      : limits_(policy::LimitSettings{}, policy::HostCapacity{8, std::int64_t{64} << 30}),
        runs_(backend_, runs::RunSettings{}, policy::SandboxSettings{}, clock_),
        tools_(runs_, limits_, files_, std::chrono::seconds(3600)) {}

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
    std::vector<std::string> errors;
    checkAgainstSchema(content, toolDefinition(tool)->getObject("outputSchema"),
                       "structuredContent", errors);
    EXPECT_THAT(errors, ::testing::IsEmpty());
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

  TrailerRuntime backend_;
  runs::SystemClock clock_;
  policy::LimitPolicy limits_;
  policy::FileSettings files_ = fileSettings();
  runs::RunManager runs_;
  Tools tools_;
};

TEST_F(ResultsToolsTest, AnUncaughtExceptionIsReportedAndTheTrailerIsNotOutput) {
  const std::string id = start(R"({"code":"#out=before\\n\n#exception=ValueError:bad value"})");
  const Object::Ptr result = finalResult(id);
  const Object::Ptr report = structured("get_result", result);
  EXPECT_EQ(report->getValue<std::string>("status"), "failed");
  EXPECT_EQ(report->getValue<int>("exit_code"), 1);
  EXPECT_EQ(report->getValue<std::string>("stdout"), "before\n");
  EXPECT_EQ(report->getValue<int>("stdout_bytes"), 7);
  const Object::Ptr exception = report->getObject("exception");
  ASSERT_TRUE(exception) << compact(report);
  EXPECT_EQ(exception->getValue<std::string>("type"), "ValueError");
  EXPECT_EQ(exception->getValue<std::string>("message"), "bad value");
  EXPECT_THAT(exception->getValue<std::string>("traceback"), HasSubstr("ValueError: bad value"));
  EXPECT_FALSE(report->has("files"));
  EXPECT_EQ(result->getArray("content")->size(), 1u);
}

TEST_F(ResultsToolsTest, UsageReachesTheReport) {
  const Object::Ptr report = structured("get_result", finalResult(start(R"({"code":"pass"})")));
  EXPECT_EQ(report->getValue<std::int64_t>("peak_memory_bytes"), 12345678);
  EXPECT_DOUBLE_EQ(report->getValue<double>("cpu_seconds"), 0.25);
  EXPECT_FALSE(report->has("exception"));
}

TEST_F(ResultsToolsTest, FilesComeBackAsTextOrBase64AndImagesAsImageBlocks) {
  const std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\"/>";
  const std::string svg64 = "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=";
  const std::string id =
      start(R"({"code":"#file=notes.txt:aMOpbGxv\n#file=plot.png:)" + kPngBase64 +
            R"(\n#file=sub/chart.svg:)" + svg64 + R"(\n#file=fake.png:aGVsbG8="})");
  const Object::Ptr result = finalResult(id);
  const Object::Ptr report = structured("get_result", result);
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  const Array::Ptr files = report->getArray("files");
  ASSERT_TRUE(files) << compact(report);
  ASSERT_EQ(files->size(), 4u);
  const Object::Ptr notes = files->getObject(0);
  EXPECT_EQ(notes->getValue<std::string>("path"), "notes.txt");
  EXPECT_EQ(notes->getValue<int>("size"), 6);
  EXPECT_EQ(notes->getValue<std::string>("encoding"), "utf-8");
  EXPECT_EQ(notes->getValue<std::string>("content"), "h\xC3\xA9llo");
  EXPECT_EQ(notes->getValue<std::string>("mime_type"), "text/plain");
  EXPECT_EQ(files->getObject(1)->getValue<std::string>("path"), "plot.png");
  EXPECT_EQ(files->getObject(1)->getValue<std::string>("encoding"), "base64");
  EXPECT_EQ(files->getObject(1)->getValue<std::string>("content"), kPngBase64);
  EXPECT_EQ(files->getObject(1)->getValue<int>("size"), 11);
  EXPECT_EQ(files->getObject(1)->getValue<std::string>("mime_type"), "image/png");
  EXPECT_EQ(files->getObject(2)->getValue<std::string>("encoding"), "utf-8");
  EXPECT_EQ(files->getObject(2)->getValue<std::string>("content"), svg);
  EXPECT_EQ(files->getObject(2)->getValue<std::string>("mime_type"), "image/svg+xml");
  EXPECT_EQ(files->getObject(3)->getValue<std::string>("mime_type"), "application/octet-stream");
  EXPECT_FALSE(report->getValue<bool>("files_truncated"));

  // Text first, then one image block per displayable image, in file order.
  const Array::Ptr content = result->getArray("content");
  ASSERT_EQ(content->size(), 3u) << compact(result);
  const Object::Ptr png = content->getObject(1);
  EXPECT_EQ(png->getValue<std::string>("type"), "image");
  EXPECT_EQ(png->getValue<std::string>("mimeType"), "image/png");
  EXPECT_EQ(base64Decode(png->getValue<std::string>("data")), kPngBytes);
  const Object::Ptr svg_block = content->getObject(2);
  EXPECT_EQ(svg_block->getValue<std::string>("mimeType"), "image/svg+xml");
  EXPECT_EQ(base64Decode(svg_block->getValue<std::string>("data")), svg);

  // stop_run on the finished run answers the same way.
  const Object::Ptr stopped = call("stop_run", R"({"run_id":")" + id + R"("})");
  EXPECT_EQ(stopped->getArray("content")->size(), 3u);
}

TEST_F(ResultsToolsTest, AMalformedTrailerIsIgnoredAndStillStrippedFromStdout) {
  const Object::Ptr report = structured(
      "get_result", finalResult(start(R"({"code":"#out=x\n#trailer={\"exception\":[1"})")));
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(report->getValue<std::string>("stdout"), "x");
  EXPECT_FALSE(report->has("exception"));
  EXPECT_FALSE(report->has("files"));
}

TEST_F(ResultsToolsTest, StdinIsDeliveredAndCapped) {
  const std::string id = start(R"({"code":"#echo_stdin","stdin":"hello\nworld"})");
  const Object::Ptr report = structured("get_result", finalResult(id));
  EXPECT_EQ(report->getValue<std::string>("stdout"), "hello\nworld");
  EXPECT_EQ(backend_.lastMembers()[runs::kStdinPath], "hello\nworld");

  finalResult(start(R"({"code":"pass"})"));
  EXPECT_EQ(backend_.lastMembers().count(runs::kStdinPath), 0u);
  EXPECT_THAT(backend_.lastMembers()[runs::kControlPath], HasSubstr(R"("stdin":false)"));

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
  const std::string id = start(R"({"code":"#out=hello\\n\n#err=warn\n#hang"})");
  ASSERT_TRUE(backend_.waitForWaiter());
  const Object::Ptr live =
      structured("get_result", call("get_result", R"({"run_id":")" + id + R"("})"));
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

TEST_F(ResultsToolsTest, ToolsListTeachesTheResultsFeatures) {
  const Object::Ptr start_tool = toolDefinition("start_run");
  const std::string start_text = start_tool->getValue<std::string>("description");
  for (const char* needle :
       {"/workspace/out", "image", "exception", "stdin", "numpy", "pandas", "scipy", "matplotlib",
        "sympy", "default image includes", "import sys; sys.path.insert(0, \"/workspace\")"}) {
    EXPECT_THAT(start_text, HasSubstr(needle));
  }
  const Object::Ptr start_input = start_tool->getObject("inputSchema")->getObject("properties");
  EXPECT_EQ(start_input->getObject("stdin")->getValue<std::string>("type"), "string");

  const Object::Ptr get_tool = toolDefinition("get_result");
  const std::string get_text = get_tool->getValue<std::string>("description");
  for (const char* needle : {"stdout_offset", "stderr_offset", "running", "peak_memory_bytes",
                             "cpu_seconds", "exception", "files", "/workspace/out"}) {
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
  EXPECT_THAT(start_text, Not(HasSubstr("standard library only. There")));
}

}  // namespace
}  // namespace scs::mcp
