#include "app/lock.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>

#include "app/sources.hpp"
#include "base/cache/blob_store.hpp"
#include "base/cache/caching_fetcher.hpp"
#include "base/cache/work_dir.hpp"
#include "base/file_io.hpp"
#include "packages/pin_image.hpp"

namespace gpuenv::app {
namespace {

// apt's default keyrings: trusted.gpg and trusted.gpg.d/*.gpg|*.asc under the host root.
std::vector<std::string> default_keyrings(const std::string& root) {
  namespace fs = std::filesystem;
  const std::string base = (root == "/" ? std::string() : root) + "/etc/apt";
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::is_regular_file(base + "/trusted.gpg", ec)) out.push_back(base + "/trusted.gpg");
  for (const auto& e : fs::directory_iterator(base + "/trusted.gpg.d", ec)) {
    const auto ext = e.path().extension();
    if (ext == ".gpg" || ext == ".asc") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// torch's variants other than its default live on torch's own wheel index: without one configured (an extra
/// index URL with {variant}), only what the Python package index serves can be locked, so resolve again so. When
/// none of those fits, the resolution becomes that unsatisfiable one (its conflicts and suggestions say why), as
/// pinning the other variant from the Python package index could only fail, and with a message that hides the reason.
void narrow_to_default_variants(const packages::SourceSet& sources, PreparedResolution& p) {
  const bool variant_index = std::any_of(sources.pip.extra_index_urls.begin(), sources.pip.extra_index_urls.end(),
                                         [](const auto& e) { return e.url.find("{variant}") != std::string::npos; });
  const auto non_default = std::find_if(p.resolution.frameworks.begin(), p.resolution.frameworks.end(),
                                        [](const resolver::ChosenFramework& f) { return f.name == "torch" && !f.is_default; });
  if (variant_index || non_default == p.resolution.frameworks.end()) return;
  const std::string wanted = non_default->name + " " + non_default->version.str() + "+" + non_default->variant;
  resolver::ResolveRequest narrowed = p.request;
  narrowed.spec = &p.spec;
  narrowed.default_variants_only = true;
  auto again = resolver::resolve(p.catalog.catalog, narrowed);
  if (again && again->ok) {
    p.resolution = std::move(*again);
    p.resolution.notes.push_back("no wheel index for framework variants is configured, so only the variants the Python package index serves were "
                                 "considered; " + wanted + " would need one (sources.pip.extra_index_urls with {variant}, docs/cli.md)");
  } else {
    // Say why (a driver, an architecture, linux/arm64's CPU-only wheels: docs/resolver.md rule 9).
    const std::string why = again && !again->conflicts.empty() ? ": " + again->conflicts.front().message : std::string();
    if (again) p.resolution = std::move(*again);
    p.resolution.notes.push_back(wanted + " is served by torch's own wheel index, and none is configured "
                                 "(sources.pip.extra_index_urls with {variant}); no variant the Python package index serves fits" + why);
  }
}

/// The indexes a project file names, in the place of the configured ones (pip reads a requirements file's
/// --index-url so), unless the spec's own sources.pip says where wheels come from: the spec > the project file > the
/// user's configuration > the host's.
void take_project_indexes(const packages::ProjectFile& project, bool spec_names_pip, packages::SourceSet& sources) {
  if (spec_names_pip || (project.index_url.empty() && project.extra_index_urls.empty())) return;
  if (!project.index_url.empty()) sources.pip.index_url = {project.index_url, project.path};
  for (const auto& url : project.extra_index_urls) {
    const bool known = url == sources.pip.index_url.url ||
                       std::any_of(sources.pip.extra_index_urls.begin(), sources.pip.extra_index_urls.end(), [&](const auto& e) { return e.url == url; });
    if (!known) sources.pip.extra_index_urls.push_back({url, project.path});
  }
  sources.pip_origin = project.path;
}

/// The cache-backed apt context the pins of one lock share (so that --offline can answer from the cache alone).
struct AptPinning {
  std::unique_ptr<BlobStore> store;
  std::unique_ptr<Fetcher> fetcher;
  std::unique_ptr<WorkDir> work_dir;
  packages::AptFetchContext apt;
};

Result<std::unique_ptr<AptPinning>> apt_pinning(const LockRequest& rq, Fetcher& network, CommandRunner& runner, const Services& services) {
  auto out = std::make_unique<AptPinning>();
  const std::string cache = cache_root(services);
  GPUENV_TRY(store, open_blob_store(services, cache));
  out->store = std::move(store);
  out->fetcher = make_caching_fetcher(network, *out->store, cache);
  sweep_abandoned_work_dirs(cache);
  GPUENV_TRY(work_dir, WorkDir::create(cache));
  out->work_dir = std::move(work_dir);
  out->apt.fetcher = out->fetcher.get();
  out->apt.cache = out->store.get();
  out->apt.runner = &runner;
  out->apt.work_dir = out->work_dir->path();
  out->apt.default_keyrings = default_keyrings(rq.host_root);
  out->apt.now_unix = now_seconds(services);  // the injected clock: InRelease's Valid-Until is judged against it
  return out;
}

/// A VM image's driver is the one it carries: its module package's version is the fleet's driver, and the spec is
/// resolved again against it, so that every rule holds for it (CUDA's minor-version compatibility, each GPU's
/// minimum driver, confidential computing). Returns the module source.
Result<packages::DriverSource> take_packaged_driver(PreparedResolution& p, const packages::PinImageRequest& req, const packages::AptUniverse& universe) {
  auto source = packages::find_driver_source(req, universe);
  if (!source) {
    Error e = std::move(source).error();
    e.while_("finding vm.driver's module package " + p.spec.vm->driver->module);
    return e;
  }
  p.spec.vm->driver->version = source->driver.str();
  p.request.spec = &p.spec;
  p.request.driver = *resolver::Constraint::parse(source->driver.str());
  p.request.driver_origin = "vm.driver (" + source->module.name + " " + source->module.version + ")";
  GPUENV_TRY(again, resolver::resolve(p.catalog.catalog, p.request));
  p.resolution = std::move(again);
  return source;
}

/// The driver build's own packages (the lock's build_packages), for the kernel IMAGE's pins install.
Result<std::vector<resolver::LockedPackage>> pin_driver_build(const std::vector<resolver::LockedPackage>& image, const packages::DriverSource& source,
                                                              const packages::AptUniverse& universe) {
  GPUENV_TRY(kernel, packages::pinned_kernel(image));
  return packages::pin_driver_build(kernel, source.module, universe);
}

}  // namespace

Result<MadeLock> lock(const LockRequest& rq, Services& services) {
  MadeLock made;
  GPUENV_TRY(prepared, resolve(rq.resolve, services));
  made.prepared = std::move(prepared);
  PreparedResolution& p = *made.prepared;
  const bool packaged_driver = p.spec.vm && p.spec.vm->driver;  // resolved again below, against the packaged driver
  if (!p.resolution.ok && !packaged_driver) return made;
  // A usage error before any repository is fetched or verified (and whatever the network or the cache holds).
  if (packaged_driver && rq.resolve.driver)
    return make_error(ErrorKind::usage, "cli.driver_with_vm_driver", "--driver does not apply: this VM image's driver is the one vm.driver builds into it", "--driver",
                      "leave out --driver; the lock takes the driver version from vm.driver's module package");
  auto runner = services.make_runner ? services.make_runner() : nullptr;
  GPUENV_TRY(network, open_fetcher(services, rq.offline));
  if (!runner || !network) {
    return make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher or process runner configured", {}, "");
  }
  GPUENV_TRY(sources, gather_sources(services, &p.spec.sources, rq.resolve.spec_path, rq.host_root, runner.get()));
  if (p.project) take_project_indexes(*p.project, p.spec.sources.pip_given, sources);
  GPUENV_TRY(pinning, apt_pinning(rq, *network, *runner, services));
  const resolver::Distro* distro = p.catalog.catalog.distro(p.spec.base_distro, p.spec.base_release);
  const std::vector<resolver::Platform> platforms = p.resolution.platforms.empty() ? std::vector<resolver::Platform>{resolver::Platform()} : p.resolution.platforms;
  if (p.spec.vm && platforms.size() > 1)
    return make_error(ErrorKind::spec, "vm.platforms", "a VM disk is for one platform, and this spec's GPUs are in hosts of " + resolver::platform_list(platforms),
                      p.spec.where("image"), "name the disk's platform in image.platforms (one disk per platform)");
  if (!p.spec.base_image.empty() && platforms != std::vector<resolver::Platform>{resolver::Platform()})
    return make_error(ErrorKind::spec, "spec.base_image_platform", "a base image is taken for linux/amd64 only, and this image is for " + resolver::platform_list(platforms),
                      p.spec.where("base"), "build from packages (base: debian:12) for other platforms, or set image.platforms: [linux/amd64]");
  std::vector<resolver::LockedPackage> locked, build_packages;
  for (const resolver::Platform& platform : platforms) {
    // Each platform's packages from its architecture's indexes (InRelease and Packages come through the cache,
    // so a second platform fetches only its own Packages files).
    pinning->apt.architectures = {std::string(platform.debian_arch())};
    packages::PinImageRequest req{&p.spec, &p.resolution, distro, &sources, p.base ? p.base->dpkg_status : std::string(), platform,
                                  p.project ? &*p.project : nullptr};
    const std::string what = p.spec.name + (platforms.size() > 1 ? " for " + platform.str() : std::string());
    auto universe = packages::open_apt_universe(req, pinning->apt);
    if (!universe) {
      Error e = std::move(universe).error();
      e.while_("pinning the packages of " + what);
      return e;
    }
    std::optional<packages::DriverSource> driver;
    if (p.spec.vm && p.spec.vm->driver) {
      GPUENV_TRY(found, take_packaged_driver(p, req, *universe));
      driver = std::move(found);
      if (!p.resolution.ok) return made;
    }
    if (&platform == &platforms.front()) {
      narrow_to_default_variants(sources, p);
      if (!p.resolution.ok) return made;
    }
    auto pins = packages::pin_image(req, *universe, pinning->apt);
    if (!pins) {
      Error e = std::move(pins).error();
      e.while_("pinning the packages of " + what);
      return e;
    }
    if (driver) {
      GPUENV_TRY(build, pin_driver_build(pins->packages, *driver, *universe));
      for (auto& b : build) b.platform = platform;
      build_packages = std::move(build);
    }
    locked.insert(locked.end(), pins->packages.begin(), pins->packages.end());
    made.wheel_requirements = pins->requirements;
  }
  for (const auto& x : locked) {
    (x.kind == resolver::PackageKind::deb ? made.debs : made.wheels) += 1;
    made.bytes += x.size;
  }
  const resolver::LockInputs inputs = lock_inputs(p);
  made.lock = resolver::lock_of(p.spec, p.resolution, inputs, locked, build_packages);
  GPUENV_TRY(text, resolver::render_checked_lock(made.lock));
  made.text = std::move(text);
  if (!rq.output.empty()) {
    if (auto st = write_file_atomic(rq.output, made.text); !st) {
      Error e = st.error();
      e.while_("writing the lock");
      return e;
    }
  }
  return made;
}

}  // namespace gpuenv::app
