// A sandbox prepared ahead of its run has an interpreter that imported the warm modules while it
// waited (--warm-modules). The program must see the same world as in a sandbox created for it,
// but for sys.modules, the collector's frozen objects and the threads those modules started:
// the same probe runs in both and prints everything else it can see. Issue 14.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "integration/harness.h"

namespace scs::integration {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

const char* const kProbe = R"PY(import gc, os, resource, signal, sys, warnings

def show(label, value):
    print(label, repr(value))

show("modules", ("numpy" in sys.modules, "pandas" in sys.modules,
                 "matplotlib.pyplot" in sys.modules))
show("frozen", gc.get_freeze_count() > 0)
show("argv", sys.argv)
show("main", (__name__, __file__, __cached__, type(__loader__).__name__, __spec__, __package__))
show("globals", sorted(globals()))
show("cwd", os.getcwd())
show("path", sys.path)
show("flags", tuple(sys.flags))
show("stdio", (os.isatty(0), os.fstat(0).st_mode >> 12, sys.stdout.line_buffering,
               sys.stdout.encoding, sys.stderr.encoding))
show("warnings", [str(f) for f in warnings.filters])
show("signals", [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM,
                                                     signal.SIGPIPE, signal.SIGCHLD)])
show("blocked", sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
# A signal sent to the process while the program blocks it waits for the program: no thread the
# warm imports started takes it (and dies of it, with the whole process).
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
os.kill(os.getpid(), signal.SIGRTMIN)
show("self-signal", (signal.SIGRTMIN in signal.sigpending(), signal.sigwait([signal.SIGRTMIN])))
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGRTMIN])
show("umask", os.umask(0o022))
show("env", sorted(os.environ.items()))
show("rlimits", [resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC,
                                                  resource.RLIMIT_FSIZE, resource.RLIMIT_CORE)])
show("ids", (os.getuid() == os.geteuid() == os.getgid() == os.getegid(),  # each sandbox its own
             os.getgroups() == [os.getgid()]))
show("fds", sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
show("workspace", sorted(os.listdir("/workspace")))
show("recursion", sys.getrecursionlimit())
show("gc", (gc.isenabled(), gc.get_threshold()))
show("hash", sys.flags.hash_randomization)
import matplotlib.pyplot as plt
import pandas
show("pandas", pandas.__version__)
show("pyplot", (plt.get_fignums(), plt.get_backend(), plt.rcParams["figure.figsize"]))

def fails():
    raise ValueError("the same")

fails()
)PY";

// Stdout lines by their label; the value is the rest of the line.
std::map<std::string, std::string> linesOf(const std::string& stdout_text) {
  std::map<std::string, std::string> lines;
  std::istringstream in(stdout_text);
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    lines[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return lines;
}

TEST(WarmInterpreterTest, TheProgramSeesTheSameWorldAsInAFreshSandboxButForItsModules) {
  ASSERT_THAT(engineProblem(), IsEmpty());
  // Named: under runsc the default is none.
  auto warm = launchServer({"--prepared", "1", "--warm-modules", "numpy,pandas,matplotlib.pyplot"});
  auto fresh = launchServer({"--prepared", "0", "--warm-modules", "numpy"});
  const auto idle = [&] {
    const std::vector<std::string> ids = containersOfServer(*warm);
    return ids.size() == 1 && containerState(ids[0]).rfind("running ", 0) == 0;
  };
  ASSERT_TRUE(eventually(idle, std::chrono::seconds(60)));
  // Started is not yet warm: a run that arrives while the interpreter imports waits for the
  // module being imported only, and one that arrives before the first finds none. Warm is when
  // the imports' CPU use has stopped.
  const auto quiet = [&] {
    const std::vector<std::string> ids = containersOfServer(*warm);
    if (ids.size() != 1) {
      return false;
    }
    const CommandResult cpu =
        runCommand("docker stats --no-stream --format '{{.CPUPerc}}' " + ids[0]);
    try {
      return cpu.exit_code == 0 && std::stod(cpu.output) < 2.0;  // "0.05%"
    } catch (const std::exception&) {
      return false;
    }
  };
  ASSERT_TRUE(eventually(quiet, std::chrono::seconds(60)));

  const std::string warm_id = startRun(*warm, {kProbe, Limits{}, nullptr});
  const auto warm_report = awaitFinal(*warm, warm_id);
  // The log line precedes the report, but stderr is read on another thread than stdout.
  const std::string started = "run " + warm_id + " of tenant local started after";
  ASSERT_TRUE(eventually([&] { return warm->stderrText().find(started) != std::string::npos; },
                         std::chrono::seconds(10)))
      << tail(warm->stderrText());
  ASSERT_THAT(warm->stderrText(), HasSubstr("in prepared sandbox"));
  const auto fresh_report = awaitFinal(*fresh, startRun(*fresh, {kProbe, Limits{}, nullptr}));

  std::map<std::string, std::string> in_warm = linesOf(stream(warm_report, "stdout"));
  std::map<std::string, std::string> in_fresh = linesOf(stream(fresh_report, "stdout"));
  EXPECT_EQ(in_warm["modules"], "(True, True, True)") << describe(warm_report);
  EXPECT_EQ(in_warm["frozen"], "True");
  // --warm-modules applies to prepared sandboxes only: a fresh one imports nothing ahead.
  EXPECT_EQ(in_fresh["modules"], "(False, False, False)") << describe(fresh_report);
  EXPECT_EQ(in_fresh["frozen"], "False");
  in_warm.erase("modules");
  in_warm.erase("frozen");
  in_fresh.erase("modules");
  in_fresh.erase("frozen");
  EXPECT_EQ(in_warm.size(), 22u);
  EXPECT_EQ(in_fresh.size(), 22u);
  EXPECT_EQ(in_warm["self-signal"], "(True, <Signals.SIGRTMIN: 34>)") << describe(warm_report);
  for (const auto& [label, value] : in_warm) {
    EXPECT_EQ(value, in_fresh[label]) << label;
  }

  for (const char* key : {"status", "exit_code", "stderr"}) {
    EXPECT_EQ(warm_report->get(key).toString(), fresh_report->get(key).toString()) << key;
  }
  EXPECT_EQ(text(warm_report, "status"), "failed");
  EXPECT_EQ(integer(warm_report, "exit_code"), 1);
  std::ostringstream warm_exception;
  std::ostringstream fresh_exception;
  warm_report->getObject("exception")->stringify(warm_exception);
  fresh_report->getObject("exception")->stringify(fresh_exception);
  EXPECT_EQ(warm_exception.str(), fresh_exception.str());
  EXPECT_THAT(warm_exception.str(), HasSubstr("the same"));
  for (testing::McpProcess* server : {warm.get(), fresh.get()}) {
    server->closeStdin();
    EXPECT_EQ(server->waitExit(std::chrono::seconds(60)), 0) << tail(server->stderrText());
  }
}

}  // namespace
}  // namespace scs::integration
