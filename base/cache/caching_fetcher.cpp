#include "base/cache/caching_fetcher.hpp"

#include <filesystem>
#include <fstream>
#include <optional>

#include "base/cache/fetch_into_cache.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"

namespace gpuenv {
namespace {

namespace fs = std::filesystem;


class CachingFetcher final : public Fetcher {
 public:
  CachingFetcher(Fetcher& inner, BlobStore& store, std::string root) : m_inner(inner), m_store(store), m_refs(fs::path(root) / "refs") {}

  Result<std::string> get(const std::string& url, const std::string& accept) override {
    const fs::path ref = m_refs / sha256_hex(url + "\n" + accept);
    auto body = m_inner.get(url, accept);
    if (!body && is_offline_miss(body.error())) {  // offline: the document as the last online run got it
      std::ifstream in(ref);
      std::string remembered;
      in >> remembered;
      if (remembered == "not-found") {  // the server answered 404/410 when the cache was filled
        return make_error(ErrorKind::environment, "fetch.not_found", "HTTP 404: not found (remembered from the last online run)", url, "");
      }
      if (const auto sha = Digest::from_hex(remembered)) {
        auto found = m_store.find(*sha);
        if (found && *found) {
          std::ifstream blob(**found, std::ios::binary);
          std::string bytes(std::istreambuf_iterator<char>(blob), {});
          if (Digest::of(bytes) == *sha) return bytes;
        }
      }
      return body;
    }
    if (!body) {
      if (body.error().id == "fetch.not_found") remember(ref, "not-found");  // offline runs must see the same 404
      return body;
    }
    if (auto sha = m_store.put(*body)) remember(ref, sha->hex());
    return body;
  }

  // Best effort: a reference that cannot be written only costs a later offline run.
  void remember(const fs::path& ref, const std::string& value) {
    std::error_code ec;
    fs::create_directories(m_refs, ec);
    (void)write_file_atomic(ref.string(), value + "\n");
  }

  Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    return m_inner.get_range(url, offset, length);  // parts of files are not kept
  }

  std::vector<Result<FetchedFile>> fetch_all(const std::vector<FetchRequest>& requests) override { return fetch_each(requests, {}); }

  std::vector<Result<FetchedFile>> fetch_each(const std::vector<FetchRequest>& requests, const FetchDone& done) override {
    std::vector<std::optional<Result<FetchedFile>>> answered(requests.size());
    auto out = m_inner.fetch_each(requests, [&](std::size_t i, const Result<FetchedFile>& r) {
      answered[i] = !r && is_offline_miss(r.error()) ? from_cache(requests[i], r.error()) : r;
      if (done) done(i, *answered[i]);
    });
    for (std::size_t i = 0; i < out.size(); ++i)
      if (answered[i]) out[i] = std::move(*answered[i]);
    return out;
  }

  // Offline: a file whose sha256 the cache holds is copied from it.
  Result<FetchedFile> from_cache(const FetchRequest& r, Error miss) {
    if (!r.sha256) return make_error(ErrorKind::environment, "cache.offline_miss", "offline, and the file has no digest to find it by", r.url, "");
    auto found = m_store.find(*r.sha256);
    if (!found || !*found) return miss;
    std::error_code ec;
    fs::copy_file(**found, r.dest, fs::copy_options::overwrite_existing, ec);
    if (ec) return make_error(ErrorKind::environment, "cache.io", "cannot copy from the cache: " + ec.message(), r.dest, "");
    return FetchedFile{r.url, r.dest, fs::file_size(r.dest, ec), *r.sha256, 0};
  }

 private:
  Fetcher& m_inner;
  BlobStore& m_store;
  fs::path m_refs;
};

}  // namespace

std::unique_ptr<Fetcher> make_caching_fetcher(Fetcher& inner, BlobStore& store, std::string cache_root) {
  return std::make_unique<CachingFetcher>(inner, store, std::move(cache_root));
}

}  // namespace gpuenv
