#pragma once
// The compatibility catalog: facts about CUDA, cuDNN, frameworks, GPUs and base distributions, each with
// its sources. Loaded from the YAML files of recipes/catalog/ (docs/catalog.md describes them).
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "resolver/version.hpp"

namespace gpuenv::resolver {

inline constexpr std::string_view k_catalog_schema = "gpuenv-catalog-v1";

/// Where a fact comes from: a document (title + url) or a repository file (repo + path).
struct SourceRef {
  std::string title, url, repo, path, note;
  friend bool operator==(const SourceRef&, const SourceRef&) = default;
};

struct CudaMajor {
  int major = 0;
  Version minor_compat_driver_min;  ///< oldest driver that runs every toolkit of this major (minor-version compatibility)
  std::vector<SourceRef> sources;
  friend bool operator==(const CudaMajor&, const CudaMajor&) = default;
};

struct CudaToolkit {
  Version version;     ///< x.y.z
  Version driver_min;  ///< driver the toolkit ships with; also the floor for JIT of its PTX
  std::vector<int> sm; ///< compute capabilities nvcc can emit machine code for
  std::optional<Version> gcc_max;
  std::vector<SourceRef> sources;
  friend bool operator==(const CudaToolkit&, const CudaToolkit&) = default;
};

struct CompatPackage {
  Version cuda;                          ///< x.y of the cuda-compat package
  std::vector<std::string> driver_branches;  ///< "470", "535", ...
  std::vector<SourceRef> sources;
  friend bool operator==(const CompatPackage&, const CompatPackage&) = default;
};

struct CudnnBuild {
  int cuda_major = 0;
  Version cuda_min, cuda_max, driver_min;
  std::vector<int> sm;
  friend bool operator==(const CudnnBuild&, const CudnnBuild&) = default;
};

/// What is known of one cuDNN release's build for one CUDA major: recorded, or inferred from the recorded
/// neighbours on both sides of the same major where they agree (docs/resolver.md). A fact left unset is
/// unknown and must not be the ground of a refusal.
struct CudnnFacts {
  bool recorded = false;                ///< the release itself is in the catalog
  std::optional<bool> has_build;        ///< a build for this CUDA major exists
  std::optional<Version> cuda_min, cuda_max, driver_min;
  std::optional<std::vector<int>> sm;
  std::optional<Version> below, above;  ///< the neighbours an inference used (when not recorded)
  std::vector<std::string> unknown;     ///< facts neither recorded nor agreed by both neighbours
};

struct CudnnRelease {
  Version version;
  std::vector<CudnnBuild> builds;
  std::vector<SourceRef> sources;
  friend bool operator==(const CudnnRelease&, const CudnnRelease&) = default;
};

struct FrameworkVariant {
  std::string name;               ///< cu124, cuda12
  Version cuda;                   ///< runtime it is built against (JAX: the oldest it accepts)
  std::optional<Version> cudnn;   ///< bundled (torch), tested (TensorFlow) or minimum (JAX)
  std::vector<int> sm, ptx;       ///< machine code and PTX compiled in; both empty = not stated
  std::optional<Version> driver_min;  ///< when the framework states its own floor
  /// Machine code and PTX of the variant's Linux aarch64 build (its sm/ptx are the x86_64 build's); both empty = not
  /// recorded. Recorded only for a variant the release's aarch64_cuda lists.
  std::vector<int> aarch64_sm, aarch64_ptx;
  friend bool operator==(const FrameworkVariant&, const FrameworkVariant&) = default;
};

struct FrameworkRelease {
  std::string framework;  ///< torch | tensorflow | jax | vllm | sglang
  Version version;
  Version python_min, python_max;
  std::string default_variant;
  std::optional<Version> glibc_min;
  std::vector<FrameworkVariant> variants;
  /// The torch release its wheels pin (Requires-Dist torch==X: vLLM, SGLang); each variant runs on torch's variant of
  /// the same name. std::nullopt for a framework that pins no torch.
  std::optional<Version> torch;
  /// Other exact pins of its Requires-Dist worth knowing ("torchvision==0.29.0"), as read; checked online.
  std::vector<std::string> pins;
  /// Those of `pins` for which the Python package index served no wheel when the catalog recorded it (none at all, or a
  /// source distribution only): the release cannot be installed from the index with wheels.
  std::vector<std::string> pins_without_wheel;
  /// The variants whose Linux aarch64 wheels on the Python package index (its default variant, what a plain pip
  /// install gets there) are CUDA builds: empty when every aarch64 wheel the index serves for the release is
  /// CPU-only (or there is none); std::nullopt when not recorded (unknown). Says nothing of torch's own wheel index.
  std::optional<std::vector<std::string>> aarch64_cuda;
  std::vector<SourceRef> sources;
  [[nodiscard]] const FrameworkVariant* variant(std::string_view name) const;
  /// Whether the Python package index serves VARIANT with CUDA for Linux aarch64: true or false where aarch64_cuda
  /// is recorded, std::nullopt where it is not.
  [[nodiscard]] std::optional<bool> cuda_on_aarch64(std::string_view variant) const;
  friend bool operator==(const FrameworkRelease&, const FrameworkRelease&) = default;
};

struct GpuModel {
  std::string name;
  std::vector<std::string> aliases;
  /// The names NVML reports for this model's device ids (nvidia-smi --query-gpu=name), as the driver's released-GPU
  /// table spells them today: one per product (H100: NVL, 80GB HBM3, PCIe, and the bare one). Never empty.
  std::vector<std::string> nvml_names;
  /// Names older drivers reported for the same products ("HGX GB200" before "NVIDIA GB200").
  std::vector<std::string> former_nvml_names;
  int sm = 0;
  std::vector<std::string> pci_device_ids;
  std::optional<Version> driver_min;
  bool datacenter = false;
  bool confidential = false;
  std::optional<Version> confidential_driver_min;
  std::vector<SourceRef> sources;
  /// The Debian architecture of the host CPU every product of this model comes with ("arm64": Grace), or ""
  /// when the GPU goes into hosts of any architecture. Sets a spec's default image.platforms.
  std::string host_arch;
  friend bool operator==(const GpuModel&, const GpuModel&) = default;
};

struct Distro {
  std::string name, release, codename;
  std::vector<Version> python;
  std::optional<Version> glibc;
  std::optional<std::string> gcc;
  std::vector<SourceRef> sources;
  friend bool operator==(const Distro&, const Distro&) = default;
};

/// The whole catalog. Lists are sorted as the files are (ascending by version).
struct Catalog {
  std::vector<CudaMajor> majors;
  std::vector<CudaToolkit> toolkits;
  bool compat_datacenter_only = true;
  std::vector<CompatPackage> compat;
  std::vector<CudnnRelease> cudnn;
  std::map<std::string, std::vector<FrameworkRelease>> frameworks;  ///< by framework name
  std::vector<GpuModel> gpus;
  std::vector<Distro> distros;

  [[nodiscard]] const CudaMajor* major(int m) const;
  /// Finds a GPU by name or alias, case-insensitively, ignoring "NVIDIA"/"GeForce"/"Tesla" and spaces/dashes.
  [[nodiscard]] const GpuModel* gpu(std::string_view name) const;
  [[nodiscard]] const GpuModel* gpu_by_pci_id(std::string_view id) const;
  [[nodiscard]] const Distro* distro(std::string_view name, std::string_view release) const;
  /// Toolkits whose version has the prefix x.y (newest last).
  [[nodiscard]] std::vector<const CudaToolkit*> toolkits_of(const Version& major_minor) const;
  /// Newest toolkit whose driver_min <= driver: the newest CUDA the driver runs natively.
  [[nodiscard]] const CudaToolkit* newest_native(const Version& driver) const;
  /// cuDNN release by exact version, or null.
  [[nodiscard]] const CudnnRelease* cudnn_release(const Version& v) const;
  /// The facts of cuDNN `v`'s build for CUDA `cuda_major`: the record's, or those on which the recorded
  /// neighbours below and above it (same cuDNN major) agree; nothing is taken from one side alone.
  [[nodiscard]] CudnnFacts cudnn_facts(const Version& v, int cuda_major) const;
  friend bool operator==(const Catalog&, const Catalog&) = default;
};

/// One catalog file to load: its display path and its bytes.
struct CatalogFile {
  std::string path;
  std::string_view text;
};

/// Loads and merges catalog files; each declares `kind`. Errors (ErrorKind::internal) carry file:line:col.
Result<Catalog> load_catalog(const std::vector<CatalogFile>& files);

/// The catalog digest recorded in locks: sha256 over each file's base name, a NUL, its bytes and a NUL,
/// in the given (sorted) order.
std::string catalog_digest(const std::vector<CatalogFile>& files);

/// Internal-consistency problems (unsorted lists, missing sources, dangling references); empty when sound.
std::vector<std::string> check_catalog(const Catalog& catalog);

/// What a GPU name a user typed (a spec's model name, an alias, or NVML's product name) stands for among the
/// names NVML reports, the spelling a validation record and a node label carry (docs/cli.md, `verify`).
struct GpuProducts {
  const GpuModel* model = nullptr;     ///< null: a name the catalog does not know (then `products` is the name itself)
  std::vector<std::string> products;   ///< NVML's names of the products it stands for: one, or the candidates
  std::vector<std::string> spellings;  ///< other names drivers reported for that one product (its former names)
};

/// Maps NAME to NVML product names, the one mapping `verify --gpu` uses: an NVML name (current or former) stands
/// for itself; a model's name or alias stands for the model's products, narrowed to those whose names hold every
/// word the alias adds to the model's name ("H100 PCIe" is "NVIDIA H100 PCIe"; "H100" and "H100 SXM5" are all
/// four H100s). Compared as Catalog::gpu compares names (case, spaces, dashes and NVIDIA/GeForce/Tesla ignored).
GpuProducts gpu_products(const Catalog& catalog, std::string_view name);

}  // namespace gpuenv::resolver
