#include "base/cache/fetch_into_cache.hpp"

#include <unistd.h>

namespace gpuenv {

std::vector<Result<CachedBlob>> fetch_into_cache(Fetcher& fetcher, BlobStore& store, const std::vector<CacheRequest>& requests) {
  return fetch_into_cache(fetcher, store, requests, {});
}

std::vector<Result<CachedBlob>> fetch_into_cache(Fetcher& fetcher, BlobStore& store, const std::vector<CacheRequest>& requests, const BlobReady& ready) {
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
  if (ready)
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i]) ready(i, *out[i]);
  if (!to_fetch.empty()) {
    (void)fetcher.fetch_each(to_fetch, [&](std::size_t k, const Result<FetchedFile>& fetched) {
      const std::size_t i = index[k];
      if (!fetched) {
        out[i] = fetched.error();
      } else if (auto placed = store.adopt(to_fetch[k].dest, requests[i].sha256, true); !placed) {
        // The Fetcher verified the sha256 while the bytes arrived (its contract), so the file is not read again.
        out[i] = std::move(placed).error();
      } else {
        out[i] = CachedBlob{requests[i].sha256, *placed, false};
      }
      if (ready) ready(i, *out[i]);
    });
    for (std::size_t k = 0; k < to_fetch.size(); ++k)  // an adapter that told nothing of a request failed it
      if (!out[index[k]]) {
        out[index[k]] = make_error(ErrorKind::internal, "fetch.untold", "the fetcher did not report this download", to_fetch[k].url, "");
        if (ready) ready(index[k], *out[index[k]]);
      }
  }
  std::vector<Result<CachedBlob>> result;
  result.reserve(out.size());
  for (auto& o : out) result.push_back(std::move(*o));
  return result;
}

}  // namespace gpuenv
