#include <CLI/CLI.hpp>
#include <chrono>
#include <sstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/cache.hpp"
#include "cli/commands.hpp"
#include "base/cache/blob_store.hpp"
#include "base/cache/work_dir.hpp"
#include "base/time.hpp"

namespace gpuenv::cli {
namespace {

std::string cache_size_text(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::ostringstream o;
  o << std::fixed << std::setprecision(u ? 1 : 0) << v << " " << units[u];
  return o.str();
}

/// A blob's last use, spelled as every time gpuenv writes (base/time.hpp).
std::string iso(std::chrono::system_clock::time_point t) {
  return format_rfc3339_utc(std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

}  // namespace

int cmd_cache(const CacheOptions& o, Context& ctx) {
  if (o.action == "prune") {
    auto pruned = app::prune_cache(o.older_than_days, o.all, ctx);
    if (!pruned) return report_error(pruned.error(), o.json, ctx);
    const std::size_t swept = pruned->abandoned_work_dirs;
    if (o.json) {
      *ctx.out << nlohmann::ordered_json{{"schema", "gpuenv-cache-v1"},
                                         {"root", pruned->root},
                                         {"freed_bytes", pruned->freed_bytes},
                                         {"package_trees_removed", pruned->build.package_trees},
                                         {"layers_removed", pruned->build.layers},
                                         {"drivers_removed", pruned->build.drivers},
                                         {"abandoned_work_dirs_removed", swept}}
                      .dump(2)
               << "\n";
    } else {
      *ctx.out << "freed " << cache_size_text(pruned->freed_bytes) << " in " << pruned->root << " (" << pruned->build.package_trees << " unpacked packages, "
               << pruned->build.layers << " kept layers, " << pruned->build.drivers << " built drivers among it)";
      if (swept > 0) *ctx.out << "; removed " << swept << " work director" << (swept == 1 ? "y" : "ies") << " of killed commands";
      *ctx.out << "\n";
    }
    return k_exit_ok;
  }
  auto listing = app::list_cache(ctx);
  if (!listing) return report_error(listing.error(), o.json, ctx);
  const auto& blobs = listing->blobs;
  const std::string& root = listing->root;
  const std::uint64_t total = listing->bytes();
  if (o.json) {
    const auto& b = listing->build;
    nlohmann::ordered_json j{{"schema", "gpuenv-cache-v1"}, {"root", root}, {"blobs", blobs.size()}, {"bytes", total},
                             {"package_trees", b.package_trees}, {"package_tree_bytes", b.package_tree_bytes}, {"layers", b.layers},
                             {"layer_bytes", b.layer_bytes}, {"drivers", b.drivers}, {"driver_bytes", b.driver_bytes}};
    if (o.action == "ls") {
      auto list = nlohmann::ordered_json::array();
      for (const auto& blob : blobs) list.push_back({{"sha256", blob.sha256.hex()}, {"bytes", blob.bytes}, {"last_used", iso(blob.last_used)}});
      j["entries"] = list;
    }
    *ctx.out << j.dump(2) << "\n";
    return k_exit_ok;
  }
  if (o.action == "ls")
    for (const auto& b : blobs) *ctx.out << b.sha256.hex() << "  " << std::setw(10) << cache_size_text(b.bytes) << "  " << iso(b.last_used) << "\n";
  *ctx.out << blobs.size() << " blobs, " << cache_size_text(total) << " in " << root << "\n";
  *ctx.out << listing->build.package_trees << " unpacked packages, " << cache_size_text(listing->build.package_tree_bytes) << "; " << listing->build.layers
           << " kept layers, " << cache_size_text(listing->build.layer_bytes) << "; " << listing->build.drivers << " built drivers, "
           << cache_size_text(listing->build.driver_bytes) << "\n";
  return k_exit_ok;
}

Command add_cache_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto o = std::make_shared<CacheOptions>();
  auto* sub = app.add_subcommand("cache", "Show or prune the cache: downloads, unpacked packages, kept layers ($GPUENV_CACHE_DIR, else $XDG_CACHE_HOME/gpuenv)");
  sub->require_subcommand(1);
  auto* ls = sub->add_subcommand("ls", "List cached blobs");
  auto* du = sub->add_subcommand("du", "Count cached blobs and bytes");
  auto* prune = sub->add_subcommand("prune", "Remove downloads, unpacked packages and kept layers not used for a while");
  prune->add_option("--older-than", o->older_than_days, "Days since last use (default 30)")->check(CLI::NonNegativeNumber);
  prune->add_flag("--all", o->all, "Remove everything");
  for (auto* s : {ls, du, prune}) s->add_flag("--json", o->json, "Print a gpuenv-cache-v1 JSON document");
  return {sub, [o, ls, du](Context& ctx) {
    o->action = ls->parsed() ? "ls" : du->parsed() ? "du" : "prune";
    return cmd_cache(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
