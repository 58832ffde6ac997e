#include "packages/apt/package_index.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

using gpuenv::packages::arch_matches;
using gpuenv::packages::BinaryPackage;
using gpuenv::packages::OrGroup;
using gpuenv::packages::PackageIndex;
using gpuenv::packages::parse_relations;
using gpuenv::packages::RelationContext;
using gpuenv::packages::RepositoryRef;

namespace {

std::vector<OrGroup> rel(std::string_view text) {
  auto r = parse_relations(text, "control:7");
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : std::vector<OrGroup>{};
}

std::vector<OrGroup> rel_for(std::string_view text, RelationContext context) {
  auto r = parse_relations(text, "control:7", context);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : std::vector<OrGroup>{};
}

// The groups written back as text, one string per group.
std::vector<std::string> texts(const std::vector<OrGroup>& groups) {
  std::vector<std::string> out;
  for (const OrGroup& g : groups) out.push_back(to_string(g));
  return out;
}

RepositoryRef repo(std::string where) { return RepositoryRef{"http://127.0.0.1/debian/", "stable", "main", where}; }

const std::vector<std::string> k_archs{"amd64", "all"};

const char* const k_main = R"(Package: libc6
Source: glibc
Version: 2.36-9+deb12u4
Installed-Size: 12986
Maintainer: GNU Libc Maintainers <debian-glibc@example.com>
Architecture: amd64
Multi-Arch: same
Depends: libgcc-s1
Recommends: libidn2-0 (>= 2.0.5~)
Breaks: hurd (<< 1:0.9.git20220301-2), nscd (<< 2.36)
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.
Priority: optional
Section: libs
Filename: pool/main/g/glibc/libc6_2.36-9+deb12u4_amd64.deb
Size: 2757936
SHA256: 0a6b3a2b1a40a1b1b0d4d0c7f0bd5e1e1c1c7b1f0d0c7f0bd5e1e1c1c7b1f0d0

Package: mawk
Version: 1.3.4.20200120-3.1
Architecture: amd64
Essential: yes
Priority: required
Multi-Arch: foreign
Provides: awk
Pre-Depends: libc6 (>= 2.34)

Package: gawk
Version: 1:5.2.1-2
Architecture: amd64
Priority: optional
Provides: awk, gawk-api (= 3.2)
Depends: libc6 (>= 2.34), libgmp10 | libgmp-dev,
 libmpfr6 (>= 3.1.3)

Package: libc6
Version: 2.36-9+deb12u4
Architecture: i386
Multi-Arch: same

Package: tzdata
Version: 2024a-0+deb12u1
Architecture: all
Priority: required
Multi-Arch: foreign
Provides: tzdata-bookworm
Depends: debconf (>= 0.5) | debconf-2.0
)";

PackageIndex index_of(std::vector<std::pair<std::string, std::string>> texts_and_wheres) {
  PackageIndex index;
  for (auto& [text, where] : texts_and_wheres) {
    auto st = index.add(text, repo(where), k_archs);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().to_string());
  }
  return index;
}

TEST(ParseRelations, SplitsGroupsAndAlternatives) {
  const auto groups = rel("libc6 (>= 2.34), debconf (>= 0.5) | debconf-2.0, libgcc-s1");
  ASSERT_EQ(groups.size(), 3u);
  ASSERT_EQ(groups[1].size(), 2u);
  EXPECT_EQ(groups[0][0].name, "libc6");
  EXPECT_EQ(groups[0][0].op, ">=");
  ASSERT_TRUE(groups[0][0].version.has_value());
  EXPECT_EQ(groups[0][0].version->str(), "2.34");
  EXPECT_EQ(groups[1][1].name, "debconf-2.0");
  EXPECT_FALSE(groups[1][1].version.has_value());
  EXPECT_EQ(groups[1][1].op, "");
  EXPECT_EQ(groups[2][0].name, "libgcc-s1");
}

TEST(ParseRelations, ReadsEveryOperatorAndTheObsoleteOnesAsOrEqual) {
  EXPECT_EQ(texts(rel("a (<< 1), b (<= 1), c (= 1), d (>= 1), e (>> 1)")),
            (std::vector<std::string>{"a (<< 1)", "b (<= 1)", "c (= 1)", "d (>= 1)", "e (>> 1)"}));
  EXPECT_EQ(texts(rel("a (< 1), b (> 2)")), (std::vector<std::string>{"a (<= 1)", "b (>= 2)"}));
}

TEST(ParseRelations, ToleratesBlanksAndLineBreaksAnywhereBetweenTokens) {
  EXPECT_EQ(texts(rel("  a(>=1:2.0-1)|b ,\n c\n  (<<  3~)  ")),
            (std::vector<std::string>{"a (>= 1:2.0-1) | b", "c (<< 3~)"}));
}

TEST(ParseRelations, ReadsArchitectureQualifiers) {
  const auto groups = rel("python3:any, libfoo:native (>= 1), bar:i386");
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0][0].name, "python3");
  EXPECT_EQ(groups[0][0].arch_qualifier, "any");
  EXPECT_EQ(groups[1][0].arch_qualifier, "native");
  EXPECT_EQ(groups[1][0].version->str(), "1");
  EXPECT_EQ(groups[2][0].arch_qualifier, "i386");
  EXPECT_EQ(to_string(groups[1][0]), "libfoo:native (>= 1)");
}

TEST(ParseRelations, EmptyFieldAndTrailingCommaGiveNoExtraGroup) {
  EXPECT_TRUE(rel("").empty());
  EXPECT_TRUE(rel(" \n ").empty());
  EXPECT_EQ(rel("a, b,").size(), 2u);
}

TEST(ParseRelations, RejectsMalformedRelationsNamingTheOrigin) {
  for (const char* bad : {"a (>= )", "a (~ 1)", "a (>= 1", "a (1.0)", "a b", "| a", "a,,b", "a |", "a [i386",
                          "a <!nocheck", "a (>= 1:)", "a:", "a []", "a <>", "a [amd64 !i386]", "a (>= 1) )"}) {
    auto r = parse_relations(bad, "pkg.dsc:12");
    EXPECT_FALSE(r.ok()) << "'" << bad << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.error().id, "apt.relation_syntax") << bad;
      EXPECT_EQ(r.error().where, "pkg.dsc:12") << bad;
      EXPECT_FALSE(r.error().hint.empty());
    }
  }
}

TEST(ParseRelations, ErrorQuotesTheField) {
  auto r = parse_relations("libc6 (=> 2.34)", "P:3");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'=>'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("libc6 (=> 2.34)"), std::string::npos) << r.error().message;
}

TEST(ParseRelations, IgnoresRestrictionsWithoutAContext) {
  EXPECT_EQ(texts(rel("a [i386], b [!amd64] <!nocheck>, c <stage1> <cross>")),
            (std::vector<std::string>{"a", "b", "c"}));
}

TEST(ParseRelations, EvaluatesArchitectureListsForTheHostArchitecture) {
  const auto groups =
      rel_for("a [i386] | c, b [!amd64], d [linux-any], e [any-i386], f [!i386 !arm64]", RelationContext{"amd64", {}});
  EXPECT_EQ(texts(groups), (std::vector<std::string>{"c", "d", "f"}));
  EXPECT_EQ(texts(rel_for("a [i386] | c, b [!amd64]", RelationContext{"i386", {}})),
            (std::vector<std::string>{"a | c", "b"}));
}

TEST(ParseRelations, EvaluatesBuildProfileFormulas) {
  const char* field = "a <!nocheck>, b <stage1>, c <stage1 cross> <!nocheck>, d <!stage1 !nocheck>";
  EXPECT_EQ(texts(rel_for(field, RelationContext{"amd64", {}})), (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_EQ(texts(rel_for(field, RelationContext{"amd64", {"nocheck"}})), (std::vector<std::string>{}));
  EXPECT_EQ(texts(rel_for(field, RelationContext{"amd64", {"stage1", "cross"}})),
            (std::vector<std::string>{"a", "b", "c"}));
}

TEST(ArchMatches, UnderstandsTheCommonWildcards) {
  EXPECT_TRUE(arch_matches("amd64", "amd64"));
  EXPECT_TRUE(arch_matches("any", "arm64"));
  EXPECT_TRUE(arch_matches("linux-any", "amd64"));
  EXPECT_TRUE(arch_matches("any-amd64", "amd64"));
  EXPECT_TRUE(arch_matches("kfreebsd-any", "kfreebsd-amd64"));
  EXPECT_TRUE(arch_matches("any-amd64", "kfreebsd-amd64"));
  EXPECT_FALSE(arch_matches("i386", "amd64"));
  EXPECT_FALSE(arch_matches("kfreebsd-any", "amd64"));
  EXPECT_FALSE(arch_matches("any-i386", "amd64"));
}

TEST(PackageIndex, KeepsOnlyTheRequestedArchitectures) {
  const PackageIndex index = index_of({{k_main, "main"}});
  EXPECT_EQ(index.size(), 4u);
  ASSERT_EQ(index.versions("libc6").size(), 1u);
  EXPECT_EQ(index.versions("libc6")[0]->architecture, "amd64");
  EXPECT_EQ(index.candidate("tzdata")->architecture, "all");
}

TEST(PackageIndex, ExtractsTheFieldsOfAStanza) {
  const PackageIndex index = index_of({{k_main, "main"}});
  const BinaryPackage* libc = index.candidate("libc6");
  ASSERT_NE(libc, nullptr);
  EXPECT_EQ(libc->version.str(), "2.36-9+deb12u4");
  EXPECT_EQ(libc->source, "glibc");
  EXPECT_EQ(libc->multi_arch, "same");
  EXPECT_EQ(libc->priority, "optional");
  EXPECT_EQ(libc->filename, "pool/main/g/glibc/libc6_2.36-9+deb12u4_amd64.deb");
  EXPECT_EQ(libc->sha256.size(), 64u);
  EXPECT_EQ(libc->size, 2757936u);
  EXPECT_EQ(libc->installed_size, 12986u);
  EXPECT_EQ(libc->depends, "libgcc-s1");
  EXPECT_EQ(libc->breaks, "hurd (<< 1:0.9.git20220301-2), nscd (<< 2.36)");
  EXPECT_FALSE(libc->essential);
  EXPECT_EQ(libc->line, 1u);
  EXPECT_EQ(index.where(*libc), "main:1");
  const BinaryPackage* mawk = index.candidate("mawk");
  ASSERT_NE(mawk, nullptr);
  EXPECT_TRUE(mawk->essential);
  EXPECT_EQ(mawk->pre_depends, "libc6 (>= 2.34)");
  EXPECT_EQ(mawk->line, 20u);
  EXPECT_EQ(index.candidate("gawk")->depends, "libc6 (>= 2.34), libgmp10 | libgmp-dev,\n libmpfr6 (>= 3.1.3)");
}

TEST(PackageIndex, ListsProvidersSortedByNameWithTheProvidedVersion) {
  const PackageIndex index = index_of({{k_main, "main"}});
  const auto awk = index.providers("awk");
  ASSERT_EQ(awk.size(), 2u);
  EXPECT_EQ(awk[0]->name, "gawk");
  EXPECT_EQ(awk[1]->name, "mawk");
  const auto api = index.provisions("gawk-api");
  ASSERT_EQ(api.size(), 1u);
  EXPECT_EQ(api[0].package->name, "gawk");
  ASSERT_TRUE(api[0].version.has_value());
  EXPECT_EQ(api[0].version->str(), "3.2");
  EXPECT_FALSE(index.provisions("awk")[0].version.has_value());
  EXPECT_TRUE(index.versions("awk").empty());
  EXPECT_EQ(index.candidate("awk"), nullptr);
}

TEST(PackageIndex, UnknownNamesGiveNothing) {
  const PackageIndex index = index_of({{k_main, "main"}});
  EXPECT_TRUE(index.versions("nope").empty());
  EXPECT_TRUE(index.providers("nope").empty());
  EXPECT_EQ(index.candidate("nope"), nullptr);
}

TEST(PackageIndex, NamesAreTheRealPackagesSorted) {
  const PackageIndex index = index_of({{k_main, "main"}});
  EXPECT_EQ(index.names(), (std::vector<std::string_view>{"gawk", "libc6", "mawk", "tzdata"}));
}

TEST(PackageIndex, VersionsAreNewestFirstAndTiesKeepRepositoryOrder) {
  const std::string base =
      "Package: a\nVersion: 1.0-1\nArchitecture: amd64\n\n"
      "Package: a\nVersion: 1.0-1+deb12u1\nArchitecture: amd64\n";
  const std::string security =
      "Package: a\nVersion: 1.0-1+deb12u1\nArchitecture: amd64\n\n"
      "Package: a\nVersion: 1.0~rc1-1\nArchitecture: amd64\n";
  const PackageIndex index = index_of({{base, "base"}, {security, "security"}});
  const auto v = index.versions("a");
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0]->version.str(), "1.0-1+deb12u1");
  EXPECT_EQ(v[0]->repository, 0u);
  EXPECT_EQ(v[1]->version.str(), "1.0-1+deb12u1");
  EXPECT_EQ(v[1]->repository, 1u);
  EXPECT_EQ(v[2]->version.str(), "1.0-1");
  EXPECT_EQ(v[3]->version.str(), "1.0~rc1-1");
  EXPECT_EQ(index.candidate("a"), v[0]);
  ASSERT_EQ(index.repositories().size(), 2u);
  EXPECT_EQ(index.repositories()[1].where, "security");
}

TEST(PackageIndex, CandidateIsTheHighestVersionWhicheverRepositoryHasIt) {
  const PackageIndex index = index_of({{"Package: a\nVersion: 1:0.9\nArchitecture: all\n", "one"},
                                       {"Package: a\nVersion: 2.0\nArchitecture: all\n", "two"}});
  EXPECT_EQ(index.candidate("a")->version.str(), "1:0.9");
  EXPECT_EQ(index.repositories()[index.candidate("a")->repository].where, "one");
}

TEST(PackageIndex, ErrorsNameTheRepositoryAndLine) {
  struct Case {
    const char* text;
    const char* id;
    const char* where;
  };
  const Case cases[] = {
      {"Package: a\nVersion: 1\nArchitecture: all\n\n\nPackage: b\nArchitecture: all\n", "apt.packages_missing_field",
       "P:6"},
      {"Version: 1\nArchitecture: all\n", "apt.packages_missing_field", "P:1"},
      {"Package: a\nVersion: 1\n", "apt.packages_missing_field", "P:1"},
      {"Package: a\nVersion: 1.0-\nArchitecture: all\n", "apt.packages_bad_field", "P:1"},
      {"Package: a\nVersion: 1\nArchitecture: all\nSize: 12k\n", "apt.packages_bad_field", "P:1"},
      {"Package: a\nVersion: 1\nArchitecture: all\nInstalled-Size: -1\n", "apt.packages_bad_field", "P:1"},
      {"Package: a\nVersion: 1\nArchitecture: all\nProvides: b (>= 1)\n", "apt.relation_syntax", "P:1"},
      {"Package: a\nVersion: 1\nArchitecture: all\nProvides: b | c\n", "apt.relation_syntax", "P:1"},
      {"Package: a\nVersion: 1\nArchitecture: all\nProvides: b (= x:1)\n", "apt.relation_syntax", "P:1"},
      {"Package: a\nVersion: 1\nArchitecture: all\nbroken line\n", "deb822.syntax", "P:4"},
  };
  for (const Case& c : cases) {
    PackageIndex index;
    auto st = index.add(c.text, repo("P"), k_archs);
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_EQ(st.error().id, c.id) << c.text;
    EXPECT_EQ(st.error().where, c.where) << c.text;
    EXPECT_EQ(index.size(), 0u);
  }
}

TEST(PackageIndex, StanzasOfOtherArchitecturesAreNotChecked) {
  PackageIndex index;
  EXPECT_TRUE(index.add("Package: a\nVersion: not a version-\nArchitecture: i386\n", repo("P"), k_archs).ok());
  EXPECT_EQ(index.size(), 0u);
}

TEST(PackageIndex, AFailedAddLeavesTheIndexAsItWas) {
  PackageIndex index = index_of({{k_main, "main"}});
  auto st = index.add(
      "Package: gawk\nVersion: 9\nArchitecture: all\n\nPackage: x\nVersion: 1\nArchitecture: all\n"
      "Provides: awk (>> 1)\n",
      repo("bad"), k_archs);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(index.repositories().size(), 1u);
  EXPECT_EQ(index.candidate("gawk")->version.str(), "1:5.2.1-2");
  EXPECT_EQ(index.providers("awk").size(), 2u);
}

TEST(PackageIndex, ViewsStayValidWhenTheIndexMoves) {
  PackageIndex index = index_of({{k_main, "main"}});
  const BinaryPackage* before = index.candidate("gawk");
  PackageIndex moved = std::move(index);
  const BinaryPackage* after = moved.candidate("gawk");
  EXPECT_EQ(before, after);
  EXPECT_EQ(after->name, "gawk");
  EXPECT_EQ(moved.providers("gawk-api")[0]->name, "gawk");
}

TEST(PackageIndex, FieldNamesAreCaseInsensitive) {
  PackageIndex index;
  ASSERT_TRUE(index.add("package: a\nVERSION: 1\narchitecture: all\nprovides: b\n", repo("P"), k_archs).ok());
  EXPECT_EQ(index.candidate("a")->version.str(), "1");
  EXPECT_EQ(index.providers("b").size(), 1u);
}

}  // namespace
