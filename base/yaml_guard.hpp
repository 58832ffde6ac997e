#pragma once
// Checks that must pass before untrusted bytes reach yaml-cpp: size, binary content, UTF-8, nesting depth.
#include <cstddef>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace gpuenv {

/// Refuses input that is empty (when !allow_empty), larger than max_bytes, contains NUL bytes, is not UTF-8,
/// or may nest deeper than max_depth. The depth test is a conservative upper bound computed without parsing
/// (indentation + block indicators + flow brackets), so yaml-cpp's recursive parser never sees deep input.
Status check_yaml_bytes(std::string_view text, const std::string& path, std::size_t max_bytes, std::size_t max_depth);

/// Reads a YAML file (spec, lock, catalog, thresholds) of at most MAX_BYTES; one over it is `yaml.too_large`
/// (ErrorKind::spec), the other errors are read_file_limited's.
inline Result<std::string> read_yaml_file(const std::string& path, std::size_t max_bytes) {
  return read_file_limited(path, max_bytes, TooLarge{ErrorKind::spec, "yaml.too_large", "is this the right file? a spec is a few hundred bytes"});
}

}  // namespace gpuenv
