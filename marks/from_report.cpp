#include "marks/from_report.hpp"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "marks/judge.hpp"
#include "validate/report.hpp"

namespace gpuenv::marks {
namespace {

using nlohmann::json;

Error bad_report(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::usage, "mark.bad_report", what, where,
                    "give the JSON report of one validation run, as `gpuenv validate --json` prints it");
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string text_of(const json* p) { return p != nullptr && p->is_string() ? p->get<std::string>() : std::string(); }

/// "0x2335" (the report's device id) → "0x233510de" (NVML's pciDeviceId: device id, then NVIDIA's vendor id).
std::string pci_device_id(const std::string& report_id) {
  if (report_id.size() == 6 && report_id.rfind("0x", 0) == 0) return report_id + "10de";
  return report_id;
}

}  // namespace

Result<ReportFacts> read_report(std::string_view bytes, const std::string& where) {
  const json j = json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad_report("the report is not a JSON object", where);
  if (text_of(member(j, "schema")) != validate::k_report_schema)
    return bad_report("the report's schema is '" + text_of(member(j, "schema")) + "', not " + validate::k_report_schema, where);
  ReportFacts out;
  MarkPredicate& p = out.predicate;
  out.status = text_of(member(j, "status"));
  const json* code = member(j, "exit_code");
  if (out.status.empty() || code == nullptr || !code->is_number_integer()) return bad_report("the report lacks its status or exit_code", where);
  out.exit_code = code->get<int>();
  p.passed = out.exit_code == 0;
  p.level = text_of(member(j, "level"));
  p.backend = text_of(member(j, "backend"));
  if (p.level.empty() || p.backend.empty()) return bad_report("the report lacks its level or backend", where);
  const std::string started = text_of(member(j, "started_at"));
  const auto t = parse_rfc3339_utc(started);
  if (!t) return bad_report("the report's started_at '" + started + "' is not an RFC 3339 UTC time", where);
  p.time_verified = *t;

  const json* driver = member(j, "driver");
  if (driver == nullptr || !driver->is_object()) return bad_report("the report has no driver", where);
  p.driver_version = text_of(member(*driver, "version"));
  if (const json* cuda = member(*driver, "cuda_driver_version"); cuda != nullptr && cuda->is_number_integer() && cuda->get<int>() > 0) {
    const int v = cuda->get<int>();
    p.cuda_driver_version = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }
  p.cc_mode = text_of(member(*driver, "cc_state"));
  if (p.cc_mode.empty()) p.cc_mode = "unknown";

  const json* gpus = member(j, "gpus");
  if (gpus == nullptr || !gpus->is_array()) return bad_report("the report has no gpus list", where);
  for (const auto& g : *gpus) {
    const std::string name = text_of(member(g, "name"));
    if (name.empty()) return bad_report("a GPU of the report has no name", where);
    if (p.gpu_count > 0 && name != text_of(member((*gpus)[0], "name")))
      return bad_report("the report covers GPUs of more than one model (" + text_of(member((*gpus)[0], "name")) + ", " + name +
                     "); a mark covers one: validate each model with --gpus",
                 where);
    ++p.gpu_count;
  }
  if (p.gpu_count > 0) {
    p.gpu_product = gpu_product_label(text_of(member((*gpus)[0], "name")));
    p.gpu_pci_device_id = pci_device_id(text_of(member((*gpus)[0], "pci_device_id")));
  }

  if (const json* image = member(j, "image"); image != nullptr && image->is_object()) {
    out.image = text_of(member(*image, "ref"));
    if (auto d = Digest::parse(text_of(member(*image, "digest")))) out.image_digest = *d;
  }
  if (const json* lock = member(j, "lock"); lock != nullptr && lock->is_object()) p.lock_sha256 = text_of(member(*lock, "sha256"));

  const json* checks = member(j, "checks");
  if (checks == nullptr || !checks->is_array()) return bad_report("the report has no checks list", where);
  for (const auto& c : *checks) {
    MarkCheck mc{text_of(member(c, "key")), text_of(member(c, "status")), {}};
    if (mc.id.empty() || mc.status.empty()) return bad_report("a check of the report lacks its key or status", where);
    // The key figures: each metric's lowest value over the GPUs (the figure every GPU reached).
    if (const json* results = member(c, "results"); results != nullptr && results->is_array())
      for (const auto& r : *results)
        if (const json* metrics = member(r, "metrics"); metrics != nullptr && metrics->is_array())
          for (const auto& m : *metrics) {
            const std::string name = text_of(member(m, "name"));
            const json* v = member(m, "value");
            if (name.empty() || v == nullptr || !v->is_number() || !std::isfinite(v->get<double>())) continue;
            auto [it, fresh] = mc.metrics.emplace(name, v->get<double>());
            if (!fresh) it->second = std::min(it->second, v->get<double>());
          }
    p.checks.push_back(std::move(mc));
  }
  p.report_sha256 = Digest::of(bytes).hex();
  return out;
}

Result<MarkPredicate> predicate_for(const ReportFacts& facts, const Digest& image, const MarkRules& rules, const std::string& where) {
  if (facts.exit_code != 0)
    return make_error(ErrorKind::usage, "mark.not_passed", "the validation did not pass (status " + facts.status + ", exit code " + std::to_string(facts.exit_code) + ")",
                      where, "only a passing validation marks an image good; fix what failed and validate again");
  if (facts.predicate.backend == "replay" && !rules.allow_replay)
    return make_error(ErrorKind::usage, "mark.replay", "the report was made by the replay backend, from recorded GPU answers", where,
                      "validate on the real GPU; --allow-replay marks it anyway, as `replay`, which `gpuenv verify` refuses unless asked");
  if (facts.predicate.gpu_count == 0)
    return make_error(ErrorKind::usage, "mark.no_gpu", "the report validated no GPU", where, "validate on a machine with the GPUs the image is for");
  if (!facts.image_digest)
    return make_error(ErrorKind::usage, "mark.no_image", "the report validated no image", where,
                      "validate the image itself: gpuenv validate --image DIR --json > report.json");
  if (*facts.image_digest != image)
    return make_error(ErrorKind::usage, "mark.other_image", "the report is for image " + facts.image_digest->str() + ", not " + image.str(), where,
                      "mark the image the report validated, or validate this one");
  MarkPredicate p = facts.predicate;
  p.verifier_version = rules.verifier_version;
  p.not_after = p.time_verified + rules.valid_for_s;
  return p;
}

}  // namespace gpuenv::marks
