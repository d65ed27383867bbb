#include "support/ustar.h"

#include <algorithm>

namespace scs::testing {
namespace {

constexpr std::size_t kBlock = 512;

// A NUL-terminated octal field as the builder writes it: digits, then NUL, then only NULs.
std::optional<std::uint64_t> octalField(std::string_view field) {
  const std::size_t end = field.find('\0');
  if (end == 0 || end == std::string_view::npos) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (std::size_t k = 0; k < end; ++k) {
    if (field[k] < '0' || field[k] > '7') {
      return std::nullopt;
    }
    value = value * 8 + static_cast<std::uint64_t>(field[k] - '0');
  }
  return value;
}

// A NUL-padded text field: the text, then only NULs (a full field has no terminator).
std::optional<std::string> textField(std::string_view field) {
  const std::size_t end = std::min(field.find('\0'), field.size());
  if (field.find_first_not_of('\0', end) != std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(field.substr(0, end));
}

bool allZero(std::string_view bytes) {
  return bytes.find_first_not_of('\0') == std::string_view::npos;
}

}  // namespace

std::optional<std::string> readUstar(std::string_view archive, std::vector<TarEntry>* entries) {
  std::size_t offset = 0;
  while (true) {
    const std::string at = " at offset " + std::to_string(offset);
    if (offset + kBlock > archive.size()) {
      return "archive ends inside a header block" + at;
    }
    const std::string_view header = archive.substr(offset, kBlock);
    if (allZero(header)) {
      if (offset + 2 * kBlock != archive.size() || !allZero(archive.substr(offset, 2 * kBlock))) {
        return "the end is not exactly two zero blocks" + at;
      }
      return std::nullopt;
    }
    // The checksum field reads "%06o", NUL, space.
    const std::string_view sum_field = header.substr(148, 8);
    if (sum_field[6] != '\0' || sum_field[7] != ' ') {
      return "checksum field not terminated by NUL and space" + at;
    }
    const std::optional<std::uint64_t> stored = octalField(sum_field.substr(0, 7));
    std::uint64_t computed = 0;
    for (std::size_t k = 0; k < kBlock; ++k) {
      computed += (k >= 148 && k < 156) ? ' ' : static_cast<unsigned char>(header[k]);
    }
    if (!stored || *stored != computed) {
      return "bad header checksum" + at;
    }
    if (header.substr(257, 6) != std::string_view("ustar\0", 6) || header.substr(263, 2) != "00") {
      return "not a POSIX ustar header" + at;
    }
    const auto name = textField(header.substr(0, 100));
    const auto prefix = textField(header.substr(345, 155));
    const auto mode = octalField(header.substr(100, 8));
    const auto uid = octalField(header.substr(108, 8));
    const auto gid = octalField(header.substr(116, 8));
    const auto size = octalField(header.substr(124, 12));
    const auto mtime = octalField(header.substr(136, 12));
    const auto devmajor = octalField(header.substr(329, 8));
    const auto devminor = octalField(header.substr(337, 8));
    if (!name || name->empty() || !prefix || !mode || !uid || !gid || !size || !mtime ||
        !devmajor || !devminor) {
      return "malformed header field" + at;
    }
    if (!allZero(header.substr(157, 100)) || !allZero(header.substr(500, 12))) {
      return "link name or padding not zero" + at;
    }
    TarEntry entry;
    entry.name = prefix->empty() ? *name : *prefix + "/" + *name;
    entry.type = header[156];
    entry.mode = static_cast<std::uint32_t>(*mode);
    entry.uid = static_cast<std::uint32_t>(*uid);
    entry.gid = static_cast<std::uint32_t>(*gid);
    const std::size_t padded = (*size + kBlock - 1) / kBlock * kBlock;
    if (archive.size() - offset - kBlock < padded) {
      return "content runs past the end" + at;
    }
    entry.content = std::string(archive.substr(offset + kBlock, *size));
    if (!allZero(archive.substr(offset + kBlock + *size, padded - *size))) {
      return "content padding not zero" + at;
    }
    entries->push_back(std::move(entry));
    offset += kBlock + padded;
  }
}

std::map<std::string, std::string> ustarFiles(std::string_view archive) {
  std::vector<TarEntry> entries;
  std::map<std::string, std::string> files;
  if (readUstar(archive, &entries)) {
    return files;
  }
  for (TarEntry& entry : entries) {
    if (entry.type == '0') {
      files[entry.name] = std::move(entry.content);
    }
  }
  return files;
}

}  // namespace scs::testing
