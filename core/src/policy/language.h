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

// Each language's name (launcher::kLanguage*), in the enum's order.
inline constexpr std::array<std::string_view, 3> kLanguageNames{
    backend::launcher::kLanguagePython, backend::launcher::kLanguageBash,
    backend::launcher::kLanguageJavascript};

constexpr std::string_view nameOf(Language language) {
  return kLanguageNames[static_cast<std::size_t>(language)];
}
// main.py, main.sh or main.js: the launcher's table (launcher::codeFileOf).
constexpr std::string_view codeFileOf(Language language) {
  return backend::launcher::codeFileOf(nameOf(language));
}

inline std::optional<Language> languageNamed(std::string_view name) {
  for (std::size_t index = 0; index < kLanguageNames.size(); ++index) {
    if (kLanguageNames[index] == name) {
      return static_cast<Language>(index);
    }
  }
  return std::nullopt;
}

// "python, bash or javascript", for the refusal of a name not in the list.
inline std::string languageNames() {
  std::string names;
  for (std::size_t index = 0; index < kLanguageNames.size(); ++index) {
    names += index == 0 ? "" : index + 1 == kLanguageNames.size() ? " or " : ", ";
    names += kLanguageNames[index];
  }
  return names;
}

}  // namespace scs::policy
