// common::toValidUtf8 must return valid UTF-8, be the identity on valid input, and repair
// ill-formed input exactly as the Unicode "maximal subpart" practice does (compared with an
// independent implementation).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "support/checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace scs;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string repaired = common::toValidUtf8(input);
  SCS_FUZZ_CHECK(fuzz::isValidUtf8(repaired), input);
  if (fuzz::isValidUtf8(input)) {
    SCS_FUZZ_CHECK(repaired == input, input);
  }
  SCS_FUZZ_CHECK(repaired == fuzz::referenceRepairUtf8(input), input);
  SCS_FUZZ_CHECK(common::toValidUtf8(repaired) == repaired, input);
  return 0;
}
