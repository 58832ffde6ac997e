#pragma once
// Downloads through the cache: what is cached is not fetched again; what is fetched is verified before it
// enters the cache.
#include <functional>
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

/// Told that request `index` is in the cache (or has failed), with its result.
using BlobReady = std::function<void(std::size_t index, const Result<CachedBlob>& blob)>;
/// As above, telling `ready` about each request as soon as its blob is in the cache or has failed: the ones
/// the cache holds first (on the calling thread), then each download as it finishes (on the fetching thread).
std::vector<Result<CachedBlob>> fetch_into_cache(Fetcher& fetcher, BlobStore& store, const std::vector<CacheRequest>& requests, const BlobReady& ready);

}  // namespace gpuenv
