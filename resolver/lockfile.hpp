#pragma once
// gpuenv.lock (`gpuenv-lock-v1`): the resolved versions of a spec, written byte-for-byte deterministically.
#include <optional>
#include <string>
#include <string_view>

#include "base/digest.hpp"
#include "resolver/platform.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::resolver {

inline constexpr std::string_view k_lock_schema = "gpuenv-lock-v1";

/// Digests that tie a lock to its inputs (hex sha256), computed by the caller.
struct LockInputs {
  std::string spec_sha256;
  std::string catalog_sha256;
  std::string generator;  ///< "gpuenv 0.1.0"
  std::string base_image; ///< the spec's base image pinned by digest ("docker://host/repo:tag@sha256:..."); "" for none
  /// The project file read (packages.python_project or --from): its path as named, its format, and the sha256 of its
  /// bytes and its includes'; file "" for none.
  std::string project_file, project_format, project_sha256;
};

/// What a pinned artifact is, and so how a build installs it.
enum class PackageKind { deb, wheel };
/// "deb" or "wheel", as the lock spells it.
std::string_view to_string(PackageKind kind);
/// The kind a lock names; std::nullopt for anything else.
std::optional<PackageKind> parse_package_kind(std::string_view text);

/// One pinned artifact: a .deb or a wheel, with where it comes from and its digest.
struct LockedPackage {
  std::string name, version;
  PackageKind kind = PackageKind::deb;
  std::string architecture, url;
  Digest sha256;
  std::string source;
  std::uint64_t size = 0;
  Platform platform;  ///< the image platform it is for (`platform:`, written when the lock has several)
  bool operator==(const LockedPackage&) const = default;
};

/// A lock read back (what `gpuenv build` needs from it).
struct Lock {
  std::string generator;
  std::string spec_name, spec_sha256, catalog_sha256;
  std::string project_file, project_format, project_sha256;  ///< `project:` (LockInputs), written when a project file was read
  std::string base;             ///< "debian:12"
  std::string base_image;       ///< "docker://host/repo:tag@sha256:..." or "oci:PATH@sha256:..."; "" when built from packages
  std::string base_variant = "required";  ///< the spec's base.variant: "required" or "slim" (`base_variant:`, written when not required)
  /// The image's platforms, each once, in k_platform_facts' order (`platforms:`, written unless it is linux/amd64
  /// alone: a lock without the key, as every lock before platforms were, is linux/amd64's).
  std::vector<Platform> platforms = {Platform()};
  std::string cuda, cudnn, python;  ///< "" when null
  std::string driver_min;
  bool forward_compat = false;
  std::string compat_package;   ///< "cuda-compat-12-4" when forward compatibility needs it; "" for none
  struct Floor {
    std::string driver, why;    ///< a driver floor and the rule that sets it ("550.54.15", "H100: ...")
    bool operator==(const Floor&) const = default;
  };
  std::vector<Floor> driver_floor;  std::vector<std::string> archs, models;
  std::string confidential;
  struct Framework {
    std::string name, version, variant, cuda, cudnn;
    bool operator==(const Framework&) const = default;
  };
  std::vector<Framework> frameworks;
  std::vector<std::string> requested_apt, requested_pip;  ///< the spec's own package lists
  std::optional<VmRequest> vm;  ///< a VM disk's lock (`vm:`, docs/vm.md): its kernel, size, cloud-init, command line
  std::vector<LockedPackage> packages;
  std::vector<LockedPackage> build_packages;  ///< a VM driver's build sandbox only (headers, compiler, module source)
  bool operator==(const Lock&) const = default;
};

/// The lock of a successful resolution and its pinned packages (in the given order): the one value a lock is,
/// which render_lock writes and parse_lock reads back (parse_lock(render_lock(lock)) == lock).
/// BUILD_PACKAGES: what only a VM image's driver build unpacks (the kernel's headers, the compiler, the module's
/// source), never installed in the image (`build_packages:`, written when not empty).
Lock lock_of(const Spec& spec, const Resolution& resolution, const LockInputs& inputs, const std::vector<LockedPackage>& packages = {},
             const std::vector<LockedPackage>& build_packages = {});

/// LOCK narrowed to one of its platforms: `platforms` is {PLATFORM} and `packages` that platform's only (what one
/// image of a multi-platform build is built from).
Lock lock_for_platform(const Lock& lock, const Platform& platform);

/// The one writer of lock text (YAML). Same lock, same bytes: no time stamps, no host paths, fixed key order.
std::string render_lock(const Lock& lock);

/// render_lock's text, first read back with parse_lock and compared with LOCK: a lock the reader would refuse (a
/// package name or version an index gave that no package has, text that would reach a terminal as escapes) is
/// "lock.unwritable" (ErrorKind::environment: the index is at fault, not the spec) and never written.
Result<std::string> render_checked_lock(const Lock& lock);

/// Whether TEXT is a lock rather than a spec: a top-level `schema: gpuenv-lock-v1` line, as render_lock writes
/// it, also when the rest is damaged (parse_lock then says where). Reads no YAML.
bool is_lock_text(std::string_view text);

/// Parses lock text. Errors (ErrorKind::spec, `where` = "path:line:col"): `lock.yaml_syntax`, `lock.schema` (not
/// gpuenv-lock-v1), `lock.missing` (a required key is absent), `lock.bad_value` (wrong type, a package without
/// url/sha256/size, a sha256 that is not 64 hex digits, an unknown kind).
Result<Lock> parse_lock(std::string_view text, const std::string& path);

}  // namespace gpuenv::resolver
