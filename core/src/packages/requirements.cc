// Requirement specifiers, parsed by hand: the grammar we accept is a small, strict subset of
// PEP 508 (a name and version clauses), smaller than what a general parser such as
// packaging's would let through, and a request must be judged before any tool sees it.

#include "packages/requirements.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

namespace scs::packages {
namespace {

constexpr std::size_t kMaxNameBytes = 100;
constexpr std::size_t kMaxSpecifierBytes = 200;

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
}

bool isVersionChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '*' || c == '+' ||
         c == '!' || c == '-' || c == '_';
}

std::string quoted(std::string_view text) {
  return "\"" + std::string(text.substr(0, 80)) + (text.size() > 80 ? "...\"" : "\"");
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && text.front() == ' ') {
    text.remove_prefix(1);
  }
  while (!text.empty() && text.back() == ' ') {
    text.remove_suffix(1);
  }
  return text;
}

Error bad(std::string_view specifier, const std::string& why) {
  return invalid("The package " + quoted(specifier) + " is not a plain requirement: " + why +
                 ". Give a project name, optionally with versions: \"tqdm\", \"tqdm==4.66.1\", "
                 "\"tqdm>=4,<5\".");
}

// pip takes a requirement that ends as an archive's file name does for a path to one.
bool looksLikeArchive(std::string_view text) {
  static constexpr std::array<std::string_view, 10> kSuffixes = {
      ".whl", ".zip", ".tar", ".tgz", ".tbz", ".txz", ".tlz", ".gz", ".bz2", ".xz"};
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(kSuffixes.begin(), kSuffixes.end(), [&](std::string_view suffix) {
    return lower.size() >= suffix.size() &&
           lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  });
}

}  // namespace

std::string Requirement::key() const {
  const std::size_t clauses = text.find_first_of("=!<>~");
  return name + (clauses == std::string::npos ? std::string() : text.substr(clauses));
}

std::string normalizedName(const std::string& name) {
  std::string out;
  for (const char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') {
        out.push_back('-');
      }
    } else {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

Result<Requirement> parseRequirement(const std::string& specifier) {
  if (specifier.size() > kMaxSpecifierBytes) {
    return bad(specifier, "it is longer than " + std::to_string(kMaxSpecifierBytes) + " bytes");
  }
  const std::string_view text = trimmed(specifier);
  std::size_t end = 0;
  while (end < text.size() && isNameChar(text[end])) {
    ++end;
  }
  const std::string_view name = text.substr(0, end);
  if (name.empty() || std::isalnum(static_cast<unsigned char>(name.front())) == 0 ||
      std::isalnum(static_cast<unsigned char>(name.back())) == 0) {
    return bad(specifier,
               "it does not start with a project name (letters, digits, \"-\", \"_\", \".\")");
  }
  if (name.size() > kMaxNameBytes) {
    return bad(specifier, "the name is longer than " + std::to_string(kMaxNameBytes) + " bytes");
  }
  Requirement requirement{normalizedName(std::string(name)), std::string(name)};
  std::string_view rest = trimmed(text.substr(end));
  static constexpr std::array<std::string_view, 7> kOperators = {
      "==", "!=", "<=", ">=", "~=", "<", ">"};
  bool first = true;
  while (!rest.empty()) {
    if (!first) {
      if (rest.front() != ',') {
        return bad(specifier, "version clauses are separated by commas");
      }
      rest = trimmed(rest.substr(1));
      requirement.text.push_back(',');
    }
    first = false;
    const auto op = std::find_if(kOperators.begin(), kOperators.end(),
                                 [&](std::string_view o) { return rest.substr(0, o.size()) == o; });
    if (op == kOperators.end()) {
      const char c = rest.empty() ? '\0' : rest.front();  // empty after a trailing comma
      return bad(specifier, c == '['   ? "extras are not accepted"
                            : c == ';' ? "environment markers are not accepted"
                            : c == '@' ? "URLs are not accepted"
                                       : "a version clause starts with ==, !=, <=, >=, ~=, < or >");
    }
    requirement.text.append(*op);
    rest = trimmed(rest.substr(op->size()));
    std::size_t version_end = 0;
    while (version_end < rest.size() && isVersionChar(rest[version_end])) {
      ++version_end;
    }
    const std::string_view version = rest.substr(0, version_end);
    if (version.empty() || std::isdigit(static_cast<unsigned char>(version.front())) == 0) {
      return bad(specifier, "a version starts with a digit");
    }
    requirement.text.append(version);
    rest = trimmed(rest.substr(version_end));
  }
  if (looksLikeArchive(requirement.text)) {
    return bad(specifier, "it ends as an archive's file name, which pip would take for a path");
  }
  return requirement;
}

Result<std::vector<Requirement>> parseRequirements(const std::vector<std::string>& specifiers,
                                                   std::size_t max_count,
                                                   const std::set<std::string>& allowed) {
  if (specifiers.empty()) {
    return invalid("\"packages\" is empty: name at least one package, or leave it out.");
  }
  if (specifiers.size() > max_count) {
    return invalid("\"packages\" names " + std::to_string(specifiers.size()) +
                   " packages; at most " + std::to_string(max_count) + " are accepted.");
  }
  std::vector<Requirement> requirements;
  std::set<std::string> seen;
  for (const std::string& specifier : specifiers) {
    Result<Requirement> parsed = parseRequirement(specifier);
    if (auto* error = std::get_if<Error>(&parsed)) {
      return *error;
    }
    Requirement& requirement = std::get<Requirement>(parsed);
    if (!seen.insert(requirement.name).second) {
      return invalid("\"packages\" names " + requirement.name +
                     " twice: give each project once, with all its version clauses.");
    }
    if (!allowed.empty() && allowed.count(requirement.name) == 0) {
      return invalid("The package " + requirement.name +
                     " is not one this server's operator allows. Allowed: " +
                     [&] {
                       std::string names;
                       for (const std::string& name : allowed) {
                         names += (names.empty() ? "" : ", ") + name;
                       }
                       return names;
                     }() +
                     ".");
    }
    requirements.push_back(std::move(requirement));
  }
  std::sort(requirements.begin(), requirements.end(),
            [](const Requirement& a, const Requirement& b) { return a.name < b.name; });
  return requirements;
}

}  // namespace scs::packages
