// The mark's in-toto statement: what cosign's protojson reader accepts (four top-level fields), read back whole.
#include "marks/statement.hpp"

#include "images/plan/image_config.hpp"
#include "fakes/sample_mark.hpp"
#include "base/time.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

namespace {

using namespace gpuenv::marks;
using gpuenv::format_rfc3339_utc;
using gpuenv::parse_rfc3339_utc;

MarkPredicate sample() { return gpuenv::testing::sample_predicate(); }

const gpuenv::Digest k_image = *gpuenv::Digest::from_hex(std::string(64, 'c'));

TEST(MarkStatement, IsAnInTotoStatementWithFourFieldsThatReadsBackWhole) {
  const std::string text = render_statement("registry.example/ml/torch", k_image, sample());
  const auto j = nlohmann::json::parse(text);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"_type", "predicate", "predicateType", "subject"}));
  EXPECT_EQ(j["_type"], "https://in-toto.io/Statement/v1");
  EXPECT_EQ(j["subject"][0]["digest"]["sha256"], std::string(64, 'c'));
  EXPECT_EQ(j["predicate"]["result"], "PASSED");
  EXPECT_EQ(j["predicate"]["gpu"]["product"], "NVIDIA-H200");
  EXPECT_EQ(j["predicate"]["passedTests"], nlohmann::json::array({"gemm.bf16"}));
  EXPECT_EQ(j["predicate"]["warnedTests"], nlohmann::json::array({"hbm.bandwidth"}));
  EXPECT_EQ(j["predicate"]["failedTests"], nlohmann::json::array());
  EXPECT_EQ(j["predicate"]["timeVerified"], "2026-12-01T12:00:00Z");
  EXPECT_EQ(j["predicate"]["report"]["mediaType"], "application/vnd.gpuenv.validation.v1+json");
  EXPECT_EQ(render_statement("registry.example/ml/torch", k_image, sample()), text) << "same input, same bytes";
  auto back = parse_statement(text, "s");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->subject, k_image);
  EXPECT_EQ(back->subject_name, "registry.example/ml/torch");
  EXPECT_EQ(back->predicate, sample());
}

TEST(MarkStatement, WhatIsNotAMarkOfThisVersionIsRefusedSayingWhy) {
  const std::string good = render_statement("x", k_image, sample());
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(good);
    edit(j);
    return parse_statement(j.dump(), "layer 2");
  };
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {[](auto& j) { j["extra"] = 1; }, "outside in-toto's four"},
           {[](auto& j) { j["_type"] = "https://in-toto.io/Statement/v0.1"; }, "not an in-toto Statement v1"},
           {[](auto& j) { j["predicateType"] = "https://slsa.dev/provenance/v1"; }, "not a gpuenv validation mark"},
           {[](auto& j) { j["subject"] = nlohmann::json::array(); }, "names no image"},
           {[](auto& j) { j["subject"][0]["digest"]["sha256"] = "../../etc"; }, "names no image"},
           {[](auto& j) { j["predicate"]["result"] = "MAYBE"; }, "neither PASSED nor FAILED"},
           {[](auto& j) { j["predicate"]["gpu"]["product"] = 7; }, "predicate.gpu.product"},
           {[](auto& j) { j["predicate"]["notAfter"] = "2026-02-31T00:00:00Z"; }, "RFC 3339"},
           {[](auto& j) { j["predicate"]["timeVerified"] = "yesterday"; }, "RFC 3339"},
           {[](auto& j) { j["predicate"]["checks"] = "all"; }, "not a list"},
           // Issue 33 review (the mark_fuzz crash): a field of another JSON type is refused, never thrown.
           {[](auto& j) { j["_type"] = 5; }, "not an in-toto Statement v1"},
           {[](auto& j) { j["predicateType"] = nlohmann::json::array(); }, "not a gpuenv validation mark"},
       }) {
    auto r = with(c.edit);
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.error().id, "mark.bad_statement");
    EXPECT_EQ(r.error().where, "layer 2");
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(parse_statement("{", "x").ok());
}

TEST(MarkStatement, TimesAreRfc3339Utc) {
  EXPECT_EQ(gpuenv::format_rfc3339_utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(parse_rfc3339_utc("2026-12-01T12:00:00Z"), std::optional<std::int64_t>(1796126400));
  EXPECT_FALSE(parse_rfc3339_utc("2026-12-01T12:00:00+01:00"));
  EXPECT_FALSE(parse_rfc3339_utc("2026-13-01T12:00:00Z"));
}

}  // namespace
