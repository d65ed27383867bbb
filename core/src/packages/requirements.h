#pragma once

// A run's `packages`: requirement specifiers checked strictly before anything else is done with
// them. Only a project name and version clauses are accepted (PEP 508 without extras, markers,
// URLs or options), so that what reaches the resolver can name nothing but a project of the
// operator's wheelhouse or index.

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "result.h"

namespace scs::packages {

struct Requirement {
  std::string name;  // normalised as PEP 503 says: lower case, runs of "-", "_", "." as "-"
  std::string text;  // name and clauses without blanks, as the resolver gets it: "pandas>=2,<3"
  // The normalised name and the clauses: the same for every spelling of one requirement.
  std::string key() const;
};

// The project name as PEP 503 normalises it.
std::string normalizedName(const std::string& name);

// Parses one specifier: a name, then optionally clauses of an operator (==, !=, <=, >=, <, >,
// ~=) and a version, separated by commas. An Error, naming the specifier and what is wrong,
// for anything else, and for one that ends as an archive's file name does (".whl", ".zip",
// ".tar.gz", ...), which pip would take for a path.
Result<Requirement> parseRequirement(const std::string& specifier);

// Parses a whole set, at most `max_count` of them, each project at most once; `allowed` (empty:
// any) holds the normalised names a set may ask for. Sorted by name.
Result<std::vector<Requirement>> parseRequirements(const std::vector<std::string>& specifiers,
                                                   std::size_t max_count,
                                                   const std::set<std::string>& allowed);

}  // namespace scs::packages
