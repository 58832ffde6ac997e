#include "app/lock.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>

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
/// index URL with {variant}), only what the Python package index serves can be locked, so resolve again so.
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
    p.resolution.notes.push_back(wanted + " is served by torch's own wheel index, and none is configured "
                                 "(sources.pip.extra_index_urls with {variant}); no variant the Python package index serves fits");
  }
}

/// Pins every package through the cache (so that --offline can answer from it alone).
Result<packages::ImagePins> pin(const LockRequest& rq, const packages::SourceSet& sources, Fetcher& network, CommandRunner& runner,
                                const PreparedResolution& p, const Services& services) {
  const std::string cache = cache_root(services);
  GPUENV_TRY(store, open_blob_store(services, cache));
  auto fetcher = make_caching_fetcher(network, *store, cache);
  sweep_abandoned_work_dirs(cache);
  GPUENV_TRY(work_dir, WorkDir::create(cache));
  packages::AptFetchContext apt;
  apt.fetcher = fetcher.get();
  apt.cache = store.get();
  apt.runner = &runner;
  apt.work_dir = work_dir->path();
  apt.default_keyrings = default_keyrings(rq.host_root);
  apt.now_unix = std::time(nullptr);
  const resolver::Distro* distro = p.catalog.catalog.distro(p.spec.base_distro, p.spec.base_release);
  packages::PinImageRequest req{&p.spec, &p.resolution, distro, &sources, p.base ? p.base->dpkg_status : std::string()};
  auto pins = packages::pin_image(req, apt);
  if (!pins) {
    Error e = std::move(pins).error();
    e.while_("pinning the packages of " + p.spec.name);
    return e;
  }
  return pins;
}

}  // namespace

Result<MadeLock> lock(const LockRequest& rq, Services& services) {
  MadeLock made;
  GPUENV_TRY(prepared, resolve(rq.resolve, services));
  made.prepared = std::move(prepared);
  PreparedResolution& p = *made.prepared;
  if (!p.resolution.ok) return made;
  auto runner = services.make_runner ? services.make_runner() : nullptr;
  auto network = rq.offline ? make_offline_fetcher() : (services.make_fetcher ? services.make_fetcher(services.net) : nullptr);
  if (!runner || !network) {
    return make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher or process runner configured", {}, "");
  }
  GPUENV_TRY(sources, gather_sources(services, &p.spec.sources, rq.resolve.spec_path, rq.host_root, runner.get()));
  narrow_to_default_variants(sources, p);
  GPUENV_TRY(pins, pin(rq, sources, *network, *runner, p, services));
  const std::vector<resolver::LockedPackage>& locked = pins.packages;  // pinned packages are the lock's records
  for (const auto& x : locked) {
    (x.kind == resolver::PackageKind::deb ? made.debs : made.wheels) += 1;
    made.bytes += x.size;
  }
  const resolver::LockInputs inputs = lock_inputs(p);
  made.text = resolver::render_lock(p.spec, p.resolution, inputs, locked);
  made.lock = resolver::lock_of(p.spec, p.resolution, inputs, locked);
  made.wheel_requirements = pins.requirements;
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
