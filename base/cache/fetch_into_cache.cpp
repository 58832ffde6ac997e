#include "base/cache/fetch_into_cache.hpp"

#include <unistd.h>

namespace gpuenv {

std::vector<Result<CachedBlob>> fetch_into_cache(Fetcher& fetcher, BlobStore& store, const std::vector<CacheRequest>& requests) {
  std::vector<std::optional<Result<CachedBlob>>> out(requests.size());
  std::vector<FetchRequest> to_fetch;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    auto found = store.find(r.sha256);
    if (!found) {
      out[i] = std::move(found).error();
      continue;
    }
    if (*found) {
      out[i] = CachedBlob{r.sha256, **found, true};
      continue;
    }
    auto tmp = store.temp_path();
    if (!tmp) {
      out[i] = std::move(tmp).error();
      continue;
    }
    to_fetch.push_back(FetchRequest{r.url, *tmp, r.sha256, r.size});
    index.push_back(i);
  }
  if (!to_fetch.empty()) {
    auto fetched = fetcher.fetch_all(to_fetch);
    for (std::size_t k = 0; k < fetched.size(); ++k) {
      const std::size_t i = index[k];
      if (!fetched[k]) {
        out[i] = std::move(fetched[k]).error();
        continue;
      }
      // The Fetcher verified the sha256 while the bytes arrived (its contract), so the file is not read again.
      auto placed = store.adopt(to_fetch[k].dest, requests[i].sha256, true);
      if (!placed) {
        out[i] = std::move(placed).error();
        continue;
      }
      out[i] = CachedBlob{requests[i].sha256, *placed, false};
    }
  }
  std::vector<Result<CachedBlob>> result;
  result.reserve(out.size());
  for (auto& o : out) result.push_back(std::move(*o));
  return result;
}

}  // namespace gpuenv
