#pragma once
// `gpuenv build`: a lock's pinned packages, assembled into a root filesystem and written as a reproducible OCI
// image, without a container daemon. The decisions are images/plan's (pure: layer assignment, GPU rules,
// loader configuration, the config's environment and labels, the reuse key); this folder carries them out,
// one named step each (assemble_image.cpp lists them in order):
//
// 1. Reuse: a layout that already holds the image for this reuse key only gets its index.json rewritten.
// 2. Fetch: the plan's one-source-of-CUDA rule, then every pinned .deb and wheel comes from the cache, fetched
//    and verified against the lock's sha256 on a thread of its own while step 3 unpacks what has arrived;
//    step 3 ends when every download has (a failed one fails the build, naming its package).
// 3. Root filesystem (root_tree): a base image's layers unpacked at the bottom, the .debs unpacked in lock order
//    (each once into the package store, package_trees, then hard-linked into the root)
//    (maintainer scripts are not run; their needed effects are reproduced: the dpkg database, base-passwd's
//    files), documentation, man pages and locales left out; then the wheels installed for the image's Python
//    (PEP 427); the plan's ld.so.conf.d entry for wheel-provided CUDA libraries, the dynamic linker's cache;
//    the lock and the SBOM (sbom) under /usr/share/gpuenv.
// 4. Checks on the finished tree: the plan's no-driver-library rule, then every ELF file's DT_NEEDED must
//    resolve inside the image (driver libraries and --allow-missing-lib names excepted).
// 5. Layers (layer_writer): the plan splits the tree by what installed each path (base, cuda, cudnn,
//    framework, user, gpuenv metadata); each is a deterministic tar (sorted, parents first, one mtime, numeric
//    owners) compressed with a deterministic gzip or zstd. Each layer's input key (its entries and the store
//    identity of each file) names it: a layer whose key was written before is taken as it is, without reading
//    a byte, and a new one is written in one pass (tar, both digests and compression in one stream). With a base image, its layers come first as they are, and only
//    what the build adds or changes goes into gpuenv's layers.
// 6. The image config (the plan's environment, NVIDIA_* variables, labels), manifest and index.json are
//    written last; the SPDX 2.3 SBOM also goes beside the layout.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/cache/blob_store.hpp"
#include "base/net/fetcher.hpp"
#include "images/disk/filesystems.hpp"
#include "images/oci/layout.hpp"
#include "images/plan/image_config.hpp"
#include "images/registry/build_cache.hpp"
#include "resolver/lockfile.hpp"

namespace gpuenv::images {

/// A build cache other builds share (app/build_cache.hpp: a registry's, docs/build.md "A cache shared through the
/// registry"): asked before the tree is assembled for an image of the same identity, and before a layer is
/// compressed for a layer of the same identity; told what this build made. Identities are the build's own exact
/// keys with the compressor's implementation (the adapter turns them into the cache's keys). The assembler checks
/// every answer before it uses it: a manifest that names another build key, platform, config or layers, and a layer
/// whose file list differs from this build's, are refused with a note, and the build goes on as if the cache had
/// said nothing.
class SharedCache {
 public:
  virtual ~SharedCache() = default;
  /// An image another build made, its documents' bytes checked against the entry's digests by the adapter.
  struct Image {
    CachedImage entry;
    std::string manifest, config, sbom;
  };
  /// The image of IDENTITY for PLATFORM, if the cache holds one.
  virtual std::optional<Image> find_image(const std::string& identity, const resolver::Platform& platform) = 0;
  /// The layer of IDENTITY for PLATFORM, if the cache holds one.
  virtual std::optional<CachedLayer> find_layer(const std::string& identity, const resolver::Platform& platform) = 0;
  /// Makes BLOB usable by the image in LAYOUT: downloaded into it (false) or left in the registry the image is
  /// pushed to, which has it or can mount it (true). Errors: the registry's.
  virtual Result<bool> take_blob(const Descriptor& blob, OciLayout& layout) = 0;
  /// A layer this build wrote or took from its own cache, under IDENTITY (entry.key is left empty).
  virtual void made_layer(const std::string& identity, CachedLayer entry) = 0;
  /// The image this build made under IDENTITY (entry.key left empty) and its SBOM's text.
  virtual void made_image(const std::string& identity, CachedImage entry, std::string sbom) = 0;
  /// What the assembler refused or could not use, for the build's notes.
  virtual void note(const std::string& text) = 0;
};

struct BuildRequest {
  const resolver::Lock* lock = nullptr;
  std::string lock_text;             ///< the lock's bytes (its digest labels the image; it is copied into it)
  std::string output_dir;            ///< the OCI layout to write
  std::string work_dir;              ///< a fresh directory for the root filesystem (removed by the caller)
  std::string tag;                   ///< org.opencontainers.image.ref.name in index.json; "" for none
  std::int64_t source_date_epoch = 0;  ///< every mtime and the config's `created`
  resolver::Platform platform;       ///< the image's platform (the lock's, narrowed by resolver::lock_for_platform)
  /// false: one image of a multi-platform build: its blobs go into the layout, and index.json, the layout's garbage
  /// collection and sbom.spdx.json are left to write_platform_index (the SBOM is written as sbom.<platform>.spdx.json).
  bool write_index = true;
  unsigned threads = 0;              ///< compression threads; 0: all cores
  int gzip_level = 6;
  Compression compression = Compression::gzip;  ///< gzip at gzip_level, or zstd at zstd_level (tar+zstd layers)
  int zstd_level = 3;
  std::string generator = "gpuenv";  ///< "gpuenv 0.1.0": written into the SBOM and labels
  std::vector<std::string> allow_missing;  ///< sonames the DT_NEEDED check accepts as absent
  /// Wheels ("name==version", the name as pip normalizes it or not) whose RECORD may give wrong hashes or sizes
  /// (packages::WheelInstallOptions::accept_record_mismatch); each one the build uses is said in its notes.
  std::vector<std::string> allow_record_mismatch;
  Fetcher* fetcher = nullptr;        ///< required; make_offline_fetcher() for --offline (the cache must hold every package)
  BlobStore* cache = nullptr;        ///< required
  std::string layer_memo_dir;        ///< remembers a layer's input key -> its blob across builds; "" disables
  /// Required: unpacked packages, one tree per package and install choices, hard-linked into the root
  /// (package_trees.hpp); on the work directory's file system.
  std::string package_tree_dir;
  std::function<void(const std::string&)> on_step;  ///< progress lines ("unpacking 121 .debs"), may be empty
  /// A base image (the lock's base_image), already in a local OCI layout: its layers come first, unchanged, and
  /// gpuenv's layers hold only what the build adds or changes. "" for a root built from packages alone.
  std::string base_layout_dir;
  std::string base_manifest_digest;  ///< the base image in base_layout_dir ("sha256:...")
  /// Adds the caller's own files to the tree (its path), after the packages and gpuenv's files and before the
  /// checks (a VM disk's units and gpuenv itself, images/disk/vm_root.hpp); may be empty.
  std::function<Status(const std::string& root)> add_files;
  /// A cache shared with other builds (--cache); null for none.
  SharedCache* shared_cache = nullptr;
};

struct BuiltLayer {
  std::string name;                   ///< base-image, base, cuda, cudnn, framework, user, metadata
  Descriptor blob;                    ///< compressed
  std::string diff_id;                ///< "sha256:<hex>" of the uncompressed tar
  std::uint64_t uncompressed_size = 0;
  std::uint64_t entries = 0;
  std::vector<std::string> packages;  ///< "name version" of what it holds
  bool reused = false;                ///< its compressed blob came from an earlier build
  bool shared = false;                ///< it came from the shared cache (another build's)
  bool remote = false;                ///< left in the registry by the shared cache: the layout lacks its blob
};

struct BuildResult {
  Descriptor manifest;
  Descriptor config;
  std::vector<BuiltLayer> layers;
  std::string lock_sha256;
  bool unchanged = false;  ///< the layout already held this exact image; nothing was rebuilt
  bool shared = false;     ///< the whole image came from the shared cache: no package fetched, no layer written
  std::vector<std::string> notes;
};

/// Assembles the image the request's lock describes into `request.output_dir`. Errors: `build.*`
/// (`build.cuda_twice`, `build.driver_in_image`, `build.unresolved_library`, `build.no_python`,
/// `build.special_file`, `build.bad_base`, `build.unstable_tree`, `build.too_many_layers`, `build.io`), and those
/// of fetching, the cache, unpacking and the layout.
Result<BuildResult> assemble_image(const BuildRequest& request);

/// A finished, checked root tree (steps 2 to 4), for a VM disk (images/disk/vm_disk.hpp).
struct BuiltRoot {
  std::string root;                        ///< the tree, in the request's work directory
  std::vector<disk::InodeOwner> owners;    ///< every path: the owner and mode its package recorded (root:root otherwise)
  std::string sbom;                        ///< the SPDX document also written into the tree
  std::vector<std::string> notes;
};

/// One image of a multi-platform build.
struct PlatformImage {
  resolver::Platform platform;
  Descriptor manifest;
};

/// Writes the OCI image index of a multi-platform build into LAYOUT: a blob listing each platform's manifest with
/// its `platform` (os, architecture, variant), named by index.json as TAG (marks of this very index kept, as for
/// one image), then drops the blobs nothing names any more. Same images, same bytes. Returns the index.
Result<Descriptor> write_platform_index(const std::string& layout_dir, const std::vector<PlatformImage>& images, const std::string& tag);

/// Steps 2 to 4 only: the root tree of the request's lock, checked, and no layers. Errors: those of
/// assemble_image's first steps; a base image is refused (`build.no_store`).
Result<BuiltRoot> assemble_root(const BuildRequest& request);

/// What builds keep in the cache besides downloads.
struct BuildCacheUse {
  std::uint64_t package_trees = 0, package_tree_bytes = 0;  ///< unpacked packages (package_tree_dir)
  std::uint64_t layers = 0, layer_bytes = 0;                ///< layer blobs kept for their input keys (layer_memo_dir)
  std::uint64_t drivers = 0, driver_bytes = 0;              ///< VM drivers' built modules (images/disk/vm_driver.hpp; filled by the caller)
};

/// Counts what the package store and the layer memo hold.
BuildCacheUse build_cache_use(const std::string& package_tree_dir, const std::string& layer_memo_dir);

/// Removes unpacked packages and kept layers last used before `cutoff` (all with time_point::max()), and
/// returns what was removed. A layer blob that an image layout still links stays (removing it would free
/// nothing) unless everything goes. Not meant to run while a build runs on the same cache: a build that is
/// linking a tree being removed fails with `build.bad_tree` or `build.io` and can simply be run again.
BuildCacheUse prune_build_cache(const std::string& package_tree_dir, const std::string& layer_memo_dir, std::chrono::system_clock::time_point cutoff);

}  // namespace gpuenv::images
