#include "packages/apt/deb822.hpp"

#include <gtest/gtest.h>

#include <string>

using gpuenv::packages::clearsigned_body;
using gpuenv::packages::parse_deb822;
using gpuenv::packages::parse_release;
using gpuenv::packages::parse_release_date;
using gpuenv::packages::Stanza;
using gpuenv::packages::value_lines;
using gpuenv::packages::value_words;

namespace {

constexpr const char* k_packages =
    "Package: libc6\n"
    "Version: 2.36-9+deb12u4\n"
    "Architecture: amd64\n"
    "Depends: libgcc-s1\n"
    "Description: GNU C Library: Shared libraries\n"
    " Contains the standard libraries that are used by nearly all programs on\n"
    " the system.\n"
    " .\n"
    " This package includes shared versions.\n"
    "Filename: pool/main/g/glibc/libc6_2.36-9+deb12u4_amd64.deb\n"
    "\n"
    "Package: zlib1g\n"
    "Version: 1:1.2.13.dfsg-1\n"
    "\n";

std::vector<Stanza> parse_ok(std::string_view text) {
  auto r = parse_deb822(text, "Packages");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? std::move(*r) : std::vector<Stanza>{};
}

TEST(Deb822, SplitsStanzasAndKeepsFieldOrder) {
  const auto st = parse_ok(k_packages);
  ASSERT_EQ(st.size(), 2u);
  ASSERT_EQ(st[0].fields().size(), 6u);
  EXPECT_EQ(st[0].fields()[0].name, "Package");
  EXPECT_EQ(st[0].fields()[4].name, "Description");
  EXPECT_EQ(st[0].fields()[5].name, "Filename");
  EXPECT_EQ(st[1].get("Version"), "1:1.2.13.dfsg-1");
}

TEST(Deb822, LooksUpFieldNamesCaseInsensitively) {
  const auto st = parse_ok(k_packages);
  ASSERT_FALSE(st.empty());
  EXPECT_EQ(st[0].get("package"), "libc6");
  EXPECT_EQ(st[0].get("VERSION"), "2.36-9+deb12u4");
  EXPECT_TRUE(st[0].has("depends"));
  EXPECT_FALSE(st[0].find("Pre-Depends").has_value());
  EXPECT_EQ(st[0].get("Pre-Depends"), "");
}

TEST(Deb822, RecordsLineNumbersOfStanzasAndFields) {
  const auto st = parse_ok(k_packages);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].line(), 1u);
  EXPECT_EQ(st[1].line(), 12u);
  EXPECT_EQ(st[0].field("Filename")->line, 10u);
}

TEST(Deb822, KeepsContinuationLinesOfMultiLineFields) {
  const auto st = parse_ok(k_packages);
  ASSERT_FALSE(st.empty());
  const std::string_view d = st[0].get("Description");
  EXPECT_EQ(d.substr(0, d.find('\n')), "GNU C Library: Shared libraries");
  const auto lines = value_lines(d);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[1], "Contains the standard libraries that are used by nearly all programs on");
  EXPECT_EQ(lines[3], ".");
  EXPECT_EQ(lines[4], "This package includes shared versions.");
}

TEST(Deb822, ValuesAreViewsIntoTheInput) {
  const std::string text = k_packages;
  auto r = parse_deb822(text, "Packages");
  ASSERT_TRUE(r.ok());
  const std::string_view v = (*r)[0].get("Package");
  EXPECT_GE(v.data(), text.data());
  EXPECT_LT(v.data(), text.data() + text.size());
}

TEST(Deb822, MultiLineValueWithEmptyFirstLineStartsOnTheNextLine) {
  const auto st = parse_ok("SHA256:\n abc 1 main/a\n def 2 main/b\n");
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].get("SHA256"), "abc 1 main/a\n def 2 main/b");
}

TEST(Deb822, SkipsCommentsAndJoinsValuesAroundThem) {
  const std::string text =
      "# a comment before the stanza\n"
      "Types: deb\n"
      "# commented: out\n"
      "URIs: http://example.com/a\n"
      "# between continuation lines\n"
      " http://example.com/b\n"
      "Suites: stable\n";
  auto r = parse_deb822(text, "x.sources");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->size(), 1u);
  const Stanza copy = (*r)[0];  // joined values must survive copies
  r = parse_deb822("", "empty");
  EXPECT_EQ(copy.line(), 2u);
  EXPECT_FALSE(copy.has("commented"));
  EXPECT_EQ(value_words(copy.get("URIs")), (std::vector<std::string_view>{"http://example.com/a", "http://example.com/b"}));
  EXPECT_EQ(copy.get("Suites"), "stable");
}

TEST(Deb822, CommentOnlyParagraphsGiveNoStanza) {
  const auto st = parse_ok("# only\n# comments\n\n\nA: 1\n\n# trailing\n");
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].line(), 5u);
}

TEST(Deb822, BlankOnlyLinesAndCarriageReturnsSeparateStanzas) {
  const auto st = parse_ok("A: 1\r\nB: two words \r\n \t\r\nA: 2\r\n");
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].get("B"), "two words");
  EXPECT_EQ(st[1].get("A"), "2");
}

TEST(Deb822, AcceptsEmptyValuesAndMissingFinalNewline) {
  const auto st = parse_ok("A:\nB:   value");
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].get("A"), "");
  EXPECT_TRUE(st[0].has("A"));
  EXPECT_EQ(st[0].get("B"), "value");
}

TEST(Deb822, EmptyInputHasNoStanzas) { EXPECT_TRUE(parse_ok("\n\n").empty()); }

TEST(Deb822, RejectsLineWithoutColonAndNamesTheLine) {
  auto r = parse_deb822("A: 1\nnot a field\n", "dists/x/Packages");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "deb822.syntax");
  EXPECT_EQ(r.error().where, "dists/x/Packages:2");
  EXPECT_NE(r.error().message.find("'not a field'"), std::string::npos);
}

TEST(Deb822, RejectsContinuationWithoutField) {
  auto r = parse_deb822("A: 1\n\n continued\n", "f");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "f:3");
}

TEST(Deb822, RejectsBadFieldNames) {
  for (const char* bad : {": no name\n", "Two words: x\n", "-Dash: x\n"}) {
    auto r = parse_deb822(bad, "f");
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(Deb822, RejectsDuplicateFieldsInAnyCase) {
  auto r = parse_deb822("Package: a\npackage: b\n", "f");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "deb822.duplicate_field");
  EXPECT_EQ(r.error().where, "f:2");
  EXPECT_TRUE(parse_deb822("Package: a\n\nPackage: b\n", "f").ok());
}

TEST(Deb822, ValueWordsSplitOnAnyBlank) {
  EXPECT_EQ(value_words(" amd64\tarm64\n  i386 "), (std::vector<std::string_view>{"amd64", "arm64", "i386"}));
  EXPECT_TRUE(value_words("").empty());
}

constexpr const char* k_release =
    "Origin: Debian\n"
    "Label: Debian\n"
    "Suite: stable\n"
    "Version: 12.8\n"
    "Codename: bookworm\n"
    "Date: Sat, 09 Nov 2024 10:05:58 UTC\n"
    "Valid-Until: Sat, 16 Nov 2024 10:05:58 +0000\n"
    "Acquire-By-Hash: yes\n"
    "No-Support-for-Architecture-all: Packages\n"
    "Architectures: all amd64 arm64\n"
    "Components: main contrib non-free-firmware\n"
    "Description: Debian 12.8 Released 09 November 2024\n"
    "MD5Sum:\n"
    " 0ed6d4c8891eb86358b94bb35d9e4da4  1484322 contrib/Contents-all\n"
    "SHA256:\n"
    " 2c5e4dbae5d19e2d6ee2e1e6dd6bbb0ad56b1fcb1df2b4bbb9bb8c1a3ab3c6c1  1484322 contrib/Contents-all\n"
    " 9F2B6D1E7A3C4B5D6E7F8091A2B3C4D5E6F708192A3B4C5D6E7F8091A2B3C4D5 45123456 main/binary-amd64/Packages\n"
    " 1111111111111111111111111111111111111111111111111111111111111111  8901234 main/binary-amd64/Packages.xz\n";

TEST(Release, ExtractsTheFieldsGpuenvUses) {
  auto r = parse_release(k_release, "Release");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->origin, "Debian");
  EXPECT_EQ(r->label, "Debian");
  EXPECT_EQ(r->suite, "stable");
  EXPECT_EQ(r->codename, "bookworm");
  EXPECT_EQ(r->date, "Sat, 09 Nov 2024 10:05:58 UTC");
  EXPECT_EQ(r->date_unix, 1731146758);
  EXPECT_EQ(r->valid_until_unix, 1731751558);
  EXPECT_EQ(r->architectures, (std::vector<std::string>{"all", "amd64", "arm64"}));
  EXPECT_EQ(r->components, (std::vector<std::string>{"main", "contrib", "non-free-firmware"}));
  EXPECT_TRUE(r->acquire_by_hash);
}

TEST(Release, ReadsTheSha256ListNotOtherHashes) {
  auto r = parse_release(k_release, "Release");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->sha256.size(), 3u);
  EXPECT_EQ(r->sha256[0].path, "contrib/Contents-all");
  EXPECT_EQ(r->sha256[0].size, 1484322u);
  const auto* p = r->find("main/binary-amd64/Packages");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->size, 45123456u);
  EXPECT_EQ(p->sha256.hex(), "9f2b6d1e7a3c4b5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5");  // lower-cased
  EXPECT_EQ(r->find("main/binary-i386/Packages"), nullptr);
}

TEST(Release, OptionalFieldsMayBeAbsent) {
  auto r = parse_release("Suite: flat\nSHA256:\n " + std::string(64, 'a') + " 10 Packages\n", "Release");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE(r->acquire_by_hash);
  EXPECT_FALSE(r->date_unix.has_value());
  EXPECT_FALSE(r->valid_until_unix.has_value());
  EXPECT_TRUE(r->components.empty());
  EXPECT_EQ(r->sha256.at(0).path, "Packages");
}

TEST(Release, RejectsMissingSha256) {
  auto r = parse_release("Suite: x\nMD5Sum:\n 0ed6d4c8891eb86358b94bb35d9e4da4 1 a\n", "Release");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "release.missing_sha256");
}

TEST(Release, RejectsMalformedEntriesWithTheirLine) {
  const std::string h(64, 'a');
  for (const std::string& entry : {h + " 10", h + " ten Packages", std::string(63, 'a') + " 10 Packages",
                                   std::string(63, 'a') + "g 10 Packages", h + " 10 Packages extra"}) {
    auto r = parse_release("Suite: x\nSHA256:\n " + h + " 1 ok\n " + entry + "\n", "Release");
    ASSERT_FALSE(r.ok()) << entry;
    EXPECT_EQ(r.error().id, "release.bad_entry") << entry;
    EXPECT_EQ(r.error().where, "Release:4") << entry;
  }
}

TEST(Release, RejectsBadDatesAndSeveralStanzas) {
  const std::string sums = "SHA256:\n " + std::string(64, 'a') + " 1 x\n";
  auto bad_date = parse_release("Date: yesterday\n" + sums, "Release");
  ASSERT_FALSE(bad_date.ok());
  EXPECT_EQ(bad_date.error().id, "release.bad_date");
  auto two = parse_release(sums + "\nSuite: y\n", "Release");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().id, "release.syntax");
}

TEST(Release, ReadsTheBodyOfAClearSignedInRelease) {
  const std::string inrelease = std::string("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\n") + k_release +
                                "- X-Dash-Escaped: line\n"
                                "-----BEGIN PGP SIGNATURE-----\n\niQIzBAEBCgAdFiEE\n=abcd\n-----END PGP SIGNATURE-----\n";
  auto r = parse_release(inrelease, "InRelease");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->codename, "bookworm");
  EXPECT_EQ(r->sha256.size(), 3u);
}

TEST(Release, ClearSignedBodyUndoesDashEscaping) {
  auto b = clearsigned_body("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nA: 1\n- -B: 2\n"
                            "-----BEGIN PGP SIGNATURE-----\nxx\n-----END PGP SIGNATURE-----\n",
                            "InRelease");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "A: 1\n-B: 2\n");
  auto plain = clearsigned_body("A: 1\n", "Release");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "A: 1\n");
}

TEST(Release, RejectsTruncatedClearSignedMessage) {
  auto r = clearsigned_body("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nA: 1\n", "InRelease");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "release.bad_clearsign");
  auto no_end = clearsigned_body("-----BEGIN PGP SIGNED MESSAGE-----\n\nA: 1\n-----BEGIN PGP SIGNATURE-----\nx\n",
                                 "InRelease");
  EXPECT_FALSE(no_end.ok());
}

TEST(Release, ParsesRfc2822DatesAsReleaseFilesWriteThem) {
  EXPECT_EQ(parse_release_date("Thu, 01 Jan 1970 00:00:00 UTC"), 0);
  EXPECT_EQ(parse_release_date("Sat, 09 Nov 2024 10:05:58 UTC"), 1731146758);
  EXPECT_EQ(parse_release_date("9 Nov 2024 10:05:58 GMT"), 1731146758);
  EXPECT_EQ(parse_release_date("Sat, 09 Nov 2024 12:05:58 +0200"), 1731146758);
  EXPECT_EQ(parse_release_date("Thu, 29 Feb 2024 00:00 Z"), 1709164800);
  for (const char* bad : {"", "2024-11-09T10:05:58Z", "Sat, 09 Nov 2024 10:05:58", "Sat, 09 Foo 2024 10:05:58 UTC",
                          "Sat, 32 Nov 2024 10:05:58 UTC", "Sat, 09 Nov 2024 25:05:58 UTC", "Sat, 09 Nov 2024 10:05:58 CET"}) {
    EXPECT_FALSE(parse_release_date(bad).has_value()) << bad;
  }
}

}  // namespace
