#include "images/plan/image_config.hpp"


#include <set>

#include "base/time.hpp"
#include "base/digest.hpp"

namespace gpuenv::images {
namespace {

std::string env_name(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

std::map<std::string, std::string> gpuenv_labels(const resolver::Lock& lock, const std::string& lock_sha256, std::int64_t epoch) {
  std::map<std::string, std::string> labels = {{"org.opencontainers.image.title", lock.spec_name},
                                               {"org.opencontainers.image.created", format_rfc3339_utc(epoch)},
                                               {"dev.gpuenv.lock.sha256", lock_sha256}};
  // A label says what the image holds: no CUDA (Spec::wants_cuda), no CUDA labels; no floor, no driver label.
  if (!lock.driver_min.empty()) labels["dev.gpuenv.driver.min"] = lock.driver_min;
  std::string archs;
  for (const auto& a : lock.archs) archs += (archs.empty() ? "" : ",") + a;
  if (!archs.empty() && !lock.cuda.empty()) labels["dev.gpuenv.cuda.archs"] = archs;
  if (!lock.cuda.empty()) labels["dev.gpuenv.cuda.version"] = lock.cuda;
  if (!lock.cudnn.empty()) labels["dev.gpuenv.cudnn.version"] = lock.cudnn;
  if (!lock.python.empty()) labels["dev.gpuenv.python.version"] = lock.python;
  for (const auto& f : lock.frameworks) labels["dev.gpuenv.framework." + f.name] = f.version + (f.variant.empty() ? "" : "+" + f.variant);
  return labels;
}

std::vector<std::string> gpuenv_env(const resolver::Lock& lock) {
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "NVIDIA_VISIBLE_DEVICES=all",
                                  "NVIDIA_DRIVER_CAPABILITIES=compute,utility"};
  if (!lock.cuda.empty()) {
    // "12.4.1" -> "cuda>=12.4"
    const auto second_dot = lock.cuda.find('.', lock.cuda.find('.') + 1);
    env.push_back("NVIDIA_REQUIRE_CUDA=cuda>=" + lock.cuda.substr(0, second_dot));
  }
  return env;
}

/// The base's variables and labels stay unless gpuenv sets the same name.
void merge_base(ImageConfigPlan& plan, const resolver::Lock& lock, const BaseImageConfig& base) {
  std::set<std::string> ours;
  for (const auto& e : plan.env) ours.insert(env_name(e));
  std::vector<std::string> merged;
  for (const auto& e : base.env)
    if (!ours.count(env_name(e))) merged.push_back(e);
  merged.insert(merged.end(), plan.env.begin(), plan.env.end());
  plan.env = std::move(merged);
  for (const auto& [k, v] : base.labels) plan.labels.emplace(k, v);
  plan.labels["org.opencontainers.image.base.digest"] = base.manifest_digest;
  plan.labels["dev.gpuenv.base.image"] = lock.base_image;
}

}  // namespace

std::string_view to_string(Compression compression) { return compression == Compression::zstd ? "zstd" : "gzip"; }

std::optional<Compression> parse_compression(std::string_view name) {
  if (name == "gzip") return Compression::gzip;
  if (name == "zstd") return Compression::zstd;
  return std::nullopt;
}

std::string reuse_key(std::string_view lock_text, const ImageParameters& p) {
  std::string allowed;
  for (const auto& a : p.allow_missing) allowed += a + ",";
  return sha256_hex(std::string(lock_text) + '\0' + p.generator + '\0' + std::to_string(p.source_date_epoch) + '\0' + p.architecture + '\0' +
                    std::to_string(p.gzip_level) + '\0' + (p.compression == Compression::gzip ? std::string() : std::string(to_string(p.compression)) + std::to_string(p.zstd_level) + '\0') +
                    allowed);
}

ImageConfigPlan plan_image_config(const resolver::Lock& lock, const std::string& lock_sha256, std::int64_t epoch, const BaseImageConfig* base) {
  ImageConfigPlan plan;
  plan.env = gpuenv_env(lock);
  plan.labels = gpuenv_labels(lock, lock_sha256, epoch);
  // A slim base has no shell: without Python it names no command (the user's `run` command or the base's).
  if (!lock.python.empty()) plan.cmd = {"/usr/bin/python" + lock.python};
  else if (lock.base_variant != "slim") plan.cmd = {"/bin/sh"};
  if (base) merge_base(plan, lock, *base);
  return plan;
}

}  // namespace gpuenv::images
