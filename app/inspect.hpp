#pragma once
// `gpuenv inspect`: what an image holds, layer by layer and package by package, and what changed between two.
#include <optional>
#include <string>
#include <vector>

#include "app/marks.hpp"
#include "app/services.hpp"
#include "base/error.hpp"
#include "images/disk/disk_reader.hpp"
#include "images/oci/image_reader.hpp"

namespace gpuenv::app {

struct InspectRequest {
  std::string image;        ///< DIR[:REF], oci:DIR[:REF], oci-archive:FILE, docker-archive:FILE, a tar FILE, or docker://REF
  std::string diff;         ///< a second image to compare with; "" for none
  bool plain_http = false;  ///< talk to a docker:// registry over plain HTTP
};

struct InspectResult {
  images::ImageSummary image;
  std::optional<images::ImageSummary> other;  ///< the image of `diff`, when asked
  std::vector<images::LayerChange> changes;   ///< image -> other, by layer name, when `diff` was asked
  std::vector<ListedRecord> marks;  ///< the image's marks (docs/mark.md), oldest first; none for archives
  std::string marks_problem;        ///< why its marks could not be listed, when they could not
  /// Set, instead of `image`, when IMAGE is a VM disk (raw or qcow2, docs/vm.md).
  std::optional<images::disk::DiskSummary> disk;
};

/// Reads the image (and the one to compare with). A docker:// image is fetched with the registry options of the
/// environment (GPUENV_INSECURE_REGISTRIES, credentials, GPUENV_CA_BUNDLE): manifest and config only.
/// Errors: those of images::read_image_summary, and `registry.config` (an unreadable Docker config.json). A VM
/// disk file is read by images::disk::read_disk (its errors), and has no --diff (`inspect.disk_diff`).
Result<InspectResult> inspect(const InspectRequest& request, Services& services);

}  // namespace gpuenv::app
