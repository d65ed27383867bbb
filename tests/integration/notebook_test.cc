// Realistic notebook sessions (tests/integration/notebooks/, README there), each replayed cell
// by cell in one session at an agent's pace, under the runtime of SCS_TEST_RUNTIME: every
// cell's report is checked, and the session must live through every cell that does not end it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/harness.h"

namespace scs::integration {
namespace {

using ::testing::HasSubstr;

// The pause between cells: an agent reads a report before it sends the next cell.
constexpr auto kAgentPace = std::chrono::milliseconds(300);

struct Cell {
  int line = 0;  // of its header, for failure messages
  std::string status;
  std::map<std::string, std::string> expect;  // key (with its "=" or "~") -> value
  std::string code;
};

// `key=value` and `key~value` items of a header; a value is a bare word or a quoted string.
std::map<std::string, std::string> parseExpectations(const std::string& text, int line) {
  std::map<std::string, std::string> items;
  std::size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && text[at] == ' ') {
      ++at;
    }
    if (at >= text.size()) {
      break;
    }
    const std::size_t op = text.find_first_of("=~", at);
    if (op == std::string::npos) {
      throw std::runtime_error("line " + std::to_string(line) + ": no = or ~ in " + text);
    }
    const std::string key = text.substr(at, op - at) + text[op];
    std::string value;
    at = op + 1;
    if (at < text.size() && text[at] == '"') {
      for (++at; at < text.size() && text[at] != '"'; ++at) {
        if (text[at] == '\\' && at + 1 < text.size()) {
          const char escaped = text[++at];
          value.push_back(escaped == 'n' ? '\n' : escaped);
        } else {
          value.push_back(text[at]);
        }
      }
      ++at;
    } else {
      const std::size_t end = text.find(' ', at);
      value = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
      at = end == std::string::npos ? text.size() : end;
    }
    items[key] = value;
  }
  return items;
}

// A notebook's language, by its file's extension, and the comment that starts its cell headers.
struct Kind {
  const char* extension;
  const char* language;
  std::string header;
};
const std::vector<Kind>& kinds() {
  static const std::vector<Kind> all = {
      {".py", "python", "# %% "}, {".sh", "bash", "# %% "}, {".js", "javascript", "// %% "}};
  return all;
}
const Kind& kindOf(const std::filesystem::path& path) {
  for (const Kind& kind : kinds()) {
    if (path.extension() == kind.extension) {
      return kind;
    }
  }
  throw std::runtime_error("not a notebook: " + path.string());
}

std::vector<Cell> readNotebook(const std::filesystem::path& path) {
  std::ifstream in(path);
  const std::string& prefix = kindOf(path).header;
  std::vector<Cell> cells;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind(prefix, 0) == 0) {
      Cell cell;
      cell.line = number;
      const std::string header = line.substr(prefix.size());
      const std::size_t space = header.find(' ');
      cell.status = header.substr(0, space);
      if (space != std::string::npos) {
        cell.expect = parseExpectations(header.substr(space + 1), number);
      }
      cells.push_back(std::move(cell));
    } else if (!cells.empty()) {
      cells.back().code += line + "\n";
    }
  }
  return cells;
}

std::vector<std::string> notebooks() {
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(SCS_SOURCE_DIR "/tests/integration/notebooks")) {
    const auto extension = entry.path().extension();
    if (std::any_of(kinds().begin(), kinds().end(),
                    [&](const Kind& kind) { return extension == kind.extension; })) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

class NotebookTest : public OwnServerTest<::testing::TestWithParam<std::string>> {
 protected:
  // What a model is handed as text for each cell, in characters (issue 24), told at the end.
  static void TearDownTestSuite() {
    if (text_sizes_.empty()) {
      return;
    }
    std::sort(text_sizes_.begin(), text_sizes_.end());
    std::cout << "notebook cells: " << text_sizes_.size() << " text blocks, median "
              << text_sizes_[text_sizes_.size() / 2].first << " characters, max "
              << text_sizes_.back().first << " (" << text_sizes_.back().second << ")\n";
  }

  static inline std::vector<std::pair<std::size_t, std::string>> text_sizes_;
};

std::string filesOf(const Poco::JSON::Object::Ptr& report) {
  std::vector<std::string> names;
  if (const auto files = report->getArray("files")) {
    for (std::size_t i = 0; i < files->size(); ++i) {
      names.push_back(files->getObject(i)->getValue<std::string>("path"));
    }
  }
  std::sort(names.begin(), names.end());
  std::string joined;
  for (const std::string& name : names) {
    joined += (joined.empty() ? "" : ",") + name;
  }
  return joined;
}

// Every file's bytes are in its own content block only: none is repeated in the text block.
void expectEachFileOnce(const Poco::JSON::Object::Ptr& result, const std::string& where) {
  const auto content = result->getArray("content");
  ASSERT_TRUE(content && content->size() > 0) << where;
  const std::string text = content->getObject(0)->getValue<std::string>("text");
  for (std::size_t i = 1; i < content->size(); ++i) {
    const auto block = content->getObject(i);
    std::string bytes;
    if (block->getValue<std::string>("type") == "image") {
      bytes = block->getValue<std::string>("data");
    } else if (const auto resource = block->getObject("resource")) {
      bytes = resource->has("text") ? resource->getValue<std::string>("text")
                                    : resource->getValue<std::string>("blob");
    }
    if (bytes.size() >= 32) {
      EXPECT_EQ(text.find(bytes.substr(0, 32)), std::string::npos)
          << where << ": a file's content is in the text block too";
    }
  }
}

std::size_t imagesOf(const Poco::JSON::Object::Ptr& result) {
  std::size_t images = 0;
  if (const auto content = result->getArray("content")) {
    for (std::size_t i = 0; i < content->size(); ++i) {
      images += content->getObject(i)->getValue<std::string>("type") == "image" ? 1 : 0;
    }
  }
  return images;
}

TEST_P(NotebookTest, EveryCellReportsWhatItDidAndTheSessionLivesThroughIt) {
  const std::filesystem::path path = SCS_SOURCE_DIR "/tests/integration/notebooks/" + GetParam();
  const std::vector<Cell> cells = readNotebook(path);
  ASSERT_GE(cells.size(), 8u);
  const std::string session = openSession(server(), 2, kindOf(path).language);

  for (const Cell& cell : cells) {
    std::this_thread::sleep_for(kAgentPace);
    const std::string where = GetParam() + ":" + std::to_string(cell.line);
    Poco::JSON::Object::Ptr arguments = new Poco::JSON::Object;
    arguments->set("session_id", session);
    arguments->set("code", cell.code);
    arguments->set("wait_seconds", 60);
    const auto& expect = cell.expect;
    Poco::JSON::Object::Ptr run_limits = new Poco::JSON::Object;
    run_limits->set("timeout_seconds",
                    expect.count("timeout=") ? std::stod(expect.at("timeout=")) : 60.0);
    arguments->set("limits", run_limits);
    if (expect.count("stdin=")) {
      arguments->set("stdin", expect.at("stdin="));
    }
    Poco::JSON::Object::Ptr result = server().callTool("start_run", arguments);
    Poco::JSON::Object::Ptr report = result->getObject("structuredContent");
    ASSERT_TRUE(report) << where;
    if (!isFinalStatus(text(report, "status"))) {
      report = awaitFinal(server(), text(report, "run_id"));
      result = nullptr;  // its content blocks came with get_result
    }
    const std::string status = text(report, "status");
    EXPECT_EQ(status, cell.status) << where << ": " << describe(report);
    if (result) {
      expectEachFileOnce(result, where);
      text_sizes_.emplace_back(
          result->getArray("content")->getObject(0)->getValue<std::string>("text").size(), where);
    }
    for (const auto& [key, value] : expect) {
      if (key == "result=") {
        EXPECT_EQ(absentOrNull(report, "result") ? "" : text(report, "result"), value) << where;
      } else if (key == "result~") {
        EXPECT_THAT(absentOrNull(report, "result") ? "" : text(report, "result"), HasSubstr(value))
            << where;
      } else if (key == "stdout~" || key == "stderr~") {
        const std::string stream = key.substr(0, 6);
        EXPECT_THAT(absentOrNull(report, stream) ? "" : text(report, stream), HasSubstr(value))
            << where << ": " << describe(report);
      } else if (key == "stdout=" || key == "stderr=") {
        const std::string stream = key.substr(0, 6);
        EXPECT_EQ(absentOrNull(report, stream) ? "" : text(report, stream), value)
            << where << ": " << describe(report);
      } else if (key == "exception=") {
        const auto exception = report->getObject("exception");
        ASSERT_TRUE(exception) << where << ": no exception in " << describe(report);
        EXPECT_EQ(exception->getValue<std::string>("type"), value) << where;
      } else if (key == "files=") {
        EXPECT_EQ(filesOf(report), value) << where;
      } else if (key == "images=") {
        if (result) {
          EXPECT_EQ(imagesOf(result), std::stoul(value)) << where;
        }
      } else if (key == "exit=") {
        EXPECT_EQ(report->getValue<int>("exit_code"), std::stoi(value)) << where;
      } else if (key == "alive=") {
        EXPECT_EQ(flag(report, "session_alive"), value == "true") << where;
      } else if (key != "timeout=" && key != "stdin=") {
        ADD_FAILURE() << where << ": unknown expectation " << key;
      }
    }
    if (!expect.count("alive=")) {
      ASSERT_TRUE(flag(report, "session_alive"))
          << where << ": the session ended: " << describe(report);
    }
  }
  closeSession(server(), session);
}

// Test names: sales_py, inventory_sh, ...
INSTANTIATE_TEST_SUITE_P(Notebooks, NotebookTest, ::testing::ValuesIn(notebooks()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

}  // namespace
}  // namespace scs::integration
