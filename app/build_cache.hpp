#pragma once
// `gpuenv build --cache REF --cache-key KEY` (docs/build.md "A cache shared through the registry"): the registry's
// build cache (images/registry/build_cache) as the assembler's SharedCache.
//
// Trust: an entry is only a writer's claim that inputs K produced layer D, so every document is a DSSE envelope
// signed with the cache key (ECDSA P-256, the same keys and signing as marks), and a reader takes a document only
// when its signature verifies under that key: an unsigned document, one signed by another key, or one that is not a
// cache document is refused with a note and its entries are never used. The assembler then checks what it takes
// (a manifest of another build key, platform or layers; a layer of another file list) and builds cold when it does
// not hold. A public key alone reads the cache and writes nothing (pull requests of forks).
//
// Keys: every cache key is a sha256 of the builder's identity (its program's own sha256 and version) and of the
// build's exact identity of an image (the reuse key: the lock's bytes and every image parameter) or of a layer (its
// input key: everything its tar is made of), each with the compressor's implementation. Builders running the same
// gpuenv program share entries; another program never takes one of them, so a change in how gpuenv writes an image
// can never be served an older writer's bytes.
//
// A cache that cannot be read (the registry unreachable, refused credentials) is a note, and the build goes on
// cold without trying to write it; one that cannot be written afterwards is a note too: the image is built and
// pushed either way.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/services.hpp"
#include "images/assemble/assemble_image.hpp"
#include "images/registry/build_cache.hpp"
#include "images/registry/registry_client.hpp"

namespace gpuenv::marks {
class Key;
}

namespace gpuenv::app {

struct BuildCacheRequest {
  std::string ref;          ///< --cache: a tag in a repository ("host/team/cache:torch")
  std::string key_path;     ///< --cache-key: a private key (read and write) or a public key (read only)
  /// Layers taken from the cache may stay in the registry (the layout lacks them) when the image is pushed to this
  /// registry host; empty: every layer taken is downloaded into the layout.
  std::string push_registry;
  bool plain_http = false;
  std::string ca_bundle;
};

/// What the cache did, for the build's report.
struct BuildCacheReport {
  std::string ref;
  bool read_only = false;       ///< the key given was a public key: nothing is written
  int documents = 0;            ///< signed documents read and taken
  int refused = 0;              ///< documents refused (unsigned, another key, malformed)
  int images_taken = 0;         ///< images served whole
  int layers_taken = 0;         ///< layers taken (with images_taken's: every layer of those images)
  int layers_remote = 0;        ///< of those, left in the registry
  int images_written = 0, layers_written = 0;  ///< entries of the document this build wrote
  std::string written;          ///< that document's manifest digest; "" when nothing was written
  std::vector<std::string> notes;  ///< refusals, a cache that could not be read or written
};

/// The cache of one build.
class BuildCache final : public images::SharedCache {
 public:
  ~BuildCache() override;
  /// Reads the key and the cache's documents (a cache that cannot be read is a note, not an error). Errors:
  /// `build.cache_key` (no key given), the key's (`key.*`), `registry.bad_reference` for REF.
  static Result<std::unique_ptr<BuildCache>> open(const BuildCacheRequest& request, Services& services);

  std::optional<Image> find_image(const std::string& identity, const resolver::Platform& platform) override;
  std::optional<images::CachedLayer> find_layer(const std::string& identity, const resolver::Platform& platform) override;
  Result<bool> take_blob(const images::Descriptor& blob, images::OciLayout& layout) override;
  void made_layer(const std::string& identity, images::CachedLayer entry) override;
  void made_image(const std::string& identity, images::CachedImage entry, std::string sbom) override;
  void note(const std::string& text) override;

  /// Counts what the assembler took from the cache (what it was offered and refused is not counted).
  void tally(const std::vector<const images::BuildResult*>& built);

  /// The repository to mount remote layers from when pushing (the cache's, on the push's registry), else "".
  [[nodiscard]] std::string mount_source() const;

  /// Downloads BLOBS (layers it left in the registry) from the cache's repository into the layout at LAYOUT_DIR,
  /// each checked against its digest: for a registry that would not mount them where the image is pushed.
  Status download(const std::string& layout_dir, const std::vector<images::Descriptor>& blobs);

  /// Writes one signed document of what the build made and the cache lacked (nothing when it lacks nothing or the
  /// key is public), its blobs from LAYOUT_DIR, or mounted from PUSHED_TO's repository when the image was just
  /// pushed there on the cache's registry. A failure is a note in the report.
  void write(const std::string& layout_dir, const std::optional<images::ImageReference>& pushed_to, Services& services);

  [[nodiscard]] const BuildCacheReport& report() const { return m_report; }

 private:
  BuildCache() = default;
  [[nodiscard]] std::string cache_key(const std::string& identity) const;
  void take_documents(const images::CacheRead& read);

  std::unique_ptr<HttpClient> m_http;
  std::unique_ptr<images::RegistryClient> m_client;
  std::unique_ptr<images::RegistryBuildCache> m_cache;  ///< null when the cache could not be read: then unused
  std::unique_ptr<marks::Key> m_key;
  std::string m_builder;         ///< the builder's identity (program sha256 and version)
  std::string m_generator;
  bool m_lazy = false;           ///< layers may stay in the registry
  std::map<std::string, images::CachedImage> m_images;  ///< by cache key, the newest document's first
  std::map<std::string, images::CachedLayer> m_layers;
  images::CacheDocument m_new;   ///< what this build made that the cache lacks
  std::vector<std::string> m_sboms;  ///< the SBOM of each of m_new's images
  BuildCacheReport m_report;
};

}  // namespace gpuenv::app
