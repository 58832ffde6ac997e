#pragma once
// The image's SLSA provenance v1 predicate (slsa.dev/spec/v1.0/provenance; docs/build.md "Attestations"): how it
// was built, from what. buildDefinition: gpuenv's build type, the spec's and the lock's digests and the build's
// choices as external parameters, the catalog and SOURCE_DATE_EPOCH as internal ones, and every locked package (and
// a base image) as a resolvedDependencies entry with its URI and sha256. runDetails: gpuenv as the builder, with its
// version, and the build's start and end. Everything but runDetails.metadata.startedOn and finishedOn (the build's own
// clock) is the same for every build of the same lock with the same choices. Pure.
#include <cstdint>
#include <string>

#include "resolver/lockfile.hpp"

namespace gpuenv::images {

/// gpuenv's build type and builder id (URIs that name, not locate: docs/build.md says what they mean).
inline constexpr const char* k_slsa_build_type = "https://gpuenv.dev/build/image/v1";
inline constexpr const char* k_slsa_builder_id = "https://gpuenv.dev/builder/gpuenv-cli/v1";

struct ProvenanceInputs {
  std::string lock_sha256;        ///< of the lock's bytes
  std::string platform;           ///< "linux/amd64"
  std::string format;             ///< oci-dir | oci-archive | docker-archive
  std::string compression;        ///< gzip | zstd
  std::string tag;                ///< the image's reference name
  std::int64_t source_date_epoch = 0;
  std::string builder_version;    ///< gpuenv's version
  std::int64_t started = 0, finished = 0;  ///< the build's start and end, seconds since the epoch
};

/// The predicate's JSON text (compact, fixed key order).
std::string provenance_predicate(const resolver::Lock& lock, const ProvenanceInputs& inputs);

}  // namespace gpuenv::images
