#pragma once
// Test double for the Fetcher port: a map of URL to bytes; records requests; can fail chosen URLs.
#include <fstream>
#include <map>
#include <set>

#include <cstdio>

#include "base/cache/blob_store.hpp"
#include "base/net/fetcher.hpp"

namespace gpuenv::testing {

class FakeFetcher final : public gpuenv::Fetcher {
 public:
  std::map<std::string, std::string> files;
  std::set<std::string> failing;
  std::vector<std::string> requested;

  std::vector<std::string> accepts;  ///< the Accept header of each get()

  Result<std::string> get(const std::string& url, const std::string& accept = {}) override {
    requested.push_back(url);
    accepts.push_back(accept);
    if (failing.count(url)) return make_error(ErrorKind::environment, "fetch.failed", "injected failure", url, "");
    auto it = files.find(url);
    if (it == files.end()) return make_error(ErrorKind::environment, "fetch.not_found", "HTTP 404: not found", url, "");
    return it->second;
  }

  std::vector<std::string> ranges;  ///< "url a-b" for each get_range()
  bool ranges_supported = true;

  Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    ranges.push_back(url + " " + std::to_string(offset) + "-" + std::to_string(offset + length - 1));
    if (!ranges_supported) return make_error(ErrorKind::environment, "fetch.no_ranges", "no ranges", url, "");
    auto it = files.find(url);
    if (it == files.end()) return make_error(ErrorKind::environment, "fetch.not_found", "HTTP 404: not found", url, "");
    if (offset >= it->second.size()) return make_error(ErrorKind::environment, "fetch.http", "HTTP 416", url, "");
    return it->second.substr(offset, length);
  }

  std::vector<Result<gpuenv::FetchedFile>> fetch_all(const std::vector<gpuenv::FetchRequest>& requests) override {
    std::vector<Result<gpuenv::FetchedFile>> out;
    for (const auto& r : requests) {
      auto body = get(r.url);
      if (!body) {
        out.emplace_back(std::move(body).error());
        continue;
      }
      { std::ofstream(r.dest, std::ios::binary) << *body; }
      auto sha = gpuenv::sha256_of_file(r.dest);  // verify as the port's contract requires
      if (r.sha256 && (!sha || *sha != *r.sha256)) {
        std::remove(r.dest.c_str());
        out.emplace_back(make_error(ErrorKind::environment, "fetch.hash_mismatch", "downloaded file has another sha256", r.url, ""));
        continue;
      }
      out.emplace_back(gpuenv::FetchedFile{r.url, r.dest, body->size(), sha ? *sha : gpuenv::Digest(), 1});
    }
    return out;
  }
};

/// A Fetcher that forwards to one the test keeps (for a Services::make_fetcher that may be called more than once).
class BorrowedFetcher final : public gpuenv::Fetcher {
 public:
  explicit BorrowedFetcher(gpuenv::Fetcher& inner) : m_inner(inner) {}
  Result<std::string> get(const std::string& url, const std::string& accept = {}) override { return m_inner.get(url, accept); }
  Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    return m_inner.get_range(url, offset, length);
  }
  std::vector<Result<gpuenv::FetchedFile>> fetch_all(const std::vector<gpuenv::FetchRequest>& requests) override { return m_inner.fetch_all(requests); }
  std::vector<Result<gpuenv::FetchedFile>> fetch_each(const std::vector<gpuenv::FetchRequest>& requests, const FetchDone& done) override {
    return m_inner.fetch_each(requests, done);
  }

 private:
  gpuenv::Fetcher& m_inner;
};

}  // namespace gpuenv::testing
