// The launcher's side of its protocol (scs/backend/launcher_protocol.h) as the fake plays it:
// the frames a session's sandbox reads, and what the launcher writes once a program has ended.
#include "launcher_side.h"

#include <scs/backend/launcher_protocol.h>

#include <cstdio>
#include <string_view>
#include <vector>

#include "json_access.h"

namespace scs::fake {
namespace {

namespace launcher = backend::launcher;

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (byte < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out.append(escaped);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// `"key":` for a key of the trailer or the control file.
std::string member(std::string_view key) { return jsonString(key) + ":"; }

}  // namespace

std::string controlPath(std::string_view file) {
  return std::string(launcher::kControlDirectory) + "/" + std::string(file);
}

std::string nonceOf(std::string_view control) { return stringOf(control, launcher::kControlNonce); }

std::string codeFileOf(std::string_view control) {
  return std::string(launcher::codeFileOf(stringOf(control, launcher::kControlLanguage)));
}

std::string stringOf(std::string_view control, std::string_view name) {
  const std::string key = member(name) + "\"";
  const std::size_t at = control.find(key);
  if (at == std::string_view::npos) {
    return {};
  }
  const std::size_t start = at + key.size();
  const std::size_t end = control.find('"', start);
  return end == std::string_view::npos ? std::string()
                                       : std::string(control.substr(start, end - start));
}

std::string tracebackOf(const std::pair<std::string, std::string>& exception) {
  return "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 1, in "
         "<module>\n" +
         exception.first + ": " + exception.second + "\n";
}

std::string endMarkerOf(const std::string& nonce) {
  return std::string(launcher::kEndPrefix) + nonce + std::string(launcher::kMarkerEnd);
}

std::string trailerOf(const std::string& nonce, const Script& script,
                      const std::string& program_exit, const std::optional<std::string>& result) {
  std::string trailer(launcher::kTrailerPrefix);
  trailer += nonce;
  trailer += launcher::kMarkerEnd;
  if (script.trailer_json) {
    return trailer + *script.trailer_json + "\n";
  }
  trailer += "{" + member(launcher::kTrailerExit) + program_exit + "," +
             member(launcher::kTrailerException);
  if (script.exception) {
    trailer += "{\"type\":" + jsonString(script.exception->first) +
               ",\"message\":" + jsonString(script.exception->second) +
               ",\"traceback\":" + jsonString(tracebackOf(*script.exception)) + "}";
  } else {
    trailer += "null";
  }
  trailer += "," + member(launcher::kTrailerFiles) + "[";
  for (std::size_t i = 0; i < script.out_files.size(); ++i) {
    const auto& [path, content] = script.out_files[i];
    trailer += (i == 0 ? "" : ",");
    trailer += "{\"path\":" + jsonString(path) + ",\"size\":" + std::to_string(content.size()) +
               ",\"content_base64\":\"" + json::encodeBase64(content) + "\"}";
  }
  trailer += "]," + member(launcher::kTrailerFilesTruncated) + "false," +
             member(launcher::kTrailerFilesOmitted) + "0";
  if (result) {
    trailer += "," + member(launcher::kTrailerResult) + jsonString(*result);
  }
  return trailer + "}\n";
}

std::optional<launcher::StdinFrame> oneFrame(const std::string& bytes) {
  launcher::StdinFrameReader reader;
  std::vector<launcher::StdinFrame> frames;
  if (!reader.feed(bytes, frames) || frames.size() != 1 || reader.buffered() != 0) {
    return std::nullopt;
  }
  return std::move(frames.front());
}

bool opensSession(const std::string& bytes) {
  return bytes.rfind(std::string(launcher::kSessionFrame) + " ", 0) == 0;
}

}  // namespace scs::fake
