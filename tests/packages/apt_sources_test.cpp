// apt source definitions: the two text formats from strings, and discovery against a temporary root.
#include "packages/apt/apt_sources.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

using gpuenv::packages::AptSource;
using gpuenv::packages::AptSourceType;
using gpuenv::packages::discover_apt_sources;
using gpuenv::packages::parse_sources_deb822;
using gpuenv::packages::parse_sources_list;

namespace {

namespace fs = std::filesystem;

std::vector<AptSource> list_ok(std::string_view text) {
  auto r = parse_sources_list(text, "sources.list");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? std::move(*r) : std::vector<AptSource>{};
}

std::vector<AptSource> deb822_ok(std::string_view text) {
  auto r = parse_sources_deb822(text, "x.sources");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? std::move(*r) : std::vector<AptSource>{};
}

TEST(SourcesList, ParsesAPlainEntry) {
  const auto s = list_ok("deb http://example.com/debian bookworm main contrib\n");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].type, AptSourceType::deb);
  EXPECT_EQ(s[0].uri, "http://example.com/debian/");  // apt adds the final slash
  EXPECT_EQ(s[0].suite, "bookworm");
  EXPECT_EQ(s[0].components, (std::vector<std::string>{"main", "contrib"}));
  EXPECT_TRUE(s[0].architectures.empty());
  EXPECT_FALSE(s[0].trusted.has_value());
  EXPECT_EQ(s[0].where, "sources.list:1");
  EXPECT_TRUE(s[0].is_used());
  EXPECT_FALSE(s[0].is_flat());
}

TEST(SourcesList, ParsesTheOptionBlock) {
  const auto s = list_ok(
      "deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/example.gpg trusted=yes pdiffs=no arch-=i386] "
      "https://example.com/repo stable main\n");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].architectures, (std::vector<std::string>{"amd64", "arm64"}));
  EXPECT_EQ(s[0].signed_by, (std::vector<std::string>{"/usr/share/keyrings/example.gpg"}));
  EXPECT_EQ(s[0].trusted, true);
  EXPECT_EQ(s[0].options, (std::vector<std::pair<std::string, std::string>>{{"pdiffs", "no"}, {"arch-", "i386"}}));
  EXPECT_EQ(s[0].uri, "https://example.com/repo/");
}

TEST(SourcesList, AcceptsSpacesInsideAndNoSpaceBeforeTheBracket) {
  const auto a = list_ok("deb [ arch=amd64 ] http://example.com/d stable main\n");
  const auto b = list_ok("deb [arch=amd64]    http://example.com/d stable main\n");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].architectures, b[0].architectures);
}

TEST(SourcesList, ParsesFlatRepositories) {
  const auto s = list_ok("deb [trusted=yes] file:/srv/repo ./\ndeb http://127.0.0.1:8080/cuda/ubuntu2204/x86_64 /\n"
                         "deb http://example.com/flat sub/dir/\n");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_TRUE(s[0].is_flat());
  EXPECT_EQ(s[0].suite, "./");
  EXPECT_EQ(s[0].uri, "file:/srv/repo/");
  EXPECT_TRUE(s[0].components.empty());
  EXPECT_EQ(s[1].suite, "/");
  EXPECT_EQ(s[1].uri, "http://127.0.0.1:8080/cuda/ubuntu2204/x86_64/");
  EXPECT_EQ(s[2].suite, "sub/dir/");
}

TEST(SourcesList, SkipsCommentsAndBlankLinesAndKeepsLineNumbers) {
  const auto s = list_ok("# deb http://example.com/old stable main\n\n   \n"
                         "deb http://example.com/d stable main # trailing comment\n"
                         "deb-src http://example.com/d stable main\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].where, "sources.list:4");
  EXPECT_EQ(s[0].components, (std::vector<std::string>{"main"}));
  EXPECT_EQ(s[1].type, AptSourceType::deb_src);
  EXPECT_FALSE(s[1].is_used());  // listed, but skipped by gpuenv
  EXPECT_EQ(s[1].where, "sources.list:5");
}

TEST(SourcesList, RejectsMalformedEntriesWithTheirLine) {
  const char* bad[] = {
      "rpm http://example.com/d stable main",     // unknown type
      "deb [arch=amd64 http://example.com/d s m",  // option block not closed
      "deb [arch] http://example.com/d stable main",  // option without '='
      "deb [arch=] http://example.com/d stable main",
      "deb",                                          // no URI
      "deb http://example.com/d",                     // no suite
      "deb http://example.com/d stable",              // no component
      "deb http://example.com/d ./ main",             // flat suite with a component
      "deb example.com/d stable main",                // not a URI
      "deb [trusted=maybe] http://example.com/d stable main",
  };
  for (const char* line : bad) {
    auto r = parse_sources_list(std::string("\n") + line + "\n", "/etc/apt/sources.list");
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.error().id, "apt_sources.syntax") << line;
    EXPECT_EQ(r.error().where, "/etc/apt/sources.list:2") << line;
    EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::environment);
  }
}

TEST(SourcesDeb822, ExpandsTypesUrisAndSuitesInAptOrder) {
  const auto s = deb822_ok(
      "Types: deb deb-src\n"
      "URIs: http://example.com/debian http://example.com/mirror/\n"
      "Suites: bookworm bookworm-updates\n"
      "Components: main non-free-firmware\n"
      "Signed-By: /usr/share/keyrings/example-archive-keyring.gpg\n");
  ASSERT_EQ(s.size(), 8u);
  EXPECT_EQ(s[0].type, AptSourceType::deb);
  EXPECT_EQ(s[0].uri, "http://example.com/debian/");
  EXPECT_EQ(s[0].suite, "bookworm");
  EXPECT_EQ(s[1].suite, "bookworm-updates");
  EXPECT_EQ(s[2].uri, "http://example.com/mirror/");
  EXPECT_EQ(s[4].type, AptSourceType::deb_src);
  for (const auto& x : s) {
    EXPECT_EQ(x.components, (std::vector<std::string>{"main", "non-free-firmware"}));
    EXPECT_EQ(x.signed_by, (std::vector<std::string>{"/usr/share/keyrings/example-archive-keyring.gpg"}));
    EXPECT_EQ(x.where, "x.sources:1");
  }
}

TEST(SourcesDeb822, ReadsArchitecturesTrustedEnabledAndOtherOptions) {
  const auto s = deb822_ok(
      "# comment\n"
      "Types: deb\nURIs: http://example.com/a\nSuites: stable\nComponents: main\n"
      "Architectures: amd64 arm64\nTrusted: yes\nPDiffs: no\n"
      "\n"
      "Enabled: no\nTypes: deb\nURIs: http://example.com/b\nSuites: stable\nComponents: main\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].architectures, (std::vector<std::string>{"amd64", "arm64"}));
  EXPECT_EQ(s[0].trusted, true);
  EXPECT_EQ(s[0].options, (std::vector<std::pair<std::string, std::string>>{{"pdiffs", "no"}}));
  EXPECT_TRUE(s[0].enabled);
  EXPECT_EQ(s[0].where, "x.sources:2");
  EXPECT_FALSE(s[1].enabled);
  EXPECT_FALSE(s[1].is_used());
  EXPECT_EQ(s[1].where, "x.sources:10");
}

TEST(SourcesDeb822, ReadsAnInlineSignedByKey) {
  const auto s = deb822_ok(
      "Types: deb\nURIs: http://example.com/a\nSuites: stable\nComponents: main\n"
      "Signed-By:\n"
      " -----BEGIN PGP PUBLIC KEY BLOCK-----\n"
      " .\n"
      " mDMEYCQjIxYJKwYBBAHaRw8BAQdAD/P5Nvvnvk66SxBBHDbhRml9ORg1WV5CvzKY\n"
      " =abcd\n"
      " -----END PGP PUBLIC KEY BLOCK-----\n");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].signed_by.empty());
  EXPECT_EQ(s[0].signed_by_key,
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEYCQjIxYJKwYBBAHaRw8BAQdAD/P5Nvvnvk66SxBBHDbhRml9ORg1WV5CvzKY\n"
            "=abcd\n-----END PGP PUBLIC KEY BLOCK-----\n");
}

TEST(SourcesDeb822, FlatSuitesTakeNoComponents) {
  const auto s = deb822_ok("Types: deb\nURIs: file:/srv/repo\nSuites: ./\n");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].is_flat());
  auto bad = parse_sources_deb822("Types: deb\nURIs: file:/srv/repo\nSuites: ./\nComponents: main\n", "f.sources");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().where, "f.sources:4");
}

TEST(SourcesDeb822, RejectsMissingFieldsAndBadValues) {
  struct Bad {
    const char* text;
    const char* id;
  };
  const Bad cases[] = {
      {"URIs: http://example.com/a\nSuites: s\nComponents: main\n", "apt_sources.missing_field"},
      {"Types: deb\nSuites: s\nComponents: main\n", "apt_sources.missing_field"},
      {"Types: deb\nURIs: http://example.com/a\nComponents: main\n", "apt_sources.missing_field"},
      {"Types: deb\nURIs: http://example.com/a\nSuites: s\n", "apt_sources.missing_field"},
      {"Types: rpm\nURIs: http://example.com/a\nSuites: s\nComponents: main\n", "apt_sources.syntax"},
      {"Types: deb\nURIs: nowhere\nSuites: s\nComponents: main\n", "apt_sources.syntax"},
      {"Types: deb\nURIs: http://example.com/a\nSuites: s\nComponents: main\nEnabled: perhaps\n", "apt_sources.syntax"},
      {"Types: deb\nURIs: http://example.com/a\nSuites: s\nComponents: main\nSigned-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n abc\n",
       "apt_sources.syntax"},
      {"Types: deb\nnot deb822\n", "deb822.syntax"},
  };
  for (const Bad& c : cases) {
    auto r = parse_sources_deb822(c.text, "f.sources");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().id, c.id) << c.text;
  }
}

TEST(SourcesDeb822, IgnoresADisabledStanzaItCannotParse) {
  const auto s = deb822_ok("Enabled: no\nTypes: deb\n\nTypes: deb\nURIs: http://example.com/a\nSuites: s\nComponents: c\n");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].where, "x.sources:4");
}

class DiscoverAptSources : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuenv-apt-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  fs::path root;
};

TEST_F(DiscoverAptSources, ReadsSourcesListThenTheDirectoryInNameOrder) {
  write("etc/apt/sources.list", "deb http://example.com/main stable main\n");
  write("etc/apt/sources.list.d/zz.list", "deb http://example.com/zz stable main\n");
  write("etc/apt/sources.list.d/debian.sources",
        "Types: deb\nURIs: http://example.com/debian\nSuites: bookworm bookworm-updates\nComponents: main\n");
  write("etc/apt/sources.list.d/cuda.list", "deb [signed-by=/k.gpg] http://127.0.0.1/cuda /\n");
  auto r = discover_apt_sources(root.string());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->size(), 5u);
  const std::string d = (root / "etc/apt/sources.list.d").string();
  EXPECT_EQ((*r)[0].where, (root / "etc/apt/sources.list").string() + ":1");
  EXPECT_EQ((*r)[1].where, d + "/cuda.list:1");
  EXPECT_EQ((*r)[2].where, d + "/debian.sources:1");
  EXPECT_EQ((*r)[2].suite, "bookworm");
  EXPECT_EQ((*r)[3].suite, "bookworm-updates");
  EXPECT_EQ((*r)[4].where, d + "/zz.list:1");
}

TEST_F(DiscoverAptSources, IgnoresFilesAptIgnores) {
  write("etc/apt/sources.list.d/ok.list", "deb http://example.com/ok stable main\n");
  write("etc/apt/sources.list.d/old.list.save", "garbage\n");
  write("etc/apt/sources.list.d/x.list.disabled", "garbage\n");
  write("etc/apt/sources.list.d/bad name.list", "garbage\n");
  write("etc/apt/sources.list.d/notes.txt", "garbage\n");
  fs::create_directories(root / "etc/apt/sources.list.d/dir.list");
  auto r = discover_apt_sources(root.string());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].uri, "http://example.com/ok/");
}

TEST_F(DiscoverAptSources, EmptyRootHasNoSources) {
  auto r = discover_apt_sources(root.string());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->empty());
}

TEST_F(DiscoverAptSources, MissingRootIsAnError) {
  auto r = discover_apt_sources((root / "missing").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt_sources.no_root");
}

TEST_F(DiscoverAptSources, ParseErrorNamesTheFileAndLine) {
  write("etc/apt/sources.list.d/broken.list", "deb http://example.com/a stable main\ndeb http://example.com/b\n");
  auto r = discover_apt_sources(root.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, (root / "etc/apt/sources.list.d/broken.list").string() + ":2");
  ASSERT_FALSE(r.error().context.empty());
}

}  // namespace
