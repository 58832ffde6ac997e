#include <ctime>
#include <sstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "base/cache/blob_store.hpp"
#include "base/cache/work_dir.hpp"

namespace gpuenv::cli {
namespace {

std::string human(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::ostringstream o;
  o << std::fixed << std::setprecision(u ? 1 : 0) << v << " " << units[u];
  return o.str();
}

std::string iso(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int cmd_cache(const CacheOptions& o, Context& ctx) {
  const std::string root = cache_root(ctx);
  auto store = gpuenv::make_dir_blob_store(root);
  if (o.action == "prune") {
    const auto cutoff = o.all ? std::chrono::system_clock::time_point::max()
                              : std::chrono::system_clock::now() - std::chrono::hours(24) * o.older_than_days;
    auto freed = store->prune(cutoff);
    if (!freed) return report_error(freed.error(), o.json, ctx);
    const std::size_t swept = gpuenv::sweep_abandoned_work_dirs(root);
    if (o.json) {
      *ctx.out << nlohmann::ordered_json{{"schema", "gpuenv-cache-v1"}, {"root", root}, {"freed_bytes", *freed},
                                         {"abandoned_work_dirs_removed", swept}}
                      .dump(2)
               << "\n";
    } else {
      *ctx.out << "freed " << human(*freed) << " in " << root;
      if (swept > 0) *ctx.out << "; removed " << swept << " work director" << (swept == 1 ? "y" : "ies") << " of killed commands";
      *ctx.out << "\n";
    }
    return k_exit_ok;
  }
  auto blobs = store->list();
  if (!blobs) return report_error(blobs.error(), o.json, ctx);
  std::uint64_t total = 0;
  for (const auto& b : *blobs) total += b.bytes;
  if (o.json) {
    nlohmann::ordered_json j{{"schema", "gpuenv-cache-v1"}, {"root", root}, {"blobs", blobs->size()}, {"bytes", total}};
    if (o.action == "ls") {
      auto list = nlohmann::ordered_json::array();
      for (const auto& b : *blobs) list.push_back({{"sha256", b.sha256}, {"bytes", b.bytes}, {"last_used", iso(b.last_used)}});
      j["entries"] = list;
    }
    *ctx.out << j.dump(2) << "\n";
    return k_exit_ok;
  }
  if (o.action == "ls")
    for (const auto& b : *blobs) *ctx.out << b.sha256 << "  " << std::setw(10) << human(b.bytes) << "  " << iso(b.last_used) << "\n";
  *ctx.out << blobs->size() << " blobs, " << human(total) << " in " << root << "\n";
  return k_exit_ok;
}

}  // namespace gpuenv::cli
