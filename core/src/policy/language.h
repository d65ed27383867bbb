#pragma once

// The languages a run may be in (start_run's and open_session's `language`): each one's name on
// the wire and in the control file, and the file in /workspace that holds its code. The
// launcher starts the interpreter (docker/scs_launcher/languages.py); every limit, control,
// status and posture check is the same for all of them.

#include <scs/backend/launcher_protocol.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace scs::policy {

enum class Language { kPython, kBash, kJavascript };

struct LanguageInfo {
  Language language;
  std::string_view name;       // launcher::kLanguage*
  std::string_view code_file;  // launcher::kCodeFile*
};

inline constexpr std::array<LanguageInfo, 3> kLanguages{{
    {Language::kPython, backend::launcher::kLanguagePython, backend::launcher::kCodeFilePython},
    {Language::kBash, backend::launcher::kLanguageBash, backend::launcher::kCodeFileBash},
    {Language::kJavascript, backend::launcher::kLanguageJavascript,
     backend::launcher::kCodeFileJavascript},
}};

constexpr const LanguageInfo& infoOf(Language language) {
  return kLanguages[static_cast<std::size_t>(language)];
}
constexpr std::string_view nameOf(Language language) { return infoOf(language).name; }
constexpr std::string_view codeFileOf(Language language) { return infoOf(language).code_file; }

inline std::optional<Language> languageNamed(std::string_view name) {
  for (const LanguageInfo& info : kLanguages) {
    if (info.name == name) {
      return info.language;
    }
  }
  return std::nullopt;
}

// "python, bash or javascript", for the refusal of a name not in the list.
inline std::string languageNames() {
  std::string names;
  for (std::size_t index = 0; index < kLanguages.size(); ++index) {
    names += index == 0 ? "" : index + 1 == kLanguages.size() ? " or " : ", ";
    names += kLanguages[index].name;
  }
  return names;
}

}  // namespace scs::policy
