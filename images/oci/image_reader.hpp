#pragma once
// Reading what an image holds without unpacking it: layer by layer and package by package (from the manifest's
// annotations gpuenv writes and the config), for `gpuenv inspect`. An image is an OCI layout, an oci-archive or
// docker-archive tar file (read member by member, nothing extracted) or a registry reference (only the manifest
// and config are fetched); each becomes the same ImageSummary.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::images {

/// A package as a layer's dev.gpuenv.packages annotation lists it.
struct LayerPackage {
  std::string name, version, kind;  ///< kind: "deb" or "wheel"
  std::uint64_t bytes = 0;          ///< installed size
};

/// One layer: its dev.gpuenv.layer name ("layer N" without one), digest, compressed size and packages.
struct LayerSummary {
  std::string name, digest;
  std::uint64_t size = 0;
  std::vector<LayerPackage> packages;
};

/// What an image holds, as its manifest and config tell.
struct ImageSummary {
  std::string where;         ///< the argument it was read from
  std::string digest;        ///< of the manifest (docker archives without an OCI manifest: of the config)
  std::string created, architecture;
  std::map<std::string, std::string> labels;  ///< the config's string Labels
  nlohmann::json env = nlohmann::json::array();  ///< the config's Env array as stored
  std::vector<LayerSummary> layers;
  /// When the image was taken from an index of platforms: every platform it lists ("linux/amd64", "linux/arm64/v8");
  /// the image shown is this machine's platform's.
  std::vector<std::string> index_platforms;
};

/// How a docker:// reference is read; set by the caller, which owns the network and the environment (app/inspect:
/// images/registry/registry_summary.hpp through the services' HTTP client).
struct RegistryAccess {
  /// Reads REFERENCE ("host[:port]/repo[:tag|@sha256:...]", the argument WHERE without docker://); empty: registry
  /// references are refused (`inspect.no_registry`).
  std::function<Result<ImageSummary>(const std::string& reference, const std::string& where)> read;
};

/// Reads the image `argument` names: DIR[:REF], oci:DIR[:REF], oci-archive:FILE[:REF], docker-archive:FILE[:NAME:TAG],
/// a tar FILE (format detected) or docker://host[:port]/repo[:tag|@sha256:...]. Errors: `inspect.bad_image`
/// (usage: not an image, no such image or ref), `inspect.damaged_image` (a blob missing, broken off or not
/// matching its digest), `inspect.io`, and the registry client's.
Result<ImageSummary> read_image_summary(const std::string& argument, const RegistryAccess& registry);

/// The model from an image manifest and its config (JSON objects) read from `where`, with manifest `digest`.
/// Error: `inspect.bad_image` when the manifest has no layers list.
Result<ImageSummary> summary_from_manifest(const nlohmann::json& manifest, const nlohmann::json& config, const std::string& where,
                                           const std::string& digest);

/// summary_from_manifest of the manifest and config documents (text). Error: `inspect.bad_image` when either is not
/// a JSON object.
Result<ImageSummary> summary_from_documents(const std::string& manifest, const std::string& config, const std::string& where, const std::string& digest);

/// Splits "PATH:REF" at the first colon after which PATH exists (a REF may hold colons: "name:tag" in a docker
/// archive); a directory's REF has no '/'. An existing `argument`, or one without such a split, is {argument, ""}.
std::pair<std::string, std::string> split_image_ref(const std::string& argument);

/// The members NAMES of the tar file at PATH ("index.json", "blobs/sha256/<hex>"), each at most 16 MiB, read in
/// one pass that skips every other member's data; a name the archive lacks is absent from the answer. Errors as
/// read_image_summary's for archives.
Result<std::map<std::string, std::string>> read_archive_members(const std::string& path, const std::set<std::string>& names, const std::string& where);

/// What changed in one package of a layer: `before` empty when added, `after` empty when removed.
struct PackageChange {
  std::string name, kind;
  std::optional<std::string> before, after;
};

/// One layer of a comparison, by layer name.
struct LayerChange {
  std::string layer;
  std::string status;  ///< "added", "removed", "unchanged" (same digest) or "changed"
  std::uint64_t size_before = 0, size_after = 0;  ///< 0 where the layer is absent
  std::vector<PackageChange> packages;  ///< removed and changed (by kind:name), then added
};

/// The layers of `before` in order, then those only `after` has, each with its package changes.
std::vector<LayerChange> diff_images(const ImageSummary& before, const ImageSummary& after);

}  // namespace gpuenv::images
