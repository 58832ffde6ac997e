#pragma once
// Where an image's marks are kept (docs/mark.md), as cosign keeps attestations: the tag sha256-<hex>.att of its
// registry repository, or the entry of that name in the index.json of its OCI layout or archive. The MarkStore port
// and its three adapters, beside the formats they store (att_image.hpp, referrer.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "base/net/http_client.hpp"
#include "images/oci/layout.hpp"
#include "images/registry/registry_client.hpp"
#include "marks/att_image.hpp"

namespace gpuenv::marks {

/// Where an image's records are kept: its registry repository, its OCI layout or its archive. Tests drive the
/// adapters against real stores (a loopback docker-registry, files on disk) and fakes of the HTTP client.
class MarkStore {
 public:
  virtual ~MarkStore() = default;
  /// The image's manifest (media type, digest, size): the subject its records name.
  virtual Result<images::Descriptor> image_descriptor() = 0;
  /// The name a record gives the image ("registry:5000/ml/torch", or the layout's path).
  [[nodiscard]] virtual std::string subject_name() const = 0;
  /// The image's attestation image, std::nullopt when it has none yet.
  virtual Result<std::optional<AttImage>> read_att(const Digest& image) = 0;
  /// One record's bytes (an attestation layer, at most LIMIT bytes), checked against its digest.
  virtual Result<std::string> read_record(const images::Descriptor& layer, std::uint64_t limit) = 0;
  /// Stores ATT as the image's attestation image, ENVELOPE (its newest layer) and its config first.
  virtual Status write_att(const Digest& image, const AttImage& att, std::string_view envelope) = 0;
  /// Stores an OCI 1.1 referrer of IMAGE (MANIFEST, whose one layer is BUNDLE, with the empty config) and makes it
  /// findable: through the registry's referrers API where it has one, else in the fallback index `sha256-<hex>`.
  /// Returns where it went, for messages.
  virtual Result<std::string> write_referrer(const Digest& image, const std::string& manifest, const std::string& bundle) = 0;
  /// Where the records live, for messages ("registry:5000/ml/torch:sha256-<hex>.att").
  [[nodiscard]] virtual std::string where(const Digest& image) const = 0;
  /// A key naming this store's records of IMAGE on this host (for the lock that serialises writers).
  [[nodiscard]] virtual std::string lock_key(const Digest& image) const = 0;
};

/// What an image argument names as a store of marks, read from the argument and the file system alone.
struct MarkStorePlace {
  enum class Kind { layout, archive, registry };
  Kind kind = Kind::layout;
  std::string path, ref;              ///< a layout or archive: its path and the REF after it ("" for none)
  images::ImageReference registry;    ///< a registry image
};

/// IMAGE as a store: a layout DIR[:REF] or oci:DIR[:REF]; an archive oci-archive:FILE, docker-archive:FILE or a tar
/// FILE; else docker://REF or a registry reference (host/repo[:tag|@digest]). Errors: `mark.bad_image` (usage: no
/// such layout or archive, a path that is neither), and the reference parser's.
Result<MarkStorePlace> mark_store_place(const std::string& image);

/// The store in the OCI layout at DIR, its image named by REF ("" for its only one).
Result<std::unique_ptr<MarkStore>> open_layout_mark_store(const std::string& dir, const std::string& ref);

/// The store in the image archive FILE (oci-archive, or a docker archive that carries an OCI index, as Docker 25+
/// and gpuenv write them), read member by member and rewritten whole (beside it, then renamed) when a record is
/// added. ARGUMENT is the image as given, for the archive reader.
Result<std::unique_ptr<MarkStore>> open_archive_mark_store(const std::string& file, const std::string& ref, const std::string& argument);

/// The store in REF's registry repository, through HTTP with OPTIONS.
std::unique_ptr<MarkStore> make_registry_mark_store(images::ImageReference ref, std::unique_ptr<HttpClient> http, const images::RegistryOptions& options);

}  // namespace gpuenv::marks
