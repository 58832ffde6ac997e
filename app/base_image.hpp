#pragma once
// Base images (`base: docker://REF` or `oci:PATH[:REF]`): fetched into a layout in the cache, unpacked once per
// digest, and read for the facts resolving and pinning need: the distribution (/etc/os-release) and what is
// installed (/var/lib/dpkg/status).
#include <string>

#include "app/services.hpp"
#include "base/error.hpp"
#include "images/registry/registry_client.hpp"

namespace gpuenv::app {

/// A base image, in a local layout and unpacked, with what resolving and pinning read from it.
struct BaseImage {
  std::string pinned;           ///< "docker://host/repo:tag@sha256:..." or "oci:/abs/path[:ref]@sha256:..."
  std::string layout_dir;       ///< the OCI layout holding it (the cache's copy of a registry image)
  std::string manifest_digest;  ///< "sha256:..."
  std::string rootfs;           ///< unpacked, read-only
  std::string distro, release;  ///< ID and VERSION_ID of its /etc/os-release ("debian", "12")
  std::string dpkg_status;      ///< its /var/lib/dpkg/status; "" when it has none
};

/// Gets REFERENCE (docker://REF, pulled into the cache unless a pinned digest is cached already; or
/// oci:PATH[:REF][@sha256:...]) and reads it. Errors: `base.*`, `registry.*`, `run.*`.
Result<BaseImage> prepare_base_image(const std::string& reference, bool offline, Services& services);

/// What a registry image is for, in its error ids and messages.
struct RegistryImageUse {
  std::string id_prefix;  ///< "base" (base.offline, base.digest_mismatch) or "run"
  std::string what;       ///< "the base image", "the image"
  bool plain_http = false;  ///< speak plain HTTP to its registry (also when GPUENV_INSECURE_REGISTRIES lists it)
  resolver::Platform platform;  ///< the image taken from an index of platforms
};

/// REFERENCE (docker://REF, or REF) into the cache's layout for its repository: pulled, every blob and the
/// manifest checked against its digest (images::RegistryClient::pull), unless it is pinned by a digest the cache
/// holds already (then no network). Fills `pinned`, `layout_dir` and `manifest_digest` of OUT. Errors:
/// `registry.*` (`registry.bad_reference` for a malformed one), `PREFIX.offline` (OFFLINE and not cached),
/// `PREFIX.digest_mismatch`.
Status fetch_registry_image(const std::string& reference, bool offline, Services& services, const RegistryImageUse& use, BaseImage& out);

/// Registry options for REGISTRY (host[:port]): plain HTTP with PLAIN_HTTP or when GPUENV_INSECURE_REGISTRIES
/// lists it; credentials from GPUENV_REGISTRY_USER/PASSWORD or the Docker config.json (a bad one in *PROBLEM).
images::RegistryOptions registry_options(const Services& services, const std::string& registry, bool plain_http, Status* problem);

}  // namespace gpuenv::app
