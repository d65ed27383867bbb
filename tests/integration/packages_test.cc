// Packages of a run in real containers (issue 29), under the runtime of SCS_TEST_RUNTIME, from
// wheels this test writes itself (tests/support/make_wheels.py: a pure-Python one and one with a
// C extension): a run imports both from its layer, a second run of the set is served from the
// cache, a set with an unknown package, a wheel for another platform or a conflict is refused
// before any code runs, the layer is read-only and the scratch space still refuses execution,
// a session's runs share its packages, and an index on loopback serves them as a wheelhouse does.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "integration/harness.h"
#include "support/wheels.h"

namespace scs::integration {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The wheels and the servers, made once: one with the wheelhouse, one with the same wheels on
// an index served from loopback.
class PackagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(engineProblem(), "");
    wheels_ = std::make_unique<testing::TestWheels>("--native --index");
  }

  static void TearDownTestSuite() {
    // Each server ends on stdin EOF, which removes every sandbox it made before it exits.
    for (std::unique_ptr<testing::McpProcess>* server : {&index_server_, &wheelhouse_server_}) {
      if (*server) {
        (*server)->closeStdin();
        EXPECT_TRUE((*server)->waitExit(std::chrono::seconds(10)).has_value());
        server->reset();
      }
    }
    index_.reset();
    wheels_.reset();
    // The layers this suite made, which no sandbox uses any more (no -f: one that did would
    // fail here).
    const CommandResult removed = runCommand(
        "docker images -q --filter label=io.scs.package-set | sort -u | xargs -r docker rmi");
    EXPECT_EQ(removed.exit_code, 0) << removed.output;
  }

  static testing::McpProcess& wheelhouseServer() {
    if (!wheelhouse_server_) {
      wheelhouse_server_ =
          launchServer({"--prepared", "0", "--wheelhouse", wheels_->path().string()});
    }
    return *wheelhouse_server_;
  }

  // A static HTTP server of wheels_ on a port of loopback the kernel picks, and a server that
  // knows only that index.
  static testing::McpProcess& indexServer() {
    if (!index_server_) {
      index_ = std::make_unique<testing::McpProcess>(
          "/usr/bin/python3",
          std::vector<std::string>{
              "-I", "-c",
              "import functools, http.server, sys\n"
              "handler = functools.partial(http.server.SimpleHTTPRequestHandler,"
              " directory=sys.argv[1])\n"
              "server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)\n"
              "print(server.server_address[1], flush=True)\n"
              "server.serve_forever()\n",
              wheels_->path().string()});
      const std::optional<std::string> port = index_->readLine(std::chrono::seconds(10));
      if (!port) {
        throw std::runtime_error("the index did not start: " + index_->stderrText());
      }
      index_server_ =
          launchServer({"--prepared", "0", "--package-index",
                        "http://127.0.0.1:" + *port + "/simple/", "--allow-packages", "purepkg"});
    }
    return *index_server_;
  }

  static Poco::JSON::Array::Ptr list(std::initializer_list<std::string> items) {
    Poco::JSON::Array::Ptr array = new Poco::JSON::Array;
    for (const std::string& item : items) {
      array->add(item);
    }
    return array;
  }

  static Poco::JSON::Object::Ptr run(testing::McpProcess& server, const std::string& code,
                                     Poco::JSON::Array::Ptr packages) {
    Poco::JSON::Object::Ptr arguments = startRunArguments({code, {}, nullptr});
    arguments->set("packages", packages);
    return runToFinal(server, arguments);
  }

  // The tool error of a start_run that must be refused; no run exists for it.
  static std::string refusal(testing::McpProcess& server, Poco::JSON::Array::Ptr packages) {
    Poco::JSON::Object::Ptr arguments = startRunArguments({"print('ran')", {}, nullptr});
    arguments->set("packages", packages);
    const Poco::JSON::Object::Ptr result = server.callTool("start_run", arguments);
    EXPECT_TRUE(result->optValue<bool>("isError", false)) << testing::toolText(result);
    return testing::toolText(result);
  }

  static Poco::JSON::Object::Ptr packagesOf(const Poco::JSON::Object::Ptr& report) {
    const Poco::JSON::Object::Ptr packages = report->getObject("packages");
    if (!packages) {
      throw std::runtime_error("the report names no packages: " + describe(report));
    }
    return packages;
  }

  static inline std::unique_ptr<testing::TestWheels> wheels_;
  static inline std::unique_ptr<testing::McpProcess> index_;
  static inline std::unique_ptr<testing::McpProcess> wheelhouse_server_;
  static inline std::unique_ptr<testing::McpProcess> index_server_;
};

constexpr const char* kImportBoth =
    "import importlib.util, os, struct, sys, purepkg, cext\n"
    "print('versions', purepkg.VERSION, cext.add(2, 3))\n"
    "print('files', purepkg.__file__, cext.__file__)\n"
    "print('pth', getattr(sys, 'scs_pth_seen', False))\n"
    "with open(importlib.util.cache_from_source(purepkg.__file__), 'rb') as pyc:\n"
    "    stamp = struct.unpack('<I', pyc.read(12)[8:12])[0]\n"
    "print('pyc', stamp == int(os.stat(purepkg.__file__).st_mtime))\n";

TEST_F(PackagesTest, ARunImportsAPureAndANativePackageAndTheSecondRunIsServedFromTheCache) {
  const auto first = run(wheelhouseServer(), kImportBoth, list({"purepkg", "cext"}));
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);
  EXPECT_EQ(verdict(first, "versions"), "2.0 5");
  EXPECT_EQ(verdict(first, "files"),
            "/usr/local/lib/scs-packages/purepkg/__init__.py "
            "/usr/local/lib/scs-packages/cext.cpython-311-x86_64-linux-gnu.so");
  // The wheel's .pth file was read by the program's interpreter, as by a site directory's; the
  // bytecode pip compiled is valid beside its source, so no import compiles again.
  EXPECT_EQ(verdict(first, "pth"), "True");
  EXPECT_EQ(verdict(first, "pyc"), "True");
  const auto packages = packagesOf(first);
  EXPECT_TRUE(flag(packages, "built"));
  ASSERT_EQ(packages->getArray("installed")->size(), 2u);
  EXPECT_EQ(packages->getArray("installed")->getElement<std::string>(0), "cext==1.0");
  EXPECT_EQ(packages->getArray("installed")->getElement<std::string>(1), "purepkg==2.0");

  const auto second = run(wheelhouseServer(), kImportBoth, list({"cext", "PurePkg"}));
  ASSERT_EQ(text(second, "status"), "succeeded") << describe(second);
  EXPECT_EQ(verdict(second, "versions"), "2.0 5");
  EXPECT_FALSE(packagesOf(second)->has("built"));  // a compact report says so only when built
  // One derived image for the set, carrying the operator's image beneath it.
  const CommandResult images = runCommand(
      "docker images --format '{{.Repository}}:{{.Tag}}' --filter label=io.scs.package-set");
  EXPECT_EQ(std::count(images.output.begin(), images.output.end(), '\n'), 1) << images.output;

  // Without packages, the same server's runs have none.
  const auto plain = runToFinal(wheelhouseServer(), startRunArguments({kImportBoth, {}, nullptr}));
  EXPECT_EQ(text(plain, "status"), "failed");
  EXPECT_THAT(stream(plain, "stderr"), HasSubstr("No module named 'purepkg'"));
}

TEST_F(PackagesTest, TheLayerIsReadOnlyAndTheScratchSpaceStillRefusesExecution) {
  const auto report = run(wheelhouseServer(),
                          "import ctypes, errno, os, shutil, subprocess, cext\n"
                          "try:\n"
                          "    open(cext.__file__, 'ab')\n"
                          "    print('layer writable')\n"
                          "except OSError as e:\n"
                          "    print('layer', errno.errorcode[e.errno])\n"
                          "try:\n"
                          "    open('/usr/local/lib/scs-packages/new.py', 'w')\n"
                          "    print('layer-new writable')\n"
                          "except OSError as e:\n"
                          "    print('layer-new', errno.errorcode[e.errno])\n"
                          "ctypes.CDLL(cext.__file__)\n"
                          "print('layer-map ok')\n"
                          "shutil.copy(cext.__file__, '/tmp/copy.so')\n"
                          "try:\n"
                          "    ctypes.CDLL('/tmp/copy.so')\n"
                          "    print('scratch-map allowed')\n"
                          "except OSError as e:\n"
                          "    print('scratch-map refused')\n"
                          "shutil.copy('/usr/bin/true', '/tmp/true')\n"
                          "os.chmod('/tmp/true', 0o755)\n"
                          "try:\n"
                          "    subprocess.run(['/tmp/true'])\n"
                          "    print('scratch-exec allowed')\n"
                          "except PermissionError:\n"
                          "    print('scratch-exec refused')\n",
                          list({"cext"}));
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_THAT(verdict(report, "layer"), ::testing::AnyOf("EACCES", "EROFS"));
  EXPECT_THAT(verdict(report, "layer-new"), ::testing::AnyOf("EACCES", "EROFS"));
  EXPECT_EQ(verdict(report, "layer-map"), "ok");
  // gVisor's 2022 snapshot maps a file of a noexec mount executable all the same (SECURITY.md
  // 5, "Native code the program brings"); runc refuses it.
  EXPECT_EQ(verdict(report, "scratch-map"), underGvisor() ? "allowed" : "refused");
  EXPECT_EQ(verdict(report, "scratch-exec"), "refused");
}

TEST_F(PackagesTest, ASetThatCannotBeHadIsRefusedBeforeAnyCodeRuns) {
  EXPECT_THAT(refusal(wheelhouseServer(), list({"nosuch"})),
              HasSubstr("No matching distribution found for nosuch"));
  EXPECT_THAT(
      refusal(wheelhouseServer(), list({"winonly"})),
      HasSubstr("The wheelhouse has winonly only as winonly-1.0-cp311-cp311-win_amd64.whl"));
  EXPECT_THAT(refusal(wheelhouseServer(), list({"purepkg==2.0", "needsold"})),
              HasSubstr("needsold 1.0 depends on purepkg<2"));
  EXPECT_THAT(refusal(wheelhouseServer(), list({"purepkg @ https://example.com/p.whl"})),
              HasSubstr("URLs are not accepted"));
  // No sandbox was made for any of them: the server has none left once the other tests' runs
  // are removed.
  EXPECT_TRUE(eventually([] { return containersOfServer(wheelhouseServer()).empty(); },
                         std::chrono::seconds(20)))
      << ::testing::PrintToString(containersOfServer(wheelhouseServer()));
}

TEST_F(PackagesTest, ASessionsRunsShareItsPackagesAndItsState) {
  Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
  arguments->set("packages", list({"purepkg==1.0"}));
  const auto session = callToolOk(wheelhouseServer(), "open_session", arguments);
  EXPECT_EQ(packagesOf(session)->getArray("installed")->getElement<std::string>(0), "purepkg==1.0");
  const std::string id = text(session, "session_id");
  const auto run_in = [&](const std::string& code) {
    Poco::JSON::Object::Ptr run_arguments = startRunArguments({code, {}, nullptr});
    run_arguments->set("session_id", id);
    return runToFinal(wheelhouseServer(), run_arguments);
  };
  const auto first = run_in("import purepkg\nkept = purepkg.VERSION\n");
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);
  const auto second = run_in("print('kept', kept)\n");
  EXPECT_EQ(verdict(second, "kept"), "1.0");
  closeSession(wheelhouseServer(), id);
}

TEST_F(PackagesTest, AnIndexOnLoopbackServesThePackagesItsAllowListNames) {
  const auto report = run(indexServer(), "import purepkg\nprint('version', purepkg.VERSION)\n",
                          list({"purepkg<2"}));
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_EQ(verdict(report, "version"), "1.0");
  // The server's log records the wheel it resolved and its hash (a layer of the same wheels,
  // made by the other server from the wheelhouse, is the same layer).
  EXPECT_THAT(indexServer().stderrText(),
              HasSubstr("purepkg 1.0 from purepkg-1.0-py3-none-any.whl sha256 "));
  EXPECT_THAT(refusal(indexServer(), list({"cext"})),
              HasSubstr("cext is not one this server's operator allows"));
}

}  // namespace
}  // namespace scs::integration
