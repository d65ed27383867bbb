// LimitPolicy: maxima lowered to the host's cores and memory, defaults to the maxima, and each
// requested limit checked by one table of fields, with a sentence naming the key when refused.

#include "policy/limits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "policy/json_values.h"

namespace scs::policy {
namespace {

std::optional<double> hostCores(const HostCapacity& host) {
  return host.cores > 0 ? std::optional<double>(host.cores) : std::nullopt;
}

// Floored to hundredths so that the lowered maximum reads well ("23.49", not
// "23.4991455078125") and never exceeds what the host has.
std::optional<double> hostMemoryGb(const HostCapacity& host) {
  if (host.memory_bytes <= 0) {
    return std::nullopt;
  }
  return std::floor(static_cast<double>(host.memory_bytes) / kBytesPerGb * 100) / 100;
}

std::optional<double> noHostFigure(const HostCapacity&) { return std::nullopt; }

struct LimitField {
  std::string_view key;
  double Limits::*value;
  double LimitSettings::*floor;
  std::string_view unit;       // "Requested 8 CPUs"
  std::string_view what;       // "Requested 32 GB of memory"
  std::string_view host_unit;  // "(this host has 2 cores)"
  std::optional<double> (*host_figure)(const HostCapacity&);
};

constexpr std::array<LimitField, 3> kFields{{
    {"memory_gb", &Limits::memory_gb, &LimitSettings::min_memory_gb, "GB", " of memory",
     "GB of memory", hostMemoryGb},
    {"timeout_seconds", &Limits::timeout_seconds, &LimitSettings::min_timeout_seconds, "seconds",
     " of timeout", "", noHostFigure},
    {"cpus", &Limits::cpus, &LimitSettings::min_cpus, "CPUs", "", "cores", hostCores},
}};

constexpr std::string_view kAllowed = "memory_gb, timeout_seconds, cpus";

std::string amount(const LimitField& field, double value) {
  return formatNumber(value) + " " + std::string(field.unit);
}

std::string requestedAmount(const LimitField& field, double value) {
  return "Requested " + amount(field, value) + std::string(field.what);
}

std::string hostHas(const LimitField& field, double figure) {
  return "this host has " + formatNumber(figure) + " " + std::string(field.host_unit);
}

Error reject(std::string message) { return overLimits(std::move(message)); }

}  // namespace

std::string formatNumber(double value) {
  if (value == 0) {
    value = 0;  // "-0" would read as a typo
  }
  char text[32];
  // %g trims trailing zeros; 15 digits read best and round-trip almost every input, the
  // rest need up to 17 ("16.000000000000004" must not print as "16").
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) {
      break;
    }
  }
  return text;
}

LimitPolicy::LimitPolicy(const LimitSettings& settings, const HostCapacity& host,
                         std::vector<std::string>* adjustments)
    : settings_(settings), host_(host), defaults_(settings.defaults), maxima_(settings.maxima) {
  const auto note = [adjustments](std::string sentence) {
    if (adjustments != nullptr) {
      adjustments->push_back(std::move(sentence));
    }
  };
  for (const LimitField& field : kFields) {
    double& maximum = maxima_.*field.value;
    const std::optional<double> host_has = field.host_figure(host_);
    if (host_has && maximum > *host_has) {
      note("Lowered the maximum " + std::string(field.key) + " from " + formatNumber(maximum) +
           " to " + formatNumber(*host_has) + ": " + hostHas(field, *host_has) + ".");
      maximum = *host_has;
    }
    double& fallback = defaults_.*field.value;
    if (fallback > maximum) {
      note("Lowered the default " + std::string(field.key) + " from " + formatNumber(fallback) +
           " to its maximum, " + formatNumber(maximum) + ".");
      fallback = maximum;
    }
  }
  if (defaults_.processes > maxima_.processes) {
    note("Lowered processes from " + std::to_string(defaults_.processes) + " to its maximum, " +
         std::to_string(maxima_.processes) + ".");
    defaults_.processes = maxima_.processes;
  }
}

Result<Limits> LimitPolicy::resolve(const Poco::Dynamic::Var& requested) const {
  Limits limits = defaults_;
  if (requested.isEmpty()) {
    return limits;
  }
  const std::optional<json::Members> members = json::members(requested);
  if (!members) {
    return reject("limits must be an object with any of " + std::string(kAllowed));
  }
  // Keys first, so that a bad key is reported whatever the values hold.
  for (const auto& [key, value] : *members) {
    if (key == "processes") {
      return reject("processes is not client-settable (every run gets " +
                    std::to_string(defaults_.processes) + ")");
    }
    if (std::none_of(kFields.begin(), kFields.end(),
                     [&key = key](const LimitField& field) { return field.key == key; })) {
      return reject("Unknown limit " + json::render(key) + "; allowed limits are " +
                    std::string(kAllowed));
    }
  }
  for (const LimitField& field : kFields) {
    const auto member = std::find_if(members->begin(), members->end(),
                                     [&](const auto& entry) { return entry.first == field.key; });
    if (member == members->end()) {
      continue;
    }
    const std::string key(field.key);
    if (!json::isNumber(member->second)) {
      return reject(key + " must be a number, got " + json::render(member->second));
    }
    const double value = member->second.convert<double>();
    if (!std::isfinite(value)) {
      return reject(key + " must be a finite number");
    }
    const double floor = settings_.*field.floor;
    if (value <= 0 || value < floor) {
      return reject(requestedAmount(field, value) + ", min is " + amount(field, floor));
    }
    const double maximum = maxima_.*field.value;
    if (value > maximum) {
      std::string message = requestedAmount(field, value) + ", max is " + amount(field, maximum);
      const std::optional<double> host_has = field.host_figure(host_);
      if (host_has && settings_.maxima.*field.value > *host_has) {
        message += " (" + hostHas(field, *host_has) + ")";
      }
      return reject(std::move(message));
    }
    limits.*field.value = value;
  }
  return limits;
}

}  // namespace scs::policy
