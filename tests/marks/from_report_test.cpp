// From a validation report to a mark's predicate: what is read, and every refusal.
#include "marks/from_report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "validate/report.hpp"

namespace {

using namespace gpuenv::marks;
using nlohmann::json;

const std::string k_image_hex(64, 'c');

/// A passing quick report of one image on two H200s, as `validate --json` writes it (the fields a mark reads).
json passing_report() {
  return json::parse(R"({
    "schema": "gpuenv-validation-v1", "status": "pass", "backend": "nvml+cuda", "level": "quick",
    "started_at": "2026-12-01T12:00:00Z", "duration_ms": 1200, "exit_code": 0,
    "driver": {"loaded": true, "version": "580.65.06", "cuda_driver_version": 13000, "cc_state": "off"},
    "gpus": [{"index": 0, "name": "NVIDIA H200", "pci_device_id": "0x2335"}, {"index": 1, "name": "NVIDIA H200", "pci_device_id": "0x2335"}],
    "image": {"ref": "out/torch", "digest": "sha256:)" + k_image_hex + R"("},
    "lock": {"sha256": ")" + std::string(64, 'a') + R"("},
    "checks": [
      {"key": "gemm_bf16", "status": "pass", "results": [
        {"gpu": 0, "status": "pass", "metrics": [{"name": "tflops", "value": 712.5, "unit": "TFLOPS"}]},
        {"gpu": 1, "status": "pass", "metrics": [{"name": "tflops", "value": 698.0, "unit": "TFLOPS"}, {"name": "bad", "value": null, "unit": ""}]}]},
      {"key": "hbm_bandwidth", "status": "warn", "results": []},
      {"key": "cc_mode", "status": "skip", "results": []}]})");
}

TEST(FromReport, ReadsWhatAMarkSaysAndTheReportsOwnDigest) {
  const std::string bytes = passing_report().dump(2) + "\n";
  auto facts = read_report(bytes, "report.json");
  ASSERT_TRUE(facts.ok()) << facts.error().to_string();
  const MarkPredicate& p = facts->predicate;
  EXPECT_TRUE(p.passed);
  EXPECT_EQ(p.level, "quick");
  EXPECT_EQ(p.backend, "nvml+cuda");
  EXPECT_EQ(p.gpu_product, "NVIDIA-H200");
  EXPECT_EQ(p.gpu_pci_device_id, "0x233510de");
  EXPECT_EQ(p.gpu_count, 2);
  EXPECT_EQ(p.driver_version, "580.65.06");
  EXPECT_EQ(p.cuda_driver_version, "13.0");
  EXPECT_EQ(p.cc_mode, "off");
  EXPECT_EQ(p.lock_sha256, std::string(64, 'a'));
  EXPECT_EQ(p.report_sha256, gpuenv::Digest::of(bytes).hex()) << "the digest of the bytes as given";
  EXPECT_EQ(p.time_verified, 1796126400);
  ASSERT_EQ(p.checks.size(), 3u);
  EXPECT_EQ(p.checks[0].metrics.at("tflops"), 698.0) << "the figure every GPU reached";
  EXPECT_EQ(p.checks[0].metrics.count("bad"), 0u);
  EXPECT_EQ(p.checks[1].status, "warn");
  EXPECT_EQ(facts->image_digest->hex(), k_image_hex);

  auto pred = predicate_for(*facts, *facts->image_digest, {false, 86400, "1.2.3"}, "report.json");
  ASSERT_TRUE(pred.ok()) << pred.error().to_string();
  EXPECT_EQ(pred->not_after, p.time_verified + 86400);
  EXPECT_EQ(pred->verifier_version, "1.2.3");
}

TEST(FromReport, EachRefusalHasItsOwnError) {
  const auto image = *gpuenv::Digest::from_hex(k_image_hex);
  auto refused = [&](json j, bool allow_replay = false, std::optional<gpuenv::Digest> other = std::nullopt) {
    auto facts = read_report(j.dump(), "r");
    if (!facts) return facts.error().id;
    auto p = predicate_for(*facts, other.value_or(image), {allow_replay, 86400, "x"}, "r");
    return p ? std::string("(marked)") : p.error().id;
  };
  json j = passing_report();
  j["exit_code"] = 1;
  j["status"] = "fail";
  EXPECT_EQ(refused(j), "mark.not_passed");
  j = passing_report();
  j["backend"] = "replay";
  EXPECT_EQ(refused(j), "mark.replay");
  EXPECT_EQ(refused(j, true), "(marked)");
  j = passing_report();
  j["image"] = nullptr;
  EXPECT_EQ(refused(j), "mark.no_image");
  EXPECT_EQ(refused(passing_report(), false, *gpuenv::Digest::from_hex(std::string(64, 'd'))), "mark.other_image");
  j = passing_report();
  j["gpus"] = json::array();
  EXPECT_EQ(refused(j), "mark.no_gpu");
  j = passing_report();
  j["gpus"][1]["name"] = "NVIDIA L4";
  EXPECT_EQ(refused(j), "mark.bad_report") << "two models";
  j = passing_report();
  j["schema"] = "gpuenv-validation-v0";
  EXPECT_EQ(refused(j), "mark.bad_report");
  j = passing_report();
  j["started_at"] = "yesterday";
  EXPECT_EQ(refused(j), "mark.bad_report");
  j = passing_report();
  j["checks"][0]["key"] = 5;
  EXPECT_EQ(refused(j), "mark.bad_report");
  EXPECT_EQ(read_report("[]", "r").error().id, "mark.bad_report");
  EXPECT_EQ(read_report("{not json", "r").error().id, "mark.bad_report");
}

}  // namespace
