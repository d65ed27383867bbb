// The launcher's own resource limits (`--rlimits`), for an engine that cannot set a process's
// limits, as a Kubernetes Pod cannot (docs/SECURITY.md, 2b): in a real container that the engine
// gave no ulimits, under runc and under runsc, the program meets exactly the limits on PID 1's
// command line and cannot raise them.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "integration/harness.h"
#include "support/temp_file.h"

namespace scs::integration {
namespace {

using ::testing::HasSubstr;

const char* const kReportLimits = R"PY(import resource
for name in ("NPROC", "NOFILE", "FSIZE", "CORE"):
    print(name, *resource.getrlimit(getattr(resource, "RLIMIT_" + name)), flush=True)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    print("raised", flush=True)
except (OSError, ValueError):
    print("cannot raise", flush=True)
)PY";

TEST(LauncherTest, RlimitsOnItsCommandLineBindTheProgramWhereTheEngineSetNone) {
  testing::TempFile main_py(kReportLimits);
  testing::TempFile bundle("");
  // A bundle as the core sends one: an uncompressed ustar of main.py, mode 0644.
  ASSERT_EQ(runCommand("python3 -c \"import sys, tarfile; t = tarfile.open(sys.argv[2], 'w', "
                       "format=tarfile.USTAR_FORMAT); i = t.gettarinfo(sys.argv[1], "
                       "'main.py'); i.mode = 0o644; i.uid = i.gid = 0; i.uname = i.gname = ''; "
                       "t.addfile(i, open(sys.argv[1], 'rb')); t.close()\" " +
                       main_py.path() + " " + bundle.path())
                .exit_code,
            0);
  const std::string uid = "1900000998";
  const CommandResult run = runCommand("docker run --rm -i --runtime " + testRuntime() +
                                       " --network none --read-only --user " + uid + ":" + uid +
                                       " --tmpfs /workspace:uid=" + uid + ",gid=" + uid +
                                       ",mode=0700 --tmpfs /tmp " + kImage +
                                       " /usr/bin/python3 -I /opt/scs/launcher.py --deadline 60"
                                       " --rlimits nproc=64,nofile=77,fsize=123456,core=0 < " +
                                       bundle.path());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("NPROC 64 64"));
  EXPECT_THAT(run.output, HasSubstr("NOFILE 77 77"));
  EXPECT_THAT(run.output, HasSubstr("FSIZE 123456 123456"));
  EXPECT_THAT(run.output, HasSubstr("CORE 0 0"));
  EXPECT_THAT(run.output, HasSubstr("cannot raise"));
}

TEST(LauncherTest, AMalformedRlimitsFlagIsRefusedBeforeAnyCodeRuns) {
  const CommandResult run =
      runCommand("docker run --rm -i --runtime " + testRuntime() +
                 " --network none --read-only --user " + "1900000998:1900000998 " + kImage +
                 " /usr/bin/python3 -I /opt/scs/launcher.py --rlimits nproc=64,stack=1 </dev/null");
  EXPECT_EQ(run.exit_code, 125) << run.output;
  EXPECT_THAT(run.output, HasSubstr("sandbox launcher: rejected setup: arguments"));
}

}  // namespace
}  // namespace scs::integration
