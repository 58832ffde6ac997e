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
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "resolver/platform.hpp"

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
  Digest digest;
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
  Result<Descriptor> adopt_file(const std::string& path, const Digest& digest, std::uint64_t size, const std::string& media_type);
  /// A temporary path inside the layout for the caller to write a blob to (same file system as blobs/).
  [[nodiscard]] std::string temp_path(const std::string& hint) const;
  /// Whether blobs/sha256/<hex> exists (a regular file).
  [[nodiscard]] bool has_blob(const Digest& digest) const;
  /// blobs/sha256/<hex>: inside the layout, whatever document the digest was read from.
  [[nodiscard]] std::string blob_path(const Digest& digest) const;

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
/// The descriptor as a JSON object (mediaType, digest, size, annotations when any).
nlohmann::json descriptor_object(const Descriptor& d);

/// What a reader of OCI documents calls a malformed descriptor: the error's kind, id and hint.
struct DescriptorErrors {
  ErrorKind kind = ErrorKind::environment;
  std::string id = "oci.bad_index";
  std::string hint = "the image is damaged; rebuild or pull it again";
};
/// Reads a descriptor (an index's manifest entry, a manifest's config or layer): an object with a sha256
/// digest and an unsigned size; mediaType and string annotations are kept when present. Anything else (a
/// missing or non-sha256 digest, "sha256:../x", a negative size) is ERRORS.id at WHERE. The one reader of
/// descriptors for layouts, archives and registries, so no digest from a document becomes a path unchecked.
Result<Descriptor> parse_descriptor(const nlohmann::json& j, const std::string& where, const DescriptorErrors& errors = {});

/// Whether a ref name is a tag of something attached to an image: cosign's "sha256-<64 hex>.att" (attestations,
/// gpuenv's marks), ".sig" or ".sbom", or the referrers tag schema's fallback index "sha256-<64 hex>". Such an
/// entry lives beside the image it names, never is one.
bool is_attachment_tag(std::string_view ref_name);

/// The entry of an index's `manifests` that REF names: its org.opencontainers.image.ref.name, or its digest
/// when REF is "sha256:..."; with an empty REF the only entry that is not an attachment (is_attachment_tag).
/// nullptr when none does, or when REF is empty and there are several. `names` gets the entries' ref names for the caller's message ("(unnamed)" for none).
/// The one rule by which layouts, archives and base images choose an image.
const nlohmann::json* choose_index_entry(const nlohmann::json& index, const std::string& ref, std::string& names);
/// The entry of an index of platforms for PLATFORM (its os, architecture and variant as resolver::platform_of
/// reads them: arm64 without a variant is arm64/v8), or nullptr; `seen` gets the platforms it lists
/// ("linux/arm64/v8", "?/?"). The one rule by which layouts, archives, inspect and the registry pick a platform.
const nlohmann::json* platform_entry(const nlohmann::json& platforms, const resolver::Platform& platform, std::vector<std::string>& seen);

}  // namespace gpuenv::images
