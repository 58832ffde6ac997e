#pragma once
// Single-file forms of an OCI image layout, written deterministically (sorted entries, one mtime, root owner):
// - oci-archive: the layout itself as a tar (oci-layout, index.json, blobs/sha256/...), as skopeo's
//   oci-archive: transport and `podman load` read it;
// - docker-archive: the same plus Docker's manifest.json (Config, RepoTags, Layers naming the blobs), which is
//   what `docker save` writes since Docker 25 and what `docker load` and skopeo's docker-archive: read.
// The file is written to a temporary name beside the output and renamed into place when complete.
#include <string>

#include "images/oci/layout.hpp"

namespace gpuenv::images {

enum class ArchiveFormat { oci, docker };

/// Writes `layout` (only what its index.json reaches: the manifest, config and layers of `manifest`) into
/// `output`. `repo_tag` ("name:tag") goes into manifest.json's RepoTags for docker archives ("" for none).
/// Errors: `oci.io`, `oci.bad_index` when the manifest cannot be read back.
Status write_image_archive(const OciLayout& layout, const Descriptor& manifest, ArchiveFormat format, const std::string& repo_tag,
                           const std::string& output);

}  // namespace gpuenv::images
