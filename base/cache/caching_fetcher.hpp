#pragma once
// A Fetcher decorator that keeps every document it gets (Release files, index pages, metadata) in the cache,
// keyed by URL, so that `--offline` can answer from the cache alone.
#include <memory>
#include <string>

#include "base/cache/blob_store.hpp"
#include "base/net/fetcher.hpp"

namespace gpuenv {

/// With the offline fetcher (make_offline_fetcher) as INNER, documents come only from the cache
/// ("cache.offline_miss" otherwise), and files only when their sha256 is cached. Online, every fetched document
/// replaces the cached one for its URL.
/// URL references live in ROOT/refs/ as files named by the sha256 of the URL (and Accept header).
std::unique_ptr<Fetcher> make_caching_fetcher(Fetcher& inner, BlobStore& store, std::string cache_root);

}  // namespace gpuenv
