// gpuenv build SPEC|LOCK: resolve and pin when given a spec, then assemble and write the image.
#include <unistd.h>

#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/yaml_guard.hpp"
#include "cli/render.hpp"
#include "images/assemble/image_build.hpp"
#include "base/cache/blob_store.hpp"
#include "base/cache/work_dir.hpp"
#include "base/digest.hpp"
#include "images/oci/archive.hpp"
#include "base/net/http_client.hpp"
#include "images/registry/registry_client.hpp"
#include "resolver/lockfile.hpp"

#ifndef GPUENV_VERSION
#define GPUENV_VERSION "0.0.0"
#endif

namespace gpuenv::cli {
namespace {

namespace fs = std::filesystem;

bool looks_like_lock(const std::string& text) { return text.find("schema: \"gpuenv-lock-v1\"") != std::string::npos || text.find("schema: gpuenv-lock-v1") != std::string::npos; }

/// The tag part of "registry/name:tag" (the OCI layout's ref.name); the whole text when it has no tag.
std::string ref_name(const std::string& tag) {
  const auto slash = tag.rfind('/');
  const auto colon = tag.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) return tag.substr(colon + 1);
  return tag;
}

std::string human(std::uint64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1);
  if (bytes >= (1ull << 30)) o << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else o << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  return o.str();
}

}  // namespace

int cmd_build(const BuildOptions& o, Context& ctx) {
  const bool json = o.lock.resolve.json;
  auto input = read_yaml_file(o.lock.resolve.spec_path, 64u << 20);
  if (!input) return report_error(input.error(), json, ctx);

  std::string lock_text;
  std::string spec_tag;
  if (looks_like_lock(*input)) {
    lock_text = *input;
  } else {
    MadeLock made;
    if (int rc = make_lock(o.lock, ctx, made); rc != k_exit_ok) return rc;
    lock_text = made.text;
    spec_tag = made.prepared.spec.image_tag;
  }
  auto lock = resolver::parse_lock(lock_text, o.lock.resolve.spec_path);
  if (!lock) return report_error(lock.error(), json, ctx);

  const bool archive = o.format != "oci-dir";
  const std::string output = o.output.empty() ? "gpuenv-out/" + lock->spec_name + (archive ? ".tar" : "") : o.output;
  std::error_code ec;
  if (fs::path(output).has_parent_path()) fs::create_directories(fs::path(output).parent_path(), ec);
  if (archive && fs::is_directory(output, ec)) {
    return report_error(make_error(ErrorKind::usage, "cli.output", "is a directory; --format " + o.format + " writes one file", output,
                                   "give a file name with -o, e.g. -o image.tar"),
                        json, ctx);
  }

  const std::string cache = cache_root(ctx);
  // An archive is written from a layout kept in the cache, so that a rebuild reuses its layers.
  const std::string layout_dir = archive ? cache + "/images/" + lock->spec_name : output;
  if (archive) fs::create_directories(cache + "/images", ec);
  auto store = gpuenv::make_dir_blob_store(cache);
  auto network = o.lock.offline ? nullptr : (ctx.make_fetcher ? ctx.make_fetcher() : nullptr);
  if (!network && !o.lock.offline) {
    return report_error(make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher configured", {}, ""), json, ctx);
  }
  // Work directories of builds that were killed (SIGKILL, a power cut) are removed first; this one is locked while
  // the build runs and removed when it ends.
  gpuenv::sweep_abandoned_work_dirs(cache);
  auto work_dir = gpuenv::WorkDir::create(cache);
  if (!work_dir) return report_error(work_dir.error(), json, ctx);
  const std::string* work = &(*work_dir)->path();

  std::int64_t epoch = 0;
  if (auto it = ctx.env.find("SOURCE_DATE_EPOCH"); it != ctx.env.end() && !it->second.empty()) {
    try {
      std::size_t used = 0;
      epoch = std::stoll(it->second, &used);
      if (used != it->second.size() || epoch < 0) throw std::invalid_argument("x");
    } catch (const std::exception&) {
      return report_error(make_error(ErrorKind::usage, "cli.source_date_epoch", "SOURCE_DATE_EPOCH is '" + it->second + "', not a number of seconds",
                                     "SOURCE_DATE_EPOCH", "set it to a non-negative integer (seconds since 1970) or unset it"),
                          json, ctx);
    }
  }

  images::BuildRequest rq;
  rq.lock = &*lock;
  rq.lock_text = lock_text;
  rq.output_dir = layout_dir;
  rq.work_dir = *work;
  rq.tag = ref_name(o.tag.empty() ? spec_tag : o.tag);
  rq.source_date_epoch = epoch;
  rq.threads = o.threads;
  rq.compression = o.compression;
  rq.generator = std::string("gpuenv ") + GPUENV_VERSION;
  rq.allow_missing = o.allow_missing;
  rq.fetcher = network.get();
  rq.cache = store.get();
  rq.layer_memo_dir = cache + "/layers";
  fs::create_directories(rq.layer_memo_dir, ec);
  if (ctx.stderr_is_tty && ctx.err) rq.on_step = [&](const std::string& s) { *ctx.err << "gpuenv: " << s << "\n"; };
  if (!lock->base_image.empty()) {
    auto base = prepare_base_image(lock->base_image, o.lock.offline, ctx);
    if (!base) return report_error(base.error(), json, ctx);
    rq.base_layout_dir = base->layout_dir;
    rq.base_manifest_digest = base->manifest_digest;
  }
  auto built = images::build_image(rq);
  if (!built) {
    Error e = std::move(built).error();
    e.while_("building " + lock->spec_name);
    return report_error(e, json, ctx);
  }
  if (archive) {
    auto layout = images::OciLayout::open(layout_dir);
    if (!layout) return report_error(layout.error(), json, ctx);
    std::string repo_tag = o.tag.empty() ? spec_tag : o.tag;
    if (repo_tag.empty()) repo_tag = lock->spec_name + ":latest";
    else if (ref_name(repo_tag) == repo_tag) repo_tag += ":latest";
    auto st = images::write_image_archive(*layout, built->manifest, o.format == "docker-archive" ? images::ArchiveFormat::docker : images::ArchiveFormat::oci,
                                          repo_tag, output);
    if (!st) return report_error(st.error(), json, ctx);
  }
  std::optional<images::PushStats> pushed;
  if (!o.push.empty()) {
    auto ref = images::parse_image_reference(o.push);
    if (!ref) return report_error(ref.error(), json, ctx);
    gpuenv::HttpOptions ho;
    ho.ca_bundle = o.ca_bundle.empty() ? env_or(ctx, "GPUENV_CA_BUNDLE") : o.ca_bundle;
    auto http = gpuenv::make_curl_http_client(ho);
    Status problem = ok_status();
    images::RegistryOptions ro = registry_options(ctx, ref->registry, o.plain_http, &problem);
    if (!problem) return report_error(problem.error(), json, ctx);
    images::RegistryClient client(*http, ro);
    images::PushOptions po;
    po.ref_name = rq.tag;
    if (ctx.stderr_is_tty && ctx.err) *ctx.err << "gpuenv: pushing to " << ref->to_string() << "\n";
    auto st = client.push(layout_dir, *ref, po);
    if (!st) {
      Error e = std::move(st).error();
      e.while_("pushing to " + ref->to_string());
      return report_error(e, json, ctx);
    }
    pushed = *st;
  }
  std::uint64_t total = 0;
  for (const auto& l : built->layers) total += l.blob.size;
  if (json) {
    nlohmann::ordered_json j;
    j["schema"] = "gpuenv-build-result-v1";
    j["digest"] = built->manifest.digest;
    j["output"] = output;
    j["format"] = o.format;
    j["tag"] = rq.tag;
    j["lock_sha256"] = built->lock_sha256;
    j["config"] = built->config.digest;
    j["unchanged"] = built->unchanged;
    auto layers = nlohmann::ordered_json::array();
    for (const auto& l : built->layers)
      layers.push_back({{"name", l.name}, {"digest", l.blob.digest}, {"size", l.blob.size}, {"diff_id", l.diff_id},
                        {"uncompressed_size", l.uncompressed_size}, {"entries", l.entries}, {"reused", l.reused}, {"packages", l.packages}});
    j["layers"] = layers;
    j["size"] = total;
    j["notes"] = built->notes;
    if (pushed) {
      j["push"] = {{"reference", o.push}, {"digest", pushed->digest}, {"blobs_uploaded", pushed->blobs_uploaded}, {"blobs_present", pushed->blobs_present},
                   {"blobs_mounted", pushed->blobs_mounted}, {"bytes_uploaded", pushed->bytes_uploaded}};
    }
    *ctx.out << j.dump(2) << "\n";
  } else {
    if (built->unchanged) *ctx.out << "unchanged: " << output << " already holds this image\n";
    for (const auto& l : built->layers) {
      *ctx.out << "  layer " << std::left << std::setw(10) << l.name << std::right << std::setw(11) << human(l.blob.size);
      if (!built->unchanged) *ctx.out << " (" << human(l.uncompressed_size) << " unpacked, " << l.packages.size() << " packages" << (l.reused ? ", reused" : "") << ")";
      *ctx.out << "\n";
    }
    for (const auto& n : built->notes) *ctx.out << "note: " << n << "\n";
    *ctx.out << "wrote " << output << " (" << human(total) << ")\n";
    if (pushed) *ctx.out << "pushed " << o.push << " (" << pushed->blobs_uploaded << " blobs uploaded, " << pushed->blobs_present << " already there)\n";
    *ctx.out << built->manifest.digest << "\n";
  }
  return k_exit_ok;
}

}  // namespace gpuenv::cli
