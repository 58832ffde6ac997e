#pragma once
// The port through which gpuenv downloads: small documents into memory, and files (verified by size and
// sha256) into place on disk, many at once.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "base/net/net_limits.hpp"

namespace gpuenv {

/// One file to download.
struct FetchRequest {
  std::string url;
  std::string dest;                     ///< final path; written as dest + ".part" and renamed when verified
  std::optional<Digest> sha256;         ///< a mismatch is an error and nothing stays at dest
  std::optional<std::uint64_t> size;    ///< expected size, checked as bytes arrive
};

/// What a finished download was.
struct FetchedFile {
  std::string url;
  std::string dest;
  std::uint64_t bytes = 0;
  Digest sha256;       ///< of what was written
  int attempts = 0;    ///< 1 = no retry was needed
};

/// Progress as bytes arrive: per file and in total (known totals are 0 when unknown).
struct FetchProgress {
  std::size_t files_done = 0, files_total = 0;
  std::uint64_t bytes_done = 0, bytes_total = 0;
};

struct FetchOptions {
  int parallel = 8;                                        ///< transfers at once
  int max_attempts = 5;                                    ///< per transfer, first try included
  std::chrono::milliseconds backoff_base{250};             ///< doubled per retry (jittered), capped below
  std::chrono::milliseconds backoff_cap{8000};
  NetLimits limits;                                        ///< timeouts, rate rule, deadlines, budget, notices
  std::uint64_t max_document_bytes = 256u << 20;           ///< limit for get()
  std::string ca_bundle;                                   ///< extra CA file; verification is always on
  std::string user_agent = "gpuenv";
  std::function<void(const FetchProgress&)> on_progress;   ///< called from the fetching thread
};

/// Downloads. Implementations retry where retrying can help (connection errors, timeouts, stalls, 429,
/// 5xx, truncated bodies) with exponential backoff, resume partial downloads with Range, and never leave a
/// partial or unverified file at `dest`.
class Fetcher {
 public:
  virtual ~Fetcher() = default;
  /// Fetches a small document (an index, a Release file) into memory. 404/410 is ErrorKind::environment
  /// with id "fetch.not_found"; other failures "fetch.failed".
  /// `accept` is sent as the Accept header when not empty (content negotiation of the simple API).
  virtual Result<std::string> get(const std::string& url, const std::string& accept = {}) = 0;
  /// Fetches `length` bytes from `offset` with an HTTP Range request. A server that ignores ranges gives
  /// "fetch.no_ranges"; callers fall back to fetching the whole file.
  virtual Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) = 0;
  /// Fetches every request concurrently; one result per request, in order.
  virtual std::vector<Result<FetchedFile>> fetch_all(const std::vector<FetchRequest>& requests) = 0;
  /// Told that request `index` has finished, with its result; on the fetching thread, before fetch_each returns.
  /// It must not call the fetcher it is told by.
  using FetchDone = std::function<void(std::size_t index, const Result<FetchedFile>& result)>;
  /// As fetch_all, telling `done` about each request as it finishes, so that a caller can use one file while
  /// the others still arrive. This default tells it about every request once fetch_all has returned; adapters
  /// that finish files one by one override it.
  virtual std::vector<Result<FetchedFile>> fetch_each(const std::vector<FetchRequest>& requests, const FetchDone& done) {
    auto out = fetch_all(requests);
    if (done)
      for (std::size_t i = 0; i < out.size(); ++i) done(i, out[i]);
    return out;
  }
};

/// The Fetcher of `--offline`: every call fails with "cache.offline_miss" and downloads nothing. Decorators that
/// can answer from the cache (make_caching_fetcher, fetch_into_cache) do so when they see that error.
std::unique_ptr<Fetcher> make_offline_fetcher();

/// Whether ERROR is the offline fetcher's refusal.
inline bool is_offline_miss(const Error& error) { return error.id == "cache.offline_miss"; }

}  // namespace gpuenv
