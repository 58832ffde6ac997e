#pragma once
// Single-file forms of an OCI image layout, written deterministically (sorted entries, one mtime, root owner):
// - oci-archive: the layout itself as a tar (oci-layout, index.json, blobs/sha256/...), as skopeo's
//   oci-archive: transport and `podman load` read it;
// - docker-archive: the same plus Docker's manifest.json (Config, RepoTags, Layers naming the blobs), which is
//   what `docker save` writes since Docker 25 and what `docker load` and skopeo's docker-archive: read.
// The file is written to a temporary name beside the output and renamed into place when complete.
#include <map>
#include <string>

#include "base/digest.hpp"

#include "images/oci/layout.hpp"

namespace gpuenv::images {

enum class ArchiveFormat { oci, docker };

/// Writes `layout` (only what its index.json reaches: the manifest, config and layers of `manifest`) into
/// `output`. `repo_tag` ("name:tag") goes into manifest.json's RepoTags for docker archives ("" for none).
/// Errors: `oci.io`, `oci.bad_index` when the manifest cannot be read back.
Status write_image_archive(const OciLayout& layout, const Descriptor& manifest, ArchiveFormat format, const std::string& repo_tag,
                           const std::string& output);

/// Rewrites the tar file at PATH in place (a new file renamed over it when complete): every member copied as it
/// is, but index.json, which becomes INDEX, and BLOBS (digest to bytes) added as blobs/sha256/<hex> where the
/// archive lacks them. For what lives beside an image in an archive (marks). Errors: `oci.io`, `oci.bad_archive`
/// (a member libarchive cannot read).
Status rewrite_archive(const std::string& path, const std::string& index, const std::map<Digest, std::string>& blobs);

}  // namespace gpuenv::images
