#pragma once
// The one reader of an image in an OCI layout, for `run`, `validate --image`, base images (`base: oci:` and
// pulled bases) and `inspect`: index.json, the chosen entry, its manifest (through a nested index of platforms
// to the image of the platform asked for, linux/amd64 unless said), and its config, each document read whole (a regular file, at most 16 MiB: a FIFO or
// device is refused before it is read) and verified against the digest it was reached by before it is parsed.
// Every descriptor goes through parse_descriptor, so no digest becomes a path unchecked. Layers are listed, not
// read: whoever reads one checks its size and sha256 first (extract_image_layers does).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "images/oci/layout.hpp"

namespace gpuenv::images {

/// One image of an OCI layout, every document verified.
struct LayoutImage {
  std::string manifest_digest;  ///< "sha256:<hex>" of the image manifest (inside a nested index: the platform's)
  std::string manifest_text;    ///< as stored
  std::string config_text;      ///< as stored
  nlohmann::json manifest;      ///< parsed: an object with a config descriptor and a layers array
  nlohmann::json config;        ///< parsed: an object
  Descriptor config_descriptor;
  std::vector<Descriptor> layers;  ///< in order, each descriptor checked
  std::vector<std::string> index_platforms;  ///< the platforms of the index it was chosen from ("linux/amd64"); empty for none
};

/// Which errors the caller's command reports: `no_image` (usage: no such ref, several images and no ref),
/// `not_image` (the directory is no layout, a document is not what it should be), `damaged` (a blob missing, or
/// not holding the bytes its digest names), each with its kind and hint.
struct LayoutErrors {
  std::string no_image = "run.no_image";
  ErrorKind not_image_kind = ErrorKind::environment;
  std::string not_image = "run.bad_image";
  std::string not_image_hint = "rebuild the image with `gpuenv build`";
  std::string damaged = "run.bad_image";
  std::string damaged_hint = "rebuild the image with `gpuenv build`";
};

/// The image of `layout_dir` named `ref` (its org.opencontainers.image.ref.name), or the one whose manifest
/// digest is `ref` ("sha256:..."), or its only image when `ref` is empty.
Result<LayoutImage> read_layout_image(const std::string& layout_dir, const std::string& ref, const LayoutErrors& errors = {},
                                      const resolver::Platform& platform = resolver::Platform());

/// Manifests, configs and index.json are read whole; larger ones are not images gpuenv reads.
inline constexpr std::uint64_t k_max_image_document_bytes = std::uint64_t{16} << 20;

}  // namespace gpuenv::images
