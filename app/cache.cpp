#include "app/cache.hpp"

#include "base/cache/work_dir.hpp"
#include "images/assemble/assemble_image.hpp"
#include "images/disk/vm_driver.hpp"

namespace gpuenv::app {

Result<CacheListing> list_cache(Services& services) {
  CacheListing out;
  out.root = cache_root(services);
  GPUENV_TRY(store, open_blob_store(services, out.root));
  GPUENV_TRY(blobs, store->list());
  out.blobs = std::move(blobs);
  out.build = images::build_cache_use(out.root + "/trees", out.root + "/layers");
  const auto drivers = images::disk::driver_cache_use(out.root + "/drivers");
  out.build.drivers = drivers.drivers;
  out.build.driver_bytes = drivers.bytes;
  return out;
}

Result<Pruned> prune_cache(int older_than_days, bool all, Services& services) {
  Pruned out;
  out.root = cache_root(services);
  GPUENV_TRY(store, open_blob_store(services, out.root));
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(now_seconds(services)));  // the injected clock
  const auto cutoff = all ? std::chrono::system_clock::time_point::max() : now - std::chrono::hours(24) * older_than_days;
  GPUENV_TRY(freed, store->prune(cutoff));
  out.build = images::prune_build_cache(out.root + "/trees", out.root + "/layers", cutoff);
  const auto drivers = images::disk::prune_driver_cache(out.root + "/drivers", cutoff);
  out.build.drivers = drivers.drivers;
  out.build.driver_bytes = drivers.bytes;
  out.freed_bytes = freed + out.build.package_tree_bytes + out.build.layer_bytes + out.build.driver_bytes;
  out.abandoned_work_dirs = sweep_abandoned_work_dirs(out.root);
  return out;
}

}  // namespace gpuenv::app
