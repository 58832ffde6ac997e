#pragma once
// The user's spec (`gpuenv-spec-v1`): what image to build and for which GPUs. See docs/spec.md.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/text.hpp"
#include "resolver/platform.hpp"
#include "resolver/version.hpp"

namespace gpuenv::resolver {

inline constexpr std::string_view k_spec_schema = "gpuenv-spec-v1";
/// Specs larger than this are refused before parsing (a spec is a few hundred bytes).
inline constexpr std::size_t k_spec_max_bytes = 1 << 20;
/// Deepest YAML nesting a spec may have (a valid spec needs 3).
inline constexpr std::size_t k_spec_max_depth = 64;

enum class Confidential { off, allowed, required };

/// Whether NAME may name an image (and so its output directory and files): lower-case letters, digits, '.', '_'
/// and '-', starting with a letter or digit, at most 128 characters; never a path.
bool is_valid_image_name(std::string_view name);

/// What `gpuenv build` writes: an OCI layout directory, or the layout as one tar file (OCI's, or with
/// Docker's manifest.json added for `docker load`); or a bootable VM disk, raw (sparse) or qcow2 (docs/vm.md).
enum class ImageFormat { oci_dir, oci_archive, docker_archive, raw, qcow2 };
/// The names the spec and --format use, in the order of the enum.
inline const std::vector<std::string> k_image_formats = {"oci-dir", "oci-archive", "docker-archive", "raw", "qcow2"};
/// Whether FORMAT is a VM disk.
inline bool is_vm_format(ImageFormat format) { return format == ImageFormat::raw || format == ImageFormat::qcow2; }
/// "oci-dir", "oci-archive", "docker-archive", "raw" or "qcow2".
std::string_view to_string(ImageFormat format);
/// The format a name gives; std::nullopt for an unknown name.
std::optional<ImageFormat> parse_image_format(std::string_view name);

/// Where a value came from in the spec file, for error messages.
struct SourcePos {
  int line = 0;    ///< 1-based; 0 = unknown
  int column = 0;  ///< 1-based
};

/// A framework request: `torch: "2.5.*"`.
struct FrameworkRequest {
  std::string name;  ///< torch | tensorflow | jax | vllm | sglang
  Constraint version;
  SourcePos pos;
  /// Only this variant of the release ("cu118"); "" any. Set for a framework a project file pins (the PyPI wheel:
  /// the release's default variant; `torch==2.5.1+cu118`: cu118).
  std::string variant;
  /// Where the pin was read when a project file pins the framework ("requirements.txt:3"); "" from the spec.
  std::string pinned_by;
};

/// `packages.python_project`: the project's own dependency file (a requirements file, pylock.toml, uv.lock,
/// pyproject.toml or environment.yml), as written (relative to the spec's directory), with the extras and dependency
/// groups wanted (docs/spec.md "A project file").
struct PythonProjectRequest {
  std::string file;
  std::vector<std::string> extras, groups;
  SourcePos pos;
};

struct GpuRequest {
  std::vector<std::string> models;  ///< as written: "H100", "RTX 4090"
  std::vector<int> archs;           ///< compute capabilities as 10*major+minor, from `sm_90` / `sm_90a`
  std::optional<Constraint> driver; ///< the fleet's driver: exact or a range with a lower bound
  Confidential confidential = Confidential::off;
  SourcePos models_pos, archs_pos, driver_pos;
};

/// An apt repository named in a spec or in gpuenv's user configuration (`sources.apt`).
struct AptSourceRequest {
  std::string uri;    ///< http://, https:// or file://
  std::string suite;  ///< "bookworm", or "/" / "subdir/" for a flat repository
  std::vector<std::string> components;
  std::vector<std::string> architectures;
  std::string signed_by;  ///< keyring path
  std::optional<bool> trusted;
  SourcePos pos;
};

/// Where packages come from when the spec or the user's configuration says so (`sources:`); what is not
/// said here comes from the host's apt and pip configuration.
struct SourcesRequest {
  std::vector<AptSourceRequest> apt;
  bool apt_given = false;
  std::string pip_index_url;
  std::vector<std::string> pip_extra_index_urls;
  bool pip_given = false;
  SourcePos pip_pos;
};

/// The CUDA components a spec may name under cuda.components, in the order images list them.
inline const std::vector<std::string> k_cuda_components = {"cudart", "cublas", "cufft", "curand", "cusolver", "cusparse",
                                                           "nvrtc",  "nvjitlink", "nccl", "cupti", "nvcc"};

/// The base variants a spec may name.
inline const std::vector<std::string> k_base_variants = {"required", "slim"};

/// The NVIDIA driver of a VM image (`vm.driver`, docs/vm.md): a kernel module source package built for the image's
/// kernel at build time (a DKMS source tree: /usr/src/<name>-<version>/dkms.conf), and the packages the image gets
/// beside the module (firmware, NVML, libcuda). `distro` is Debian's packaged driver (k_distro_driver_*).
struct VmDriver {
  std::string request = "distro";    ///< as the spec says it: "distro" or "packages"
  std::string module;                ///< "name" or "name=version"
  std::vector<std::string> packages; ///< "name" or "name=version"
  std::string version;               ///< the driver version the module package carries ("535.309.01"); set by the lock
  bool operator==(const VmDriver&) const = default;
};

/// Debian's packaged driver (non-free): the DKMS module source, and what the image gets beside the module: the GSP
/// firmware (Turing and later run it), the module's modprobe configuration, NVML, libcuda and nvidia-smi.
inline const std::string k_distro_driver_module = "nvidia-kernel-dkms";
inline const std::vector<std::string> k_distro_driver_packages = {"firmware-nvidia-gsp", "nvidia-kernel-support", "libnvidia-ml1", "libcuda1",
                                                                  "nvidia-smi"};

/// The `vm:` section (docs/vm.md): what a VM disk image adds to the root.
struct VmRequest {
  /// The kernel package; "" (not given) until the image's platform is known, then default_vm_kernel of it.
  std::string kernel;
  std::uint64_t disk_size = 0;                     ///< the root partition in bytes; 0: what the tree needs
  bool cloud_init = false;                         ///< cloud-init: SSH keys and hostname from the cloud's metadata
  std::string cmdline;                             ///< appended to the kernel command line
  std::optional<VmDriver> driver;                  ///< the NVIDIA driver built into the image; none: no driver
  bool operator==(const VmRequest&) const = default;
};

/// vm.kernel's default: Debian's cloud kernel of PLATFORM's architecture (linux-image-cloud-amd64,
/// linux-image-cloud-arm64).
std::string default_vm_kernel(const Platform& platform);

struct Spec {
  std::string path;  ///< file the spec came from (for messages)
  std::string name = "gpuenv-image";
  std::string base_distro = "debian";
  std::string base_release = "12";
  /// A base image instead of a root built from packages: "docker://host/repo[:tag][@sha256:...]" or
  /// "oci:PATH[:REF]" as written. base_distro and base_release are then empty until the caller reads them
  /// from the image's /etc/os-release.
  std::string base_image;
  /// Which packages a root built from packages starts from (`base: {distro: debian:12, variant: slim}`):
  /// "required" (the default) is the distribution's required set; "slim" leaves it out and installs only what
  /// Python and the spec's packages need, plus packages/pin_image.hpp k_slim_core (docs/build.md "A slim base").
  std::string base_variant = "required";
  Constraint python, cuda, cudnn;
  bool python_given = false, cuda_given = false, cudnn_given = false;
  /// The CUDA libraries the image gets when no framework brings its own (`cuda: {version, components}`):
  /// names from k_cuda_components. Empty: the default, the runtime and cuBLAS (plus cuDNN when the
  /// resolution has one).
  std::vector<std::string> cuda_components;
  std::vector<FrameworkRequest> frameworks;  ///< in the order torch, tensorflow, jax
  GpuRequest gpu;
  std::vector<std::string> apt_packages, pip_packages;
  std::optional<PythonProjectRequest> python_project;
  ImageFormat image_format = ImageFormat::oci_dir;
  std::string image_tag;
  /// `image.platforms`, in k_platform_facts' order, each once; empty: not given (resolver::image_platforms
  /// chooses: linux/arm64 for Grace GPUs, else this machine's platform).
  std::vector<Platform> platforms;
  /// Set for a VM disk (image.format raw or qcow2, or a `vm:` section).
  std::optional<VmRequest> vm;
  std::string validate_level = "standard";
  std::map<std::string, double> validate_thresholds;
  /// `validate.data_read_min` ("5GB/s"), in bytes per second: the data_read check's threshold (docs/validate.md).
  std::optional<double> validate_data_read_min;
  SourcesRequest sources;
  std::map<std::string, SourcePos> positions;  ///< "cuda", "python", "base", ... to their position

  [[nodiscard]] std::string base() const { return base_distro + ":" + base_release; }
  /// True when the spec asks for CUDA: a framework, `cuda:` (a version or components) or `cudnn:`. Without it
  /// the resolution has no CUDA, no cuDNN and no CUDA driver floor (docs/spec.md "No CUDA").
  [[nodiscard]] bool wants_cuda() const { return !frameworks.empty() || cuda_given || cudnn_given || !cuda_components.empty(); }
  /// "path:line:col" for a recorded key, or just the path.
  [[nodiscard]] std::string where(const std::string& key) const;
};

/// Parses a spec from its bytes. `path` is used only in messages. Every error is ErrorKind::spec with
/// `where` = "path:line:column" and a hint. Refuses empty, binary, non-UTF-8, oversized and too-deep input,
/// duplicate keys, unknown keys (with a did-you-mean), wrong types, bad versions and contradictory fields.
Result<Spec> parse_spec(std::string_view text, const std::string& path);

/// Parses gpuenv's user configuration file (`sources:` only today), with the spec's error rules.
Result<SourcesRequest> parse_user_config(std::string_view text, const std::string& path);

/// Parses `sm_90`, `sm_90a`, `sm_100f`, `9.0` or `90` into 90.
Result<int> parse_arch(std::string_view text);

/// Formats a compute capability as `sm_90`.
std::string arch_name(int sm);

/// Closest candidate by edit distance, if it is close enough to be a likely typo (base/text.hpp).
using gpuenv::did_you_mean;

}  // namespace gpuenv::resolver
