// Packages of a run (issue 29): requirement specifiers judged strictly, and package layers made
// by the host's real pip from wheels this test writes (tests/support/make_wheels.py) into the
// fake backend's derived images.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_backend.h"
#include "mocks/mock_backend.h"
#include "packages/package_layers.h"
#include "packages/requirements.h"
#include "support/wheels.h"

namespace scs::packages {
namespace {

namespace fs = std::filesystem;
using ::testing::_;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Return;
using ::testing::StartsWith;

std::string errorOf(const Result<Requirement>& result) {
  const Error* error = std::get_if<Error>(&result);
  return error ? error->message : "";
}

TEST(RequirementTest, ANameAndVersionClausesAreAccepted) {
  const Result<Requirement> plain = parseRequirement("tqdm");
  ASSERT_TRUE(std::holds_alternative<Requirement>(plain)) << errorOf(plain);
  EXPECT_EQ(std::get<Requirement>(plain).name, "tqdm");
  EXPECT_EQ(std::get<Requirement>(plain).text, "tqdm");

  const Result<Requirement> ranged = parseRequirement(" Foo_Bar.baz >= 1.0 , <2.0b1 ");
  ASSERT_TRUE(std::holds_alternative<Requirement>(ranged)) << errorOf(ranged);
  EXPECT_EQ(std::get<Requirement>(ranged).name, "foo-bar-baz");
  EXPECT_EQ(std::get<Requirement>(ranged).text, "Foo_Bar.baz>=1.0,<2.0b1");

  for (const char* ok : {"a==1", "a!=1.2.*", "a~=1.4", "a<=2", "a>1,!=1.5,<3", "x1==1!2.0+local"}) {
    EXPECT_TRUE(std::holds_alternative<Requirement>(parseRequirement(ok))) << ok;
  }
}

TEST(RequirementTest, AnythingButAPlainRequirementIsRefusedBeforeAnyToolSeesIt) {
  for (const std::string& bad : std::vector<std::string>{
           "",
           "   ",
           "pkg @ https://example.com/pkg-1.0-py3-none-any.whl",
           "https://example.com/pkg-1.0-py3-none-any.whl",
           "pkg[extra]",
           "pkg; python_version < \"3.12\"",
           "--index-url=http://evil.example/simple",
           "-e .",
           "./pkg",
           "../pkg-1.0-py3-none-any.whl",
           "/tmp/pkg-1.0-py3-none-any.whl",
           "pkg==",
           "pkg===1.0",
           "pkg==1.0 --extra-index-url http://evil.example",
           "pkg==1.0\n--extra-index-url http://evil.example",
           "pkg 1.0",
           "-pkg",
           "pkg-",
           "pkg==v1",
           "pkg==1,",
           "pkg==1, ",
           "pkg.whl",
           "pkg==1.0.tar.gz",
           "Pkg.ZIP",
           std::string(201, 'a'),
       }) {
    const Result<Requirement> parsed = parseRequirement(bad);
    EXPECT_THAT(errorOf(parsed), HasSubstr("is not a plain requirement")) << "'" << bad << "'";
  }
  EXPECT_THAT(errorOf(parseRequirement("pkg[extra]")), HasSubstr("extras are not accepted"));
  EXPECT_THAT(errorOf(parseRequirement("pkg @ https://x")), HasSubstr("URLs are not accepted"));
  EXPECT_THAT(errorOf(parseRequirement("pkg;x")), HasSubstr("markers are not accepted"));
  EXPECT_THAT(errorOf(parseRequirement("pkg-1.0-py3-none-any.whl")),
              HasSubstr("pip would take for a path"));
}

TEST(RequirementTest, ASetNamesEachProjectOnceWithinTheCountAndTheAllowList) {
  const auto error = [](const Result<std::vector<Requirement>>& result) {
    const Error* e = std::get_if<Error>(&result);
    return e ? e->message : "";
  };
  const Result<std::vector<Requirement>> sorted = parseRequirements({"zeta", "Alpha>=1"}, 4, {});
  ASSERT_TRUE(std::holds_alternative<std::vector<Requirement>>(sorted)) << error(sorted);
  EXPECT_EQ(std::get<std::vector<Requirement>>(sorted).front().name, "alpha");

  EXPECT_THAT(error(parseRequirements({}, 4, {})), HasSubstr("is empty"));
  EXPECT_THAT(error(parseRequirements({"a", "b", "c"}, 2, {})),
              HasSubstr("names 3 packages; at most 2"));
  EXPECT_THAT(error(parseRequirements({"Py_Foo", "py-foo==1"}, 4, {})),
              HasSubstr("names py-foo twice"));
  EXPECT_THAT(error(parseRequirements({"tqdm", "evil"}, 4, {"tqdm", "plotly"})),
              AllOf(HasSubstr("evil is not one this server's operator allows"),
                    HasSubstr("Allowed: plotly, tqdm")));
}

// The wheels of make_wheels.py, written once for the suite.
class PackageLayersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    wheels_ = std::make_unique<testing::TestWheels>("--bomb 256");
    wheelhouse_ = wheels_->path();
  }
  static void TearDownTestSuite() { wheels_.reset(); }

  PackageLayersTest() {
    backend_.delegateTo(fake_);
    settings_.resolver.wheelhouse = wheelhouse_.string();
  }

  PackageLayers& layers() {
    if (!layers_) {
      layers_.emplace(backend_, settings_, "safe-code-sandbox:latest");
      const Result<Done> started = layers_->start();
      EXPECT_TRUE(std::holds_alternative<Done>(started));
    }
    return *layers_;
  }

  LayerGrant grantOf(const std::vector<std::string>& specifiers) {
    Result<LayerGrant> result = layers().layerFor(specifiers);
    if (const Error* error = std::get_if<Error>(&result)) {
      ADD_FAILURE() << error->message;
      return {};
    }
    return std::get<LayerGrant>(std::move(result));
  }

  std::string errorFor(const std::vector<std::string>& specifiers) {
    const Result<LayerGrant> result = layers().layerFor(specifiers);
    const Error* error = std::get_if<Error>(&result);
    EXPECT_NE(error, nullptr) << "made a layer for " << ::testing::PrintToString(specifiers);
    return error ? error->message : "";
  }

  static inline std::unique_ptr<testing::TestWheels> wheels_;
  static inline fs::path wheelhouse_;
  fake::FakeBackend fake_{fake::Options{}, nullptr};
  ::testing::NiceMock<mocks::MockRuntimeBackend> backend_;
  PackageSettings settings_;
  std::optional<PackageLayers> layers_;
};

TEST_F(PackageLayersTest, ANewSetIsBuiltOnceAndThenServedFromTheCache) {
  backend::ImageLayer built;
  EXPECT_CALL(backend_, buildImage(_)).WillOnce([&](const backend::ImageLayer& layer) {
    built = layer;
    return fake_.buildImage(layer);
  });
  const LayerGrant first = grantOf({"purepkg"});
  EXPECT_TRUE(first.use.built);
  EXPECT_EQ(first.use.installed, std::vector<std::string>{"purepkg==2.0"});
  EXPECT_THAT(first.use.image, StartsWith("safe-code-sandbox-packages:"));
  EXPECT_EQ(built.image, first.use.image);
  EXPECT_EQ(built.base_image, "safe-code-sandbox:latest");
  EXPECT_EQ(built.labels.at(kPackagesLabel), "purepkg==2.0");
  EXPECT_EQ(built.build_labels.at(backend::kManagedLabel), "true");
  // The files, under the directory no interpreter has on its path but the program's.
  EXPECT_THAT(built.archive, HasSubstr("usr/local/lib/scs-packages/purepkg/__init__.py"));
  EXPECT_THAT(built.archive, HasSubstr("VERSION = \"2.0\""));
  EXPECT_THAT(built.archive, HasSubstr("purepkg_probe.pth"));
  EXPECT_THAT(built.archive, Not(HasSubstr("usr/local/lib/python3")));
  EXPECT_EQ(built.archive.size() % 512, 0u);

  // The same set, however it is written.
  const LayerGrant again = grantOf({"PurePkg"});
  EXPECT_FALSE(again.use.built);
  EXPECT_EQ(again.use.image, first.use.image);
  EXPECT_EQ(again.use.installed, first.use.installed);
}

TEST_F(PackageLayersTest, AnEngineThatCannotMakeTheLayerIsTheServersErrorAndTheNextCallTriesAgain) {
  EXPECT_CALL(backend_, buildImage(_))
      .WillOnce(Return(backend::Status{backend::Code::kUnavailable, "no space left on device"}))
      .WillOnce([&](backend::ImageLayer layer) { return fake_.buildImage(std::move(layer)); });
  const Result<LayerGrant> failed = layers().layerFor({"purepkg"});
  ASSERT_TRUE(std::holds_alternative<Error>(failed));
  EXPECT_EQ(std::get<Error>(failed).kind, ErrorKind::kInternal);
  EXPECT_THAT(std::get<Error>(failed).message, HasSubstr("no space left on device"));
  EXPECT_TRUE(grantOf({"purepkg"}).use.built);  // not remembered as a set that cannot be had
}

TEST_F(PackageLayersTest, VersionsAskedForAreTheVersionsInstalled) {
  EXPECT_EQ(grantOf({"purepkg<2"}).use.installed, std::vector<std::string>{"purepkg==1.0"});
  EXPECT_EQ(grantOf({"needsold"}).use.installed,
            (std::vector<std::string>{"needsold==1.0", "purepkg==1.0"}));
}

TEST_F(PackageLayersTest, ASetThatCannotBeHadIsRefusedNamingThePackageAndNothingIsBuilt) {
  EXPECT_CALL(backend_, buildImage(_)).Times(0);
  EXPECT_THAT(errorFor({"nosuch"}), HasSubstr("No matching distribution found for nosuch"));
  EXPECT_THAT(errorFor({"winonly"}), AllOf(HasSubstr("winonly-1.0-cp311-cp311-win_amd64.whl"),
                                           HasSubstr("none for the sandbox (CPython 3.11")));
  EXPECT_THAT(errorFor({"purepkg==2.0", "needsold"}),
              AllOf(HasSubstr("The conflict is caused by"), HasSubstr("needsold 1.0 depends on "
                                                                      "purepkg<2")));
  EXPECT_THAT(errorFor({"purepkg==3"}), HasSubstr("purepkg==3"));
}

// pip runs once for a set, however it is spelled, and once a minute for one that cannot be had.
TEST_F(PackageLayersTest, ACachedOrRefusedSetRunsNoPipAgain) {
  const fs::path counter = wheelhouse_ / ("pip-runs-" + std::to_string(::getpid()));
  const fs::path script = wheelhouse_ / ("counting-pip-" + std::to_string(::getpid()) + ".sh");
  std::ofstream(script) << "echo \"$1\" >>" << counter.string()
                        << "\nexec /usr/bin/python3 -I -m pip \"$@\"\n";
  settings_.resolver.pip = {"/bin/sh", script.string()};
  const auto runs = [&] {
    std::ifstream in(counter);
    std::string line;
    std::vector<std::string> lines;
    while (std::getline(in, line)) {
      lines.push_back(line);
    }
    return lines;
  };
  EXPECT_TRUE(grantOf({"purepkg", "needsold"}).use.built);
  EXPECT_EQ(runs(), (std::vector<std::string>{"--version", "install"}));
  EXPECT_FALSE(grantOf({"NeedsOld", "PurePkg"}).use.built);
  EXPECT_THAT(errorFor({"nosuch==1"}), HasSubstr("nosuch"));
  EXPECT_THAT(errorFor({"NoSuch==1"}), HasSubstr("nosuch"));
  EXPECT_EQ(runs(), (std::vector<std::string>{"--version", "install", "install"}));
  fs::remove(counter);
  fs::remove(script);
}

TEST_F(PackageLayersTest, ALayerGoneFromTheEngineIsMadeAgain) {
  const std::string image = grantOf({"purepkg"}).use.image;
  ASSERT_TRUE(fake_.removeImage(image).ok());  // another server, or an operator's docker rmi
  const LayerGrant again = grantOf({"purepkg"});
  EXPECT_TRUE(again.use.built);
  EXPECT_EQ(again.use.image, image);
  EXPECT_EQ(fake_.listImages(kPackageSetLabel).images.size(), 1u);
}

TEST_F(PackageLayersTest, AFileWhosePathNoTarHeaderHoldsIsRefusedNamingIt) {
  EXPECT_CALL(backend_, buildImage(_)).Times(0);
  EXPECT_THAT(errorFor({"longpath"}), AllOf(HasSubstr("too long for the layer"),
                                            HasSubstr("longpath/"), HasSubstr("nnnnnnnn")));
}

TEST_F(PackageLayersTest, ADependencyTheOperatorDoesNotAllowIsRefused) {
  settings_.allowed = {"needsold"};
  EXPECT_CALL(backend_, buildImage(_)).Times(0);
  EXPECT_THAT(errorFor({"needsold"}),
              HasSubstr("need purepkg 1.0, which this server's operator does not allow"));
  EXPECT_THAT(errorFor({"purepkg"}), HasSubstr("purepkg is not one this server's operator allows"));
}

TEST_F(PackageLayersTest, ASetLargerThanTheOperatorAllowsIsRefused) {
  settings_.max_layer_bytes = 16;
  EXPECT_CALL(backend_, buildImage(_)).Times(0);
  EXPECT_THAT(errorFor({"purepkg"}),
              AllOf(HasSubstr("would unpack to"), HasSubstr("this server's operator allows")));
}

// Issue 45: a zip bomb (256 MiB of zeros in a 256 KiB wheel) is refused by the sizes its zip
// directory declares before pip unpacks any of it, so the host's temporary directory never
// holds more than the wheel itself; it used to take the whole 256 MiB before the cap refused it.
TEST_F(PackageLayersTest, AWheelThatWouldUnpackPastTheCapIsRefusedBeforeAnyOfItIsWritten) {
  settings_.max_layer_bytes = std::uint64_t{64} << 20;
  EXPECT_CALL(backend_, buildImage(_)).Times(0);
  std::atomic<bool> done{false};
  std::uintmax_t peak = 0;
  std::thread watch([&] {
    while (!done) {
      std::uintmax_t used = 0;
      std::error_code error;
      for (const auto& work : fs::directory_iterator(fs::temp_directory_path(), error)) {
        if (work.path().filename().string().rfind("scs-packages-", 0) != 0) {
          continue;
        }
        for (auto it = fs::recursive_directory_iterator(work.path(), error);
             it != fs::recursive_directory_iterator(); it.increment(error)) {
          used += it->is_regular_file(error) ? it->file_size(error) : 0;
        }
      }
      peak = std::max(peak, used);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const std::string refusal = errorFor({"bombpkg"});
  done = true;
  watch.join();
  EXPECT_THAT(refusal, AllOf(HasSubstr("would unpack to 268"), HasSubstr("bombpkg-1.0"),
                             HasSubstr("nothing was unpacked")));
  EXPECT_LT(peak, std::uintmax_t{8} << 20);
  std::cout << "a 256 MiB zip bomb refused; the temporary directory held at most " << peak
            << " bytes\n";
}

TEST_F(PackageLayersTest, TheLeastRecentlyUsedLayerGoesPastTheCapUnlessAnyoneHoldsIt) {
  settings_.max_layers = 1;
  const std::string old_image = grantOf({"purepkg==1.0"}).use.image;  // its hold is dropped
  EXPECT_CALL(backend_, removeImage(old_image));
  const LayerGrant held = grantOf({"purepkg==2.0"});
  ::testing::Mock::VerifyAndClearExpectations(&backend_);

  // Held: it stays, however far past the cap, until a later layer's eviction.
  EXPECT_CALL(backend_, removeImage(held.use.image)).Times(0);
  const LayerGrant newest = grantOf({"needsold"});
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  EXPECT_NE(newest.use.image, held.use.image);
  EXPECT_FALSE(grantOf({"purepkg==2.0"}).use.built);  // still served
}

TEST_F(PackageLayersTest, StartAdoptsThisBasesLayersAndRemovesThoseOfAnEarlierBase) {
  EXPECT_CALL(backend_, listImages(kPackageSetLabel))
      .WillOnce(Return(
          backend::ImageListReply{{},
                                  {{"safe-code-sandbox-packages:current",
                                    "safe-code-sandbox:latest",
                                    true,
                                    {{kPackageSetLabel, "digest-a"}, {kPackagesLabel, "a==1"}}},
                                   {"safe-code-sandbox-packages:stale",
                                    "safe-code-sandbox:latest",
                                    false,
                                    {{kPackageSetLabel, "digest-b"}, {kPackagesLabel, "b==1"}}},
                                   {"safe-code-sandbox-packages:other",
                                    "another:image",
                                    true,
                                    {{kPackageSetLabel, "digest-c"}, {kPackagesLabel, "c==1"}}}}}));
  EXPECT_CALL(backend_, removeImage("safe-code-sandbox-packages:stale"));
  EXPECT_CALL(backend_, removeImage("safe-code-sandbox-packages:current")).Times(0);
  EXPECT_CALL(backend_, removeImage("safe-code-sandbox-packages:other")).Times(0);
  layers();
}

TEST_F(PackageLayersTest, ABackendWithoutDerivedImagesOrAMissingWheelhouseStopsTheStart) {
  ::testing::StrictMock<mocks::MockRuntimeBackend> bare;
  EXPECT_CALL(bare, listImages(_))
      .WillOnce(Return(backend::ImageListReply{
          {backend::Code::kUnsupported, "this backend cannot list images"}, {}}));
  PackageLayers unsupported(bare, settings_, "safe-code-sandbox:latest");
  const Result<Done> refused = unsupported.start();
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_THAT(std::get<Error>(refused).message, HasSubstr("need a backend that derives images"));

  settings_.resolver.wheelhouse = (wheelhouse_ / "missing").string();
  PackageLayers missing(backend_, settings_, "safe-code-sandbox:latest");
  const Result<Done> no_wheelhouse = missing.start();
  ASSERT_TRUE(std::holds_alternative<Error>(no_wheelhouse));
  EXPECT_THAT(std::get<Error>(no_wheelhouse).message, HasSubstr("is not a directory"));
}

TEST_F(PackageLayersTest, AtShutdownACallWaitingForAnotherLayerIsAnsweredAtOnce) {
  std::promise<void> building;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  EXPECT_CALL(backend_, buildImage(_)).WillRepeatedly([&](const backend::ImageLayer& layer) {
    building.set_value();
    released.wait();
    return fake_.buildImage(layer);
  });
  layers();
  std::thread first([&] { grantOf({"purepkg==1.0"}); });
  building.get_future().wait();
  std::future<Result<LayerGrant>> waiting =
      std::async(std::launch::async, [&] { return layers().layerFor({"purepkg==2.0"}); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  layers().shutdown();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const Result<LayerGrant> answered = waiting.get();
  ASSERT_TRUE(std::holds_alternative<Error>(answered));
  EXPECT_THAT(std::get<Error>(answered).message, HasSubstr("shutting down"));
  release.set_value();
  first.join();
  // And no new one is begun.
  EXPECT_THAT(errorFor({"needsold"}), HasSubstr("shutting down"));
}

}  // namespace
}  // namespace scs::packages
