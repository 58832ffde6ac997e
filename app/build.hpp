#pragma once
// `gpuenv build SPEC|LOCK`: lock the spec when given one (app::lock), then assemble the image from the lock
// (images::assemble_image), write it as a layout or an archive, and push it when asked.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/build_cache.hpp"
#include "app/lock.hpp"
#include "app/services.hpp"
#include "app/statements.hpp"
#include "images/assemble/assemble_image.hpp"
#include "images/disk/vm_disk.hpp"
#include "images/registry/registry_client.hpp"

namespace gpuenv::app {

struct BuildRequest {
  LockRequest lock;                  ///< lock.resolve.spec_path is the SPEC or LOCK argument
  std::string output;                ///< layout directory or archive file; "" for gpuenv-out/NAME[.tar]
  /// What to write; unset: the spec's image.format when the argument is a spec, an OCI layout directory for a lock.
  std::optional<resolver::ImageFormat> format;
  images::Compression compression = images::Compression::gzip;
  std::string tag;                   ///< "" for the spec's image.tag
  std::vector<std::string> allow_missing;
  std::vector<std::string> allow_record_mismatch;  ///< wheels "name==version" installed though their RECORD disagrees
  unsigned threads = 0;
  std::string push;         ///< registry reference to push to; "" for none
  bool plain_http = false;  ///< talk to the registry over http:// (a loopback test registry)
  std::string ca_bundle;    ///< extra CA for the registry's TLS
  /// A VM disk's /usr/bin/gpuenv (--vm-gpuenv): a gpuenv built for the lock's platform. "": this gpuenv, which
  /// must then be a program of that platform (a linux/arm64 disk built on an amd64 machine needs an arm64 one).
  std::string vm_gpuenv;
  /// A build cache shared through a registry (--cache, docs/build.md): a tag; "" for none. Container images only.
  std::string cache;
  std::string cache_key;    ///< --cache-key: the cache's signing key (private: read and write; public: read only)
  /// Layers taken from the cache may stay in the registry when the image is pushed to the cache's registry as a
  /// layout (the layout then lacks them); false: every layer taken is downloaded (a build that runs its image).
  bool cache_may_leave_layers = true;
  /// --attest: the statements (SBOM, provenance) signed with ATTEST_KEY ("" for GPUENV_MARK_KEY) and stored beside the
  /// image: in the layout or archive written, and with --push in the registry too (app/statements.hpp).
  std::vector<StatementKind> attest;
  std::string attest_key;
};

/// A VM disk that was built (docs/vm.md).
struct VmBuilt {
  images::disk::VmDisk disk;
  std::uint64_t file_size = 0;   ///< the output file's size (the raw disk's, or the qcow2's)
  std::string lock_sha256;
  std::string container_disk;    ///< with --push: the containerDisk image's manifest digest ("sha256:...")
  /// With vm.driver: the module the image got ("nvidia-current"), its driver version, and whether the modules came
  /// from the cache (built before for the same build packages, kernel and epoch) rather than compiled now.
  struct Driver {
    std::string module, version;
    bool reused = false;
  };
  std::optional<Driver> driver;
};

/// One platform's image of a multi-platform build.
struct PlatformBuilt {
  resolver::Platform platform;
  images::BuildResult image;
};

struct Built {
  /// Set when the argument was a spec that no combination satisfies; nothing was built then.
  std::unique_ptr<PreparedResolution> unsatisfied;
  std::string output;  ///< where the image was written
  std::string tag;     ///< the layout's ref.name
  resolver::ImageFormat format = resolver::ImageFormat::oci_dir;  ///< what was written to output
  images::BuildResult image;   ///< an OCI image's (for several platforms: their index, without layers); empty for a VM disk
  std::vector<PlatformBuilt> platforms;  ///< a multi-platform build's images, in the index's order; empty otherwise
  std::optional<VmBuilt> vm;     ///< set for a VM disk (format raw or qcow2)
  std::optional<images::PushStats> pushed;
  std::optional<BuildCacheReport> cache;  ///< with --cache: what the shared cache gave and took
  std::vector<StoredStatement> attested;  ///< with --attest: each statement in each store
  [[nodiscard]] std::uint64_t size() const {
    std::uint64_t total = 0;
    std::set<std::string> seen;  // a layer two platforms share counts once
    for (const auto* im : built_images())
      for (const auto& l : im->layers)
        if (seen.insert(l.blob.digest.str()).second) total += l.blob.size;
    return total;
  }
  /// The images built: the one image, or each platform's.
  [[nodiscard]] std::vector<const images::BuildResult*> built_images() const {
    std::vector<const images::BuildResult*> out;
    if (platforms.empty()) out.push_back(&image);
    for (const auto& p : platforms) out.push_back(&p.image);
    return out;
  }
};

/// Builds. Errors: those of reading the argument, locking, the base image, assembling, archiving and pushing;
/// `cli.output` (an archive or disk over a directory), `cli.source_date_epoch` (SOURCE_DATE_EPOCH not a number),
/// `build.not_vm` (a VM format for a container's lock, or the other way round), and the VM disk's (`vm.*`, `disk.*`;
/// `vm.gpuenv_binary`: no gpuenv of the disk's platform to put in it, `vm.driver_build`: vm.driver for a platform
/// other than this machine's, whose compiler cannot run here), `build.cache_vm` (--cache for a VM disk), BuildCache::open's;
/// with --attest: the key's (`key.missing`, before anything is built), `build.attest_vm` (a VM disk), and attest_build's.
Result<Built> build(const BuildRequest& request, Services& services);

/// The tag part of "registry/name:tag" (the OCI layout's ref.name); the whole text when it has no tag.
std::string ref_name(const std::string& tag);

}  // namespace gpuenv::app
