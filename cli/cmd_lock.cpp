#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/yaml_guard.hpp"
#include "cli/render.hpp"
#include "base/cache/blob_store.hpp"
#include "base/cache/work_dir.hpp"
#include "base/cache/caching_fetcher.hpp"
#include "packages/pin_image.hpp"
#include "resolver/lockfile.hpp"

#ifndef GPUENV_VERSION
#define GPUENV_VERSION "0.0.0"
#endif

namespace gpuenv::cli {
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

}  // namespace

int make_lock(const LockOptions& o, Context& ctx, MadeLock& made) {
  PreparedResolution& p = made.prepared;
  if (int rc = prepare_resolution(o.resolve, ctx, p); rc != k_exit_ok) return rc;
  if (!p.resolution.ok) {
    if (o.resolve.json) *ctx.out << resolution_json(p.spec, p.resolution).dump(2) << "\n";
    else print_resolution(*ctx.out, p.spec, p.resolution);
    return k_exit_unsatisfiable;
  }
  const resolver::Distro* distro = p.catalog.catalog.distro(p.spec.base_distro, p.spec.base_release);

  auto runner = ctx.make_runner ? ctx.make_runner() : nullptr;
  auto network = o.offline ? nullptr : (ctx.make_fetcher ? ctx.make_fetcher() : nullptr);
  if (!runner || (!network && !o.offline)) {
    return report_error(make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher or process runner configured", {}, ""), o.resolve.json, ctx);
  }
  auto sources = gather_sources(ctx, &p.spec.sources, o.resolve.spec_path, o.host_root, runner.get());
  if (!sources) return report_error(sources.error(), o.resolve.json, ctx);
  // torch's variants other than its default live on torch's own wheel index: without one configured (an extra
  // index URL with {variant}), only what the Python package index serves can be locked.
  const bool variant_index = std::any_of(sources->pip.extra_index_urls.begin(), sources->pip.extra_index_urls.end(),
                                         [](const auto& e) { return e.url.find("{variant}") != std::string::npos; });
  const auto non_default = std::find_if(p.resolution.frameworks.begin(), p.resolution.frameworks.end(),
                                        [](const resolver::ChosenFramework& f) { return f.name == "torch" && !f.is_default; });
  if (!variant_index && non_default != p.resolution.frameworks.end()) {
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

  const std::string cache = cache_root(ctx);
  auto store = gpuenv::make_dir_blob_store(cache);
  // Every document goes through the cache, so that --offline can answer from it alone.
  auto fetcher = gpuenv::make_caching_fetcher(network.get(), *store, cache);
  gpuenv::sweep_abandoned_work_dirs(cache);
  auto work_dir = gpuenv::WorkDir::create(cache);
  if (!work_dir) return report_error(work_dir.error(), o.resolve.json, ctx);
  const std::string* work = &(*work_dir)->path();
  packages::AptFetchContext apt;
  apt.fetcher = fetcher.get();
  apt.cache = store.get();
  apt.runner = runner.get();
  apt.work_dir = *work;
  apt.default_keyrings = default_keyrings(o.host_root);
  apt.now_unix = std::time(nullptr);
  packages::PinImageRequest req{&p.spec, &p.resolution, distro, &*sources, p.base ? p.base->dpkg_status : std::string()};
  auto pins = packages::pin_image(req, apt);
  work_dir->reset();
  if (!pins) {
    Error e = std::move(pins).error();
    e.while_("pinning the packages of " + p.spec.name);
    return report_error(e, o.resolve.json, ctx);
  }

  std::vector<resolver::LockedPackage> locked;
  std::uint64_t debs = 0, wheels = 0, bytes = 0;
  for (const auto& x : pins->packages) {
    locked.push_back({x.name, x.version, x.kind, x.architecture, x.url, x.sha256, x.source, x.size});
    (x.kind == "deb" ? debs : wheels) += 1;
    bytes += x.size;
  }
  resolver::LockInputs inputs{sha256_hex(p.spec_text), p.catalog.sha256, std::string("gpuenv ") + GPUENV_VERSION, p.base ? p.base->pinned : std::string()};
  made.text = resolver::render_lock(p.spec, p.resolution, inputs, locked);
  made.packages = std::move(locked);
  made.wheel_requirements = pins->requirements;
  made.debs = debs;
  made.wheels = wheels;
  made.bytes = bytes;
  return k_exit_ok;
}

int cmd_lock(const LockOptions& o, Context& ctx) {
  MadeLock made;
  if (int rc = make_lock(o, ctx, made); rc != k_exit_ok) return rc;
  const PreparedResolution& p = made.prepared;
  const std::string& text = made.text;
  if (auto st = write_file_atomic(o.output, text); !st) {
    Error e = st.error();
    e.while_("writing the lock");
    return report_error(e, o.resolve.json, ctx);
  }
  if (o.resolve.json) {
    nlohmann::ordered_json j = resolution_json(p.spec, p.resolution);
    j["schema"] = "gpuenv-lock-result-v1";
    j["lock"] = {{"path", o.output}, {"sha256", sha256_hex(text)}};
    auto list = nlohmann::ordered_json::array();
    for (const auto& x : made.packages)
      list.push_back({{"name", x.name}, {"version", x.version}, {"kind", x.kind}, {"architecture", x.architecture}, {"size", x.size},
                      {"sha256", x.sha256}, {"url", x.url}, {"source", x.source}});
    j["packages"] = list;
    j["wheel_requirements"] = made.wheel_requirements;
    *ctx.out << j.dump(2) << "\n";
  } else {
    print_resolution(*ctx.out, p.spec, p.resolution);
    *ctx.out << "pinned " << made.debs << " Debian packages and " << made.wheels << " wheels (" << std::fixed << std::setprecision(1)
             << static_cast<double>(made.bytes) / (1024.0 * 1024.0) << " MiB)\nwrote " << o.output << "\n";
  }
  return k_exit_ok;
}

}  // namespace gpuenv::cli
