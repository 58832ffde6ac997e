#pragma once
// Container Device Interface (CDI) specs, read for the cdi_spec check: the fields that name host paths, read from
// YAML or JSON text within bounds, and the rules that tell a driver library's version from its file name. Pure: no
// file is opened here (cdi_host.hpp reads the directories and the host's paths).
//
// The format: the CDI specification (https://github.com/cncf-tags/container-device-interface/blob/main/SPEC.md):
// cdiVersion, kind, devices[].name and .containerEdits, and the spec-wide containerEdits with deviceNodes[].path
// and .hostPath (hostPath from v0.5.0; path when absent), mounts[].hostPath and .containerPath, hooks[].path, env.
// Released versions: specs-go/version.go (v0.3.0 the earliest supported, to v1.1.0).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::validate {

/// Bounds on what one spec file may hold before it is judged malformed.
struct CdiLimits {
  std::size_t max_file_bytes = 4u << 20;  ///< as gpuenv's other YAML inputs; nvidia-ctk's specs are tens of KiB
  std::size_t max_depth = 64;             ///< check_yaml_bytes' conservative nesting bound (indentation counts)
  std::size_t max_nodes = 200000;         ///< YAML nodes visited, aliases counted each time they are used
  std::size_t max_devices = 4096;         ///< devices of one spec
  std::size_t max_paths = 65536;          ///< host paths of one spec (device nodes, mounts, hooks)
  std::size_t max_path_bytes = 4096;      ///< PATH_MAX
};

enum class CdiFormat { yaml, json };

/// What a host path of a spec is for.
enum class CdiPathRole { device_node, mount, hook };
const char* to_string(CdiPathRole role);

/// One host path a spec names, in document order.
struct CdiPath {
  std::string device;  ///< the device whose containerEdits name it; empty: the spec-wide containerEdits
  CdiPathRole role = CdiPathRole::mount;
  std::string host_path;  ///< absolute, without ".." (the parser refuses others)
};

/// A spec's fields that the check judges.
struct CdiSpec {
  std::string version;               ///< cdiVersion, "0.5.0"
  std::string kind;                  ///< "nvidia.com/gpu"
  std::vector<std::string> devices;  ///< device names, in document order
  std::vector<CdiPath> paths;
};

/// A file's text read as a spec. KIND is set whenever the document had a readable `kind`, even when the rest is
/// not a valid spec, so that the specs of other vendors are left alone whatever their state.
struct CdiParse {
  std::string kind;
  std::optional<CdiSpec> spec;  ///< empty: PROBLEM says why
  std::string problem;          ///< one line, made safe to print (safe_text), naming the place when known
};

/// Reads TEXT (the file PATH, for messages) as a CDI spec: size, UTF-8, nesting and node bounds, YAML or JSON
/// syntax, a known cdiVersion, a kind of the form vendor/class, at least one device with a name, and every path
/// absolute, free of ".." components and control characters and at most PATH_MAX. Never throws.
CdiParse parse_cdi_spec(std::string_view text, const std::string& path, CdiFormat format, const CdiLimits& limits = {});

/// Whether VERSION ("0.7.0" or "v0.7.0") is a released CDI spec version gpuenv reads (0.3.0 to 1.1.0).
bool is_known_cdi_version(std::string_view version);

/// Whether KIND is NVIDIA's GPU kind: "nvidia.com/gpu", or the management spec's "management.nvidia.com/gpu"
/// (nvidia-ctk cdi generate --mode=management --vendor=management.nvidia.com).
bool is_nvidia_gpu_kind(std::string_view kind);

/// The driver version that PATH carries, when it is versioned with the driver: a driver library
/// (libcuda.so.550.54.15, libnvidia-ml.so.550.54.15, libnvidia-*.so.<version>, libcudadebugger, libnvcuvid,
/// libnvoptix, lib*_nvidia.so.<version>) or GSP firmware (/lib/firmware/nvidia/<version>/...). A library with a
/// version of its own (libnvidia-egl-wayland.so.1.1.13: a first component under 100) carries none.
std::optional<std::string> driver_version_in_path(std::string_view path);

/// Whether the device NAME or host PATH belongs to a MIG device: names "<gpu>:<gi>" or "MIG-<uuid>", nodes under
/// /dev/nvidia-caps/.
bool is_mig_name(std::string_view name);
bool is_mig_path(std::string_view path);

/// The spec-dirs of the NVIDIA container toolkit's config.toml ([nvidia-container-runtime.modes.cdi] spec-dirs,
/// or the dotted key nvidia-container-runtime.modes.cdi.spec-dirs): empty when the file does not set them; an
/// Error (`cdi.toolkit_config`) when the key is there but is not an array of plain strings this reader takes.
/// Only that key is read; the rest of the file is not judged.
Result<std::optional<std::vector<std::string>>> toolkit_spec_dirs(std::string_view text, const std::string& path);

}  // namespace gpuenv::validate
