#include "common/ids.h"

#include <cstdint>
#include <random>

namespace scs::common {

std::string randomHexId() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string id;
  id.reserve(32);
  for (int word = 0; word < 4; ++word) {
    std::uint32_t value = device();
    for (int nibble = 0; nibble < 8; ++nibble) {
      id.push_back(kHex[value & 0xF]);
      value >>= 4;
    }
  }
  return id;
}

}  // namespace scs::common
