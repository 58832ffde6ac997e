#pragma once
// The image config and reuse key of the image plan (pure; see layer_plan.hpp for the whole plan).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "resolver/lockfile.hpp"

namespace gpuenv::images {

/// How layers are compressed: tar+gzip (every runtime reads it) or tar+zstd (faster, newer runtimes).
enum class Compression { gzip, zstd };
/// "gzip" or "zstd".
std::string_view to_string(Compression compression);
/// The compression a name gives; std::nullopt for an unknown name.
std::optional<Compression> parse_compression(std::string_view name);

/// Everything besides the lock that an image's bytes depend on (the tag is not: it lives in index.json only).
struct ImageParameters {
  std::string generator;                  ///< "gpuenv 0.1.0"
  std::int64_t source_date_epoch = 0;
  std::string architecture;               ///< Debian architecture
  int gzip_level = 6;
  Compression compression = Compression::gzip;
  int zstd_level = 3;
  std::vector<std::string> allow_missing;  ///< sonames the DT_NEEDED check accepts as absent, in the caller's order
};

/// The key under which a finished image is found again in a layout (its manifest's dev.gpuenv.build.key):
/// hex sha256 over the lock's bytes and the parameters.
std::string reuse_key(std::string_view lock_text, const ImageParameters& parameters);

/// What a base image's config brings that the image's config keeps.
struct BaseImageConfig {
  std::vector<std::string> env;               ///< "NAME=value", in the base's order
  std::map<std::string, std::string> labels;  ///< its string-valued labels
  std::string manifest_digest;                ///< "sha256:..."
};

/// The runtime part of the image config.
struct ImageConfigPlan {
  std::vector<std::string> env;               ///< "NAME=value": the base's (unless gpuenv sets the name), then gpuenv's
  std::map<std::string, std::string> labels;  ///< gpuenv's (lock digest, CUDA, cuDNN, Python, frameworks), then the base's
  std::vector<std::string> cmd;               ///< the image's Python, else /bin/sh (none on a slim base)
};

/// The environment (PATH, LANG, NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_CUDA from the
/// lock's CUDA version), labels and command of the image; `base` when it is built on a base image.
ImageConfigPlan plan_image_config(const resolver::Lock& lock, const std::string& lock_sha256, std::int64_t source_date_epoch,
                                  const BaseImageConfig* base = nullptr);

}  // namespace gpuenv::images
