#include "base/cache/caching_fetcher.hpp"

#include <filesystem>
#include <fstream>

#include "base/cache/cached_fetch.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"

namespace gpuenv {
namespace {

namespace fs = std::filesystem;


class CachingFetcher final : public Fetcher {
 public:
  CachingFetcher(Fetcher* inner, BlobStore& store, std::string root) : m_inner(inner), m_store(store), m_refs(fs::path(root) / "refs") {}

  Result<std::string> get(const std::string& url, const std::string& accept) override {
    const fs::path ref = m_refs / sha256_hex(url + "\n" + accept);
    if (!m_inner) {
      std::ifstream in(ref);
      std::string sha;
      in >> sha;
      if (sha == "not-found") {  // the server answered 404/410 when the cache was filled
        return make_error(ErrorKind::environment, "fetch.not_found", "HTTP 404: not found (remembered from the last online run)", url, "");
      }
      if (!sha.empty()) {
        auto found = m_store.find(sha);
        if (found && *found) {
          std::ifstream blob(**found, std::ios::binary);
          std::string body(std::istreambuf_iterator<char>(blob), {});
          if (sha256_hex(body) == sha) return body;
        }
      }
      return make_error(ErrorKind::environment, "cache.offline_miss", "not in the cache and --offline forbids downloading", url,
                        "run once without --offline to fill the cache");
    }
    auto body = m_inner->get(url, accept);
    if (!body) {
      if (body.error().id == "fetch.not_found") remember(ref, "not-found");  // offline runs must see the same 404
      return body;
    }
    if (auto sha = m_store.put(*body)) remember(ref, *sha);
    return body;
  }

  // Best effort: a reference that cannot be written only costs a later offline run.
  void remember(const fs::path& ref, const std::string& value) {
    std::error_code ec;
    fs::create_directories(m_refs, ec);
    (void)write_file_atomic(ref.string(), value + "\n");
  }

  Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    if (m_inner) return m_inner->get_range(url, offset, length);  // parts of files are not kept
    return make_error(ErrorKind::environment, "cache.offline_miss", "offline: byte ranges are not cached", url, "");
  }

  std::vector<Result<FetchedFile>> fetch_all(const std::vector<FetchRequest>& requests) override {
    if (m_inner) return m_inner->fetch_all(requests);
    std::vector<Result<FetchedFile>> out;
    for (const auto& r : requests) {
      if (!r.sha256) {
        out.emplace_back(make_error(ErrorKind::environment, "cache.offline_miss", "offline, and the file has no digest to find it by", r.url, ""));
        continue;
      }
      auto found = m_store.find(*r.sha256);
      if (!found || !*found) {
        out.emplace_back(make_error(ErrorKind::environment, "cache.offline_miss", "not in the cache and --offline forbids downloading", r.url,
                                    "run once without --offline to fill the cache"));
        continue;
      }
      std::error_code ec;
      fs::copy_file(**found, r.dest, fs::copy_options::overwrite_existing, ec);
      if (ec) {
        out.emplace_back(make_error(ErrorKind::environment, "cache.io", "cannot copy from the cache: " + ec.message(), r.dest, ""));
        continue;
      }
      out.emplace_back(FetchedFile{r.url, r.dest, fs::file_size(r.dest, ec), *r.sha256, 0});
    }
    return out;
  }

 private:
  Fetcher* m_inner;
  BlobStore& m_store;
  fs::path m_refs;
};

}  // namespace

std::unique_ptr<Fetcher> make_caching_fetcher(Fetcher* inner, BlobStore& store, std::string cache_root) {
  return std::make_unique<CachingFetcher>(inner, store, std::move(cache_root));
}

}  // namespace gpuenv
