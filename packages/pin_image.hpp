#pragma once
// Pinning every concrete package of an image from a resolved spec: the Debian packages (the base's required
// set, Python, the spec's apt packages) and the wheels (the frameworks' variants and the spec's pip packages).
#include <string>
#include <vector>

#include "packages/apt/pin.hpp"
#include "packages/sources.hpp"
#include "packages/wheels/project_file.hpp"
#include "packages/wheels/wheel_resolver.hpp"
#include "resolver/catalog.hpp"
#include "resolver/solver.hpp"

namespace gpuenv::packages {

/// A slim base's own packages (`base: {distro, variant: slim}`; docs/build.md "A slim base"): what a runtime reads
/// that no dependency brings: /etc/os-release (base-files), /etc/passwd and /etc/group (base-passwd),
/// /etc/services and /etc/protocols (netbase), the time zone database (tzdata). Those the repositories hold.
inline const std::vector<std::string> k_slim_core = {"base-files", "base-passwd", "netbase", "tzdata"};
/// A slim base with Python also gets libstdc++6: the manylinux policy (PEP 600; pypa/auditwheel's policy list)
/// lets wheels link against libstdc++.so.6 and libgcc_s.so.1 without shipping them, and the required set no
/// longer brings them (libc6 brings libgcc-s1 and the policy's glibc libraries; the X11 and GL ones are left to
/// packages.apt, and the DT_NEEDED check names them when a wheel needs them).
inline const std::vector<std::string> k_slim_python_core = {"libstdc++6"};
/// What a slim base never installs as a dependency: the tools of maintainer scripts, which gpuenv does not run.
/// packages.apt may still name them.
inline const std::vector<std::string> k_slim_left_out = {"dpkg", "debconf", "install-info"};

/// What a VM disk's root adds to the spec's packages (docs/vm.md), besides vm.kernel: systemd as init
/// (systemd-sysv: /sbin/init), udev and kmod (devices, modules), systemd-boot-efi (the EFI boot loader, copied to
/// the EFI system partition), and the libraries of gpuenv itself, which goes into the image for the boot
/// pre-flight (Debian 12's names for its DT_NEEDED; the build's DT_NEEDED check holds the image to them).
inline const std::vector<std::string> k_vm_packages = {"systemd-sysv", "udev", "kmod", "systemd-boot-efi"};
inline const std::vector<std::string> k_vm_gpuenv_runtime = {"libxml2", "libcurl4", "libarchive13", "zlib1g", "libzstd1",
                                                             "libyaml-cpp0.7", "libssl3", "libstdc++6", "libgcc-s1"};

/// Every package a VM disk adds for VM (its kernel, cloud-init and openssh-server when asked, k_vm_packages,
/// k_vm_gpuenv_runtime, the driver's packages).
std::vector<std::string> vm_packages(const resolver::VmRequest& vm);

struct PinImageRequest {
  const resolver::Spec* spec = nullptr;
  const resolver::Resolution* resolution = nullptr;  ///< ok == true
  const resolver::Distro* distro = nullptr;          ///< the base, from the catalog
  const SourceSet* sources = nullptr;
  std::string base_dpkg_status;  ///< a base image's /var/lib/dpkg/status; "" when the root is built from packages
  /// The image platform pinned for: its Debian architecture's packages (the AptFetchContext's architectures must
  /// be {its debian_arch()}), its wheels (tags and platform_machine); every pin carries it.
  resolver::Platform platform;
  /// The spec's packages.python_project, read (app::resolve); null when it names none.
  const ProjectFile* project = nullptr;
};

struct ImagePins {
  std::vector<PinnedPackage> packages;  ///< debs then wheels, each sorted by name
  std::vector<std::string> decisions;
  std::vector<std::string> requirements;  ///< the wheel requirements that were resolved
};

/// The PEP 508 requirements for the frameworks of a resolution ("torch==2.5.1" for the default variant,
/// "torch==2.5.1+cu118" otherwise, "tensorflow[and-cuda]==2.18.0", "jax[cuda12]==0.10.2").
std::vector<std::string> framework_requirements(const resolver::Resolution& resolution);

/// The pip index URLs to search, in order: extra index URLs whose `{variant}` placeholder is expanded for each
/// framework variant come first (they serve the variant builds), then the index URL, then other extra URLs.
std::vector<std::string> wheel_indexes(const PipIndexConfig& pip, const resolver::Resolution& resolution);

/// The repositories of REQUEST's sources for its base's release, with the sources' preferences, opened once for
/// every apt pin of the lock (open_apt_universe).
Result<AptUniverse> open_apt_universe(const PinImageRequest& request, AptFetchContext& apt);

/// Resolves both kinds of packages: the debs from UNIVERSE, the wheels through APT's fetcher and cache.
Result<ImagePins> pin_image(const PinImageRequest& request, const AptUniverse& universe, AptFetchContext& apt);

/// The upstream part of a Debian version ("535.309.01-0+deb12u1" -> "535.309.01"): epoch and revision removed.
std::string upstream_version(const std::string& debian_version);

/// A VM driver's module source package at apt's candidate (or the version it names), and the driver version it
/// carries (its upstream version). Errors: `apt.not_found` (with the components to check), `vm.driver_version`
/// (a version that is not a driver's, e.g. no dotted numbers).
struct DriverSource {
  PinnedPackage module;
  resolver::Version driver;
};
Result<DriverSource> find_driver_source(const PinImageRequest& request, const AptUniverse& universe);

/// The kernel a VM image's pins install: the one pinned `linux-image-<abi>` package (a name whose remainder begins
/// with a digit; the cloud kernel's metapackage names it). Errors: `vm.kernel` (none, or several).
struct PinnedKernel {
  std::string abi;      ///< "6.1.0-57-cloud-amd64"
  std::string version;  ///< the package's version, which its headers must have too
};
Result<PinnedKernel> pinned_kernel(const std::vector<PinnedPackage>& packages);

/// What the driver build's sandbox unpacks, never the image (the lock's build_packages): the kernel's headers at
/// the kernel's own version, which bring the compiler the kernel was built with; make; the C library's headers;
/// the required set (a shell and the core tools the module's Makefile runs); and the module source alone, without
/// its package's dependencies (DKMS itself is not needed: gpuenv runs the build). Sorted by name.
Result<std::vector<PinnedPackage>> pin_driver_build(const PinnedKernel& kernel, const PinnedPackage& module, const AptUniverse& universe);

}  // namespace gpuenv::packages
