#pragma once
// The NVIDIA kernel module of a VM image (`vm.driver`, docs/vm.md "The driver"), built once at image-build time the
// way DKMS would build it on each machine, but in a sandbox and without running a maintainer script:
// - the build root: the lock's build_packages (the kernel's headers at the kernel's own version, the compiler they
//   name, make, the required set, and the module source package alone) unpacked like an image's root. It is never
//   part of the image: headers and compiler stay out.
// - the module source: the one DKMS tree in it (/usr/src/<name>-<version>/dkms.conf), copied to a writable
//   directory (the build root's files are hard links into the package store and stay read-only).
// - bubblewrap: the build root read-only as /, the source at /build, no network (every namespace unshared), a fixed
//   host name, a cleared environment with SOURCE_DATE_EPOCH and Kbuild's timestamp, user and host; then
//   `make -jN modules KERNEL_UNAME=<abi>`, as dkms.conf's MAKE[0] does, and `strip --strip-debug` of each module
//   (DKMS's default, STRIP[#]=yes), so the same lock gives the same module bytes.
// - install: each BUILT_MODULE_NAME[i].ko to /lib/modules/<abi>/<DEST_MODULE_LOCATION[i]>/<DEST_MODULE_NAME[i]>.ko,
//   before the image's depmod.
// - what the driver's alternatives would link (Debian's nvidia-alternative postinst, update-alternatives): NVML,
//   libcuda, nvidia-smi and the module's modprobe configuration, each only where its target is in the tree.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/process/command_runner.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images::disk {

/// One module of a dkms.conf: BUILT_MODULE_NAME[i] and where it is built, DEST_MODULE_NAME[i] and where it goes.
struct DkmsModule {
  std::string built_name;      ///< "nvidia"
  std::string built_location;  ///< relative to the source tree; "" for its top
  std::string dest_name;       ///< "nvidia-current" (default: built_name)
  std::string dest_location;   ///< "updates/dkms", relative to /lib/modules/<abi>
  bool operator==(const DkmsModule&) const = default;
};

struct DkmsConf {
  std::string package_name, package_version;
  std::vector<DkmsModule> modules;  ///< in index order
};

/// Reads a dkms.conf (a shell fragment: KEY=value and KEY[i]=value, quoted or not, lines continued by a
/// backslash), substituting $PACKAGE_NAME and $PACKAGE_VERSION. Other keys are ignored: gpuenv runs the build
/// itself. Errors: `vm.dkms_conf` at WHERE (no module, a name or location that is not a plain relative path).
Result<DkmsConf> parse_dkms_conf(std::string_view text, const std::string& where);

struct DriverBuildRequest {
  std::string build_root;  ///< the unpacked build_packages (read-only to the build)
  std::string work_dir;    ///< scratch: the source copy and the built modules
  std::string kernel_abi;  ///< "6.1.0-57-cloud-amd64"
  std::int64_t epoch = 0;  ///< SOURCE_DATE_EPOCH
  unsigned jobs = 1;       ///< make -j
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
};

struct BuiltDriver {
  DkmsConf conf;
  std::string source;  ///< /usr/src/<dir> in the build root
  struct Module {
    std::string file;     ///< the built, stripped .ko
    std::string install;  ///< relative to the image root: lib/modules/<abi>/<location>/<name>.ko
  };
  std::vector<Module> modules;
};

/// Builds the modules. Errors: `vm.driver_source` (no DKMS tree, or several, in the build root; no headers for
/// the kernel), `vm.dkms_conf`, `vm.driver_build` (make or strip failed: the end of its output, and how to rerun
/// it), `process.*` (bwrap missing, the timeout), `build.io`.
Result<BuiltDriver> build_driver_modules(const DriverBuildRequest& request, CommandRunner& runner);

/// Built modules are kept in the cache (`drivers/<key>/`: the modules and a manifest), so that the next build of the
/// same build_packages for the same kernel takes them instead of compiling again. KEY names what went into the
/// build (driver_key). keep_driver writes beside and renames, so a half-written entry is never read;
/// kept_driver gives std::nullopt for a missing or damaged entry (which is then built again) and marks it used.
std::string driver_key(const std::vector<std::string>& build_inputs);
Status keep_driver(const BuiltDriver& driver, const std::string& drivers_dir, const std::string& key);
std::optional<BuiltDriver> kept_driver(const std::string& drivers_dir, const std::string& key);

/// What the kept drivers hold, and removing those last used before CUTOFF (all with time_point::max()).
struct DriverCacheUse {
  std::uint64_t drivers = 0, bytes = 0;
};
DriverCacheUse driver_cache_use(const std::string& drivers_dir);
DriverCacheUse prune_driver_cache(const std::string& drivers_dir, std::chrono::system_clock::time_point cutoff);

/// Copies the built modules into the image tree at ROOT. Errors: `build.io`.
Status install_driver_modules(const BuiltDriver& driver, const std::string& root);

/// The links Debian's nvidia-alternative postinst makes through update-alternatives, made directly (link ->
/// its target), for each target the tree holds: libnvidia-ml.so.1, libcuda.so.1 and the other libraries of
/// /usr/lib/<PLATFORM's triplet>/nvidia/current, nvidia-smi, and /etc/nvidia's module configuration, whose
/// /etc/modprobe.d links nvidia-kernel-common ships. Returns the links made ("path -> target"). Errors: `build.io`.
Result<std::vector<std::string>> link_driver_alternatives(const std::string& root, const resolver::Platform& platform = resolver::Platform::amd64());

/// The unit that prints the driver module's modinfo on the console before the verdict (`gpuenv-driver (<host>):
/// <module> version <v> vermagic <kernel> ...`), for MODULE ("nvidia-current").
std::string driver_info_unit(const std::string& module);

}  // namespace gpuenv::images::disk
