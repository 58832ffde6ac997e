// gpuenv build SPEC|LOCK: one app::build call, and its result rendered.
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "app/build.hpp"
#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {
namespace {

std::string human(std::uint64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1);
  if (bytes >= (1ull << 30)) o << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else o << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  return o.str();
}

app::BuildRequest build_request(const BuildOptions& o) {
  app::BuildRequest rq;
  rq.lock = lock_request(o.lock);
  rq.lock.output.clear();  // building from a spec writes no lock file
  rq.output = o.output;
  rq.format = o.format;
  rq.compression = o.compression;
  rq.tag = o.tag;
  rq.allow_missing = o.allow_missing;
  rq.threads = o.threads;
  rq.push = o.push;
  rq.plain_http = o.plain_http;
  rq.ca_bundle = o.ca_bundle;
  return rq;
}

void print_json(const BuildOptions& o, const app::Built& b, Context& ctx) {
  const images::BuildResult& built = b.image;
  nlohmann::ordered_json j;
  j["schema"] = "gpuenv-build-result-v1";
  j["digest"] = built.manifest.digest;
  j["output"] = b.output;
  j["format"] = o.format;
  j["tag"] = b.tag;
  j["lock_sha256"] = built.lock_sha256;
  j["config"] = built.config.digest;
  j["unchanged"] = built.unchanged;
  auto layers = nlohmann::ordered_json::array();
  for (const auto& l : built.layers)
    layers.push_back({{"name", l.name}, {"digest", l.blob.digest}, {"size", l.blob.size}, {"diff_id", l.diff_id},
                      {"uncompressed_size", l.uncompressed_size}, {"entries", l.entries}, {"reused", l.reused}, {"packages", l.packages}});
  j["layers"] = layers;
  j["size"] = b.size();
  j["notes"] = built.notes;
  if (b.pushed) {
    j["push"] = {{"reference", o.push}, {"digest", b.pushed->digest}, {"blobs_uploaded", b.pushed->blobs_uploaded}, {"blobs_present", b.pushed->blobs_present},
                 {"blobs_mounted", b.pushed->blobs_mounted}, {"bytes_uploaded", b.pushed->bytes_uploaded}};
  }
  *ctx.out << j.dump(2) << "\n";
}

void print_text(const BuildOptions& o, const app::Built& b, Context& ctx) {
  const images::BuildResult& built = b.image;
  if (built.unchanged) *ctx.out << "unchanged: " << b.output << " already holds this image\n";
  for (const auto& l : built.layers) {
    *ctx.out << "  layer " << std::left << std::setw(10) << l.name << std::right << std::setw(11) << human(l.blob.size);
    if (!built.unchanged) *ctx.out << " (" << human(l.uncompressed_size) << " unpacked, " << l.packages.size() << " packages" << (l.reused ? ", reused" : "") << ")";
    *ctx.out << "\n";
  }
  for (const auto& n : built.notes) *ctx.out << "note: " << n << "\n";
  *ctx.out << "wrote " << b.output << " (" << human(b.size()) << ")\n";
  if (b.pushed) *ctx.out << "pushed " << o.push << " (" << b.pushed->blobs_uploaded << " blobs uploaded, " << b.pushed->blobs_present << " already there)\n";
  *ctx.out << built.manifest.digest << "\n";
}

}  // namespace

int cmd_build(const BuildOptions& o, Context& ctx) {
  const bool json = o.lock.resolve.json;
  auto built = app::build(build_request(o), ctx);
  if (!built) return report_error(built.error(), json, ctx);
  if (built->unsatisfied) return report_unsatisfied(*built->unsatisfied, json, ctx);
  if (json) print_json(o, *built, ctx);
  else print_text(o, *built, ctx);
  return k_exit_ok;
}

}  // namespace gpuenv::cli
