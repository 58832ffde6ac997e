#pragma once
// A VM disk as a KubeVirt containerDisk (docs/vm.md): an OCI image whose one layer holds the disk file under
// /disk/, owned by uid and gid 107 (the qemu user KubeVirt's launcher runs as), so registries carry VM disks like
// container images (KubeVirt user guide, "Filesystems, Disks and Volumes", containerDisk). The layer is an
// uncompressed tar (a qcow2 is already compact, and the layer's digest is then the tar's); every time stamp is
// SOURCE_DATE_EPOCH, so the same disk gives the same image digest.
#include <cstdint>
#include <map>
#include <string>

#include "base/error.hpp"
#include "images/oci/layout.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images::disk {

inline constexpr const char* k_layer_tar = "application/vnd.oci.image.layer.v1.tar";
inline constexpr std::uint32_t k_kubevirt_qemu_id = 107;

struct ContainerDiskRequest {
  std::string layout_dir;  ///< the OCI layout to write (made when missing)
  std::string disk;        ///< the disk file (qcow2 or raw)
  std::string file_name;   ///< its name under /disk/: "gpu-node.qcow2"
  std::int64_t epoch = 0;
  std::string tag;         ///< index.json's ref.name; "" for none
  std::map<std::string, std::string> labels;  ///< the config's labels
  resolver::Platform platform;                ///< the disk's: the config's architecture (and variant)
};

/// Writes the image and returns its manifest's descriptor. Errors: `oci.*` (the layout), `disk.io`, `disk.path`
/// (a file name that is not one plain name).
Result<Descriptor> write_container_disk(const ContainerDiskRequest& request);

}  // namespace gpuenv::images::disk
