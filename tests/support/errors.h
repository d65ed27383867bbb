#pragma once

#include <optional>
#include <string>
#include <variant>

#include "result.h"

namespace scs::testing {

// A Result as a test asserts it: the Error's message, or nullopt when it holds a value, so that
// ASSERT_EQ(errorOf(result), std::nullopt) prints the message when it fails.
template <class T>
std::optional<std::string> errorOf(const Result<T>& result) {
  if (const Error* error = std::get_if<Error>(&result)) {
    return error->message;
  }
  return std::nullopt;
}

}  // namespace scs::testing
