// bash and JavaScript runs and sessions in real containers (issue 28), under the runtime of
// SCS_TEST_RUNTIME: every status from its own evidence (an exit code, an uncaught exception, the
// engine's OOM record, the server's timer), files out, the last expression's value, state that
// carries over three runs of a session, a session's run interrupted at its timeout with the
// session going on, and the attacks that matter for each language failing as they do for
// Python: a shell fork bomb held at the process cap, a Node memory bomb ending out_of_memory, a
// binary written to scratch space refused execution.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "integration/harness.h"

namespace scs::integration {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

class LanguageTest : public OwnServerTest<> {
 protected:
  static Poco::JSON::Object::Ptr run(const std::string& language, const std::string& code,
                                     Limits limits = {}, const std::string& session_id = {}) {
    Poco::JSON::Object::Ptr arguments = startRunArguments({code, limits, nullptr});
    arguments->set("language", language);
    if (!session_id.empty()) {
      arguments->set("session_id", session_id);
    }
    return runToFinal(server(), arguments);
  }

  static std::string open(const std::string& language) {
    Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
    arguments->set("language", language);
    const auto session = callToolOk(server(), "open_session", arguments);
    EXPECT_EQ(text(session, "language"), language);
    return text(session, "session_id");
  }

  static std::vector<std::string> filePaths(const Poco::JSON::Object::Ptr& report) {
    std::vector<std::string> paths;
    if (const auto files = report->getArray("files")) {
      for (std::size_t index = 0; index < files->size(); ++index) {
        paths.push_back(files->getObject(index)->getValue<std::string>("path"));
      }
    }
    return paths;
  }
};

TEST_F(LanguageTest, BashRunsWithTheToolsAndReturnsItsExitCodeStreamsAndFiles) {
  const auto report = run("bash",
                          "echo \"$0 in $PWD\"\n"
                          "jq -c '.a + 1' <<< '{\"a\": 41}'\n"
                          "sqlite3 :memory: 'select 6 * 7'\n"
                          "printf 'b\\na\\nb\\n' | sort | uniq -c | sort -rn | head -1 | xargs\n"
                          "echo to-stderr >&2\n"
                          "seq 3 > /workspace/out/seq.txt\n"
                          "exit 3\n");
  EXPECT_EQ(text(report, "status"), "failed") << describe(report);
  EXPECT_EQ(integer(report, "exit_code"), 3);
  EXPECT_EQ(stream(report, "stdout"), "/workspace/main.sh in /workspace\n42\n42\n2 b\n");
  EXPECT_EQ(stream(report, "stderr"), "to-stderr\n");
  EXPECT_THAT(filePaths(report), ::testing::ElementsAre("seq.txt"));
}

TEST_F(LanguageTest, BashTimeoutAndMemoryEndAsPythonsDo) {
  const auto slept = run("bash", "sleep 100\n", Limits{.timeout_seconds = 2});
  EXPECT_EQ(text(slept, "status"), "timed_out") << describe(slept);
  // The shell itself holds 300 MB in a variable.
  const auto signalled = run("bash", "echo before\nkill -SEGV $$\necho after\n");
  EXPECT_EQ(text(signalled, "status"), "failed") << describe(signalled);
  EXPECT_EQ(text(signalled, "signal"), "SIGSEGV");
  EXPECT_EQ(stream(signalled, "stdout"), "before\n");
  const auto hog = run("bash", "kept=$(head -c 300000000 /dev/zero | tr '\\0' a)\necho done\n",
                       Limits{.memory_gb = 0.25});
  EXPECT_EQ(text(hog, "status"), "out_of_memory") << describe(hog);
}

// The classic `:(){ :|:& };:`: the process cap holds it (bash retries a failed fork, so it runs
// until the timeout), the run is timed_out with its reason, and the server goes on.
TEST_F(LanguageTest, BashForkBombIsHeldAtTheProcessCapUntilItsTimeout) {
  const auto bomb =
      run("bash", "bomb() { bomb | bomb & }\nbomb\nsleep 100\n", Limits{.timeout_seconds = 8});
  EXPECT_EQ(text(bomb, "status"), "timed_out") << describe(bomb);
  EXPECT_LT(number(bomb, "duration_seconds"), 30.0);
  const auto after = run("bash", "echo still here\n");
  EXPECT_EQ(stream(after, "stdout"), "still here\n") << describe(after);
}

TEST_F(LanguageTest, ABinaryWrittenToScratchSpaceIsRefusedExecutionInBash) {
  const auto report = run("bash",
                          "for d in /tmp /workspace /workspace/out; do\n"
                          "  cp /usr/bin/true $d/t && chmod 755 $d/t\n"
                          "  $d/t 2>/dev/null; echo \"$d $?\"\n"
                          "done\n");
  // 126: found but not executable (EACCES from the noexec mount or Landlock).
  EXPECT_EQ(stream(report, "stdout"), "/tmp 126\n/workspace 126\n/workspace/out 126\n")
      << describe(report);
}

// JavaScript as it is written in 2026 (issue 45): static and dynamic imports and top-level
// await in a one-shot run, on the image's current Node.js LTS.
TEST_F(LanguageTest, AOneShotRunTakesImportsTopLevelAwaitAndTodaysNode) {
  const auto report = run("javascript",
                          "import os from 'node:os';\n"
                          "import {join} from 'node:path';\n"
                          "const {setTimeout: later} = await import('node:timers/promises');\n"
                          "await later(50);\n"
                          "[os.platform(), join('a', 'b'), [3, 1, 2].toSorted(),\n"
                          " Number(process.versions.node.split('.')[0]) >= 22]\n");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(text(report, "result"), "[ 'linux', 'a/b', [ 1, 2, 3 ], true ]") << describe(report);
}

TEST_F(LanguageTest, JavascriptReturnsTheLastExpressionFilesAndItsUncaughtException) {
  const auto report = run("javascript",
                          "const fs = require('fs');\n"
                          "fs.writeFileSync('/workspace/out/a.json', JSON.stringify({n: 1}));\n"
                          "console.log('hi from', process.version.split('.')[0]);\n"
                          "console.error('warn');\n"
                          "({answer: 6 * 7})\n");
  EXPECT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(integer(report, "exit_code"), 0);
  EXPECT_EQ(text(report, "result"), "{ answer: 42 }");
  EXPECT_THAT(stream(report, "stdout"), HasSubstr("hi from v"));
  EXPECT_EQ(stream(report, "stderr"), "warn\n");
  EXPECT_THAT(filePaths(report), ::testing::ElementsAre("a.json"));

  const auto thrown = run("javascript",
                          "function inner() { throw new TypeError('bad input'); }\n"
                          "inner();\n");
  EXPECT_EQ(text(thrown, "status"), "failed") << describe(thrown);
  EXPECT_EQ(integer(thrown, "exit_code"), 1);
  const auto exception = thrown->getObject("exception");
  ASSERT_TRUE(exception) << describe(thrown);
  EXPECT_EQ(text(exception, "type"), "TypeError");
  EXPECT_EQ(text(exception, "message"), "bad input");
  // The stack, as Node prints it, is on stderr (so the compact report leaves out `traceback`),
  // with no frame of the launcher's runner.
  EXPECT_THAT(stream(thrown, "stderr"), HasSubstr("at inner (/workspace/main.js:1:"));
  EXPECT_THAT(stream(thrown, "stderr"), Not(HasSubstr("runner.js")));

  // A Promise as the last value is awaited: its rejection is the uncaught exception.
  const auto rejected = run("javascript", "Promise.reject(new RangeError('later'))\n");
  EXPECT_EQ(text(rejected, "status"), "failed") << describe(rejected);
  ASSERT_TRUE(rejected->getObject("exception")) << describe(rejected);
  EXPECT_EQ(text(rejected->getObject("exception"), "type"), "RangeError");

  const auto exited = run("javascript", "process.exit(4)\n");
  EXPECT_EQ(text(exited, "status"), "failed") << describe(exited);
  EXPECT_EQ(integer(exited, "exit_code"), 4);
}

TEST_F(LanguageTest, NodeMemoryBombIsOutOfMemoryAndABusyLoopTimedOut) {
  const auto bomb = run("javascript",
                        "const kept = [];\n"
                        "for (;;) kept.push(Buffer.alloc(1 << 20, 1), new Array(1e5).fill(1.5));\n",
                        Limits{.memory_gb = 0.25});
  EXPECT_EQ(text(bomb, "status"), "out_of_memory") << describe(bomb);
  const auto loop = run("javascript", "for (;;) {}\n", Limits{.timeout_seconds = 2});
  EXPECT_EQ(text(loop, "status"), "timed_out") << describe(loop);
}

TEST_F(LanguageTest, ABinaryWrittenToScratchSpaceIsRefusedExecutionInNode) {
  const auto report = run("javascript",
                          "const fs = require('fs'), cp = require('child_process');\n"
                          "fs.copyFileSync('/usr/bin/true', '/tmp/t');\n"
                          "fs.chmodSync('/tmp/t', 0o755);\n"
                          "try { cp.execFileSync('/tmp/t'); 'ran' } catch (e) { e.code }\n");
  EXPECT_EQ(text(report, "result"), "'EACCES'") << describe(report);
}

TEST_F(LanguageTest, ABashSessionKeepsItsDirectoryVariablesFunctionsAndJobs) {
  const std::string session = open("bash");
  const auto first = run("bash",
                         "cd /tmp\n"
                         "IFS=,\n"  // the code's own: the shell's reading of runs keeps its own
                         "count=1\n"
                         "greet() { echo \"hello $1\"; }\n"
                         "sleep 300 &\n"
                         "echo started\n",
                         {}, session);
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);
  EXPECT_EQ(stream(first, "stdout"), "started\n");

  const auto second =
      run("bash", "count=$((count + 1))\ngreet \"$count\"\npwd\njobs -r | wc -l\n", {}, session);
  EXPECT_EQ(stream(second, "stdout"), "hello 2\n/tmp\n1\n") << describe(second);

  // A run interrupted at its timeout ends with the session alive, and the shell goes on.
  const auto slow =
      run("bash", "sleep 100\necho not reached\n", Limits{.timeout_seconds = 2}, session);
  EXPECT_EQ(text(slow, "status"), "timed_out") << describe(slow);
  EXPECT_TRUE(flag(slow, "session_alive"));
  EXPECT_THAT(stream(slow, "stdout"), Not(HasSubstr("not reached")));

  const auto third = run("bash", "echo $count $PWD\nfalse\n", {}, session);
  EXPECT_EQ(stream(third, "stdout"), "2 /tmp\n") << describe(third);
  EXPECT_EQ(text(third, "status"), "failed");
  EXPECT_EQ(integer(third, "exit_code"), 1);
  EXPECT_TRUE(flag(third, "session_alive"));

  // A session has one language; a run's stdin reaches its commands, as in a one-shot run, and
  // is gone with the run.
  Poco::JSON::Object::Ptr other = startRunArguments({"print(1)", {}, nullptr});
  other->set("language", "python");
  other->set("session_id", session);
  const auto refused = server().callTool("start_run", other);
  EXPECT_TRUE(refused->optValue<bool>("isError", false));
  Poco::JSON::Object::Ptr with_stdin =
      startRunArguments({"read -r first\necho \"$first\"\ncat\n", {}, nullptr});
  with_stdin->set("language", "bash");
  with_stdin->set("session_id", session);
  with_stdin->set("stdin", "one\ntwo\n");
  const auto read_stdin = runToFinal(server(), with_stdin);
  EXPECT_EQ(stream(read_stdin, "stdout"), "one\ntwo\n") << describe(read_stdin);
  const auto after_stdin = run("bash", "cat; ls -A /tmp | grep -c scs-stdin\n", {}, session);
  EXPECT_EQ(stream(after_stdin, "stdout"), "0\n") << describe(after_stdin);

  // `exit` ends the shell, and with it the session, as in any persistent shell.
  const auto exited = run("bash", "exit 2\n", {}, session);
  EXPECT_FALSE(flag(exited, "session_alive")) << describe(exited);
  closeSession(server(), session);
}

TEST_F(LanguageTest, AJavascriptSessionKeepsOneGlobalContext) {
  const std::string session = open("javascript");
  const auto first = run("javascript",
                         "globalThis.n = 1;\n"
                         "let m = 10;\n"
                         "function total() { return n + m; }\n"
                         "const data = [3, 1, 2];\n",
                         {}, session);
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);

  const auto second = run("javascript", "n += 1;\ntotal()\n", {}, session);
  EXPECT_EQ(text(second, "result"), "12") << describe(second);

  // A callback of an earlier run that throws fails no later run: its stack is output.
  const auto scheduled = run(
      "javascript", "setTimeout(() => { throw new TypeError('late'); }, 600);\n1\n", {}, session);
  EXPECT_EQ(text(scheduled, "status"), "succeeded") << describe(scheduled);
  const auto waited =
      run("javascript", "new Promise((done) => setTimeout(() => done(n), 1500))\n", {}, session);
  EXPECT_EQ(text(waited, "status"), "succeeded") << describe(waited);
  EXPECT_EQ(text(waited, "result"), "2");
  EXPECT_THAT(stream(waited, "stderr"), HasSubstr("TypeError: late"));

  const auto slow = run("javascript", "for (;;) {}\n", Limits{.timeout_seconds = 2}, session);
  EXPECT_EQ(text(slow, "status"), "timed_out") << describe(slow);
  EXPECT_TRUE(flag(slow, "session_alive")) << describe(slow);

  const auto third = run("javascript", "[...data].sort().concat(n)\n", {}, session);
  EXPECT_EQ(text(third, "result"), "[ 1, 2, 3, 2 ]") << describe(third);

  const auto thrown = run("javascript", "null.x\n", {}, session);
  EXPECT_EQ(text(thrown, "status"), "failed") << describe(thrown);
  ASSERT_TRUE(thrown->getObject("exception"));
  EXPECT_EQ(text(thrown->getObject("exception"), "type"), "TypeError");
  EXPECT_TRUE(flag(thrown, "session_alive"));

  // process.exit() ends the run with its code, as sys.exit() does in a Python session.
  const auto exited = run("javascript", "process.exit(3)\n", {}, session);
  EXPECT_EQ(integer(exited, "exit_code"), 3) << describe(exited);
  EXPECT_TRUE(flag(exited, "session_alive"));
  const auto after = run("javascript", "n\n", {}, session);
  EXPECT_EQ(text(after, "result"), "2") << describe(after);
  closeSession(server(), session);
}

TEST_F(LanguageTest, AnUnknownLanguageIsAToolError) {
  Poco::JSON::Object::Ptr arguments = startRunArguments({"echo 1", {}, nullptr});
  arguments->set("language", "ruby");
  const auto refused = server().callTool("start_run", arguments);
  EXPECT_TRUE(refused->optValue<bool>("isError", false));
}

}  // namespace
}  // namespace scs::integration
