#include "app/build.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/cache/blob_store.hpp"
#include "base/cache/work_dir.hpp"
#include "base/digest.hpp"
#include "base/net/http_client.hpp"
#include "base/yaml_guard.hpp"
#include "app/marks.hpp"
#include "base/file_io.hpp"
#include "images/assemble/cyclonedx.hpp"
#include "images/oci/archive.hpp"
#include "images/disk/container_disk.hpp"
#include "images/disk/vm_driver.hpp"
#include "images/disk/vm_root.hpp"
#include "images/rootfs/ld_cache.hpp"
#include "images/oci/layout.hpp"
#include "recipes/embedded.hpp"

namespace gpuenv::app {
namespace {

namespace fs = std::filesystem;

/// The lock to build: the argument itself when it is a lock, else the one app::lock makes of the spec (its base
/// image already prepared, so it is not prepared again).
struct LockToBuild {
  std::string text;
  resolver::Lock lock;
  std::string spec_tag;
  std::optional<resolver::ImageFormat> spec_format;  ///< the spec's image.format; unset for a lock
  std::optional<BaseImage> base;
  std::unique_ptr<PreparedResolution> unsatisfied;
};

Result<LockToBuild> lock_to_build(const BuildRequest& rq, Services& services) {
  LockToBuild out;
  GPUENV_TRY(input, read_yaml_file(rq.lock.resolve.spec_path, 64u << 20));
  if (resolver::is_lock_text(input)) {
    GPUENV_TRY(lock, resolver::parse_lock(input, rq.lock.resolve.spec_path));
    out.lock = std::move(lock);
    out.text = std::move(input);
    return out;
  }
  LockRequest spec_lock = rq.lock;
  spec_lock.resolve.spec_text = std::move(input);  // a spec: resolve reads these bytes, not the file again
  GPUENV_TRY(made, app::lock(spec_lock, services));
  if (!made.satisfied()) {
    out.unsatisfied = std::move(made.prepared);
    return out;
  }
  out.text = std::move(made.text);
  out.lock = std::move(made.lock);
  out.spec_tag = made.prepared->spec.image_tag;
  out.spec_format = made.prepared->spec.image_format;
  out.base = std::move(made.prepared->base);
  return out;
}

Result<std::int64_t> source_date_epoch(const Services& services) {
  const std::string text = env_or(services, "SOURCE_DATE_EPOCH");
  if (text.empty()) return std::int64_t{0};
  std::int64_t epoch = 0;
  try {
    std::size_t used = 0;
    epoch = std::stoll(text, &used);
    if (used != text.size() || epoch < 0) throw std::invalid_argument("x");
  } catch (const std::exception&) {
    return make_error(ErrorKind::usage, "cli.source_date_epoch", "SOURCE_DATE_EPOCH is '" + text + "', not a number of seconds", "SOURCE_DATE_EPOCH",
                      "set it to a non-negative integer (seconds since 1970) or unset it");
  }
  return epoch;
}

Status write_archive(const BuildRequest& rq, resolver::ImageFormat format, const std::string& layout_dir, const LockToBuild& l,
                     const images::BuildResult& built, const std::string& output) {
  GPUENV_TRY(layout, images::OciLayout::open(layout_dir));
  std::string repo_tag = rq.tag.empty() ? l.spec_tag : rq.tag;
  if (repo_tag.empty()) repo_tag = l.lock.spec_name + ":latest";
  else if (ref_name(repo_tag) == repo_tag) repo_tag += ":latest";
  return images::write_image_archive(layout, built.manifest, format == resolver::ImageFormat::docker_archive ? images::ArchiveFormat::docker : images::ArchiveFormat::oci,
                                     repo_tag, output);
}

Result<images::PushStats> push(const BuildRequest& rq, const std::string& layout_dir, const std::string& tag, Services& services,
                               const std::vector<Digest>& remote_blobs = {}, const std::string& mount_from = {}) {
  GPUENV_TRY(ref, images::parse_image_reference(rq.push));
  GPUENV_TRY(http, open_http_client(services, rq.ca_bundle));
  Status problem = ok_status();
  images::RegistryOptions ro = registry_options(services, ref.registry, rq.plain_http, &problem);
  if (!problem) return problem.error();
  images::RegistryClient client(*http, ro);
  images::PushOptions po;
  po.ref_name = tag;
  po.remote_blobs.insert(remote_blobs.begin(), remote_blobs.end());
  po.mount_from = mount_from;
  services.step("pushing to " + ref.to_string());
  auto st = client.push(layout_dir, ref, po);
  if (!st) {
    Error e = std::move(st).error();
    e.while_("pushing to " + ref.to_string());
    return e;
  }
  return *st;
}

/// The assembly request both kinds of build share: the lock, the work directory, the caches, the clock.
images::BuildRequest assembly_request(const BuildRequest& rq, const LockToBuild& l, const std::string& work_dir, std::int64_t epoch, Fetcher& network,
                                      BlobStore& store, const std::string& cache, const Services& services) {
  images::BuildRequest a;
  a.lock = &l.lock;
  a.platform = l.lock.platforms.front();
  a.lock_text = l.text;
  a.work_dir = work_dir;
  a.source_date_epoch = epoch;
  a.threads = rq.threads;
  a.generator = generator();
  a.allow_missing = rq.allow_missing;
  a.allow_record_mismatch = rq.allow_record_mismatch;
  a.fetcher = &network;
  a.cache = &store;
  a.package_tree_dir = cache + "/trees";
  a.on_step = services.on_step;
  return a;
}

/// A VM lock's platform: its one platform (a lock without platforms is linux/amd64's).
resolver::Platform vm_platform(const resolver::Lock& lock) { return lock.platforms.empty() ? resolver::Platform() : lock.platforms.front(); }

/// The NVIDIA module of a VM image (vm.driver, docs/vm.md "The driver"): a build root from the lock's build_packages
/// (in WORK_DIR/driver, never part of the image), the module built there in bubblewrap for ROOT's kernel, then
/// installed into ROOT with the links the driver's alternatives would make and the loader cache written again.
/// Returns the module whose modinfo the console shows ("nvidia-current").
Result<images::disk::BuiltDriver> build_vm_driver(const images::BuildRequest& image, const LockToBuild& l, const std::string& kernel, CommandRunner& runner,
                                                   Services& services) {
  resolver::Lock build_lock = l.lock;  // the same lock's identity; only the build's packages
  build_lock.packages = l.lock.build_packages;
  build_lock.build_packages.clear();
  build_lock.vm.reset();
  build_lock.requested_apt.clear();
  build_lock.requested_pip.clear();
  build_lock.cuda.clear();
  build_lock.cudnn.clear();
  build_lock.python.clear();
  images::BuildRequest b = image;
  b.lock = &build_lock;
  b.work_dir = image.work_dir + "/driver";
  b.add_files = nullptr;
  services.step("unpacking the driver build's " + std::to_string(build_lock.packages.size()) + " packages (kernel headers, compiler)");
  auto build_root = images::assemble_root(b);
  if (!build_root) {
    Error e = std::move(build_root).error();
    e.while_("unpacking the build root of the driver module");
    return e;
  }
  services.step("building " + l.lock.vm->driver->module + " (driver " + l.lock.vm->driver->version + ") for the kernel " + kernel);
  images::disk::DriverBuildRequest d;
  d.build_root = build_root->root;
  d.work_dir = b.work_dir;
  d.kernel_abi = kernel;
  d.epoch = image.source_date_epoch;
  d.jobs = image.threads ? image.threads : std::max(1u, std::thread::hardware_concurrency());
  auto built = images::disk::build_driver_modules(d, runner);
  if (!built) {
    Error e = std::move(built).error();
    e.while_("building the driver module " + l.lock.vm->driver->module);
    return e;
  }
  return built;
}

/// The NVIDIA module of a VM image (vm.driver, docs/vm.md "The driver"): the modules kept in the cache for the same
/// build packages, kernel and epoch, else built (a build root from the lock's build_packages in WORK_DIR/driver,
/// never part of the image, and the module built there in bubblewrap for ROOT's kernel) and kept; then installed
/// into ROOT with the links the driver's alternatives would make and the loader cache written again. Returns the
/// module whose modinfo the console shows ("nvidia-current"), and whether it came from the cache.
Result<VmBuilt::Driver> add_vm_driver(const images::BuildRequest& image, const LockToBuild& l, const std::string& root, CommandRunner& runner, Services& services) {
  GPUENV_TRY(kernel, images::disk::find_kernel(root));
  std::vector<std::string> inputs = {image.generator, kernel.version, std::to_string(image.source_date_epoch), l.lock.vm->driver->module};
  for (const auto& p : l.lock.build_packages) inputs.push_back(p.name + " " + p.version + " " + p.sha256.hex());
  const std::string key = images::disk::driver_key(inputs);
  const std::string drivers = cache_root(services) + "/drivers";
  auto built = images::disk::kept_driver(drivers, key);
  const bool reused = built.has_value();
  if (built) {
    services.step("taking " + l.lock.vm->driver->module + " for the kernel " + kernel.version + " from the cache (built before for the same packages)");
  } else {
    GPUENV_TRY(fresh, build_vm_driver(image, l, kernel.version, runner, services));
    if (auto st = images::disk::keep_driver(fresh, drivers, key); !st) services.step("could not keep the built driver in the cache: " + st.error().message);
    built = std::move(fresh);
  }
  GPUENV_CHECK(images::disk::install_driver_modules(*built, root));
  GPUENV_TRY(links, images::disk::link_driver_alternatives(root, vm_platform(l.lock)));
  images::LdCacheOptions lo;
  lo.platform = l.lock.platforms.front();
  lo.generator = "gpuenv";
  if (auto cache = images::write_ld_cache(root, lo); !cache) return std::move(cache).error();
  std::error_code ec;
  fs::remove_all(image.work_dir + "/driver", ec);  // the headers and the compiler: gigabytes the disk step need not wait beside
  const auto& mods = built->conf.modules;
  const auto core = std::find_if(mods.begin(), mods.end(), [](const images::disk::DkmsModule& m) { return m.built_name == "nvidia"; });
  return VmBuilt::Driver{(core != mods.end() ? *core : mods.front()).dest_name, l.lock.vm->driver->version, reused};
}

/// The gpuenv a VM disk of PLATFORM gets: --vm-gpuenv, else this one when it is PLATFORM's program. Errors:
/// `vm.gpuenv_binary` (none of PLATFORM's, with how to make and name one), check_vm_gpuenv's.
Result<std::string> vm_gpuenv_for(const BuildRequest& rq, const resolver::Platform& platform) {
  std::string path = rq.vm_gpuenv;
  if (path.empty()) {
    if (platform != resolver::native_platform())
      return make_error(ErrorKind::usage, "vm.gpuenv_binary",
                        "this disk is " + platform.str() + ", and this gpuenv is a " + resolver::native_platform().str() + " program: the disk's /usr/bin/gpuenv must be a " +
                            platform.str() + " gpuenv",
                        "--vm-gpuenv",
                        "build gpuenv for " + platform.str() + (platform.is_arm64() ? " (scripts/build_arm64.sh makes build-arm64/cli/gpuenv)" : "") +
                            " and name it with --vm-gpuenv PATH");
    path = "/proc/self/exe";
  }
  GPUENV_CHECK(images::disk::check_vm_gpuenv(path, platform));
  return path;
}

/// A VM disk from LOCK into OUTPUT (docs/vm.md): the root tree with the VM's own files, then the disk.
Result<VmBuilt> build_vm_disk(const BuildRequest& rq, LockToBuild& l, resolver::ImageFormat format, const std::string& output, Services& services) {
  // A VM lock is for one platform; its boot loader, root partition, initramfs init and gpuenv are that platform's.
  const resolver::Platform platform = vm_platform(l.lock);
  GPUENV_TRY(gpuenv_binary, vm_gpuenv_for(rq, platform));
  if (l.lock.vm->driver && platform != resolver::native_platform())
    return make_error(ErrorKind::environment, "vm.driver_build",
                      "vm.driver's module is compiled by the image's own compiler, a " + platform.str() + " program, which cannot run on this " +
                          resolver::native_platform().str() + " machine",
                      "vm.driver", "build this disk on a " + platform.str() + " machine, or leave out vm.driver");
  const std::string cache = cache_root(services);
  GPUENV_TRY(store, open_blob_store(services, cache));
  GPUENV_TRY(network, open_fetcher(services, rq.lock.offline));
  auto runner = services.make_runner ? services.make_runner() : nullptr;
  if (!network || !runner) return make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher or process runner configured", {}, "");
  sweep_abandoned_work_dirs(cache);
  GPUENV_TRY(work_dir, WorkDir::create(cache));
  GPUENV_TRY(epoch, source_date_epoch(services));
  VmBuilt out;
  out.lock_sha256 = sha256_hex(l.text);
  const images::disk::DiskIds ids = images::disk::disk_ids(out.lock_sha256);
  images::BuildRequest a = assembly_request(rq, l, work_dir->path(), epoch, *network, *store, cache, services);
  a.add_files = [&](const std::string& root) -> Status {
    images::disk::VmRootInputs in{ids, l.lock.spec_name, gpuenv_binary, std::string(recipes::preflight_unit()), l.lock.vm->cloud_init, {}, epoch, platform};
    if (l.lock.vm->driver) {
      GPUENV_TRY(driver, add_vm_driver(a, l, root, *runner, services));
      in.driver_module = driver.module;
      out.driver = std::move(driver);
    }
    return images::disk::add_vm_files(root, in, *runner);
  };
  auto tree = images::assemble_root(a);
  if (!tree) {
    Error e = std::move(tree).error();
    e.while_("building the root of " + l.lock.spec_name);
    return e;
  }
  images::disk::VmDiskRequest d;
  d.root = tree->root;
  d.owners = std::move(tree->owners);
  d.work_dir = work_dir->path() + "/disk";
  d.out = output;
  d.format = format == resolver::ImageFormat::qcow2 ? images::disk::DiskFormat::qcow2 : images::disk::DiskFormat::raw;
  d.root_size = l.lock.vm->disk_size;
  d.seed = out.lock_sha256;
  d.epoch = epoch;
  d.cmdline = l.lock.vm->cmdline;
  d.platform = platform;
  services.step("writing the " + std::string(resolver::to_string(format)) + " disk");
  auto disk = images::disk::build_vm_disk(d, *runner);
  if (!disk) {
    Error e = std::move(disk).error();
    e.while_("writing the disk of " + l.lock.spec_name);
    return e;
  }
  out.disk = std::move(*disk);
  std::error_code ec;
  out.file_size = fs::file_size(output, ec);
  return out;
}

/// A multi-platform lock's images, one per platform (each from the lock narrowed to it, in the one layout), then
/// the OCI index that names them: the result's manifest is the index, its notes and lock digest the images'.
Result<images::BuildResult> assemble_platforms(images::BuildRequest& a, const LockToBuild& l, const std::string& layout_dir, const std::string& tag,
                                               std::vector<PlatformBuilt>& per_platform, Services& services) {
  std::vector<images::PlatformImage> entries;
  images::BuildResult out;
  out.unchanged = true;
  for (const auto& platform : l.lock.platforms) {
    const resolver::Lock narrowed = resolver::lock_for_platform(l.lock, platform);
    a.lock = &narrowed;
    a.platform = platform;
    a.write_index = false;
    services.step("building the " + platform.str() + " image");
    auto built = images::assemble_image(a);
    if (!built) {
      Error e = std::move(built).error();
      e.while_("building " + l.lock.spec_name + " for " + platform.str());
      return e;
    }
    entries.push_back({platform, built->manifest});
    out.lock_sha256 = built->lock_sha256;
    out.unchanged = out.unchanged && built->unchanged;
    for (const auto& n : built->notes) out.notes.push_back(platform.str() + ": " + n);
    per_platform.push_back({platform, std::move(*built)});
  }
  a.lock = &l.lock;
  auto index = images::write_platform_index(layout_dir, entries, tag);
  if (!index) {
    Error e = std::move(index).error();
    e.while_("writing the index of " + l.lock.spec_name);
    return e;
  }
  out.manifest = *index;
  return out;
}

/// Assembles LOCK into LAYOUT_DIR (in a locked work directory of the cache, removed afterwards); a multi-platform
/// lock's images go to PER_PLATFORM and the result is their index.
Result<images::BuildResult> assemble(const BuildRequest& rq, LockToBuild& l, const std::string& layout_dir, const std::string& tag,
                                     std::vector<PlatformBuilt>& per_platform, images::SharedCache* shared, Services& services) {
  const std::string cache = cache_root(services);
  GPUENV_TRY(store, open_blob_store(services, cache));
  GPUENV_TRY(network, open_fetcher(services, rq.lock.offline));
  if (!network) return make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher configured", {}, "");
  // Work directories of builds that were killed (SIGKILL, a power cut) are removed first; this one is locked while
  // the build runs and removed when it ends.
  sweep_abandoned_work_dirs(cache);
  GPUENV_TRY(work_dir, WorkDir::create(cache));
  GPUENV_TRY(epoch, source_date_epoch(services));
  images::BuildRequest a = assembly_request(rq, l, work_dir->path(), epoch, *network, *store, cache, services);
  a.output_dir = layout_dir;
  a.tag = tag;
  a.compression = rq.compression;
  a.layer_memo_dir = cache + "/layers";
  a.shared_cache = shared;
  std::error_code ec;
  fs::create_directories(a.layer_memo_dir, ec);
  if (!l.lock.base_image.empty()) {
    if (!l.base || l.base->pinned != l.lock.base_image) {
      GPUENV_TRY(base, prepare_base_image(l.lock.base_image, rq.lock.offline, services));
      l.base = std::move(base);
    }
    a.base_layout_dir = l.base->layout_dir;
    a.base_manifest_digest = l.base->manifest_digest;
  }
  if (l.lock.platforms.size() == 1) {
    a.platform = l.lock.platforms.front();
    auto built = images::assemble_image(a);
    if (!built) {
      Error e = std::move(built).error();
      e.while_("building " + l.lock.spec_name);
      return e;
    }
    return built;
  }
  return assemble_platforms(a, l, layout_dir, tag, per_platform, services);
}

}  // namespace

std::string ref_name(const std::string& tag) {
  const auto slash = tag.rfind('/');
  const auto colon = tag.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) return tag.substr(colon + 1);
  return tag;
}

/// Where a layout is written. An OUTPUT that exists is written in place (a layout keeps its old index until the
/// new one is in place, so it is never half-written); a new one is staged in a hidden sibling and renamed onto
/// OUTPUT once the image is complete, so a failed or killed first build leaves no OUTPUT at all.
struct LayoutTarget {
  std::string dir;      ///< where assemble writes
  bool staged = false;  ///< dir is a sibling to rename onto the output
};

/// ".NAME.gpuenv-new-": the prefix of OUTPUT's staging siblings.
std::string staging_prefix(const fs::path& output) { return "." + output.filename().string() + ".gpuenv-new-"; }

/// Removes the staging siblings of OUTPUT whose build is gone (killed); live builds' siblings stay.
void remove_abandoned_staging(const fs::path& output) {
  std::error_code ec;
  const fs::path parent = output.has_parent_path() ? output.parent_path() : fs::path(".");
  const std::string prefix = staging_prefix(output);
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const long pid = std::strtol(rest.c_str(), nullptr, 10);
    if (pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) continue;  // still building
    std::error_code rm;
    fs::remove_all(e.path(), rm);
  }
}

LayoutTarget layout_target(const std::string& output) {
  std::error_code ec;
  const auto status = fs::symlink_status(output, ec);
  const bool empty_dir = fs::is_directory(status) && fs::is_empty(output, ec);  // rename(2) replaces an empty directory
  if (fs::exists(status) && !empty_dir) return {output, false};
  const fs::path out(output);
  remove_abandoned_staging(out);
  static std::atomic<unsigned> counter{0};
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  return {(parent / (staging_prefix(out) + std::to_string(::getpid()) + "-" + std::to_string(counter++))).string(), true};
}

/// Renames a staged layout onto OUTPUT (which a concurrent build may have created meanwhile: then that one stays
/// and this one, the same image, is dropped).
Status place_layout(const LayoutTarget& t, const std::string& output) {
  if (!t.staged) return ok_status();
  // Synced: the layout is what the user keeps, and its new name must survive a power cut. Its blobs and index were
  // each synced as written, so the file system's sync (syncfs) finds little of ours to write; it does wait for
  // whatever else is dirty on that file system.
  constexpr IoArea k_layout_output_io{"build.io", "check permissions of the output's directory"};
  GPUENV_CHECK(commit_directory(t.dir, output, Durability::synced, k_layout_output_io, "cannot move the finished layout into place"));
  return ok_status();
}

/// A VM lock's build: the disk at OUT.output, and with --push its containerDisk pushed.
Status build_vm(const BuildRequest& rq, LockToBuild& l, Built& out, Services& services) {
  out.output = rq.output.empty() ? "gpuenv-out/" + l.lock.spec_name + "." + std::string(resolver::to_string(out.format)) : rq.output;
  std::error_code ec;
  if (fs::is_directory(out.output, ec))
    return make_error(ErrorKind::usage, "cli.output", "is a directory; a VM disk is one file", out.output, "give a file name with -o, e.g. -o disk.qcow2");
  if (fs::path(out.output).has_parent_path()) fs::create_directories(fs::path(out.output).parent_path(), ec);
  GPUENV_TRY(vm, build_vm_disk(rq, l, out.format, out.output, services));
  out.vm = std::move(vm);
  if (!rq.push.empty()) {
    // A KubeVirt containerDisk: the disk under /disk/ in an image of its own, kept in the cache and pushed.
    GPUENV_TRY(epoch, source_date_epoch(services));
    const std::string layout_dir = cache_root(services) + "/images/" + l.lock.spec_name + ".containerdisk";
    fs::create_directories(cache_root(services) + "/images", ec);
    out.tag = ref_name(rq.tag.empty() ? (l.spec_tag.empty() ? rq.push : l.spec_tag) : rq.tag);
    images::disk::ContainerDiskRequest cd{layout_dir,
                                          out.output,
                                          l.lock.spec_name + "." + std::string(resolver::to_string(out.format)),
                                          epoch,
                                          out.tag,
                                          {{"dev.gpuenv.lock.sha256", out.vm->lock_sha256}, {"dev.gpuenv.vm.kernel", out.vm->disk.kernel.version}},
                                          out.vm->disk.platform};
    GPUENV_TRY(manifest, images::disk::write_container_disk(cd));
    out.vm->container_disk = manifest.digest.str();
    GPUENV_TRY(pushed, push(rq, layout_dir, out.tag, services));
    out.pushed = pushed;
  }
  return ok_status();
}

/// The build cache of --cache (or GPUENV_BUILD_CACHE), read; null without one. Layers may stay in the registry only
/// when the image goes to the cache's registry as a layout (PUSHED_LAYOUT; an archive holds every blob).
Result<std::unique_ptr<BuildCache>> open_shared_cache(const BuildRequest& rq, const std::string& cache_ref, const images::ImageReference* pushed_layout,
                                                      Services& services) {
  if (cache_ref.empty()) return std::unique_ptr<BuildCache>();
  const bool may_leave = pushed_layout && rq.cache_may_leave_layers;
  BuildCacheRequest cr{cache_ref, rq.cache_key.empty() ? env_or(services, "GPUENV_BUILD_CACHE_KEY") : rq.cache_key, may_leave ? pushed_layout->registry : std::string(),
                       rq.plain_http, rq.ca_bundle};
  return BuildCache::open(cr, services);
}

/// Pushes the built image. Layers the shared cache left in the registry are mounted from the cache's repository; a
/// registry that will not mount them (some never do) gets them downloaded into the layout and the image pushed whole.
Status push_image(const BuildRequest& rq, const std::string& layout_dir, const images::ImageReference& to, BuildCache* shared, Built& out,
                  Services& services) {
  std::vector<images::Descriptor> remote;
  for (const auto* im : out.built_images())
    for (const auto& layer : im->layers)
      if (layer.remote) remote.push_back(layer.blob);
  std::vector<Digest> remote_digests;
  for (const auto& d : remote) remote_digests.push_back(d.digest);
  auto pushed = push(rq, layout_dir, out.tag, services, remote_digests, shared ? shared->mount_source() : std::string());
  if (!pushed && shared && !remote.empty() && pushed.error().id == "registry.blob_missing") {
    shared->note("the registry would not mount the cache's layers into " + to.repository + " (" + pushed.error().message +
                 "); downloading them and pushing again");
    GPUENV_CHECK(shared->download(layout_dir, remote));
    for (auto& layer : out.image.layers) layer.remote = false;
    for (auto& p : out.platforms)
      for (auto& layer : p.image.layers) layer.remote = false;
    pushed = push(rq, layout_dir, out.tag, services);
  }
  if (!pushed) return std::move(pushed).error();
  out.pushed = *pushed;
  return ok_status();
}

/// The name statements give the image: the repository it was pushed to, else the spec's tag without its tag, else the
/// spec's name.
std::string attested_name(const std::optional<images::ImageReference>& pushed, const LockToBuild& l) {
  if (pushed) return pushed->registry + "/" + pushed->repository;
  if (l.spec_tag.empty()) return l.lock.spec_name;
  const std::string tag = ref_name(l.spec_tag);
  return tag == l.spec_tag ? l.spec_tag : l.spec_tag.substr(0, l.spec_tag.size() - tag.size() - 1);
}

/// --attest: the image's SBOM and provenance, signed and stored in the output written and the registry pushed to.
Status attest_built(const BuildRequest& rq, const LockToBuild& l, const std::string& layout_dir, const std::optional<images::ImageReference>& pushed,
                    const marks::Key& key, std::int64_t started, Built& out, Services& services) {
  GPUENV_TRY(epoch, source_date_epoch(services));
  // One image, or each platform's (its SBOM beside the layout is sbom.<platform>.cdx.json): each gets its own
  // statements, attached to its own manifest, as `cosign attest --recursive` attaches them.
  std::vector<AttestedImage> images;
  if (out.platforms.empty()) {
    GPUENV_TRY(cyclonedx, read_file_limited(layout_dir + "/" + images::cyclonedx_file_name("sbom.spdx.json"), 256u << 20));
    images.push_back({out.image.manifest, l.lock.platforms.front(), std::move(cyclonedx)});
  }
  for (const auto& p : out.platforms) {
    GPUENV_TRY(cyclonedx, read_file_limited(layout_dir + "/" + images::cyclonedx_file_name("sbom." + p.platform.file_tag() + ".spdx.json"), 256u << 20));
    images.push_back({p.image.manifest, p.platform, std::move(cyclonedx)});
  }
  BuildFacts facts;
  facts.lock = &l.lock;
  facts.lock_text = l.text;
  facts.format = std::string(resolver::to_string(out.format));
  facts.compression = std::string(images::to_string(rq.compression));
  facts.tag = out.tag;
  facts.subject_name = attested_name(pushed, l);
  facts.source_date_epoch = epoch;
  facts.started = started;
  AttestStores stores;
  stores.places.push_back((out.format == resolver::ImageFormat::oci_dir ? std::string("oci") : std::string(resolver::to_string(out.format))) + ":" + out.output);
  if (pushed) stores.places.push_back("docker://" + rq.push);
  stores.plain_http = rq.plain_http;
  stores.referrers = rq.attest_referrers;
  services.step("signing and storing the image's " + std::string(rq.attest.size() == 2 ? "SBOM and provenance" : to_string(rq.attest.front())));
  GPUENV_TRY(stored, attest_build(rq.attest, images, facts, key, stores, services));
  out.attested = std::move(stored);
  return ok_status();
}

Result<Built> build(const BuildRequest& rq, Services& services) {
  Built out;
  const std::int64_t started = now_seconds(services);
  // The key of --attest first: a build that cannot sign at its end fails before it starts.
  std::optional<marks::Key> attest_key;
  if (!rq.attest.empty()) {
    GPUENV_TRY(key, load_signing_key(rq.attest_key, services));
    attest_key = std::move(key);
  }
  GPUENV_TRY(l, lock_to_build(rq, services));
  if (l.unsatisfied) {
    out.unsatisfied = std::move(l.unsatisfied);
    return out;
  }
  if (attest_key && l.lock.vm)
    return make_error(ErrorKind::usage, "build.attest_vm", "--attest signs a container image's SBOM and provenance, and this lock is a VM disk's", "--attest",
                      "leave out --attest for a VM disk; its lock (inside the disk, gpuenv inspect) says what it holds");

  out.format = rq.format.value_or(l.spec_format.value_or(l.lock.vm ? resolver::ImageFormat::raw : resolver::ImageFormat::oci_dir));
  if (resolver::is_vm_format(out.format) != l.lock.vm.has_value())
    return make_error(ErrorKind::usage, "build.not_vm",
                      l.lock.vm ? "this lock is a VM disk's (it has vm:), and --format " + std::string(resolver::to_string(out.format)) + " is a container image's"
                                : "format " + std::string(resolver::to_string(out.format)) + " is a VM disk, and this lock is a container image's (it has no vm:)",
                      "--format", l.lock.vm ? "build it with --format raw or qcow2" : "set image.format: raw (or qcow2) in the spec and lock it again");
  const std::string cache_ref = rq.cache.empty() ? env_or(services, "GPUENV_BUILD_CACHE") : rq.cache;
  if (l.lock.vm) {
    if (!rq.cache.empty())  // GPUENV_BUILD_CACHE alone does not stop a VM disk: the variable is for a pipeline's every build
      return make_error(ErrorKind::usage, "build.cache_vm", "--cache shares the layers of container images; a VM disk is built from its own cache", "--cache",
                        "leave out --cache for this lock");
    GPUENV_CHECK(build_vm(rq, l, out, services));
    return out;
  }
  const bool archive = out.format != resolver::ImageFormat::oci_dir;
  out.output = rq.output.empty() ? "gpuenv-out/" + l.lock.spec_name + (archive ? ".tar" : "") : rq.output;
  while (out.output.size() > 1 && out.output.back() == '/') out.output.pop_back();  // "out/" is the directory out
  std::error_code ec;
  if (fs::path(out.output).has_parent_path()) fs::create_directories(fs::path(out.output).parent_path(), ec);
  if (archive && fs::is_directory(out.output, ec)) {
    return make_error(ErrorKind::usage, "cli.output", "is a directory; format " + std::string(resolver::to_string(out.format)) + " writes one file", out.output,
                      "give a file name with -o, e.g. -o image.tar");
  }
  // An archive is written from a layout kept in the cache, so that a rebuild reuses its layers.
  const std::string cache = cache_root(services);
  if (archive) fs::create_directories(cache + "/images", ec);
  const LayoutTarget target = archive ? LayoutTarget{cache + "/images/" + l.lock.spec_name, false} : layout_target(out.output);
  const std::string layout_dir = archive ? target.dir : out.output;
  out.tag = ref_name(rq.tag.empty() ? l.spec_tag : rq.tag);
  std::optional<images::ImageReference> push_ref;
  if (!rq.push.empty()) {
    GPUENV_TRY(parsed, images::parse_image_reference(rq.push));
    push_ref = std::move(parsed);
  }
  GPUENV_TRY(shared, open_shared_cache(rq, cache_ref, push_ref && !archive ? &*push_ref : nullptr, services));
  auto image = assemble(rq, l, target.dir, out.tag, out.platforms, shared.get(), services);
  if (!image) {
    if (target.staged) fs::remove_all(target.dir, ec);
    return std::move(image).error();
  }
  out.image = std::move(*image);
  GPUENV_CHECK(place_layout(target, out.output));
  if (archive) GPUENV_CHECK(write_archive(rq, out.format, layout_dir, l, out.image, out.output));
  if (shared) shared->tally(out.built_images());
  if (push_ref) GPUENV_CHECK(push_image(rq, layout_dir, *push_ref, shared.get(), out, services));
  if (shared) {
    shared->write(layout_dir, push_ref, services);
    out.cache = shared->report();
  }
  if (attest_key) GPUENV_CHECK(attest_built(rq, l, layout_dir, push_ref, *attest_key, started, out, services));
  return out;
}

}  // namespace gpuenv::app
