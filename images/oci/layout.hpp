#pragma once
// Writing an OCI image layout directory (image-spec v1.1 "oci-layout", blobs/sha256/..., index.json).
//
// Safe against interruption at any point: a blob is written to a temporary name, verified, fsynced and then
// renamed to its digest, so a name under blobs/ always holds the bytes it names; index.json is written last,
// atomically, so an index never names a blob that is missing or partial. Blobs an earlier index named are left
// in place until the new index is in place (`collect_garbage` removes what no index names).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::images {

namespace media_type {
inline constexpr const char* k_manifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr const char* k_index = "application/vnd.oci.image.index.v1+json";
inline constexpr const char* k_config = "application/vnd.oci.image.config.v1+json";
inline constexpr const char* k_layer_gzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr const char* k_layer_zstd = "application/vnd.oci.image.layer.v1.tar+zstd";
}  // namespace media_type

struct Descriptor {
  std::string media_type;
  std::string digest;  ///< "sha256:<hex>"
  std::uint64_t size = 0;
  std::map<std::string, std::string> annotations;
};

class OciLayout {
 public:
  /// Opens or creates the layout at `dir` (its parent must exist). Errors: `oci.io`, `oci.not_layout` when
  /// the directory exists, is not empty and is not an OCI layout (gpuenv never writes into such a directory).
  static Result<OciLayout> open(const std::string& dir);

  /// Stores bytes as a blob.
  Result<Descriptor> put_bytes(const std::string& bytes, const std::string& media_type);
  /// Moves a finished file (written and fsynced by the caller, with known digest and size) into blobs/.
  Result<Descriptor> adopt_file(const std::string& path, const std::string& sha256_hex, std::uint64_t size, const std::string& media_type);
  /// A temporary path inside the layout for the caller to write a blob to (same file system as blobs/).
  [[nodiscard]] std::string temp_path(const std::string& hint) const;
  /// Whether blobs/sha256/<hex> exists.
  [[nodiscard]] bool has_blob(const std::string& sha256_hex) const;
  [[nodiscard]] std::string blob_path(const std::string& sha256_hex) const;

  /// Writes index.json naming `manifests` (atomically, then fsyncs the directory).
  Status write_index(const std::vector<Descriptor>& manifests);
  /// Removes blobs that no manifest in index.json reaches, and stale temporary files. Returns bytes freed.
  Result<std::uint64_t> collect_garbage();

  [[nodiscard]] const std::string& dir() const { return m_dir; }

 private:
  explicit OciLayout(std::string dir) : m_dir(std::move(dir)) {}
  std::string m_dir;
};

/// Canonical JSON text of a descriptor (keys sorted, no spaces), as manifests and indexes embed them.
std::string descriptor_json(const Descriptor& d);

}  // namespace gpuenv::images
