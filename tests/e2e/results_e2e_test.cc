#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/base64.h"
#include "support/eventually.h"
#include "support/mcp_client.h"

// Issue 7 end to end over stdio with the fake backend, which plays the launcher's side of the
// side channel: files out, structured exceptions, stdin, live output with offsets.
namespace scs::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Object = Poco::JSON::Object;
using Array = Poco::JSON::Array;
using namespace std::chrono_literals;

const std::string kBinary = SCS_BINARY;

class Server {
 public:
  explicit Server(std::vector<std::string> extra = {}) : process_(kBinary, fakeArgs(extra)) {
    process_.initialize();
  }

  // The CallToolResult, which must not be an error.
  Object::Ptr result(const std::string& tool, Object::Ptr arguments) {
    Object::Ptr result = process_.callTool(tool, arguments);
    EXPECT_FALSE(result->optValue<bool>("isError", false)) << toolText(result);
    EXPECT_FALSE(result->getObject("structuredContent").isNull()) << toolText(result);
    return result;
  }

  Object::Ptr call(const std::string& tool, Object::Ptr arguments) {
    return result(tool, arguments)->getObject("structuredContent");
  }

  std::string errorOf(const std::string& tool, Object::Ptr arguments) {
    Object::Ptr result = process_.callTool(tool, arguments);
    EXPECT_TRUE(result->optValue<bool>("isError", false)) << toolText(result);
    return toolText(result);
  }

  std::string start(Object::Ptr arguments) {
    return call("start_run", arguments)->getValue<std::string>("run_id");
  }

  // get_result's CallToolResult once the run is final.
  Object::Ptr finalResult(const std::string& run_id) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (true) {
      Object::Ptr got = result("get_result", object({{"run_id", run_id}, {"wait_seconds", 5}}));
      const std::string status =
          got->getObject("structuredContent")->getValue<std::string>("status");
      if ((status != "queued" && status != "running") ||
          std::chrono::steady_clock::now() > deadline) {
        return got;
      }
    }
  }

  Object::Ptr runToEnd(const std::string& code) {
    return finalResult(start(object({{"code", code}})))->getObject("structuredContent");
  }

  McpProcess& process() { return process_; }

 private:
  McpProcess process_;
};

TEST(ResultsE2eTest, AnUncaughtExceptionIsStructuredAndTheTracebackIsOnStderr) {
  Server server;
  const Object::Ptr report =
      server.runToEnd("#fake: stdout=before\\n exception=ValueError:bad\\svalue\n");
  EXPECT_EQ(report->getValue<std::string>("status"), "failed");
  EXPECT_EQ(report->getValue<int>("exit_code"), 1);
  const Object::Ptr exception = report->getObject("exception");
  ASSERT_FALSE(exception.isNull());
  EXPECT_EQ(exception->getValue<std::string>("type"), "ValueError");
  EXPECT_EQ(exception->getValue<std::string>("message"), "bad value");
  // The traceback is on stderr once, not repeated in the exception.
  EXPECT_FALSE(exception->has("traceback"));
  EXPECT_THAT(report->getValue<std::string>("stderr"),
              HasSubstr("Traceback (most recent call last)"));
  EXPECT_THAT(report->getValue<std::string>("stderr"), HasSubstr("ValueError: bad value"));
  // The trailer is never output.
  EXPECT_EQ(report->getValue<std::string>("stdout"), "before\n");
  EXPECT_THAT(report->getValue<std::string>("stdout"), Not(HasSubstr("SCS-TRAILER")));
}

TEST(ResultsE2eTest, ARunWithoutExceptionHasNoExceptionField) {
  Server server;
  const Object::Ptr report = server.runToEnd("#fake: stdout=ok exit=2\n");
  EXPECT_EQ(report->getValue<int>("exit_code"), 2);
  EXPECT_FALSE(report->has("exception"));
  EXPECT_FALSE(report->has("files"));
}

TEST(ResultsE2eTest, FilesOutComeBackOnceEachInTheirOwnBlocks) {
  Server server;
  const std::string png("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 16);
  const std::string run_id =
      server.start(object({{"code",
                            "#fake: outfile=result.csv:a,b\\n1,2\\n "
                            "outfile=plot.png:\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDR\n"}}));
  const Object::Ptr result = server.finalResult(run_id);
  const Object::Ptr report = result->getObject("structuredContent");
  EXPECT_EQ(report->getValue<std::string>("status"), "succeeded");
  const Array::Ptr files = report->getArray("files");
  ASSERT_FALSE(files.isNull()) << toolText(result);
  ASSERT_EQ(files->size(), 2u);
  const Object::Ptr csv = files->getObject(0);
  EXPECT_EQ(csv->getValue<std::string>("path"), "result.csv");
  EXPECT_EQ(csv->getValue<std::string>("mime_type"), "text/csv");
  EXPECT_EQ(csv->getValue<int>("size"), 8);
  EXPECT_FALSE(csv->has("content"));
  const Object::Ptr plot = files->getObject(1);
  EXPECT_EQ(plot->getValue<std::string>("mime_type"), "image/png");
  EXPECT_EQ(plot->getValue<std::string>("sha256").size(), 64u);
  EXPECT_FALSE(report->has("files_truncated"));

  // Each file once, in its own block: the CSV as an embedded resource, the PNG as an image.
  const Array::Ptr content = result->getArray("content");
  ASSERT_EQ(content->size(), 3u);
  EXPECT_EQ(content->getObject(0)->getValue<std::string>("type"), "text");
  EXPECT_EQ(content->getObject(1)->getValue<std::string>("type"), "resource");
  EXPECT_EQ(fileContent(result, "result.csv"), "a,b\n1,2\n");
  const Object::Ptr image = content->getObject(2);
  EXPECT_EQ(image->getValue<std::string>("type"), "image");
  EXPECT_EQ(image->getValue<std::string>("mimeType"), "image/png");
  EXPECT_EQ(fileContent(result, "plot.png"), png);
  EXPECT_EQ(fileBlockCount(result, "plot.png"), 1u);
}

TEST(ResultsE2eTest, OverTheFileCapIsFlagged) {
  Server server({"--max-out-files", "1"});
  const Object::Ptr report = server.runToEnd("#fake: outfile=a.txt:one outfile=b.txt:two\n");
  ASSERT_EQ(report->getArray("files")->size(), 1u);
  EXPECT_EQ(report->getArray("files")->getObject(0)->getValue<std::string>("path"), "a.txt");
  EXPECT_TRUE(report->getValue<bool>("files_truncated"));
  EXPECT_EQ(report->getValue<int>("files_omitted"), 1);
}

TEST(ResultsE2eTest, StdinReachesTheProgramAndIsCapped) {
  Server server({"--max-stdin-bytes", "32"});
  const std::string input = "line one\nline two\n";
  const std::string run_id =
      server.start(object({{"code", "#fake: echo_stdin\n"}, {"stdin", input}}));
  EXPECT_EQ(
      server.finalResult(run_id)->getObject("structuredContent")->getValue<std::string>("stdout"),
      input);
  EXPECT_THAT(
      server.errorOf("start_run", object({{"code", "pass"}, {"stdin", std::string(33, 'x')}})),
      HasSubstr("max is 32 bytes"));
}

TEST(ResultsE2eTest, OutputIsVisibleBeforeTheRunEndsAndOffsetsFetchOnlyWhatIsNew) {
  Server server;
  const std::string run_id =
      server.start(object({{"code", "#fake: stdout=early\\n stderr=warning\\n hang\n"}}));
  // The fake writes at start; poll until the output has arrived.
  Object::Ptr live = server.call("get_result", object({{"run_id", run_id}}));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (live->optValue<std::string>("stdout", "") != "early\n" &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    live = server.call("get_result", object({{"run_id", run_id}}));
  }
  EXPECT_EQ(live->getValue<std::string>("status"), "running");
  EXPECT_EQ(live->getValue<std::string>("stdout"), "early\n");
  EXPECT_EQ(live->getValue<int>("stdout_bytes"), 6);
  EXPECT_EQ(live->getValue<std::string>("stderr"), "warning\n");

  const Object::Ptr newer =
      server.call("get_result", object({{"run_id", run_id},
                                        {"stdout_offset", live->getValue<int>("stdout_bytes")},
                                        {"stderr_offset", 3}}));
  EXPECT_EQ(newer->getValue<std::string>("status"), "running");
  EXPECT_EQ(newer->getValue<std::string>("stdout"), "");
  EXPECT_EQ(newer->getValue<int>("stdout_offset"), 6);
  EXPECT_EQ(newer->getValue<std::string>("stderr"), "ning\n");
  EXPECT_EQ(newer->getValue<int>("stderr_offset"), 3);

  const Object::Ptr stopped = server.call("stop_run", object({{"run_id", run_id}}));
  EXPECT_EQ(stopped->getValue<std::string>("status"), "stopped");
  EXPECT_EQ(stopped->getValue<std::string>("stdout"), "early\n");
  EXPECT_THAT(server.errorOf("get_result", object({{"run_id", run_id}, {"stdout_offset", -1}})),
              HasSubstr("stdout_offset"));
}

TEST(ResultsE2eTest, AFloodIsCountedExactlyWithTheTrailerExcluded) {
  Server server;
  const std::string run_id =
      server.start(object({{"code", "#fake: flood=20000000 outfile=a.txt:x\n"}}));
  const Object::Ptr result = server.finalResult(run_id);
  const Object::Ptr report = result->getObject("structuredContent");
  EXPECT_EQ(report->getValue<std::int64_t>("stdout_bytes"), 20000000);
  EXPECT_TRUE(report->getValue<bool>("stdout_truncated"));
  ASSERT_FALSE(report->getArray("files").isNull());
  EXPECT_EQ(fileContent(result, "a.txt"), "x");
}

// What a model is handed is sized for a model (issue 45): a window of 30,000 characters of
// output by default, whose marker names the offset get_result reads the rest from; the whole
// capture stays, and an operator may widen the window.
TEST(ResultsE2eTest, AReportCarriesAWindowOfOutputAndTheOffsetThatReadsOn) {
  Server server;
  const std::string run_id = server.start(object({{"code", "#fake: flood=1213032 stderr=oops\n"}}));
  const Object::Ptr result = server.finalResult(run_id);
  const Object::Ptr report = result->getObject("structuredContent");
  const std::string out = report->getValue<std::string>("stdout");
  EXPECT_EQ(report->getValue<std::string>("stderr"), "oops");
  EXPECT_LE(out.size() + 5, 30'000u);
  EXPECT_GE(out.size(), 29'000u);
  EXPECT_LE(toolText(result).size(), 31'000u);
  const std::string named = "get_result with stdout_offset=";
  const std::size_t at = out.find(named);
  ASSERT_NE(at, std::string::npos) << out.substr(14'000, 400);
  const std::uint64_t offset = std::stoull(out.substr(at + named.size()));
  EXPECT_EQ(out.substr(0, offset), std::string(offset, 'x'));

  const Object::Ptr on = server.call(
      "get_result",
      object({{"run_id", run_id}, {"stdout_offset", static_cast<Poco::Int64>(offset)}}));
  EXPECT_EQ(on->getValue<std::uint64_t>("stdout_offset"), offset);
  // 30,000 less room for two markers, less stderr's four bytes: the next window's start.
  EXPECT_THAT(on->getValue<std::string>("stdout"),
              HasSubstr("get_result with stdout_offset=" + std::to_string(offset + 29'516)));

  Server wide({"--output-window-chars", "0"});
  const Object::Ptr whole = wide.runToEnd("#fake: flood=200000\n");
  EXPECT_EQ(whole->getValue<std::string>("stdout"), std::string(200'000, 'x'));
}

TEST(ResultsE2eTest, TheControlDirectoryCannotBeSentAsFiles) {
  Server server;
  Array::Ptr files = new Array;
  files->add(object({{"path", ".scs/control.json"}, {"content", "{}"}}));
  EXPECT_THAT(server.errorOf("start_run", object({{"code", "pass"}, {"files", files}})),
              HasSubstr(".scs"));
}

// Issue 28: `language` picks the code file the sandbox gets (the fake reads its script from it),
// reserves that file's name in `files`, and binds a session's every run.
TEST(ResultsE2eTest, ALanguageNamesTheCodeFileAndASessionKeepsItsOwn) {
  Server server;
  Array::Ptr named_main_py = new Array;
  named_main_py->add(object({{"path", "main.py"}, {"content", "print(1)"}}));
  const std::string run_id = server.start(object(
      {{"code", "#fake: stdout=from-bash\n"}, {"language", "bash"}, {"files", named_main_py}}));
  EXPECT_EQ(
      server.finalResult(run_id)->getObject("structuredContent")->getValue<std::string>("stdout"),
      "from-bash");
  Array::Ptr named_main_sh = new Array;
  named_main_sh->add(object({{"path", "main.sh"}, {"content", "echo"}}));
  EXPECT_THAT(
      server.errorOf("start_run",
                     object({{"code", "echo 1"}, {"language", "bash"}, {"files", named_main_sh}})),
      HasSubstr(R"(must not use "main.sh", which holds the code argument)"));
  EXPECT_THAT(server.errorOf("start_run", object({{"code", "1"}, {"language", "ruby"}})),
              HasSubstr(R"("language" must be the string python, bash or javascript, got "ruby")"));
  EXPECT_THAT(server.errorOf("start_run", object({{"code", "1"}, {"language", 3}})),
              HasSubstr("python, bash or javascript."));

  const Object::Ptr session = server.call("open_session", object({{"language", "javascript"}}));
  EXPECT_EQ(session->getValue<std::string>("language"), "javascript");
  const std::string id = session->getValue<std::string>("session_id");
  EXPECT_THAT(server.errorOf("start_run",
                             object({{"code", "1"}, {"language", "python"}, {"session_id", id}})),
              HasSubstr("This session runs javascript, not python"));
  EXPECT_THAT(
      server.errorOf("start_run", object({{"code", "1"}, {"stdin", "x"}, {"session_id", id}})),
      HasSubstr("a run reads no stdin"));
  const std::string in_session = server.start(
      object({{"code", "#fake: result=42\n"}, {"session_id", id}, {"wait_seconds", 0}}));
  EXPECT_EQ(server.finalResult(in_session)
                ->getObject("structuredContent")
                ->getValue<std::string>("result"),
            "42");
  // Naming the session's own language is the same as naming none.
  const std::string named = server.start(object({{"code", "#fake: result=7\n"},
                                                 {"language", "javascript"},
                                                 {"session_id", id},
                                                 {"wait_seconds", 0}}));
  EXPECT_EQ(
      server.finalResult(named)->getObject("structuredContent")->getValue<std::string>("result"),
      "7");
  EXPECT_EQ(server.call("open_session", object({}))->getValue<std::string>("language"), "python");
  EXPECT_THAT(server.errorOf("open_session", object({{"language", ""}})),
              HasSubstr("python, bash or javascript"));

  // A bash session's files may hold a main.py but not its main.sh; a one-shot bash run reads
  // stdin.
  Array::Ptr both = new Array;
  both->add(object({{"path", "main.py"}, {"content", "x"}}));
  EXPECT_EQ(server.call("open_session", object({{"language", "bash"}, {"files", both}}))
                ->getValue<std::string>("language"),
            "bash");
  both->add(object({{"path", "main.sh"}, {"content", "x"}}));
  EXPECT_THAT(server.errorOf("open_session", object({{"language", "bash"}, {"files", both}})),
              HasSubstr(R"(must not use "main.sh")"));
  const std::string echoed = server.start(
      object({{"code", "#fake: echo_stdin\n"}, {"language", "bash"}, {"stdin", "in"}}));
  EXPECT_EQ(
      server.finalResult(echoed)->getObject("structuredContent")->getValue<std::string>("stdout"),
      "in");
}

TEST(ResultsE2eTest, ToolsListTeachesFilesExceptionsLiveOutputStdinAndImports) {
  Server server;
  const Object::Ptr listed = server.process().request("tools/list", nullptr);
  const Array::Ptr tools = listed->getObject("result")->getArray("tools");
  std::string all;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    std::ostringstream text;  // the descriptions of the tool, its parameters and its report
    tools->getObject(i)->stringify(text);
    all += text.str() + "\n";
  }
  for (const char* needle :
       {"/workspace/out", "exception", "stdout_offset", "stdin", "numpy", "matplotlib",
        "sys.path.insert(0, ", "peak_memory_bytes", "bash", "javascript", "jq", "Node.js"}) {
    EXPECT_THAT(all, HasSubstr(needle));
  }
}

// Hibernation over MCP, the fake playing a runtime that snapshots (issue 46): tools/list and
// open_session say when a session hibernates; after the idle time its next run wakes it with its
// names, and its report says how long waking took.
TEST(ResultsE2eTest, AnIdleSessionHibernatesAndItsNextRunWakesIt) {
  Server server(
      {"--backend-option", "snapshots=on", "--session-idle-seconds", "1", "--prepared", "0"});
  std::ostringstream tools;
  server.process().request("tools/list", new Object)->stringify(tools);
  EXPECT_THAT(tools.str(), HasSubstr("After 1 second without a run it hibernates"));
  const Object::Ptr session = server.call("open_session", object({}));
  EXPECT_TRUE(session->has("hibernates_at"));
  EXPECT_FALSE(session->has("hibernated"));
  const std::string id = session->getValue<std::string>("session_id");
  const Object::Ptr set =
      server.finalResult(server.start(object({{"code", "#fake: set=x=7\n"}, {"session_id", id}})))
          ->getObject("structuredContent");
  EXPECT_EQ(set->getValue<std::string>("status"), "succeeded");
  EXPECT_FALSE(set->has("session_woke_seconds"));
  ASSERT_TRUE(eventually(
      [&] {
        return server.process().stderrText().find(
                   "session " + id + " of tenant local hibernated") != std::string::npos;
      },
      30s))
      << server.process().stderrText();
  const Object::Ptr woke =
      server.finalResult(server.start(object({{"code", "#fake: get=x\n"}, {"session_id", id}})))
          ->getObject("structuredContent");
  EXPECT_EQ(woke->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(woke->getValue<std::string>("result"), "7");
  EXPECT_TRUE(woke->has("session_woke_seconds"));
  EXPECT_EQ(
      server.call("close_session", object({{"session_id", id}}))->getValue<std::string>("status"),
      "ended");
}

// A restart over MCP (issue 46, --state-dir): SIGTERM keeps the open session, the next server
// with the same directory says it took it back, and its next run wakes it with its names.
TEST(ResultsE2eTest, ASessionKeptInAStateDirOutlivesARestart) {
  char pattern[] = "/tmp/scs-e2e-state-XXXXXX";
  const std::string directory = ::mkdtemp(pattern);
  const std::vector<std::string> args{"--backend-option", "snapshots=on", "--prepared", "0",
                                      "--state-dir",      directory};
  std::string id;
  {
    Server before(args);
    std::ostringstream tools;
    before.process().request("tools/list", new Object)->stringify(tools);
    EXPECT_THAT(tools.str(), HasSubstr("A server restart keeps it too"));
    id = before.call("open_session", object({}))->getValue<std::string>("session_id");
    const Object::Ptr set =
        before
            .finalResult(before.start(object({{"code", "#fake: set=x=7\n"}, {"session_id", id}})))
            ->getObject("structuredContent");
    EXPECT_EQ(set->getValue<std::string>("status"), "succeeded");
    before.process().signal(SIGTERM);
    EXPECT_EQ(before.process().waitExit(30s), 0) << before.process().stderrText();
    EXPECT_TRUE(eventually([&] {
      return before.process().stderrText().find("session " + id +
                                                " of tenant local is kept for the next server") !=
             std::string::npos;
    })) << before.process().stderrText();
  }
  Server after(args);
  // Stderr is read on a thread of its own: the line may trail the answer to initialize.
  EXPECT_TRUE(eventually([&] {
    return after.process().stderrText().find("took back 1 of 1 kept sessions") != std::string::npos;
  })) << after.process().stderrText();
  const Object::Ptr woke =
      after.finalResult(after.start(object({{"code", "#fake: get=x\n"}, {"session_id", id}})))
          ->getObject("structuredContent");
  EXPECT_EQ(woke->getValue<std::string>("status"), "succeeded");
  EXPECT_EQ(woke->getValue<std::string>("result"), "7");
  EXPECT_TRUE(woke->has("session_woke_seconds"));
  EXPECT_EQ(
      after.call("close_session", object({{"session_id", id}}))->getValue<std::string>("status"),
      "ended");
  std::filesystem::remove_all(directory);
}

// A session with network access is never kept: its channel's nonce and CA are one server's.
TEST(ResultsE2eTest, ASessionWithNetworkAccessEndsWithTheServerEvenWithAStateDir) {
  char pattern[] = "/tmp/scs-e2e-state-XXXXXX";
  const std::string directory = ::mkdtemp(pattern);
  const std::vector<std::string> args{
      "--backend-option", "snapshots=on", "--prepared",     "0",
      "--state-dir",      directory,      "--egress-allow", "local=api.example.com"};
  std::string id;
  {
    Server before(args);
    std::ostringstream tools;
    before.process().request("tools/list", new Object)->stringify(tools);
    EXPECT_THAT(tools.str(), Not(HasSubstr("A server restart keeps it too")));
    id = before.call("open_session", object({}))->getValue<std::string>("session_id");
    before.process().signal(SIGTERM);
    EXPECT_EQ(before.process().waitExit(30s), 0) << before.process().stderrText();
    EXPECT_TRUE(eventually([&] {
      return before.process().stderrText().find("session " + id +
                                                " of tenant local ended: the server shut down") !=
             std::string::npos;
    })) << before.process().stderrText();
  }
  Server after(args);
  EXPECT_TRUE(eventually([&] {
    return after.process().stderrText().find("took back 0 of 0 kept sessions") != std::string::npos;
  })) << after.process().stderrText();
  EXPECT_THAT(after.errorOf("start_run", object({{"code", "#fake: get=x\n"}, {"session_id", id}})),
              HasSubstr("Unknown session_id"));
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace scs::testing
