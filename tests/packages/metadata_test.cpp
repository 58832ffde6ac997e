#include "packages/wheels/metadata.hpp"

#include <gtest/gtest.h>

#include <string>

using gpuenv::packages::CoreMetadata;
using gpuenv::packages::parse_core_metadata;
using gpuenv::packages::Pep440Version;

namespace {

// Shaped like the METADATA a current build backend writes for a wheel.
constexpr const char* k_metadata =
    "Metadata-Version: 2.1\n"
    "Name: Example_Pkg\n"
    "Version: 2.31.0\n"
    "Summary: Python HTTP for Humans.\n"
    "Home-page: https://example.com/example-pkg\n"
    "Classifier: Programming Language :: Python :: 3\n"
    "Classifier: License :: OSI Approved :: Apache Software License\n"
    "Requires-Python: >=3.7\n"
    "Description-Content-Type: text/markdown\n"
    "License-File: LICENSE\n"
    "Requires-Dist: charset-normalizer (<4,>=2)\n"
    "Requires-Dist: idna<4,>=2.5\n"
    "Requires-Dist: PySocks!=1.5.7,>=1.5.6 ; extra == 'socks'\n"
    "Requires-Dist: chardet<6,>=3.0.2 ; extra == \"use_chardet_on_py3\"\n"
    "Provides-Extra: socks\n"
    "Provides-Extra: use_chardet_on_py3\n"
    "\n"
    "# Example\n"
    "\n"
    "Body text: with a colon.\n";

CoreMetadata parse_ok(const std::string& text) {
  auto parsed = parse_core_metadata(text, "example_pkg-2.31.0.dist-info/METADATA");
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().to_string());
  return parsed.ok() ? *parsed : CoreMetadata{};
}

std::string error_id(const std::string& text) {
  auto parsed = parse_core_metadata(text, "METADATA");
  return parsed.ok() ? "ok" : parsed.error().id;
}

TEST(CoreMetadata, ReadsTheFieldsInstallingNeeds) {
  const auto md = parse_ok(k_metadata);
  EXPECT_EQ(md.metadata_version, "2.1");
  EXPECT_EQ(md.name, "Example_Pkg");
  EXPECT_EQ(md.version.str(), "2.31.0");
  EXPECT_EQ(md.requires_python_text, ">=3.7");
  EXPECT_TRUE(md.requires_python.contains(*Pep440Version::parse("3.11")));
  EXPECT_FALSE(md.requires_python.contains(*Pep440Version::parse("3.6")));
  ASSERT_EQ(md.requires_dist.size(), 4U);
  EXPECT_EQ(md.requires_dist[0].name, "charset-normalizer");
  EXPECT_EQ(md.requires_dist[0].specifier_text, "<4,>=2");
  EXPECT_EQ(md.requires_dist[2].name, "PySocks");
  ASSERT_TRUE(md.requires_dist[2].marker.has_value());
  EXPECT_EQ(md.requires_dist[2].marker->str(), "extra == \"socks\"");
  ASSERT_EQ(md.provides_extra.size(), 2U);
  EXPECT_EQ(md.provides_extra[1], "use_chardet_on_py3");
}

TEST(CoreMetadata, KeepsMultipleUseFieldsInOrder) {
  const auto md = parse_ok(k_metadata);
  std::vector<std::string> classifiers;
  for (const auto& f : md.fields) {
    if (f.name == "Classifier") classifiers.push_back(f.value);
  }
  ASSERT_EQ(classifiers.size(), 2U);
  EXPECT_EQ(classifiers[1], "License :: OSI Approved :: Apache Software License");
  EXPECT_EQ(md.fields.front().line, 1);
  EXPECT_EQ(md.fields.back().name, "Provides-Extra");
  EXPECT_EQ(md.fields.back().line, 16);
}

TEST(CoreMetadata, TakesTheBodyAsDescription) {
  const auto md = parse_ok(k_metadata);
  EXPECT_EQ(md.description, "# Example\n\nBody text: with a colon.\n");
}

TEST(CoreMetadata, UnfoldsContinuationLines) {
  const auto md = parse_ok(
      "Metadata-Version: 1.1\r\n"
      "Name: legacy\r\n"
      "Version: 1.0\r\n"
      "Requires-Dist: foo\r\n"
      "   >=1.0 ; python_version >= '3'\r\n"
      "Description: first line\r\n"
      "        |  second line\r\n"
      "        \r\n"
      "        |  after a blank\r\n");
  ASSERT_EQ(md.requires_dist.size(), 1U);
  EXPECT_EQ(md.requires_dist[0].name, "foo");
  EXPECT_EQ(md.requires_dist[0].specifier_text, ">=1.0");
  EXPECT_EQ(md.description, "first line\n        |  second line\n        \n        |  after a blank");
  EXPECT_TRUE(md.requires_python.empty());
}

TEST(CoreMetadata, MatchesFieldNamesWithoutRegardToCaseAndSkipsABom) {
  const auto md = parse_ok("\xEF\xBB\xBFmetadata-version: 2.3\nNAME: x\nversion:1.0.POST1\nrequires-dist: y\n");
  EXPECT_EQ(md.name, "x");
  EXPECT_EQ(md.version.str(), "1.0.post1");
  EXPECT_EQ(md.requires_dist.size(), 1U);
}

TEST(CoreMetadata, ErrorsNameTheLine) {
  auto parsed = parse_core_metadata("Name: a\nVersion: 1.0\nRequires-Dist: b >= \n", "a-1.0.dist-info/METADATA");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().id, "metadata.invalid_field");
  EXPECT_EQ(parsed.error().where, "a-1.0.dist-info/METADATA:3");
  EXPECT_NE(parsed.error().message.find("line 3"), std::string::npos);
  EXPECT_FALSE(parsed.error().hint.empty());

  auto garbage = parse_core_metadata("Name: a\nVersion: 1.0\nthis is not a header\n", "PKG-INFO");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error().id, "metadata.syntax");
  EXPECT_EQ(garbage.error().where, "PKG-INFO:3");
  EXPECT_NE(garbage.error().message.find("this is not a header"), std::string::npos);
}

TEST(CoreMetadata, RejectsMissingOrRepeatedIdentity) {
  EXPECT_EQ(error_id("Version: 1.0\n"), "metadata.missing_field");
  EXPECT_EQ(error_id("Name: a\n\nVersion: 1.0\n"), "metadata.missing_field");  // after the blank line is body
  EXPECT_EQ(error_id("Name: a\nName: b\nVersion: 1.0\n"), "metadata.duplicate_field");
  EXPECT_EQ(error_id("Name: a\nVersion: 1.0\nRequires-Python: >=3\nRequires-Python: <4\n"),
            "metadata.duplicate_field");
  EXPECT_EQ(error_id(" continued: x\nName: a\nVersion: 1\n"), "metadata.syntax");
}

TEST(CoreMetadata, RejectsInvalidValues) {
  EXPECT_EQ(error_id("Name: -a\nVersion: 1.0\n"), "metadata.invalid_field");
  EXPECT_EQ(error_id("Name: a\nVersion: one\n"), "metadata.invalid_field");
  EXPECT_EQ(error_id("Name: a\nVersion: 1\nRequires-Python: >=3.x\n"), "metadata.invalid_field");
  EXPECT_EQ(error_id("Metadata-Version: 3.0\nName: a\nVersion: 1\n"), "metadata.unsupported_version");
  EXPECT_EQ(error_id("Metadata-Version: 10.0\nName: a\nVersion: 1\n"), "metadata.unsupported_version");
  EXPECT_EQ(error_id("Metadata-Version: 2.4\nName: a\nVersion: 1\n"), "ok");
}

}  // namespace
