#pragma once

// Small text helpers the backend plugins share (a plugin never links the core's own).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scs::text {

// `items` with `separator` between them.
std::string join(const std::vector<std::string>& items, std::string_view separator);

// The pieces of `text` between each `separator`, empty ones kept ("" is one empty piece).
std::vector<std::string_view> split(std::string_view text, char separator);

// A whole decimal number in [min, max], nothing else; nullopt otherwise.
std::optional<std::int64_t> wholeNumber(std::string_view text, std::int64_t min, std::int64_t max);

// The bytes of the file at `path`; nullopt when it cannot be read.
std::optional<std::string> readFile(const std::string& path);

// `text` without the newlines, carriage returns and spaces at its end (a token file's).
std::string trimmedEnd(std::string text);

}  // namespace scs::text
