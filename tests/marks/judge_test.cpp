// Which marks count for an image and a host, and why the others do not: each negative case with its own reason.
#include "marks/judge.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "fakes/sample_mark.hpp"

namespace {

using namespace gpuenv::marks;

const gpuenv::Digest k_judged_image = *gpuenv::Digest::from_hex(std::string(64, 'c'));
const gpuenv::Digest k_other = *gpuenv::Digest::from_hex(std::string(64, 'd'));
constexpr std::int64_t k_now = 1796200000;  // a day after the sample was verified

MarkPredicate sample_judged() { return gpuenv::testing::sample_predicate(); }

MarkWanted wanted() {
  MarkWanted w;
  w.image = k_judged_image;
  w.gpu_product = "NVIDIA H200";  // NVML's spelling; the record keeps the label's
  w.driver = "580.82.07";
  w.cc_mode = "off";
  w.level = "standard";
  w.now = k_now;
  return w;
}

Key new_key() {
  auto k = generate_key();
  EXPECT_TRUE(k.ok());
  return std::move(*k);
}

struct Keys {
  Key signer = new_key();
  Key stranger = new_key();
};

std::string record(const Key& key, const std::function<void(MarkPredicate&)>& edit = {}, const gpuenv::Digest& image = k_judged_image) {
  MarkPredicate p = sample_judged();
  if (edit) edit(p);
  return *sign_envelope(render_statement("registry.example/ml/torch", image, p), k_in_toto_payload_type, key);
}

TEST(JudgeMark, AGoodRecordCountsUnderItsKey) {
  Keys k;
  const auto v = judge_mark(record(k.signer), {&k.stranger, &k.signer}, wanted(), "layer 0");
  EXPECT_TRUE(v.counts) << ::testing::PrintToString(v.reasons);
  EXPECT_EQ(v.key, 1);
  ASSERT_TRUE(v.statement);
  EXPECT_EQ(v.statement->predicate.gpu_product, "NVIDIA-H200");
}

TEST(JudgeMark, EachReasonARecordDoesNotCountIsNamed) {
  Keys k;
  struct Case {
    std::string name, envelope, reason;
    std::function<void(MarkWanted&)> want = {};
  };
  std::string flipped = record(k.signer);
  flipped[flipped.find("\"payload\":\"") + 20] ^= 1;  // one payload byte (in base64) changed
  const std::vector<Case> cases = {
      {"another key", record(k.stranger), "no given key verifies"},
      {"a changed payload", flipped, ""},
      {"another image", record(k.signer, {}, k_other), "another image"},
      {"failed", record(k.signer, [](auto& p) { p.passed = false; }), "FAILED"},
      {"expired", record(k.signer, [](auto& p) { p.not_after = k_now - 1; }), "expired"},
      {"replay", record(k.signer, [](auto& p) { p.backend = "replay"; }), "replay"},
      {"another GPU", record(k.signer, [](auto& p) { p.gpu_product = "NVIDIA-L4"; }), "validated on NVIDIA-L4, not NVIDIA-H200"},
      {"a lower level", record(k.signer, [](auto& p) { p.level = "quick"; }), "level quick is below standard"},
      {"another branch", record(k.signer, [](auto& p) { p.driver_version = "575.57.08"; }), "does not cover 580.82.07"},
      {"a newer driver than the host's", record(k.signer, [](auto& p) { p.driver_version = "580.95.05"; }), "does not cover"},
      {"CC on", record(k.signer, [](auto& p) { p.cc_mode = "on"; }), "confidential computing was on"},
      {"too old", record(k.signer), "more than 3600 s ago", [](auto& w) { w.max_age_s = 3600; }},
      {"not JSON", "{\"payload\":", "not a JSON object"},
      {"not an envelope", "{\"layers\":[]}", "payloadType or payload is missing"},
  };
  for (const Case& c : cases) {
    MarkWanted w = wanted();
    if (c.want) c.want(w);
    const auto v = judge_mark(c.envelope, {&k.signer}, w, "layer 3");
    EXPECT_FALSE(v.counts) << c.name;
    ASSERT_FALSE(v.reasons.empty()) << c.name;
    if (!c.reason.empty()) EXPECT_NE(::testing::PrintToString(v.reasons).find(c.reason), std::string::npos) << c.name << ": " << ::testing::PrintToString(v.reasons);
  }
  // Asked for CC on, a record counts only when it shows its GPUs' attestation passed.
  MarkWanted cc = wanted();
  cc.cc_mode = "on";
  const auto unattested = judge_mark(record(k.signer, [](auto& p) { p.cc_mode = "on"; }), {&k.signer}, cc, "l");
  EXPECT_FALSE(unattested.counts);
  EXPECT_NE(::testing::PrintToString(unattested.reasons).find("attestation was not verified"), std::string::npos);
  const auto warned = judge_mark(record(k.signer, [](auto& p) {
                                   p.cc_mode = "on";
                                   p.checks.push_back({"cc_attestation", "warn", {{"attested", 0}}});
                                 }),
                                 {&k.signer}, cc, "l");
  EXPECT_NE(::testing::PrintToString(warned.reasons).find("attestation did not pass (cc_attestation warn)"), std::string::npos);
  EXPECT_TRUE(judge_mark(record(k.signer, [](auto& p) {
                           p.cc_mode = "on";
                           p.checks.push_back({"cc_attestation", "pass", {{"attested", 1}, {"claim_measurements", 1}}});
                         }),
                         {&k.signer}, cc, "l")
                  .counts);
  // A replay mark counts only when asked to.
  MarkWanted w = wanted();
  w.allow_replay = true;
  EXPECT_TRUE(judge_mark(record(k.signer, [](auto& p) { p.backend = "replay"; }), {&k.signer}, w, "l").counts);
}

TEST(JudgeMark, TheDriverRuleIsTheSameVersionOrTheSameBranchAndNotOlder) {
  EXPECT_TRUE(driver_covers("580.65.06", "580.65.06"));
  EXPECT_TRUE(driver_covers("580.65.06", "580.82.07"));
  EXPECT_TRUE(driver_covers("535.104.05", "535.104.12"));
  EXPECT_FALSE(driver_covers("580.65.06", "580.65.05"));
  EXPECT_FALSE(driver_covers("580.65.06", "590.44.01"));
  EXPECT_FALSE(driver_covers("580.65.06", "575.57.08"));
  EXPECT_FALSE(driver_covers("580.65.06", "580.x"));
  EXPECT_FALSE(driver_covers("", "580.65.06"));
  EXPECT_EQ(gpu_product_label("NVIDIA H200"), "NVIDIA-H200");
  EXPECT_EQ(gpu_product_label("NVIDIA A100-SXM4-40GB"), "NVIDIA-A100-SXM4-40GB");
  EXPECT_EQ(gpu_product_label("Tesla T4 (rev a)"), "Tesla-T4-rev-a");
}

}  // namespace
