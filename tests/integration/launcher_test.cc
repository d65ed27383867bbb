// What the launcher enforces and checks itself, for an engine that cannot set a process's limits
// or show its /proc masking, as a Kubernetes Pod cannot (docs/SECURITY.md, 2b): in real
// containers started by the engine without those settings, under runc and under runsc.

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

// Runs the launcher as PID 1 of a container the engine gave only its own defaults (no ulimits;
// Docker's default masked and read-only paths), with `flags` and main.py as its bundle.
CommandResult launch(const std::string& flags, const std::string& main_py = "print('ran')\n") {
  testing::TempFile source(main_py);
  testing::TempFile bundle("");
  // A bundle as the core sends one: an uncompressed ustar of main.py, mode 0644.
  const CommandResult packed = runCommand(
      "python3 -c \"import sys, tarfile; t = tarfile.open(sys.argv[2], 'w', "
      "format=tarfile.USTAR_FORMAT); i = t.gettarinfo(sys.argv[1], 'main.py'); i.mode = 0o644; "
      "i.uid = i.gid = 0; i.uname = i.gname = ''; t.addfile(i, open(sys.argv[1], 'rb')); "
      "t.close()\" " +
      source.path() + " " + bundle.path());
  if (packed.exit_code != 0) {
    return packed;
  }
  const std::string uid = "1900000998";
  return runCommand("docker run --rm -i --runtime " + testRuntime() +
                    " --network none --read-only --user " + uid + ":" + uid +
                    " --tmpfs /workspace:uid=" + uid + ",gid=" + uid + ",mode=0700 --tmpfs /tmp " +
                    kImage + " /usr/bin/python3 -I /opt/scs/launcher.py --deadline 60 " + flags +
                    " < " + bundle.path());
}

TEST(LauncherTest, RlimitsOnItsCommandLineBindTheProgramWhereTheEngineSetNone) {
  const CommandResult run =
      launch("--rlimits nproc=64,nofile=77,fsize=123456,core=0", kReportLimits);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("NPROC 64 64"));
  EXPECT_THAT(run.output, HasSubstr("NOFILE 77 77"));
  EXPECT_THAT(run.output, HasSubstr("FSIZE 123456 123456"));
  EXPECT_THAT(run.output, HasSubstr("CORE 0 0"));
  EXPECT_THAT(run.output, HasSubstr("cannot raise"));
}

TEST(LauncherTest, AMalformedFlagIsRefusedBeforeAnyCodeRuns) {
  for (const char* flags : {"--rlimits nproc=64,stack=1", "--masked proc/keys", "--readonly"}) {
    const CommandResult run = launch(flags);
    EXPECT_EQ(run.exit_code, 125) << flags << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr("sandbox launcher: rejected setup: arguments")) << flags;
    EXPECT_THAT(run.output, ::testing::Not(HasSubstr("ran"))) << flags;
  }
}

// The paths the engine masked and made read-only pass; one it left readable, or writable, ends
// the sandbox before main.py runs.
TEST(LauncherTest, PathsTheEngineMaskedPassAndOneItDidNotEndsTheSandbox) {
  const CommandResult masked = launch(
      "--masked /proc/keys,/proc/timer_list,/proc/acpi,/sys/firmware,/proc/no-such "
      "--readonly /proc/sys,/proc/bus");
  EXPECT_EQ(masked.exit_code, 0) << masked.output;
  EXPECT_THAT(masked.output, HasSubstr("ran"));

  // Docker 20.10 does not mask /proc/interrupts; gVisor's /proc has none.
  const CommandResult interrupts = launch("--masked /proc/interrupts");
  if (underGvisor()) {
    EXPECT_EQ(interrupts.exit_code, 0) << interrupts.output;
  } else {
    EXPECT_EQ(interrupts.exit_code, 125) << interrupts.output;
    EXPECT_THAT(interrupts.output, HasSubstr("rejected setup: /proc/interrupts is not masked"));
    EXPECT_THAT(interrupts.output, ::testing::Not(HasSubstr("ran")));
  }

  const CommandResult writable = launch("--readonly /tmp");
  EXPECT_EQ(writable.exit_code, 125) << writable.output;
  EXPECT_THAT(writable.output, HasSubstr("rejected setup: /tmp is not read-only"));
  EXPECT_THAT(writable.output, ::testing::Not(HasSubstr("ran")));
}

}  // namespace
}  // namespace scs::integration
