#pragma once

// The ids the server hands out (runs, sessions, nonces, its instance): 128 random bits as 32
// lowercase hex digits, from std::random_device.

#include <string>

namespace scs::common {

std::string randomHexId();

// A randomHexId() that is not yet a key of `taken`.
template <typename Map>
std::string unusedHexId(const Map& taken) {
  std::string id;
  do {
    id = randomHexId();
  } while (taken.count(id) != 0);
  return id;
}

}  // namespace scs::common
