#pragma once
// The resolver: picks driver floor, CUDA, cuDNN, framework variants and Python for a spec, or explains why
// nothing fits. Pure: no I/O. Rules and preferences are documented in docs/resolver.md.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "resolver/catalog.hpp"
#include "base/error.hpp"
#include "resolver/spec.hpp"
#include "resolver/version.hpp"

namespace gpuenv::resolver {

/// One GPU the image must run on.
struct GpuTarget {
  std::string name;               ///< catalog model name, or "sm_90" when given by architecture
  int sm = 0;
  const GpuModel* model = nullptr;  ///< null when known only by architecture
};

/// Looks GPU models up in the catalog (unknown names fail with a did-you-mean) or wraps bare architectures.
Result<std::vector<GpuTarget>> gpu_targets(const Catalog& catalog, const std::vector<std::string>& models,
                                           const std::vector<int>& archs, const std::string& where);

struct ResolveRequest {
  const Spec* spec = nullptr;
  std::vector<GpuTarget> gpus;        ///< empty: GPU architecture is not checked (and said so)
  std::optional<Constraint> driver;   ///< the fleet's driver; its lower bound is what must be met
  std::string gpu_origin = "spec";    ///< "spec", "--gpu", "host"
  std::string driver_origin = "spec";
  /// Only the framework variants the Python package index itself serves: torch's default variant (its other
  /// variants live on torch's own wheel index). Set when no variant index is configured.
  bool default_variants_only = false;
  /// This machine's platform, image_platforms' fallback; unset: native_platform() (tests set it).
  std::optional<Platform> host_platform;
};

/// Rules a combination can break. Names are stable (they appear in JSON output).
enum class Rule {
  framework_version, cuda_constraint, cudnn_constraint, python_constraint, python_framework, arch_cuda,
  arch_cudnn, arch_framework, cudnn_cuda, driver, gpu_driver, confidential, glibc,
  cudnn_conflict,  ///< two frameworks in one image need different cuDNN releases
  platform_framework,  ///< linux/arm64 is a platform and the framework's aarch64 wheels on the index are CPU-only
  framework_pin,       ///< a framework pins a torch release (vLLM, SGLang) and the image's torch is another
  pin_without_wheel,   ///< a framework release pins a package the Python package index serves no wheel of
};
std::string_view rule_name(Rule rule);

struct Violation {
  Rule rule;
  std::string message;
};

/// One reason the driver must be at least some version.
struct FloorPart {
  Version driver;
  std::string why;
  bool compat_can_lift = false;  ///< forward compatibility (cuda-compat) satisfies it on an older driver
  Rule rule_if_unmet = Rule::driver;  ///< driver, gpu_driver or confidential
};

struct ChosenFramework {
  std::string name;
  Version version;
  std::string variant;
  Version cuda;
  std::optional<Version> cudnn;
  bool is_default = false;
  std::vector<int> sm, ptx;
  /// "vllm 0.33.0" when this is the torch a framework pins and the spec did not name torch; empty otherwise.
  std::string pinned_by;
};

/// The outcome. `ok == false` is a normal answer ("unsatisfiable") carrying conflicts and suggestions.
struct Resolution {
  bool ok = false;
  std::string base;
  std::optional<Version> cuda;    ///< toolkit release x.y.z
  std::optional<Version> cudnn;
  std::optional<Version> python;
  Version driver_min;
  std::vector<FloorPart> driver_floor;
  std::optional<Version> driver;  ///< the fleet's driver (lower bound of the request)
  std::string driver_origin;
  bool forward_compat = false;
  std::optional<Version> compat_package;  ///< cuda-compat x.y when forward_compat
  /// How the fleet's driver runs the chosen CUDA, when a driver is known: "native" (driver >= the toolkit's
  /// own driver), "minor_version_compat" (same major, older driver: runs, but no PTX JIT of newer PTX and
  /// no features of the newer driver) or "forward_compat" (through cuda-compat). Empty without a driver.
  std::string driver_mode;
  Version cuda_native_driver;  ///< the chosen toolkit's own driver (the floor for running it natively)
  std::vector<int> archs;
  std::vector<std::string> gpu_models;
  std::string gpu_origin;
  std::vector<ChosenFramework> frameworks;
  /// The image's platforms (image_platforms), and why: "spec", "gpu" (the GPUs' hosts), "host" (this machine).
  std::vector<Platform> platforms;
  std::string platform_origin;
  std::vector<std::string> notes;
  std::vector<Violation> conflicts;
  std::vector<std::string> suggestions;
};

/// The platforms an image is built for: the spec's image.platforms, else linux/arm64 for GPU models whose host
/// is a Grace CPU (GpuModel::host_arch) together with NATIVE when another GPU (or none) is named, else NATIVE.
/// Sets ORIGIN to "spec", "gpu" or "host".
std::vector<Platform> image_platforms(const Spec& spec, const std::vector<GpuTarget>& gpus, const Platform& native, std::string& origin);

/// Resolves a request. Fails (ErrorKind::spec) only for input the catalog cannot interpret, such as an
/// unknown base distribution; an impossible combination is a Resolution with ok == false.
Result<Resolution> resolve(const Catalog& catalog, const ResolveRequest& request);

/// True when machine code for `built` runs on a GPU of compute capability `gpu` (same major, built minor <= gpu minor).
bool sass_runs_on(int built, int gpu);
/// True when PTX for `ptx` can be JIT-compiled for `gpu` (ptx <= gpu).
bool ptx_runs_on(int ptx, int gpu);

/// One row of `gpuenv matrix`: a framework release and variant (or a bare toolkit) and what it needs.
struct MatrixRow {
  std::string framework;  ///< torch | tensorflow | jax | vllm | sglang | cuda
  Version version;
  std::optional<Version> torch;  ///< the torch release a framework pins (vllm, sglang)
  std::vector<std::string> pins_without_wheel;  ///< its pins the Python package index serves no wheel of (not installable)
  std::string variant;
  Version cuda;
  std::optional<Version> cudnn;
  Version python_min, python_max;
  Version driver_min;     ///< with minor-version compatibility, GPU-independent
  Version driver_native;  ///< the toolkit's own driver (needed for PTX JIT)
  std::vector<int> sm, ptx;
  bool is_default = false;
};

/// Every valid combination for one framework ("cuda" for toolkits, empty for all).
Result<std::vector<MatrixRow>> matrix(const Catalog& catalog, std::string_view framework);

}  // namespace gpuenv::resolver
