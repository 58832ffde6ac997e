#include "packages/apt/debian_version.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

using gpuenv::packages::compare_debian_versions;
using gpuenv::packages::DebianVersion;
using gpuenv::packages::satisfies;

namespace {

DebianVersion dv(const char* s) {
  auto v = DebianVersion::parse(s);
  EXPECT_TRUE(v.ok()) << s << ": " << (v.ok() ? "" : v.error().message);
  return v.ok() ? *v : DebianVersion{};
}
int cmp(const char* a, const char* b) { return compare_debian_versions(dv(a), dv(b)); }

struct Case {
  const char* a;
  const char* b;
  int expected;
};

TEST(DebianVersion, SplitsEpochUpstreamAndRevision) {
  const DebianVersion v = dv("1:2.36-9+deb12u4");
  EXPECT_EQ(v.epoch(), 1u);
  EXPECT_EQ(v.upstream(), "2.36");
  EXPECT_EQ(v.revision(), "9+deb12u4");
  EXPECT_EQ(v.str(), "1:2.36-9+deb12u4");
}

TEST(DebianVersion, RevisionIsAfterTheLastHyphenAndEpochBeforeTheFirstColon) {
  const DebianVersion v = dv("2:1.0-rc1-3");
  EXPECT_EQ(v.upstream(), "1.0-rc1");
  EXPECT_EQ(v.revision(), "3");
  const DebianVersion colons = dv("1:2:3");
  EXPECT_EQ(colons.epoch(), 1u);
  EXPECT_EQ(colons.upstream(), "2:3");
  const DebianVersion plain = dv("12.4");
  EXPECT_EQ(plain.epoch(), 0u);
  EXPECT_EQ(plain.revision(), "");
}

TEST(DebianVersion, TrimsSurroundingBlanksLikeDpkg) { EXPECT_EQ(dv(" \t1.0-1 ").str(), "1.0-1"); }

TEST(DebianVersion, RejectsWhatDpkgRejects) {
  for (const char* bad : {"", "   ", "1.0 x", "1:", "x:1", ":1", "1.0:1", "-1:1", "2147483648:1",
                          "99999999999999999999:1", "1.0-", "-1", "1:-1", "1:-"}) {
    auto v = DebianVersion::parse(bad);
    EXPECT_FALSE(v.ok()) << "'" << bad << "'";
    if (!v.ok()) {
      EXPECT_EQ(v.error().id, "debian_version.syntax");
    }
  }
}

TEST(DebianVersion, ErrorNamesTheRule) {
  auto v = DebianVersion::parse("1.0-");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("revision number is empty"), std::string::npos) << v.error().message;
  EXPECT_NE(v.error().message.find("'1.0-'"), std::string::npos);
}

TEST(DebianVersion, AcceptsEpochFormsStrtolAccepts) {
  EXPECT_EQ(dv("2147483647:1").epoch(), 2147483647u);
  EXPECT_EQ(dv("+1:2").epoch(), 1u);
  EXPECT_EQ(dv("-0:2").epoch(), 0u);
  EXPECT_EQ(dv("007:2").epoch(), 7u);
}

TEST(DebianVersion, AcceptsWhatDpkgOnlyWarnsAboutAndSaysWhy) {
  EXPECT_EQ(dv("a1").policy_warning().value_or(""), "version number does not start with digit");
  EXPECT_NE(dv("1.0_x").policy_warning().value_or("").find("invalid character '_' in version number"), std::string::npos);
  EXPECT_NE(dv("1:1.0-1:2").policy_warning().value_or("").find("in revision number"), std::string::npos);
  EXPECT_EQ(dv("1:2.36-9+deb12u4").policy_warning(), std::nullopt);
  EXPECT_EQ(dv("1.0~rc1+dfsg-0ubuntu1~22.04").policy_warning(), std::nullopt);
}

TEST(DebianVersion, TildeSortsBeforeEverything) {
  EXPECT_LT(cmp("1.0~rc1", "1.0"), 0);
  EXPECT_LT(cmp("1.0~~", "1.0~"), 0);
  EXPECT_LT(cmp("1.0~", "1.0"), 0);
  EXPECT_LT(cmp("1.0~rc1", "1.0~rc2"), 0);
  EXPECT_LT(cmp("1.0~", "1.0a"), 0);
  EXPECT_LT(cmp("1.0-1~bpo1", "1.0-1"), 0);
}

TEST(DebianVersion, EpochWinsOverEverythingElse) {
  EXPECT_GT(cmp("1:0.1", "2.0"), 0);
  EXPECT_LT(cmp("0:9.9", "1:0.0"), 0);
  EXPECT_EQ(cmp("0:1.0", "1.0"), 0);
}

TEST(DebianVersion, LettersSortBeforeOtherCharacters) {
  EXPECT_LT(cmp("1.0a", "1.0+"), 0);
  EXPECT_LT(cmp("1.0a", "1.0."), 0);
  EXPECT_LT(cmp("1.0Z", "1.0a"), 0);  // ASCII order among letters
  EXPECT_LT(cmp("1.0+", "1.0."), 0);  // '+' (43) before '.' (46)
  EXPECT_GT(cmp("1.0a", "1.0"), 0);   // anything but '~' is after the end
}

TEST(DebianVersion, DigitRunsCompareNumerically) {
  EXPECT_LT(cmp("1.9", "1.10"), 0);
  EXPECT_EQ(cmp("1.0", "1.00"), 0);
  EXPECT_EQ(cmp("1.001", "1.1"), 0);
  EXPECT_LT(cmp("535.54.03", "535.104.05"), 0);
  EXPECT_GT(cmp("2.0.12345678901234567890", "2.0.12345678901234567889"), 0);  // beyond 64 bits
}

TEST(DebianVersion, RevisionDecidesAfterUpstream) {
  EXPECT_GT(cmp("1.0-1", "1.0"), 0);
  EXPECT_EQ(cmp("1.0-0", "1.0"), 0);  // an absent revision is "", and a run of zeros weighs as much as nothing
  EXPECT_LT(cmp("1.0-1", "1.0-2"), 0);
  EXPECT_LT(cmp("1.0-2", "1.0-10"), 0);
  EXPECT_GT(cmp("1.0-1+deb12u1", "1.0-1"), 0);
  EXPECT_LT(cmp("1.0-9", "1.0.1-1"), 0);
}

TEST(DebianVersion, TableFromDpkgStyleCases) {
  const Case cases[] = {
      {"1.0", "1.0", 0},         {"1.0", "1.1", -1},          {"1.1", "1.0", 1},
      {"1.0-1", "1.0-1", 0},     {"1.2.3", "1.2.3-0", 0},     {"0.0", "0", 1},
      {"1.0~rc1", "1.0", -1},    {"1:0.1", "2.0", 1},         {"1.0-1", "1.0", 1},
      {"1.0a", "1.0+", -1},      {"2.7.4+reloaded2-13", "2.7.4+reloaded2-13+b1", -1},
      {"7.6p2-4", "7.6-0", 1},   {"1.0.3-3", "1.0-1", 1},     {"1.3", "1.2.2-2", 1},
      {"1.3", "1.2.2", 1},       {"0-pre", "0-pre", 0},       {"0-pre", "0-pree", -1},
      {"1.1.6r2-37.1", "1.1.6r-37.1", 1}, {"2.6b2-1", "2.6b-2", 1}, {"98.1-pre2-b6-2", "98.1p5-1", 1},
      {"0.4a6-2", "0.4-1", 1},   {"1:3.0.5-2", "1:3.0.5.1", -1}, {"10.11.1.3-2", "10.11.1.3-2+b1", -1},
      {"4.4.3-2", "4.4.3-2+b1", -1}, {"1:0.4", "10.3", 1},    {"1:1.25-4", "1:1.25-8", -1},
      {"0:1.18.36", "1.18.36", 0}, {"1.18.36", "1.18.35", 1},  {"0:1.18.36", "1.18.35", 1},
      {"9:1.18.36:5.4-20", "10:0.5.1-22", -1}, {"9:1.18.36:5.4-20", "9:1.18.36:5.5-1", -1},
      {"9:1.18.36:5.4-20", " 9:1.18.37:4.3-22", -1}, {"1.18.36-0.17.35-18", "1.18.36-19", 1},
      {"1:1.2.13-3", "1:1.2.13-3.1", -1}, {"2.0.7pre1-4", "2.0.7r-1", -1}, {"0.2", "1.0-0", -1},
      {"1.0", "1.0-0+b1", -1},   {"1.0", "1.0-0~", 1},        {"1.0~", "1.0~~", 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(cmp(c.a, c.b), c.expected) << c.a << " vs " << c.b;
    EXPECT_EQ(cmp(c.b, c.a), -c.expected) << c.b << " vs " << c.a << " (reversed)";
  }
}

TEST(DebianVersion, OperatorsFollowDpkgOrderNotSpelling) {
  EXPECT_TRUE(dv("1.0") == dv("0:1.00"));
  EXPECT_TRUE(dv("1.0~rc1") < dv("1.0"));
  EXPECT_TRUE(dv("1:0.1") > dv("9.9"));
}

TEST(DebianVersion, SatisfiesRelationOperators) {
  const DebianVersion ref = dv("2.36-9");
  EXPECT_TRUE(satisfies(dv("2.36-8"), "<<", ref));
  EXPECT_FALSE(satisfies(dv("2.36-9"), "<<", ref));
  EXPECT_TRUE(satisfies(dv("2.36-9"), "<=", ref));
  EXPECT_TRUE(satisfies(dv("0:2.36-9"), "=", ref));
  EXPECT_FALSE(satisfies(dv("2.36-9+b1"), "=", ref));
  EXPECT_TRUE(satisfies(dv("2.36-9+b1"), ">=", ref));
  EXPECT_TRUE(satisfies(dv("2.37~rc1-1"), ">>", ref));
  EXPECT_FALSE(satisfies(dv("2.36-9"), ">>", ref));
}

TEST(DebianVersion, ObsoleteSingleAngleOperatorsMeanOrEqual) {
  const DebianVersion ref = dv("1.0");
  EXPECT_TRUE(satisfies(dv("1.0"), "<", ref));
  EXPECT_TRUE(satisfies(dv("1.0"), ">", ref));
  EXPECT_FALSE(satisfies(dv("1.1"), "<", ref));
}

TEST(DebianVersion, UnknownOperatorIsNeverSatisfied) {
  EXPECT_FALSE(satisfies(dv("1.0"), "==", dv("1.0")));
  EXPECT_FALSE(satisfies(dv("1.0"), "", dv("1.0")));
}

// tests/data/debian_versions.tsv holds pairs with dpkg's verdict (scripts/gen_debian_version_corpus.py).
TEST(DebianVersion, AgreesWithDpkgOnTheRecordedCorpus) {
  const std::string path = std::string(GPUENV_SOURCE_DIR) + "/tests/data/debian_versions.tsv";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::string line;
  int checked = 0;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t t1 = line.find('\t');
    const std::size_t t2 = line.find('\t', t1 + 1);
    ASSERT_NE(t2, std::string::npos) << path << ":" << line_no;
    const std::string a = line.substr(0, t1);
    const std::string b = line.substr(t1 + 1, t2 - t1 - 1);
    const std::string expected = line.substr(t2 + 1);
    auto va = DebianVersion::parse(a);
    auto vb = DebianVersion::parse(b);
    if (expected == "err") {
      EXPECT_FALSE(va.ok() && vb.ok()) << path << ":" << line_no << ": dpkg rejects '" << a << "' or '" << b << "'";
    } else {
      ASSERT_TRUE(va.ok()) << path << ":" << line_no << ": " << va.error().message;
      ASSERT_TRUE(vb.ok()) << path << ":" << line_no << ": " << vb.error().message;
      EXPECT_EQ(compare_debian_versions(*va, *vb), std::stoi(expected))
          << path << ":" << line_no << ": " << a << " vs " << b;
    }
    ++checked;
  }
  EXPECT_GE(checked, 5000);
}

}  // namespace
