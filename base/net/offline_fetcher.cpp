#include "base/net/fetcher.hpp"

namespace gpuenv {
namespace {

const char* const k_miss = "not in the cache and --offline forbids downloading";
const char* const k_hint = "run once without --offline to fill the cache";

class OfflineFetcher final : public Fetcher {
 public:
  Result<std::string> get(const std::string& url, const std::string& /*accept*/) override {
    return make_error(ErrorKind::environment, "cache.offline_miss", k_miss, url, k_hint);
  }
  Result<std::string> get_range(const std::string& url, std::uint64_t /*offset*/, std::uint64_t /*length*/) override {
    return make_error(ErrorKind::environment, "cache.offline_miss", "offline: byte ranges are not cached", url, "");
  }
  std::vector<Result<FetchedFile>> fetch_all(const std::vector<FetchRequest>& requests) override {
    std::vector<Result<FetchedFile>> out;
    for (const auto& r : requests) out.emplace_back(make_error(ErrorKind::environment, "cache.offline_miss", k_miss, r.url, k_hint));
    return out;
  }
};

}  // namespace

std::unique_ptr<Fetcher> make_offline_fetcher() { return std::make_unique<OfflineFetcher>(); }

}  // namespace gpuenv
