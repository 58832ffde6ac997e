#include "packages/wheels/pep440.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

using gpuenv::packages::Pep440Specifier;
using gpuenv::packages::Pep440SpecifierSet;
using gpuenv::packages::Pep440Version;
using gpuenv::packages::PreKind;

namespace {

Pep440Version v(const char* s) {
  auto parsed = Pep440Version::parse(s);
  EXPECT_TRUE(parsed.ok()) << s;
  return parsed.ok() ? *parsed : Pep440Version{};
}

bool in(const char* spec, const char* version, std::optional<bool> prereleases = std::nullopt) {
  auto set = Pep440SpecifierSet::parse(spec);
  EXPECT_TRUE(set.ok()) << spec;
  return set.ok() && set->contains(v(version), prereleases);
}

std::string norm(const char* s) { return v(s).str(); }

// Splits one corpus line on tabs, keeping empty fields and surrounding spaces.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

std::vector<std::vector<std::string>> corpus(const std::string& name) {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/tests/data/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    rows.push_back(fields(line));
  }
  return rows;
}

TEST(Pep440Version, NormalizesAlternativeSpellings) {
  EXPECT_EQ(norm("1.0-alpha1"), "1.0a1");
  EXPECT_EQ(norm("1.0.post"), "1.0.post0");
  EXPECT_EQ(norm("1.0-1"), "1.0.post1");
  EXPECT_EQ(norm("1.0_rev_2"), "1.0.post2");
  EXPECT_EQ(norm("1.0c1"), "1.0rc1");
  EXPECT_EQ(norm("1.0-preview.3"), "1.0rc3");
  EXPECT_EQ(norm("V1.0.DEV"), "1.0.dev0");
  EXPECT_EQ(norm("  01.002  "), "1.2");
  EXPECT_EQ(norm("0!1.0"), "1.0");
  EXPECT_EQ(norm("1.0+Ubuntu-01_x"), "1.0+ubuntu.1.x");
  EXPECT_EQ(norm("1.0a-1"), "1.0a1");  // the separator goes to the pre-release number, as packaging's regex does
  EXPECT_EQ(norm("1.0prer"), "1.0rc0.post0");
}

TEST(Pep440Version, RejectsWhatPackagingRejects) {
  for (const char* bad : {"", "1.", ".1", "1..0", "1.0+", "1.0+a..b", "1.0-", "1.0a1.", "1.*", "a1", "1.0 a1",
                          "1.0+local+x", "1!", "1.0é", "1.0.devx"}) {
    EXPECT_FALSE(Pep440Version::parse(bad).ok()) << bad;
  }
}

TEST(Pep440Version, OrdersDevBeforePreBeforeReleaseBeforePost) {
  EXPECT_LT(v("1.0.dev0"), v("1.0a0"));
  EXPECT_LT(v("1.0a0"), v("1.0a1.dev0"));  // a pre-release's dev comes after the previous pre-release
  EXPECT_LT(v("1.0a1.dev0"), v("1.0a1"));
  EXPECT_LT(v("1.0a1"), v("1.0b0"));
  EXPECT_LT(v("1.0b0"), v("1.0rc0"));
  EXPECT_LT(v("1.0rc0"), v("1.0"));
  EXPECT_LT(v("1.0"), v("1.0+local"));
  EXPECT_LT(v("1.0+local"), v("1.0.post0.dev0"));
  EXPECT_LT(v("1.0.post0.dev0"), v("1.0.post0"));
  EXPECT_LT(v("1.0.post0"), v("1.1.dev0"));
  EXPECT_LT(v("1.1"), v("1!0.1"));
}

TEST(Pep440Version, IgnoresTrailingZerosAndComparesHugeNumbersExactly) {
  EXPECT_EQ(v("1.0"), v("1.0.0.0"));
  EXPECT_EQ(v("1.0+abc.01"), v("1+ABC-1"));
  EXPECT_LT(v("18446744073709551616"), v("18446744073709551617"));
  EXPECT_LT(v("9"), v("10"));
}

TEST(Pep440Version, LocalLabelsSortTextBeforeNumbers) {
  EXPECT_LT(v("1.0+abc"), v("1.0+1"));
  EXPECT_LT(v("1.0+1"), v("1.0+1.abc"));
  EXPECT_LT(v("1.0+2"), v("1.0+10"));
  EXPECT_LT(v("1.0+abc"), v("1.0+abd"));
}

TEST(Pep440Version, ExposesSegments) {
  const Pep440Version x = v("2!1.2.3rc4.post5.dev6+cu121.7");
  EXPECT_EQ(x.epoch(), "2");
  EXPECT_EQ(x.release(), (std::vector<std::string>{"1", "2", "3"}));
  ASSERT_TRUE(x.pre());
  EXPECT_EQ(x.pre()->kind, PreKind::rc);
  EXPECT_EQ(*x.post(), "5");
  EXPECT_EQ(*x.dev(), "6");
  EXPECT_EQ(x.local(), "cu121.7");
  EXPECT_EQ(x.public_str(), "2!1.2.3rc4.post5.dev6");
  EXPECT_EQ(x.base_str(), "2!1.2.3");
  EXPECT_TRUE(x.is_prerelease());
  EXPECT_TRUE(x.is_postrelease());
  EXPECT_EQ(v("1.0.0").canonical_str(), "1");
}

TEST(Pep440Specifier, ParsesEachOperatorAndRejectsMisplacedForms) {
  for (const char* good : {"==1.0", "!=1.0.*", "<=1.0", ">= 1.0", "<1", ">1", "~=1.0", "===foo", "==1.0+local",
                           " == v1.0-alpha1 "}) {
    EXPECT_TRUE(Pep440Specifier::parse(good).ok()) << good;
  }
  for (const char* bad : {"1.0", "=1.0", "~=1", "~=1.0.*", ">=1.0.*", "<1.0+local", "==1.0.*+x", "== 1.0 2",
                          "=== a b", "==", "=>1.0"}) {
    EXPECT_FALSE(Pep440Specifier::parse(bad).ok()) << bad;
  }
}

TEST(Pep440SpecifierSet, ExcludesPreReleasesUnlessAskedOrNamed) {
  EXPECT_FALSE(in(">=1.0", "2.0a1"));
  EXPECT_TRUE(in(">=1.0", "2.0a1", true));
  EXPECT_TRUE(in(">=1.0a1", "2.0a1"));  // a clause naming a pre-release admits them
  EXPECT_FALSE(in("", "1.0.dev0"));
  EXPECT_TRUE(in("", "1.0"));
  EXPECT_FALSE(in(">=1.0a1", "2.0a1", false));
}

TEST(Pep440SpecifierSet, LessAndGreaterSkipVariantsOfTheBoundary) {
  EXPECT_FALSE(in("<1.0", "1.0rc1", true));
  EXPECT_FALSE(in("<1.0rc2", "1.0rc1"));  // < never admits pre-releases by itself
  EXPECT_TRUE(in("<1.0rc2", "1.0rc1", true));
  EXPECT_TRUE(in("<1.0", "0.9.post1"));
  EXPECT_FALSE(in(">1.0", "1.0.post1"));
  EXPECT_TRUE(in(">1.0.post1", "1.0.post2"));
  EXPECT_FALSE(in(">1.0", "1.0+local"));
  EXPECT_TRUE(in(">1.0", "1.0.1"));
  EXPECT_TRUE(in("<=1.0", "1.0+local"));  // <= and >= compare the public version
}

TEST(Pep440SpecifierSet, EqualityWildcardsAndLocalVersions) {
  EXPECT_TRUE(in("==1.0", "1.0+local"));
  EXPECT_FALSE(in("==1.0+other", "1.0+local"));
  EXPECT_TRUE(in("==1.0.0", "1.0"));
  EXPECT_TRUE(in("==1.2.*", "1.2.7"));
  EXPECT_TRUE(in("==1.2.*", "1.2"));
  EXPECT_FALSE(in("==1.2.*", "1.20"));
  EXPECT_TRUE(in("!=1.2.*", "1.3"));
  EXPECT_TRUE(in("==1!1.*", "1!1.5"));
  EXPECT_FALSE(in("==1!1.0.*", "1!1.0"));  // packaging's quirk: the epoch stays glued to the first part
  EXPECT_TRUE(in("===1.0", "1.0"));
  EXPECT_FALSE(in("===1.0.0", "1.0"));  // arbitrary equality compares strings
}

TEST(Pep440SpecifierSet, CompatibleReleaseDropsTheLastReleasePart) {
  EXPECT_TRUE(in("~=2.2", "2.9"));
  EXPECT_FALSE(in("~=2.2", "3.0"));
  EXPECT_TRUE(in("~=1.4.5", "1.4.9"));
  EXPECT_FALSE(in("~=1.4.5", "1.5.0"));
  EXPECT_TRUE(in("~=2.2.post3", "2.3"));
  EXPECT_FALSE(in("~=2.2.post3", "2.2"));
}

TEST(Pep440SpecifierSet, CombinesClausesAndPrintsThemSorted) {
  EXPECT_TRUE(in(">=1.0, <2, !=1.5", "1.9"));
  EXPECT_FALSE(in(">=1.0, <2, !=1.5", "1.5"));
  auto set = Pep440SpecifierSet::parse(" <2 ,>=1.0,,>=1.0.0");
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->str(), "<2,>=1.0");
  auto bad = Pep440SpecifierSet::parse(">=1.0, two");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "pep440.specifier_syntax");
  EXPECT_NE(bad.error().message.find("two"), std::string::npos);
}

TEST(Pep440Corpus, VersionsMatchPackaging) {
  const auto rows = corpus("pep440_versions.tsv");
  ASSERT_GT(rows.size(), 1000U);
  std::size_t checked = 0;
  for (const auto& row : rows) {
    if (row[0] == "N") {
      ASSERT_EQ(row.size(), 6U);
      auto parsed = Pep440Version::parse(row[1]);
      if (row[2] == "!") {
        EXPECT_FALSE(parsed.ok()) << "'" << row[1] << "' should be rejected";
        ++checked;
        continue;
      }
      ASSERT_TRUE(parsed.ok()) << "'" << row[1] << "': " << parsed.error().message;
      EXPECT_EQ(parsed->str(), row[2]) << row[1];
      EXPECT_EQ(parsed->public_str(), row[3]) << row[1];
      EXPECT_EQ(parsed->base_str(), row[4]) << row[1];
      const std::string flags = std::string(parsed->is_prerelease() ? "1" : "0") +
                                (parsed->is_postrelease() ? "1" : "0") + (parsed->is_devrelease() ? "1" : "0");
      EXPECT_EQ(flags, row[5]) << row[1];
    } else {
      ASSERT_EQ(row[0], "C");
      ASSERT_EQ(row.size(), 4U);
      const auto c = v(row[1].c_str()) <=> v(row[2].c_str());
      const int got = c < 0 ? -1 : c > 0 ? 1 : 0;
      EXPECT_EQ(std::to_string(got), row[3]) << row[1] << " vs " << row[2];
    }
    ++checked;
  }
  EXPECT_EQ(checked, rows.size());
}

TEST(Pep440Corpus, SpecifierSetsMatchPackaging) {
  const auto rows = corpus("pep440_specifiers.tsv");
  ASSERT_GT(rows.size(), 1000U);
  for (const auto& row : rows) {
    auto set = Pep440SpecifierSet::parse(row[1]);
    if (row[0] == "S") {
      ASSERT_EQ(row.size(), 3U);
      if (row[2] == "!") {
        EXPECT_FALSE(set.ok()) << "'" << row[1] << "' should be rejected";
      } else {
        ASSERT_TRUE(set.ok()) << "'" << row[1] << "': " << set.error().message;
        EXPECT_EQ(set->str(), row[2]) << row[1];
      }
      continue;
    }
    ASSERT_EQ(row[0], "M");
    ASSERT_EQ(row.size(), 5U);
    ASSERT_TRUE(set.ok()) << row[1];
    const std::optional<bool> pre = row[3] == "-" ? std::nullopt : std::optional<bool>(row[3] == "1");
    EXPECT_EQ(set->contains(v(row[2].c_str()), pre) ? "1" : "0", row[4])
        << "'" << row[1] << "' contains '" << row[2] << "' prereleases=" << row[3];
  }
}

}  // namespace
