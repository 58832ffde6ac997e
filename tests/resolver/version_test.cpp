#include "resolver/version.hpp"

#include <gtest/gtest.h>

using gpuenv::resolver::Constraint;
using gpuenv::resolver::Version;

namespace {

Version v(const char* s) { return *Version::parse(s); }
bool m(const char* c, const char* ver) {
  auto parsed = Constraint::parse(c);
  EXPECT_TRUE(parsed.ok()) << c;
  return parsed.ok() && parsed->matches(v(ver));
}

TEST(Version, ComparesNumericallyNotLexically) {
  EXPECT_LT(v("12.4"), v("12.10"));
  EXPECT_LT(v("535.54.03"), v("535.104.05"));
  EXPECT_GT(v("550.54.15"), v("550.54.14"));
}

TEST(Version, PadsWithZerosWhenComparing) {
  EXPECT_EQ(v("12.4"), v("12.4.0"));
  EXPECT_LT(v("12.4"), v("12.4.1"));
}

TEST(Version, KeepsOriginalSpelling) { EXPECT_EQ(v("535.104.05").str(), "535.104.05"); }

TEST(Version, RejectsMalformedText) {
  for (const char* bad : {"", "12.", ".4", "12..4", "12.x", "-1", "1.2.3.4.5.6.7", "abc", "12.4 ", "99999999999"}) {
    EXPECT_FALSE(Version::parse(bad).ok()) << bad;
  }
}

TEST(Version, PrefixAndTruncation) {
  EXPECT_TRUE(v("12.4.1").has_prefix(v("12.4")));
  EXPECT_FALSE(v("12.40").has_prefix(v("12.4")));
  EXPECT_TRUE(v("12.4").has_prefix(v("12.4.0")));
  EXPECT_FALSE(v("12.4").has_prefix(v("12.4.1")));
  EXPECT_EQ(v("12.4.1").truncated(2).str(), "12.4");
  EXPECT_EQ(v("12").truncated(2).str(), "12.0");
}

TEST(Constraint, BareVersionIsAPrefix) {
  EXPECT_TRUE(m("12.4", "12.4.1"));
  EXPECT_TRUE(m("12.4", "12.4"));
  EXPECT_FALSE(m("12.4", "12.5"));
  EXPECT_TRUE(m("9", "9.1.0"));
  EXPECT_FALSE(m("2.5.1", "2.5.10"));
}

TEST(Constraint, Wildcards) {
  EXPECT_TRUE(m("12.*", "12.9.1"));
  EXPECT_FALSE(m("12.*", "13.0"));
  EXPECT_TRUE(m("==2.5.*", "2.5.1"));
}

TEST(Constraint, RangesAndOperators) {
  EXPECT_TRUE(m(">=12.1,<13", "12.9.1"));
  EXPECT_FALSE(m(">=12.1,<13", "13.0.0"));
  EXPECT_FALSE(m(">=12.1,<13", "12.0.1"));
  EXPECT_TRUE(m("==2.5.1", "2.5.1"));
  EXPECT_FALSE(m("==2.5.1", "2.5.10"));
  EXPECT_FALSE(m("!=2.4.0", "2.4.0"));
  EXPECT_TRUE(m("> 2.4", "2.4.1"));
  EXPECT_TRUE(m("<=12.4", "12.4.0"));
  EXPECT_FALSE(m("<=12.4", "12.4.1"));  // PEP 440: 12.4.1 > 12.4
}

TEST(Constraint, CompatibleRelease) {
  EXPECT_TRUE(m("~=2.5", "2.9"));
  EXPECT_FALSE(m("~=2.5", "3.0"));
  EXPECT_TRUE(m("~=2.5.1", "2.5.3"));
  EXPECT_FALSE(m("~=2.5.1", "2.6.0"));
}

TEST(Constraint, AlternativesAndLatest) {
  EXPECT_TRUE(m("12.4 || 12.6", "12.6.3"));
  EXPECT_FALSE(m("12.4 || 12.6", "12.5"));
  EXPECT_TRUE(Constraint::parse("latest")->is_any());
  EXPECT_TRUE(m("latest", "0.1"));
  EXPECT_TRUE(m("*", "99"));
}

TEST(Constraint, DetectsEmptyRanges) {
  EXPECT_TRUE(Constraint::parse(">=13,<12")->is_empty());
  EXPECT_TRUE(Constraint::parse("==12.4,==12.5")->is_empty());
  EXPECT_TRUE(Constraint::parse(">12.4,<12.4")->is_empty());
  EXPECT_FALSE(Constraint::parse(">=12.4,<=12.4")->is_empty());
  EXPECT_FALSE(Constraint::parse(">=13,<12 || 12.4")->is_empty());
}

TEST(Constraint, LowerBound) {
  EXPECT_EQ(Constraint::parse("550.54.15")->lower_bound()->str(), "550.54.15");
  EXPECT_EQ(Constraint::parse(">=550,<560")->lower_bound()->str(), "550");
  EXPECT_FALSE(Constraint::parse("<560")->lower_bound().has_value());
  EXPECT_FALSE(Constraint::parse("latest")->lower_bound().has_value());
}

TEST(Constraint, RejectsBadSyntaxWithColumn) {
  auto r = Constraint::parse(">=12.1,<1x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("column 8"), std::string::npos) << r.error().message;
  for (const char* bad : {">=", "12.4,", ",12", ">=12.*", "~=2", "!=12.*", "=>12"}) {
    EXPECT_FALSE(Constraint::parse(bad).ok()) << bad;
  }
}

}  // namespace
