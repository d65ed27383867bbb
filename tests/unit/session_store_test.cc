// SessionStore (sessions/session_store.h): records round-trip, are 0600 in a 0700 directory, and a
// file that is not a record of this server's is reported and removed rather than trusted.
#include "sessions/session_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "support/errors.h"

namespace scs::sessions {
namespace {

using ::testing::HasSubstr;

class SessionStoreTest : public ::testing::Test {
 protected:
  SessionStoreTest() {
    char pattern[] = "/tmp/scs-store-XXXXXX";
    directory_ = ::mkdtemp(pattern);
  }
  ~SessionStoreTest() override { std::filesystem::remove_all(directory_); }

  SessionStore store() {
    Result<SessionStore> opened = SessionStore::open(directory_);
    EXPECT_TRUE(std::holds_alternative<SessionStore>(opened)) << std::get<Error>(opened).message;
    return std::get<SessionStore>(opened);
  }

  static SavedSession sample() {
    SavedSession session;
    session.id = "0123456789abcdef";
    session.tenant = "alice";
    session.language = policy::Language::kBash;
    session.limits = {2, 30, 1.5, 128};
    session.packages = packages::PackageLayerUse{"scs-pkg:abc", {"six==1.16.0"}, false, 0};
    session.uid = 100123;
    session.sandbox_id = "c0ffee";
    session.backend_saved = "{\"container\":\"c0ffee2\"}";
    // Whole milliseconds, as records keep them; one time for every sample.
    static const auto now =
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
    session.opened = now - std::chrono::seconds(30);
    session.last_active = now - std::chrono::seconds(20);
    session.hibernated = now - std::chrono::seconds(10);
    session.awake = std::chrono::milliseconds(1500);
    return session;
  }

  std::string directory_;
};

TEST_F(SessionStoreTest, ARecordRoundTripsAndIsOnlyTheServersToRead) {
  const SessionStore kept = store();
  ASSERT_EQ(scs::testing::errorOf(kept.write(sample())), std::nullopt);
  struct stat status {};
  ASSERT_EQ(::stat((kept.directory() + "/0123456789abcdef.json").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(kept.directory().c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0700u);

  std::vector<std::string> problems;
  const std::vector<SavedSession> loaded = kept.load(&problems);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(loaded.size(), 1u);
  const SavedSession& back = loaded[0];
  const SavedSession expected = sample();
  EXPECT_EQ(back.id, expected.id);
  EXPECT_EQ(back.tenant, "alice");
  EXPECT_EQ(back.language, policy::Language::kBash);
  EXPECT_EQ(back.limits, expected.limits);
  ASSERT_TRUE(back.packages);
  EXPECT_EQ(back.packages->image, "scs-pkg:abc");
  EXPECT_EQ(back.packages->installed, std::vector<std::string>{"six==1.16.0"});
  EXPECT_EQ(back.uid, 100123u);
  EXPECT_EQ(back.sandbox_id, "c0ffee");
  EXPECT_EQ(back.backend_saved, expected.backend_saved);
  EXPECT_EQ(back.opened, expected.opened);
  EXPECT_EQ(back.last_active, expected.last_active);
  EXPECT_EQ(back.hibernated, expected.hibernated);
  EXPECT_EQ(back.awake, expected.awake);

  kept.remove(expected.id);
  EXPECT_TRUE(kept.load(&problems).empty());
}

TEST_F(SessionStoreTest, WhatIsNotARecordOfItsOwnIsReportedAndRemoved) {
  const SessionStore kept = store();
  const auto put = [&](const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = kept.directory() + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
  };
  put("feed.json", "{not json", 0600);
  put("beef.json", "{\"version\":1}", 0600);
  put("cafe.json", "{\"version\":2}", 0600);  // a later server's: left for it
  put("notes.txt", "hello", 0600);
  SavedSession readable = sample();
  ASSERT_EQ(scs::testing::errorOf(kept.write(readable)), std::nullopt);
  ::chmod((kept.directory() + "/" + readable.id + ".json").c_str(), 0644);
  SavedSession misnamed = sample();
  misnamed.id = "abcd";
  ASSERT_EQ(scs::testing::errorOf(kept.write(misnamed)), std::nullopt);
  std::filesystem::rename(kept.directory() + "/abcd.json", kept.directory() + "/dcba.json");

  std::vector<std::string> problems;
  EXPECT_TRUE(kept.load(&problems).empty());
  EXPECT_EQ(problems.size(), 6u);
  std::string all;
  for (const std::string& problem : problems) {
    all += problem + "\n";
  }
  EXPECT_THAT(all, HasSubstr("feed.json: not a session record"));
  EXPECT_THAT(all, HasSubstr("beef.json: not a session record"));
  EXPECT_THAT(all, HasSubstr("notes.txt: not a session record"));
  EXPECT_THAT(all, HasSubstr("mode 0600"));
  EXPECT_THAT(all, HasSubstr("dcba.json: names another session"));
  EXPECT_THAT(all, HasSubstr("cafe.json: a record of another version of the server; left alone"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(kept.directory()), {}), 1);

  // A record whose times are out of range (a crafted or corrupt one) is not trusted either.
  SavedSession ancient = sample();
  ancient.hibernated = std::chrono::system_clock::time_point(std::chrono::milliseconds(1000));
  ASSERT_EQ(scs::testing::errorOf(kept.write(ancient)), std::nullopt);
  problems.clear();
  EXPECT_TRUE(kept.load(&problems).empty());
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_THAT(problems[0] + problems[1], HasSubstr("a time out of range"));
}

TEST_F(SessionStoreTest, OneServerAtATimeUsesADirectory) {
  std::optional<SessionStore> first(store());
  Result<SessionStore> second = SessionStore::open(directory_);
  ASSERT_TRUE(std::holds_alternative<Error>(second));
  EXPECT_THAT(std::get<Error>(second).message, HasSubstr("is in use by another server"));
  first.reset();
  EXPECT_TRUE(std::holds_alternative<SessionStore>(SessionStore::open(directory_)));
}

TEST_F(SessionStoreTest, ADirectoryOthersMayWriteOrARelativePathIsRefused) {
  ::chmod(directory_.c_str(), 0777);
  Result<SessionStore> open = SessionStore::open(directory_);
  ASSERT_TRUE(std::holds_alternative<Error>(open));
  EXPECT_THAT(std::get<Error>(open).message, HasSubstr("may be written by others (mode 777)"));
  Result<SessionStore> relative = SessionStore::open("state");
  ASSERT_TRUE(std::holds_alternative<Error>(relative));
  EXPECT_THAT(std::get<Error>(relative).message, HasSubstr("absolute path"));
  Result<SessionStore> invalid = SessionStore::open(directory_ + "/not/there");
  ASSERT_TRUE(std::holds_alternative<Error>(invalid));
  EXPECT_THAT(std::get<Error>(invalid).message, HasSubstr("cannot create"));
}

}  // namespace
}  // namespace scs::sessions
