#pragma once
// Core metadata (a wheel's .dist-info/METADATA, an sdist's PKG-INFO, a PEP 658 .metadata file): RFC 822 style
// "Field: value" headers with indented continuation lines, fields that may repeat, then a blank line and the
// description as the body (https://packaging.python.org/specifications/core-metadata/).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packages/wheels/markers.hpp"
#include "packages/wheels/pep440.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// One header as written: the field name with its original case, the unfolded value and its first line.
struct MetadataField {
  std::string name;
  std::string value;  ///< first line trimmed, then each continuation line after a '\n' as written (indentation kept)
  int line = 0;
};

/// The fields of core metadata that installing needs, plus every header in order.
struct CoreMetadata {
  std::string metadata_version;          ///< "2.1"; empty when the field is missing
  std::string name;                      ///< as written; compare with canonicalize_name()
  Pep440Version version;
  std::string version_text;              ///< as written
  std::string requires_python_text;      ///< as written, "" when absent
  Pep440SpecifierSet requires_python;    ///< parsed requires_python_text (empty set when absent)
  std::vector<Requirement> requires_dist;  ///< in order
  std::vector<std::string> provides_extra;  ///< as written, in order
  std::string description;               ///< the body, or the Description field when there is no body
  std::vector<MetadataField> fields;     ///< every header, in order
};

/// Parses core metadata from `text`; `where` names the source in errors ("foo-1.0.dist-info/METADATA" or a URL)
/// and is followed by ":line". Fails with `metadata.syntax` for a header line without "Field:" or a continuation
/// before any field, `metadata.missing_field` without Name or Version, `metadata.duplicate_field` for a second
/// Name, Version, Metadata-Version or Requires-Python, `metadata.unsupported_version` for Metadata-Version 3 or
/// later, and `metadata.invalid_field` for an invalid name, version, Requires-Python or Requires-Dist (the
/// parser's message included).
Result<CoreMetadata> parse_core_metadata(std::string_view text, const std::string& where);

}  // namespace gpuenv::packages
