// In-toto Statements v1 of any predicate (marks/in_toto.hpp): what gpuenv writes reads back, with in-toto's field
// order and the predicate's own; what is not a statement, or names no image by sha256, is refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "marks/in_toto.hpp"

namespace {

using gpuenv::Digest;
namespace marks = gpuenv::marks;

TEST(InToto, AStatementReadsBackWithItsSubjectTypeAndPredicate) {
  const Digest image = Digest::of("image");
  const auto text = marks::render_in_toto("registry.test/ml/torch", image, marks::k_slsa_predicate_type, R"({"z":1,"a":{"b":2}})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, R"({"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"registry.test/ml/torch","digest":{"sha256":")" + image.hex() +
                       R"("}}],"predicateType":"https://slsa.dev/provenance/v1","predicate":{"z":1,"a":{"b":2}}})");
  const auto back = marks::parse_in_toto(*text, "here");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->predicate_type, marks::k_slsa_predicate_type);
  ASSERT_EQ(back->subjects.size(), 1u);
  EXPECT_EQ(back->subjects[0].name, "registry.test/ml/torch");
  EXPECT_TRUE(back->names(image));
  EXPECT_FALSE(back->names(Digest::of("another")));
  EXPECT_EQ(back->predicate, R"({"z":1,"a":{"b":2}})");
}

TEST(InToto, APredicateThatIsNotAnObjectIsNotRendered) {
  EXPECT_FALSE(marks::render_in_toto("x", Digest::of("i"), marks::k_cyclonedx_predicate_type, "[1]").ok());
  EXPECT_FALSE(marks::render_in_toto("x", Digest::of("i"), marks::k_cyclonedx_predicate_type, "{").ok());
}

TEST(InToto, WhatIsNotAStatementIsRefusedByName) {
  const std::string sha = Digest::of("i").hex();
  const std::string subject = R"("subject":[{"name":"x","digest":{"sha256":")" + sha + R"("}}])";
  const std::vector<std::string> bads = {std::string("not json"), std::string("[]"),
                                R"({"_type":"https://in-toto.io/Statement/v0.1",)" + subject + R"(,"predicateType":"t","predicate":{}})",
                                R"({"_type":"https://in-toto.io/Statement/v1",)" + subject + R"(,"predicate":{}})",
                                std::string(R"({"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha512":"ab"}}],"predicateType":"t","predicate":{}})"),
                                std::string(R"({"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"XYZ"}}],"predicateType":"t","predicate":{}})"),
                                R"({"_type":"https://in-toto.io/Statement/v1",)" + subject + R"(,"predicateType":"t","predicate":[]})",
                                R"({"_type":"https://in-toto.io/Statement/v1",)" + subject + R"(,"predicateType":"t","predicate":{},"extra":1})"};
  for (const std::string& bad : bads) {
    const auto r = marks::parse_in_toto(bad, "layout:sha256-x.att");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().id, "attest.bad_statement") << bad;
    EXPECT_EQ(r.error().where, "layout:sha256-x.att");
  }
}

}  // namespace
