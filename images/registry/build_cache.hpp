#pragma once
// The build cache shared through a registry (`gpuenv build --cache REF`, docs/build.md "A cache shared through the
// registry"). Two halves, both here:
//
// 1. The cache document (pure): what one build wrote, per platform. Image entries map an image's reuse key
//    (images::reuse_key: the lock's bytes and every image parameter) to its manifest, config and SBOM, stored as
//    blobs in the cache's repository, and to its layers; layer entries map a layer's input key
//    (LayerStream::key: everything its tar is made of) to the layer's descriptor, diff_id and file-list digest.
//    Rendered as canonical JSON; read back strictly and within bounds (a damaged, huge or other-schema document
//    is an error, never a partial answer). The caller signs the rendered bytes (a DSSE envelope, marks/dsse) and
//    checks the signature before it parses one; this half never trusts a document it is handed.
// 2. The registry store: the cache lives beside a root artifact tagged REF (a fixed, tiny manifest), and each
//    build's document is one more OCI 1.1 referrer of that root: a manifest with artifactType
//    k_build_cache_artifact_type whose first layer is the signed document and whose other layers are every blob
//    the document names (so that the registry's garbage collection keeps them, and a build in another
//    repository of the same registry can mount them). Writers never rewrite each other's documents: with the
//    referrers API the registry keeps the list; without it (Debian's docker-registry 2.8) the referrers tag
//    schema's fallback index `sha256-<root hex>` is read, extended and written back, then read again, and
//    written again when a concurrent writer's index replaced it (the loss is detected, never silent).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "images/oci/layout.hpp"
#include "images/registry/registry_client.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images {

inline constexpr std::string_view k_build_cache_schema = "gpuenv.build-cache/v1";
/// The artifactType of a cache document's manifest (a referrer of the root).
inline constexpr std::string_view k_build_cache_artifact_type = "application/vnd.gpuenv.build-cache.v1";
/// The artifactType of the root manifest the cache's tag names.
inline constexpr std::string_view k_build_cache_root_type = "application/vnd.gpuenv.build-cache.root.v1";
/// The media type of the signed document: the first layer of a document's manifest (a DSSE envelope whose
/// payloadType is k_build_cache_payload_type).
inline constexpr std::string_view k_build_cache_envelope_type = "application/vnd.gpuenv.build-cache.v1.dsse+json";
inline constexpr std::string_view k_build_cache_payload_type = "application/vnd.gpuenv.build-cache.v1+json";
/// The media type under which an image's manifest is stored as a blob of the cache's repository.
inline constexpr std::string_view k_cached_manifest_type = "application/vnd.gpuenv.build-cache.image-manifest.v1+json";
inline constexpr std::string_view k_spdx_type = "application/spdx+json";

/// One layer a build made: its input key and what it became.
struct CachedLayer {
  std::string key;             ///< 64 lowercase hex: LayerStream::key
  resolver::Platform platform;
  std::string name;            ///< base, cuda, cudnn, framework, user, metadata
  Descriptor blob;             ///< media type (a tar+gzip or tar+zstd layer), digest, size; no annotations
  Digest diff_id;              ///< of the uncompressed tar
  Digest files;                ///< of the layer's entry list (LayerStream::files_digest)
};

/// One image a build made: its reuse key and its documents.
struct CachedImage {
  std::string key;             ///< 64 lowercase hex: images::reuse_key
  resolver::Platform platform;
  Descriptor manifest;         ///< the image manifest (media type k_manifest); stored as a blob of k_cached_manifest_type
  Descriptor config;           ///< the image config blob
  Descriptor sbom;             ///< the SPDX document beside the layout (media type k_spdx_type)
  std::vector<Descriptor> layers;  ///< the manifest's layers, bottom to top, without annotations
};

/// What one build wrote.
struct CacheDocument {
  std::string generator;       ///< "gpuenv 0.1.0"
  std::vector<CachedImage> images;
  std::vector<CachedLayer> layers;

  /// Every blob the document names, each once, in a fixed order (images' manifest, config, SBOM and layers,
  /// then the layer entries' blobs), each with the media type it is stored under (k_cached_manifest_type for
  /// a manifest).
  [[nodiscard]] std::vector<Descriptor> blobs() const;
};

/// Bounds on reading a cache.
struct BuildCacheLimits {
  std::uint64_t max_document_bytes = 4u << 20;  ///< a signed document (the envelope blob)
  std::size_t max_documents = 64;               ///< the newest documents read; older ones are skipped, with a note
  std::size_t max_images = 256;                 ///< entries of one document
  std::size_t max_layers = 4096;
  std::size_t max_image_layers = 127;
};

/// The document as canonical JSON (sorted keys, no spaces, entries in the document's order, descriptors without
/// annotations): same document, same bytes.
std::string render_cache_document(const CacheDocument& document);

/// Reads a document rendered by render_cache_document. Strict: the schema must be k_build_cache_schema, keys
/// 64 lowercase hex, platforms ones resolver::parse_platform reads, descriptors sha256 with sizes, media types
/// of layers tar+gzip or tar+zstd, counts within LIMITS, no unknown field. Error `cache.bad_document`
/// (ErrorKind::environment) at WHERE, naming the first thing wrong; `cache.schema` for another schema. Bounded
/// before parsing: a text over LIMITS.max_document_bytes, or nested deeper than any document, is refused unread.
Result<CacheDocument> parse_cache_document(std::string_view json_text, const std::string& where, const BuildCacheLimits& limits = {});

/// The root manifest's bytes: an OCI image manifest of artifactType k_build_cache_root_type whose config and one
/// layer are the OCI empty descriptor, annotated with the cache's NAME (its tag): one root, and so one list of
/// documents, per tag, and the same bytes whoever writes it first.
std::string build_cache_root_manifest(const std::string& name);

/// A document as read from the registry, not yet checked: the envelope's bytes and where it came from.
struct StoredDocument {
  Digest manifest;        ///< the referrer manifest's digest
  std::string created;    ///< its org.opencontainers.image.created annotation ("" when none)
  std::string envelope;   ///< the first layer's bytes (at most max_document_bytes)
  std::string where;      ///< "REGISTRY/REPO@sha256:..." for messages
};

/// What reading a cache found.
struct CacheRead {
  bool root_found = false;              ///< false: nothing was ever written under this tag
  bool referrers_api = false;           ///< the list came from the referrers API (else the fallback index)
  std::vector<StoredDocument> documents;  ///< newest first (created, then digest), at most max_documents
  std::vector<std::string> notes;       ///< what was skipped and why (a referrer of another type, a document over the limit, ...)
};

/// What writing a document did.
struct CacheWrite {
  Digest manifest;        ///< the document's manifest
  bool referrers_api = false;
  int index_writes = 0;   ///< fallback index PUTs (1 unless a concurrent writer's index replaced ours)
  PushStats blobs;        ///< the named blobs: present, mounted, uploaded
};

/// A blob the document names and where its bytes are when the cache's repository lacks it.
struct CacheBlob {
  Descriptor descriptor;
  BlobSource source;      ///< its bytes (BlobSource::of / file), or BlobSource::remote: only HEAD and a mount are tried
};

/// The cache at REF (a tag of a repository), through CLIENT.
class RegistryBuildCache {
 public:
  RegistryBuildCache(RegistryClient& client, ImageReference ref, BuildCacheLimits limits = {});

  /// The cache's documents, newest first, bounded by the limits. No root under the tag is an empty read, not
  /// an error. A referrer that is not a cache document, or whose manifest or envelope is malformed, gone or over
  /// the limits (sizes checked before downloading), is skipped with a note (the build goes on without it). Errors:
  /// the registry's (unreachable, auth), and `cache.not_a_cache` (ErrorKind::usage) when the tag names another manifest.
  Result<CacheRead> read();

  /// Adds one document: the root is put when missing (same bytes every time), every blob of BLOBS is made
  /// present in the cache's repository (HEAD, else mounted from MOUNT_FROM, a repository of the same registry,
  /// else uploaded from its source; a remote source that is neither present nor mountable is
  /// `cache.blob_missing`), then the document's manifest (ENVELOPE as its first layer, BLOBS after it, the root
  /// as its subject, CREATED as org.opencontainers.image.created), then, without the referrers API, the fallback
  /// index: read, extended, written, read back, and written again (at most 8 times, with a short random pause)
  /// until it lists the document, and read once more after a pause (a writer that read the index before our PUT
  /// may write its own after our read-back); `cache.write_lost` when it never does. The index keeps the newest
  /// 1024 documents. Errors also the registry's, `cache.not_a_cache` as read's, and `cache.bad_blob`
  /// (ErrorKind::internal) for a CacheBlob whose source is not its descriptor's blob.
  Result<CacheWrite> write(const std::string& envelope, const std::vector<CacheBlob>& blobs, const std::string& mount_from, const std::string& created);

  /// Blob D of the cache's repository into LAYOUT (streamed, checked against its digest and size).
  Status fetch_blob(const Descriptor& d, OciLayout& layout);
  /// Blob D of the cache's repository in memory, at most LIMIT bytes (manifests, configs, SBOMs).
  Result<std::string> get_blob(const Descriptor& d, std::uint64_t limit);

  [[nodiscard]] const ImageReference& ref() const { return m_ref; }

 private:
  RegistryClient& m_client;
  ImageReference m_ref;
  BuildCacheLimits m_limits;
};

}  // namespace gpuenv::images
