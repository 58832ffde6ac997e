#pragma once
// `gpuenv cache ls|du|prune`: what the content-addressed cache holds, and removing what was not used lately.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "app/services.hpp"
#include "images/assemble/assemble_image.hpp"

namespace gpuenv::app {

struct CacheListing {
  std::string root;
  std::vector<BlobInfo> blobs;
  images::BuildCacheUse build;  ///< unpacked packages and kept layers (what builds reuse)
  [[nodiscard]] std::uint64_t bytes() const {
    std::uint64_t total = 0;
    for (const auto& b : blobs) total += b.bytes;
    return total;
  }
};
Result<CacheListing> list_cache(Services& services);

struct Pruned {
  std::string root;
  std::uint64_t freed_bytes = 0;   ///< downloads, unpacked packages and kept layers together
  images::BuildCacheUse build;     ///< of which unpacked packages and kept layers
  std::size_t abandoned_work_dirs = 0;  ///< work directories of killed commands, removed too
};
/// Removes blobs, unpacked packages and kept layers last used more than OLDER_THAN_DAYS days ago (all with ALL;
/// a kept layer that an image layout still links stays unless ALL).
Result<Pruned> prune_cache(int older_than_days, bool all, Services& services);

}  // namespace gpuenv::app
