#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>
#include <gtest/gtest.h>
#include <scs/backend/backend.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace scs::backend {
namespace {

// The plugin header as the compiler sees it: comments dropped, white space folded, so that
// rewording a comment is not an ABI change.
std::string declarations(std::istream& in) {
  std::string out;
  for (std::string line; std::getline(in, line);) {
    const std::size_t comment = line.find("//");
    if (comment != std::string::npos) {
      line.erase(comment);
    }
    for (const char c : line) {
      const bool blank = c == ' ' || c == '\t';
      if (!blank) {
        out.push_back(c);
      } else if (!out.empty() && out.back() != ' ') {
        out.push_back(' ');
      }
    }
    if (!out.empty() && out.back() != ' ') {
      out.push_back(' ');
    }
  }
  return out;
}

std::string fingerprint(const std::string& text) {
  Poco::SHA2Engine sha256;
  sha256.update(text);
  return Poco::DigestEngine::digestToHex(sha256.digest());
}

// One fingerprint per ABI version: a change to the header's declarations must come with a new
// kAbiVersion, or plugins built before it would load into a server they do not match.
const std::map<std::uint32_t, std::string> kFingerprints = {
    {3, "d25834adbd3c1b68cc70f9009c5db208807a5705e30a2cc713cc0f9a05ddd479"},
    // 4: PID 1 is the launcher; RLIMIT_NPROC; kills from outside.
    {4, "cdbe4e9f86b860074372919cef6aa5f393ceee4ec9ffb197df8610b9f2793be3"},
    // 5: OutputSink::ended() and RuntimeBackend::progress(), for the early report.
    {5, "ac53a6a33e3cd0d757184691c00b2b06d5dcf13bd35e8bf7b16d89955f216d74"},
    // 6: SandboxSpec::session, a sandbox that takes several deliveries with stdin kept open.
    {6, "a66dfcc8a722f3765044a0a24a43495cd582223d455a868646303409d1d27ecf"},
    // 7: kDeadlineLabel, for a backend whose engine can end a sandbox at a deadline.
    {7, "dc9d749044da2ed296d5c1cc3c8bd1fbfb1c89edb7ab3fc3e1fd1cd9eb9fbdb1"},
    // 8: RuntimeBackend::supports(), so a backend refuses at startup what it cannot carry.
    {8, "c56d0a5eca2a232077e24a0f989b1c7c93fb9028a912771809a76da31958d69d"},
    // 9: ProgressReply::oom_kills (a session's run tells the kills it saw) and
    // CapacityReply::versions (the audit names the runtime's version).
    {9, "d4c1aff7f279b539209fd76b7bb80d45d249b61aff5a980d5a5905019138109f"},
    // 10: derived images (buildImage, removeImage, listImages), for the packages of a run.
    {10, "75271bfe9b3b16e37cb46444fe5138306ce5db17abea4feae1699f79f2cc81bf"},
    // 11: snapshots (snapshots, snapshot, resume), for sessions that hibernate when idle.
    {11, "a02e26c3e0540554c878fd29de68d8fef9a0e8867d0c908764e18b9cd20ba438"},
    // 12: saved and adopt, for sessions kept across a restart (--state-dir).
    {12, "82896f5da0fdb252719070e41e2a0644b8eab14dc067c36e70df7811ee3516b9"},
};

TEST(AbiTest, TheHeaderMatchesTheFingerprintOfItsAbiVersion) {
  std::ifstream header(SCS_BACKEND_HEADER);
  ASSERT_TRUE(header.good()) << SCS_BACKEND_HEADER;
  const std::string actual = fingerprint(declarations(header));
  const auto recorded = kFingerprints.find(kAbiVersion);
  ASSERT_NE(recorded, kFingerprints.end())
      << "kAbiVersion " << kAbiVersion << " has no fingerprint; record " << actual;
  EXPECT_EQ(recorded->second, actual)
      << "core/include/scs/backend/backend.h changed: bump kAbiVersion and record its new "
         "fingerprint here";
}

TEST(AbiTest, OnlyDeclarationsCountNotCommentsOrSpacing) {
  std::istringstream commented("// the f\nint  f(); // what f does\n\n");
  std::istringstream plain("int f();\n");
  std::istringstream changed("long f();\n");
  const std::string folded = declarations(commented);
  EXPECT_EQ(folded, declarations(plain));
  EXPECT_NE(fingerprint(folded), fingerprint(declarations(changed)));
}

}  // namespace
}  // namespace scs::backend
