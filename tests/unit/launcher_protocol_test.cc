// The launcher protocol has two copies, core/include/scs/backend/launcher_protocol.h and
// docker/scs_launcher/protocol.py: every constant of one is in the other, with the same value.
// Both files are read as text (the header's `inline constexpr ... kName = value;`, the module's
// `NAME = literal`), so a constant added to one side only fails here.

#include <gtest/gtest.h>
#include <scs/backend/launcher_protocol.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "launcher/side_channel.h"

namespace scs {
namespace {

namespace protocol = backend::launcher;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// kTrailerPrefix -> TRAILER_PREFIX
std::string pythonName(const std::string& cpp_name) {
  std::string name;
  for (std::size_t i = 1; i < cpp_name.size(); ++i) {
    const char c = cpp_name[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i > 1) {
      name.push_back('_');
    }
    name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return name;
}

// A C++ string literal's bytes (the escapes the header uses), or a number as written.
std::string cppValue(const std::string& literal) {
  if (literal.empty() || literal.front() != '"') {
    return literal;
  }
  const std::size_t close = literal.rfind('"');
  std::string value;
  for (std::size_t i = 1; i < close; ++i) {
    if (literal[i] == '\\' && i + 1 < close) {
      const char escaped = literal[++i];
      value.push_back(escaped == 'n' ? '\n' : escaped == '0' ? '\0' : escaped);
    } else {
      value.push_back(literal[i]);
    }
  }
  return value;
}

std::map<std::string, std::string> headerConstants() {
  const std::string text = readFile(SCS_SOURCE_DIR "/core/include/scs/backend/launcher_protocol.h");
  const std::regex constant(R"(inline constexpr [^=]+ (k[A-Za-z]+) = ("[^;]*"(sv)?|[0-9]+);)");
  std::map<std::string, std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), constant);
       it != std::sregex_iterator(); ++it) {
    found[pythonName((*it)[1])] = cppValue((*it)[2]);
  }
  return found;
}

// NAME -> value, each byte of a str as a byte (the constants are ASCII), from the module.
std::map<std::string, std::string> moduleConstants() {
  const std::string command =
      "/usr/bin/python3 -I " SCS_SOURCE_DIR "/tests/launcher/protocol_constants.py " SCS_SOURCE_DIR
      "/docker/scs_launcher/protocol.py";
  std::map<std::string, std::string> found;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return found;
  }
  std::string output;
  char buffer[4096];
  while (const std::size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) {
    output.append(buffer, n);
  }
  ::pclose(pipe);
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t equals = line.find('=');
    std::string value;
    const std::string escaped = line.substr(equals + 1);
    for (std::size_t i = 0; i < escaped.size(); ++i) {
      if (escaped[i] == '\\' && i + 1 < escaped.size()) {
        const char e = escaped[++i];
        if (e == 'n') {
          value.push_back('\n');
        } else if (e == 'x' && i + 2 < escaped.size()) {
          value.push_back(static_cast<char>(std::stoi(escaped.substr(i + 1, 2), nullptr, 16)));
          i += 2;
        } else {
          value.push_back(e);
        }
      } else {
        value.push_back(escaped[i]);
      }
    }
    found[line.substr(0, equals)] = value;
  }
  return found;
}

TEST(LauncherProtocolTest, TheHeaderAndTheLaunchersModuleHoldTheSameConstants) {
  const auto header = headerConstants();
  const auto module = moduleConstants();
  ASSERT_GE(header.size(), 30u) << "the header's constants were not found";
  ASSERT_GE(module.size(), 30u) << "protocol.py's constants were not found";
  for (const auto& [name, value] : header) {
    const auto other = module.find(name);
    ASSERT_NE(other, module.end()) << name << " is in launcher_protocol.h, not in protocol.py";
    EXPECT_EQ(other->second, value) << name;
  }
  for (const auto& [name, value] : module) {
    EXPECT_TRUE(header.count(name)) << name << " is in protocol.py, not in launcher_protocol.h";
  }
}

// The text the test reads is the text the compiler read.
TEST(LauncherProtocolTest, TheHeadersTextReadsAsItsCompiledValues) {
  const auto header = headerConstants();
  EXPECT_EQ(header.at("TRAILER_PREFIX"), std::string(protocol::kTrailerPrefix));
  EXPECT_EQ(header.at("END_PREFIX"), std::string(protocol::kEndPrefix));
  EXPECT_EQ(header.at("MARKER_END"), std::string(protocol::kMarkerEnd));
  EXPECT_EQ(header.at("REJECTED_EXIT"), std::to_string(protocol::kRejectedExit));
  EXPECT_EQ(header.at("MAX_FRAME_BYTES"), std::to_string(protocol::kMaxFrameBytes));
  EXPECT_EQ(protocol::kTrailerPrefix.size(), 14u);
  EXPECT_EQ(protocol::kEndPrefix.size(), 9u);
}

TEST(LauncherProtocolTest, TheCoresNamesAreTheProtocols) {
  EXPECT_EQ(launcher::trailerMarker("ab"), std::string("\n\0SCS-TRAILER-ab\0", 17));
  EXPECT_EQ(launcher::stderrEndMarker("ab"), std::string("\0SCS-END-ab\0", 12));
  EXPECT_EQ(std::string(launcher::kControlPath),
            std::string(protocol::kControlDirectory) + "/" + std::string(protocol::kControlFile));
  EXPECT_EQ(std::string(launcher::kStdinPath),
            std::string(protocol::kControlDirectory) + "/" + std::string(protocol::kStdinFile));
}

}  // namespace
}  // namespace scs
