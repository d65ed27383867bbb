// The flag table (config_flags.cc): every flag's name, value placeholder, help, shown default
// and setter. Internal to config.cc, which parses, validates and renders --help from it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config.h"
#include "result.h"

namespace scs::config {

struct Flag {
  const char* name;     // the long flag without dashes; also the config file key
  const char* metavar;  // empty: takes no value
  const char* help;
  std::function<std::string(const Config&)> shown_default;  // nullptr: no default to show
  std::function<Result<Done>(Config&, const std::string&)> apply;
  // Given once per entry (--backend-option, --egress-allow): in a config file, an array of them.
  bool repeated = false;
};

inline std::string flagName(const std::string& name) { return "--" + name; }

// Every flag, in the order --help lists them.
const std::vector<Flag>& flags();

// The flag called `name` (without dashes), or nullptr.
const Flag* findFlag(const std::string& name);

}  // namespace scs::config
