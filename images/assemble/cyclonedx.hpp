#pragma once
// The image's CycloneDX 1.6 JSON SBOM (docs/build.md "What an image holds and how it was made"), made from its SPDX 2.3 document (sbom.hpp) and the
// image's manifest digest, which the SPDX inside the image cannot name. Every package the SPDX document lists
// becomes a component with the same name, version, sha256, download location and declared licence; its CONTAINS,
// DESCENDANT_OF and DEPENDS_ON relationships become the dependency graph. Same SPDX and image, same bytes: the
// serial number is a name-based UUID (RFC 4122 version 5) of them and the timestamp is the SPDX document's own
// (SOURCE_DATE_EPOCH). Pure.
#include <string>
#include <string_view>

#include "base/digest.hpp"
#include "base/error.hpp"

namespace gpuenv::images {

/// What the SBOM says of the image itself (its metadata component).
struct CycloneDxImage {
  Digest manifest;               ///< the image's manifest digest
  std::string architecture;      ///< the OCI architecture ("amd64", "arm64"), for the image's purl; "" for none
  std::string distro;            ///< the .debs' purl qualifier ("debian-12"); "" for none
  std::string generator_version; ///< gpuenv's version
};

/// The CycloneDX text (indented, ending in a newline). Errors `sbom.bad_spdx` (ErrorKind::environment, at WHERE):
/// SPDX text that is not gpuenv's document (not JSON, no packages list, a package without its SPDXID or name).
Result<std::string> cyclonedx_json(std::string_view spdx_text, const CycloneDxImage& image, const std::string& where);

/// "sbom.cdx.json", or "sbom.<platform>.cdx.json" beside the SPDX file SPDX_FILE_NAME ("sbom.<platform>.spdx.json").
std::string cyclonedx_file_name(std::string_view spdx_file_name);

}  // namespace gpuenv::images
