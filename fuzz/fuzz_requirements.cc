// packages::parseRequirements (issue 29) judges a model's `packages` before pip sees them. The
// input is split at newlines into specifiers; the first byte picks whether an allow-list
// applies. The verdict must agree with an independent model of the accepted grammar (a regular
// expression), and whatever is accepted must be safe to hand pip: a project name first, nothing
// pip could read as an option, a URL, a path or a file, the names normalised, sorted and unique.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "packages/requirements.h"
#include "support/checks.h"

namespace {

using scs::packages::Requirement;

// PEP 503's normalisation, written again: lower case, every run of "-", "_" and "." one "-".
std::string modelNormalised(const std::string& name) {
  static const std::regex runs("[-_.]+");
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::regex_replace(lower, runs, "-");
}

// The accepted grammar: blanks around, a name of letters, digits, "-", "_", "." that starts and
// ends with a letter or digit, then clauses of an operator and a version starting with a digit,
// separated by commas; at most 200 bytes, a name of at most 100, and no archive's file suffix.
// The model's verdict and, when accepted, the name and the text without blanks.
bool modelAccepts(const std::string& spec, std::string* name, std::string* text) {
  static const std::regex grammar(
      " *([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?) *"
      "((?:(?:==|!=|<=|>=|~=|<|>) *[0-9][A-Za-z0-9.*+!_-]*)"
      "(?: *, *(?:==|!=|<=|>=|~=|<|>) *[0-9][A-Za-z0-9.*+!_-]*)*)? *");
  static const std::regex blanks(" +");
  static const std::regex archive(R"(.*\.(whl|zip|tar|tgz|tbz|txz|tlz|gz|bz2|xz)$)",
                                  std::regex::icase);
  std::smatch match;
  if (spec.size() > 200 || !std::regex_match(spec, match, grammar) || match[1].length() > 100) {
    return false;
  }
  *name = match[1].str();
  *text = *name + std::regex_replace(match[2].str(), blanks, "");
  return !std::regex_match(*text, archive);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs;
  if (size == 0 || size > 4096) {
    return 0;
  }
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::set<std::string> allowed =
      data[0] % 2 == 0 ? std::set<std::string>{} : std::set<std::string>{"tqdm", "py-foo"};
  std::vector<std::string> specifiers;
  for (std::size_t start = 0; start <= input.size() && specifiers.size() < 40;) {
    const std::size_t end = std::min(input.find('\n', start), input.size());
    specifiers.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }

  // One specifier alone, against the model.
  for (const std::string& spec : specifiers) {
    std::string name;
    std::string text;
    const bool accepted = modelAccepts(spec, &name, &text);
    const Result<Requirement> parsed = packages::parseRequirement(spec);
    SCS_FUZZ_CHECK(std::holds_alternative<Requirement>(parsed) == accepted, spec);
    if (!accepted) {
      SCS_FUZZ_CHECK(std::get<Error>(parsed).message.find("is not a plain requirement") !=
                         std::string::npos,
                     spec);
      continue;
    }
    const Requirement& requirement = std::get<Requirement>(parsed);
    SCS_FUZZ_CHECK(requirement.text == text, spec);
    SCS_FUZZ_CHECK(requirement.name == modelNormalised(name), spec);
    SCS_FUZZ_CHECK(std::isalnum(static_cast<unsigned char>(requirement.text.front())) != 0, spec);
    SCS_FUZZ_CHECK(requirement.text.find_first_of(" \t\n@;[]/\\:#'\"$") == std::string::npos,
                   spec);
    // What was accepted is accepted again as itself.
    const Result<Requirement> again = packages::parseRequirement(requirement.text);
    SCS_FUZZ_CHECK(std::holds_alternative<Requirement>(again) &&
                       std::get<Requirement>(again).text == requirement.text,
                   spec);
  }

  // The whole set: accepted only if every one is, each project once, allowed, at most 32.
  const Result<std::vector<Requirement>> set = packages::parseRequirements(specifiers, 32, allowed);
  if (const auto* accepted = std::get_if<std::vector<Requirement>>(&set)) {
    SCS_FUZZ_CHECK(!accepted->empty() && accepted->size() <= 32, input);
    SCS_FUZZ_CHECK(accepted->size() == specifiers.size(), input);
    std::set<std::string> names;
    for (std::size_t i = 0; i < accepted->size(); ++i) {
      const Requirement& requirement = (*accepted)[i];
      SCS_FUZZ_CHECK(names.insert(requirement.name).second, input);
      SCS_FUZZ_CHECK(allowed.empty() || allowed.count(requirement.name) != 0, input);
      SCS_FUZZ_CHECK(i == 0 || (*accepted)[i - 1].name < requirement.name, input);
    }
  } else {
    SCS_FUZZ_CHECK(!std::get<Error>(set).message.empty(), input);
  }
  return 0;
}
