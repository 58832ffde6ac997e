#pragma once
// Downloads through the cache: what is cached is not fetched again; what is fetched is verified before it
// enters the cache.
#include <optional>
#include <string>
#include <vector>

#include "base/cache/blob_store.hpp"
#include "base/net/fetcher.hpp"

namespace gpuenv {

struct CacheRequest {
  std::string url;
  Digest sha256;  ///< required: the cache is content-addressed
  std::optional<std::uint64_t> size;
};

struct CachedBlob {
  Digest sha256;
  std::string path;
  bool was_cached = false;
};

/// Returns one result per request. With the offline fetcher, blobs not in the cache are its errors
/// ("cache.offline_miss").
std::vector<Result<CachedBlob>> fetch_into_cache(Fetcher& fetcher, BlobStore& store, const std::vector<CacheRequest>& requests);

}  // namespace gpuenv
